"""The JSONL side of a batch: the request lines still needed, and reading result lines.

A request's `custom_id` is its phase and its cache key, so a query asked by many events
(phase 1) or an event repeated with the same context (phase 2) is one line, and a reply
goes straight to the cache entry it answers.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from seer_metrics.evaluators.batch.records import ENDPOINT, PHASES, REQUIREMENTS_PHASE
from seer_metrics.evaluators.llm import prompts
from seer_metrics.evaluators.llm.pacing import estimate_tokens
from seer_metrics.evaluators.llm.replies import (
    API_ERROR,
    BATCH_CANCELLED,
    BATCH_EXPIRED,
    BATCH_FAILED,
    RATE_LIMITED,
    SCHEMA_MISMATCH,
    chat_request,
    shorten,
)
from seer_metrics.evaluators.llm.reported_usage import reported_tokens
from seer_metrics.evaluators.llm.settings import LLMSettings
from seer_metrics.events import RetrievalEvent
from seer_metrics.judgment import Requirement
from seer_metrics.judgment_store import JudgmentStore, judgment_key, requirements_key

logger = logging.getLogger(__name__)

KEY_CHUNK = 500  # events whose cache keys are looked up at once

if TYPE_CHECKING:  # imported where used: the SDK takes ~0.5 s, every step process pays it
    from openai.types.chat import ChatCompletion


@dataclass(frozen=True)
class RequestLine:
    """One line of an input file."""

    custom_id: str
    line: bytes

    @classmethod
    def of(cls, custom_id: str, body: dict[str, Any]) -> RequestLine:
        payload = {"custom_id": custom_id, "method": "POST", "url": ENDPOINT, "body": body}
        return cls(custom_id, (json.dumps(payload, ensure_ascii=False) + "\n").encode("utf-8"))


def custom_id(phase: str, key: str) -> str:
    return f"{phase}-{key}"


def key_of(phase: str, line_id: str) -> str:
    return line_id.removeprefix(f"{phase}-")


def pending_lines(
    phase: str,
    events: Iterable[RetrievalEvent],
    store: JudgmentStore,
    settings: LLMSettings,
    prompt_version: str,
) -> Iterator[RequestLine]:
    """The requests `phase` still needs for `events`, each cache key once.

    Phase 1: every distinct query without a stored requirement list. Phase 2: every
    distinct event (judgment key) without a stored judgment, whose query has a stored,
    non-empty requirement list and that has passages (K = 0 or N = 0 needs no call).
    """
    if phase not in PHASES:
        raise ValueError(f"unknown phase {phase!r}: choose one of {', '.join(PHASES)}")
    model = settings.model

    def body(messages: list[dict[str, str]], name: str, schema: dict[str, Any]) -> dict:
        return chat_request(
            model, settings.temperature, messages, name, schema, settings.max_completion_tokens
        )

    seen: set[str] = set()
    for chunk in chunks(events, KEY_CHUNK):
        if phase == REQUIREMENTS_PHASE:
            keys = [requirements_key(e.task, model, prompt_version) for e in chunk]
            stored = store.get_requirements(k for k in keys if k not in seen)
            for event, key in zip(chunk, keys, strict=True):
                if key in seen or key in stored:
                    continue
                seen.add(key)
                yield RequestLine.of(
                    custom_id(phase, key),
                    body(
                        prompts.requirements_messages(event.task),
                        prompts.REQUIREMENTS_SCHEMA_NAME,
                        prompts.REQUIREMENTS_SCHEMA,
                    ),
                )
            continue
        for event, key, requirements in support_candidates(
            chunk, store, model, prompt_version, seen
        ):
            messages = prompts.support_messages(
                event.task,
                [(r.id, r.text) for r in requirements],
                [(item.id, item.text) for item in event.context],
            )
            yield RequestLine.of(
                custom_id(phase, key),
                body(messages, prompts.SUPPORT_SCHEMA_NAME, prompts.SUPPORT_SCHEMA),
            )


def support_candidates(
    events: list[RetrievalEvent],
    store: JudgmentStore,
    model: str,
    prompt_version: str,
    skip: set[str],
) -> Iterator[tuple[RetrievalEvent, str, tuple[Requirement, ...]]]:
    """Events (once per judgment key, not in `skip`) with stored requirements and no
    stored judgment; each key yielded is added to `skip`."""
    keys = [judgment_key(e, model, prompt_version) for e in events]
    judged = store.get_judgments(k for k in keys if k not in skip)
    query_keys = [requirements_key(e.task, model, prompt_version) for e in events]
    lists = store.get_requirements(query_keys)
    for event, key, query_key in zip(events, keys, query_keys, strict=True):
        requirements = lists.get(query_key)
        if key in skip or key in judged or not requirements or not event.context:
            continue
        skip.add(key)
        yield event, key, requirements


def input_files(
    lines: Iterable[RequestLine], max_requests: int, max_bytes: int
) -> Iterator[list[RequestLine]]:
    """Lines grouped into input files within the request and size limits."""
    group: list[RequestLine] = []
    size = 0
    for line in lines:
        if group and (len(group) >= max_requests or size + len(line.line) > max_bytes):
            yield group
            group, size = [], 0
        group.append(line)
        size += len(line.line)
    if group:
        yield group


def parse_jsonl(content: bytes, file_id: str) -> Iterator[dict[str, Any]]:
    """The JSON objects of a file; a line that is not one is logged and skipped."""
    for number, raw in enumerate(content.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except json.JSONDecodeError:
            logger.warning("line %d of batch file %s is not JSON; skipped", number, file_id)
            continue
        if isinstance(line, dict):
            yield line


def completion_of(line: Mapping[str, Any]) -> tuple[ChatCompletion | None, str | None]:
    """The chat completion of an output line with status 200, else why the line failed."""
    error = line.get("error")
    response = line.get("response")
    if error:
        code = str(error.get("code") or "error")
        message = shorten(str(error.get("message") or ""))
        if code in (BATCH_EXPIRED, BATCH_CANCELLED):
            return None, f"{code}: {message}"
        return None, f"{API_ERROR}: batch line error {code}: {message}"
    if not isinstance(response, Mapping):
        return None, f"{API_ERROR}: batch line without response or error"
    status = int(response.get("status_code") or 0)
    body = response.get("body")
    if status != 200:
        message = ""
        if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
            message = str(body["error"].get("message") or "")
        code = RATE_LIMITED if status == 429 else API_ERROR
        return None, f"{code}: HTTP {status} in the batch: {shorten(message)}"
    from openai.types.chat import ChatCompletion

    # The usage block is read apart (`line_usage`): an odd count must not cost the answer.
    answer = {name: value for name, value in body.items() if name != "usage"}
    try:
        return ChatCompletion.model_validate(answer), None
    except ValidationError:
        return None, f"{SCHEMA_MISMATCH}: the batch reply is not a chat completion"


def line_usage(line: Mapping[str, Any]) -> tuple[int, int] | str | None:
    """(prompt, completion) tokens an output line reports; why they are no count (text);
    None when it reports none."""
    response = line.get("response")
    body = response.get("body") if isinstance(response, Mapping) else None
    usage = body.get("usage") if isinstance(body, Mapping) else None
    return None if usage is None else reported_tokens(usage)


def request_estimates(lines: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """The estimated tokens (prompt and expected completion) of each input line, by id: what
    a reply without a usable usage block is counted as."""
    return {
        str(line["custom_id"]): estimate_tokens((line.get("body") or {}).get("messages") or [])
        for line in lines
    }


def unanswered_reason(batch: Any) -> str:
    """Why a requested line has neither an output nor an error line."""
    if batch.status == "expired":
        return f"{BATCH_EXPIRED}: the batch's 24 h window ended before this request ran"
    if batch.status == "cancelled":
        return f"{BATCH_CANCELLED}: the batch was cancelled before this request ran"
    if batch.status == "failed":
        errors = batch.errors.data if batch.errors and batch.errors.data else []
        first = errors[0] if errors else None
        detail = f"{first.code}: {first.message}" if first is not None else "no reason given"
        return f"{BATCH_FAILED}: the batch was refused ({shorten(str(detail))})"
    return f"{API_ERROR}: the finished batch has no line for this request"


def chunks(items: Iterable[RetrievalEvent], size: int) -> Iterator[list[RetrievalEvent]]:
    chunk: list[RetrievalEvent] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
