"""How a judge's chat request is written and its reply read: one code for on-demand calls
and Batch API lines, so both give the same answers, statuses and reason codes.

`read_reply` turns one chat completion into a validated answer or a `ReplyError` whose
`code` is a reason code; what to do next (repair, a larger cap, an on-demand retry of a
batch line) is the caller's choice.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from seer_metrics.evaluators.llm import prompts
from seer_metrics.evaluators.llm.answers import RequirementsAnswer
from seer_metrics.evaluators.llm.structured_output import (
    JSON_OBJECT,
    JSON_SCHEMA,
    MAX_COMPLETION_TOKENS,
)
from seer_metrics.judgment import Requirement
from seer_metrics.text.redaction import redact_secrets

# Failure reason codes (the part before ":" in `EvaluationOutcome.reason`).
INVALID_JSON = "invalid_json"
SCHEMA_MISMATCH = "schema_mismatch"
TIMEOUT = "timeout"
RATE_LIMITED = "rate_limited"
REFUSED = "refused"
TRUNCATED = "truncated"
API_ERROR = "api_error"
# The endpoint refused the request itself (400/401/403/404/422, a validation error): not
# retried, since sending it again cannot succeed.
REQUEST_REJECTED = "request_rejected"
INTERNAL_ERROR = "internal_error"
# No judgment, no score: a requirement list that is empty, or longer than the bound.
NO_REQUIREMENTS = "no_requirements"
TOO_MANY_REQUIREMENTS = "too_many_requirements"
# A Batch API line that never ran: its batch expired, was cancelled, or failed validation.
BATCH_EXPIRED = "batch_expired"
BATCH_CANCELLED = "batch_cancelled"
BATCH_FAILED = "batch_failed"

AnswerT = TypeVar("AnswerT", bound=BaseModel)


class ReplyError(Exception):
    """A reply that cannot be used; `code` is its reason code, `content` what was said."""

    def __init__(self, code: str, detail: str, content: str = "", repairable: bool = False):
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail
        self.content = content
        # A reply that does not fit the schema: one repair turn may fix it.
        self.repairable = repairable

    @property
    def reason(self) -> str:
        return f"{self.code}: {self.detail}"


def chat_request(
    model: str,
    temperature: float,
    messages: list[dict[str, str]],
    schema_name: str,
    schema: dict[str, Any],
    max_completion_tokens: int,
    *,
    mode: str = JSON_SCHEMA,
    cap_field: str = MAX_COMPLETION_TOKENS,
) -> dict[str, Any]:
    """The body of one judge request in an output mode (`structured_output`), the
    completion cap under `cap_field`. The default is strict `json_schema`, as OpenAI and
    its Batch API take it."""
    body: dict[str, Any] = {"model": model, "temperature": temperature}
    if mode == JSON_SCHEMA:
        body["messages"] = messages
        body["response_format"] = prompts.response_format(schema_name, schema)
    else:
        body["messages"] = prompts.with_schema_instructions(messages, schema_name, schema)
        if mode == JSON_OBJECT:
            body["response_format"] = prompts.json_object_format(schema)
    body[cap_field] = max_completion_tokens
    return body


def read_reply(
    completion: Any,
    answer_type: type[AnswerT],
    check: Callable[[AnswerT], None] | None = None,
) -> AnswerT:
    """The validated answer of one chat completion, else `ReplyError` with its reason code.

    A refusal or content filter is `refused`, a reply cut at the completion cap
    `truncated`, content that is no JSON `invalid_json`, JSON of another shape (or failing
    `check`) `schema_mismatch`.
    """
    choices = getattr(completion, "choices", None)
    choice = choices[0] if choices else None
    if choice is None:
        raise ReplyError(SCHEMA_MISMATCH, "the reply has no choices")
    message = choice.message
    refusal = getattr(message, "refusal", None)
    if refusal or choice.finish_reason == "content_filter":
        raise ReplyError(REFUSED, shorten(str(refusal or "content filter")))
    if choice.finish_reason == "length":
        raise ReplyError(TRUNCATED, "the reply hit max_completion_tokens")
    content = message.content or ""
    try:
        answer = answer_type.model_validate(json.loads(unfenced(content)))
        if check is not None:
            check(answer)
    except json.JSONDecodeError as error:
        detail = f"{error.msg} at position {error.pos}"
        raise ReplyError(INVALID_JSON, detail, content, repairable=True) from None
    except ValidationError as error:
        detail = describe_validation_error(error)
        raise ReplyError(SCHEMA_MISMATCH, detail, content, repairable=True) from None
    except ValueError as error:
        raise ReplyError(SCHEMA_MISMATCH, str(error), content, repairable=True) from None
    return answer


_FENCE = re.compile(r"\A\s*```[A-Za-z]*[ \t]*\n(.*?)\n?```\s*\Z", re.DOTALL)


def unfenced(content: str) -> str:
    """The JSON inside a markdown code fence (a model told the schema in words often
    writes one), else the content as it is."""
    match = _FENCE.match(content)
    return match.group(1) if match else content


def check_requirements(answer: RequirementsAnswer) -> None:
    """A phase-1 answer whose requirement texts are all non-empty."""
    for index, item in enumerate(answer.requirements, start=1):
        if not item.text.strip():
            raise ValueError(f"requirements[{index - 1}].text is empty")


def requirements_check(maximum: int) -> Callable[[RequirementsAnswer], None]:
    """`check_requirements`, and a list of 1 to `maximum` requirements: an empty or an
    overlong list is no judgment (a `ReplyError` a repair turn is not asked to fix)."""

    def check(answer: RequirementsAnswer) -> None:
        problem = requirement_count_problem(len(answer.requirements), maximum)
        if problem is not None:
            raise problem
        check_requirements(answer)

    return check


def requirement_count_problem(count: int, maximum: int) -> ReplyError | None:
    """Why a list of `count` requirements cannot be judged, or None."""
    if count == 0:
        return ReplyError(NO_REQUIREMENTS, "the judge listed no requirement for the query")
    if count > maximum:
        return ReplyError(
            TOO_MANY_REQUIREMENTS,
            f"the judge listed {count} requirements, more than the bound of {maximum} "
            "(max_requirements)",
        )
    return None


def requirements_from_answer(answer: RequirementsAnswer) -> tuple[Requirement, ...]:
    """Ids re-numbered by position, so they are stable and unique whatever the model wrote;
    the texts are the model's."""
    return tuple(
        Requirement(f"r{index}", item.text.strip())
        for index, item in enumerate(answer.requirements, start=1)
    )


def describe_validation_error(error: ValidationError) -> str:
    problems = []
    for item in error.errors()[:3]:
        location = ".".join(str(part) for part in item["loc"]) or "(root)"
        problems.append(f"{location}: {item['msg']}")
    return "; ".join(problems)


def shorten(text: str, limit: int = 200) -> str:
    """One line of at most `limit` characters, secrets hidden, for reasons stored in tables
    (endpoint text: an error body may echo the API key)."""
    line = " ".join(redact_secrets(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def reason_code(reason: str | None) -> str:
    """The code of a reason (`"invalid_json: ..."` -> `"invalid_json"`)."""
    return (reason or "unknown").split(":", 1)[0].strip() or "unknown"
