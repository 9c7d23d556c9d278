"""Structured output negotiated with the endpoint, not assumed.

OpenAI-compatible servers differ in what they take: OpenAI, Azure OpenAI, vLLM and
llama.cpp's `llama-server` enforce a strict `json_schema`; llama-cpp-python's server takes
`json_object` with a `schema` field (and answers `json_schema` with an HTTP 500 whose body
is a request validation error); some proxies take no `response_format` at all. So the
judge asks in the strongest mode first and steps down when the endpoint rejects that
request shape:

    json_schema   response_format json_schema, strict (the schema enforced)
    json_object   response_format json_object with the schema in its `schema` field,
                  and the schema in the instructions too
    instructions  no response_format: the schema in the instructions only

Every reply, whatever the mode, is validated against the same pydantic model. The
completion cap is sent as `max_completion_tokens` and falls back to `max_tokens` (the
name llama-cpp-python, Ollama and most other servers read) when the endpoint rejects the
first name, ignores it (a reply longer than the cap), or has shown that it is not OpenAI's
strict API (it rejected `json_schema`).

What was learned holds for the endpoint and model for the rest of the run
(`OutputProfile`) and is remembered in the judgment store, so the next run starts there.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from seer_metrics.judgment_store import JudgmentStore

logger = logging.getLogger(__name__)

JSON_SCHEMA = "json_schema"
JSON_OBJECT = "json_object"
INSTRUCTIONS = "instructions"
# Strongest first: the order the judge tries them in.
OUTPUT_MODES = (JSON_SCHEMA, JSON_OBJECT, INSTRUCTIONS)

MAX_COMPLETION_TOKENS = "max_completion_tokens"
MAX_TOKENS = "max_tokens"
CAP_FIELDS = (MAX_COMPLETION_TOKENS, MAX_TOKENS)

# What a refused request says (`rejection_kind`).
FORMAT_REJECTED = "response_format"  # the structured-output request shape: step down
CAP_REJECTED = "cap_field"  # the name of the completion cap: use the other one
REQUEST_REJECTED = "request"  # the request as such: sending it again cannot help

# A request validation error in a body (pydantic / FastAPI wording), whatever the status.
_VALIDATION_ERROR = re.compile(
    r"validation error|'loc': \(|\"loc\":|input should be|field required"
    r"|extra inputs are not permitted|extra_forbidden|unrecognized request argument"
    r"|unknown (?:field|parameter|argument)|unsupported parameter",
    re.IGNORECASE,
)
_NAMES_FORMAT = re.compile(r"response_format|json_schema|json_object", re.IGNORECASE)
# A prompt too long for the model, or content a filter stopped: not the request's shape.
_ABOUT_THE_CONTENT = re.compile(
    r"context (?:length|window)|maximum context|too many tokens|too long|content[_ ]filter"
    r"|content management policy|content_policy",
    re.IGNORECASE,
)


def rejection_kind(status: int, text: str, cap_field: str, settled: bool) -> str | None:
    """What an error answer says about the request, or None when it is not a rejection
    (a 429, a 5xx outage: worth retrying as it was).

    A 400 or 422, or any status whose body is a request validation error, rejects the
    request. When its body names the completion cap's field, that name is at fault; when
    it names `response_format` / `json_schema`, the structured-output shape is, whatever
    the status. A 400/422 naming neither is taken as a rejection of the shape only while
    the shape is not `settled` (no reply accepted in it yet): afterwards it is about that
    one request (a content filter, a prompt too long), and must not change the shape of
    every other. 401, 403 and 404 reject the request as such (a key, a model or a URL
    that retrying cannot fix).
    """
    validation = status in (400, 422) or bool(_VALIDATION_ERROR.search(text))
    if validation and cap_field in text:
        return CAP_REJECTED
    if _NAMES_FORMAT.search(text) and (validation or status >= 500):
        return FORMAT_REJECTED
    if status in (400, 422) and not settled and not _ABOUT_THE_CONTENT.search(text):
        return FORMAT_REJECTED
    if validation or status in (401, 403, 404):
        return REQUEST_REJECTED
    return None


@dataclass
class OutputProfile:
    """What one endpoint and model take: the output mode and the cap's field name.

    `settled` once a reply has been accepted in the current shape (or the store said so):
    until then a caller sends one request at a time, so a run learns the shape from one
    probe instead of a burst of rejected requests. `on_change` is told each change (to
    remember it in the store).
    """

    mode: str = JSON_SCHEMA
    cap_field: str = MAX_COMPLETION_TOKENS
    settled: bool = False
    on_change: Callable[[OutputProfile], None] | None = None
    _refused_cap_fields: set[str] = field(default_factory=set)

    def settle(self) -> None:
        if not self.settled:
            self.settled = True
            self._changed()

    def step_down(self, kind: str, mode: str, cap_field: str) -> bool:
        """After a rejection of a request sent as (`mode`, `cap_field`): whether a changed
        request may be sent (the profile moved on, now or since that request went out)."""
        if (self.mode, self.cap_field) != (mode, cap_field):
            return True  # another call has already changed it
        if kind == CAP_REJECTED:
            self._refused_cap_fields.add(cap_field)
            other = MAX_TOKENS if cap_field == MAX_COMPLETION_TOKENS else MAX_COMPLETION_TOKENS
            if other in self._refused_cap_fields:
                return False
            self.cap_field = other
        elif kind == FORMAT_REJECTED:
            index = OUTPUT_MODES.index(mode)
            if index + 1 == len(OUTPUT_MODES):
                return False
            self.mode = OUTPUT_MODES[index + 1]
            # Not OpenAI's strict API: the cap goes under the name other servers read.
            if MAX_TOKENS not in self._refused_cap_fields:
                self.cap_field = MAX_TOKENS
        else:
            return False
        self.settled = False
        return True

    def snapshot(self) -> tuple[str, str, bool, frozenset[str]]:
        return self.mode, self.cap_field, self.settled, frozenset(self._refused_cap_fields)

    def restore(
        self, snapshot: tuple[str, str, bool, frozenset[str]], after: tuple[str, str]
    ) -> None:
        """Undo one call's step-downs when every shape it tried was rejected: it was the
        request at fault, so no shape was learned from it. Left alone when another call
        has changed the profile since (`after` is what this call last sent)."""
        if (self.mode, self.cap_field) == after and not self.settled:
            self.mode, self.cap_field, self.settled, refused = snapshot
            self._refused_cap_fields = set(refused)

    def cap_ignored(self, cap_field: str) -> None:
        """A reply ran past the cap sent as `cap_field`: the endpoint reads another name."""
        if (
            self.cap_field == cap_field == MAX_COMPLETION_TOKENS
            and MAX_TOKENS not in self._refused_cap_fields
        ):
            self.cap_field = MAX_TOKENS
            self._changed()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self)


def stored_profile(store: JudgmentStore, endpoint: str, model: str) -> tuple[str, str] | None:
    """(mode, cap field) a previous run learned for `model` at `endpoint`, when usable."""
    try:
        known = store.get_endpoint_profile(endpoint, model)
    except Exception:
        logger.exception("could not read what the endpoint takes; negotiating it again")
        return None
    if known is None or known[0] not in OUTPUT_MODES or known[1] not in CAP_FIELDS:
        return None
    return known


def remember_profile(
    store: JudgmentStore, endpoint: str, model: str, profile: OutputProfile
) -> None:
    try:
        store.put_endpoint_profile(endpoint, model, profile.mode, profile.cap_field)
    except Exception:  # only the next run's first request is lost
        logger.exception("could not remember what the endpoint takes")
