"""How a judge's chat request is written and its reply read: one code for on-demand calls
and Batch API lines, so both give the same answers, statuses and reason codes.

`read_reply` turns one chat completion into a validated answer or a `ReplyError` whose
`code` is a reason code; what to do next (repair, a larger cap, an on-demand retry of a
batch line) is the caller's choice.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from seer_metrics.evaluators.llm import prompts
from seer_metrics.evaluators.llm.answers import RequirementsAnswer
from seer_metrics.judgment import Requirement

# Failure reason codes (the part before ":" in `EvaluationOutcome.reason`).
INVALID_JSON = "invalid_json"
SCHEMA_MISMATCH = "schema_mismatch"
TIMEOUT = "timeout"
RATE_LIMITED = "rate_limited"
REFUSED = "refused"
TRUNCATED = "truncated"
API_ERROR = "api_error"
INTERNAL_ERROR = "internal_error"
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
) -> dict[str, Any]:
    """The body of one judge request: strict structured output, the given completion cap."""
    return {
        "model": model,
        "messages": messages,
        "temperature": temperature,
        "max_completion_tokens": max_completion_tokens,
        "response_format": prompts.response_format(schema_name, schema),
    }


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
        answer = answer_type.model_validate(json.loads(content))
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


def check_requirements(answer: RequirementsAnswer) -> None:
    """A phase-1 answer whose requirement texts are all non-empty."""
    for index, item in enumerate(answer.requirements, start=1):
        if not item.text.strip():
            raise ValueError(f"requirements[{index - 1}].text is empty")


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
    """One line of at most `limit` characters, for reasons stored in tables."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def reason_code(reason: str | None) -> str:
    """The code of a reason (`"invalid_json: ..."` -> `"invalid_json"`)."""
    return (reason or "unknown").split(":", 1)[0].strip() or "unknown"
