"""The tokens an endpoint says a call used, checked before anything counts or prices them.

An endpoint's `usage` block is its word, not a fact: a negative count would make a negative
cost (and loosen the budget and the pacing), a huge one stalls the pacing and overflows the
warehouse's token columns, a string or float is no count at all. Counts that are not whole
numbers in 0..`MAX_TOKENS_PER_CALL` are refused here; the caller then uses the request's
own estimate and says so (`TokenUsage.note`), so one odd reply is one flagged event, never a
failed day and never a negative cost.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Far above any context window (about 10^6 tokens today): a count above it is not a count.
MAX_TOKENS_PER_CALL = 10**9
USAGE_ESTIMATED = "usage_estimated"
TOKEN_FIELDS = ("prompt_tokens", "completion_tokens")


def _field(usage: Any, name: str) -> Any:
    if isinstance(usage, Mapping):
        return usage.get(name)
    return getattr(usage, name, None)


def token_count_problem(name: str, value: Any) -> str | None:
    """Why `value` is not a usable token count (None when it is)."""
    if type(value) is int and 0 <= value <= MAX_TOKENS_PER_CALL:
        return None
    shown = repr(value)
    if len(shown) > 40:
        shown = shown[:39] + "…"
    return f"{name}={shown} is not a whole number of tokens in 0..{MAX_TOKENS_PER_CALL:.0e}"


def reported_tokens(usage: Any) -> tuple[int, int] | str:
    """(prompt, completion) tokens of a `usage` block (the SDK's object or its JSON), or
    why they cannot be used."""
    counts = []
    for name in TOKEN_FIELDS:
        value = _field(usage, name)
        problem = token_count_problem(name, value)
        if problem is not None:
            return problem
        counts.append(value)
    return counts[0], counts[1]


def estimated_usage_note(problem: str) -> str:
    """The note of a call whose usage is the request's estimate (`TokenUsage.note`)."""
    return (
        f"{USAGE_ESTIMATED}: the endpoint reported {problem}; "
        "the call's tokens and cost are the request's estimate"
    )
