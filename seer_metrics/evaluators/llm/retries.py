"""Retries: what one call's attempts were, and what a failed request says about
sending it again.

`Attempts` counts the requests of a call (those that reached the endpoint and those that
never left), `CallFailedError` is a call given up with its reason code; `not_sent`,
`retry_after_seconds` and `error_text` read the SDK's errors for the client
(`client.Connection`), which decides what to retry.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: the SDK takes ~0.5 s, every step process pays it
    import openai

from seer_metrics.evaluators.base import TokenUsage


@dataclass(frozen=True)
class Attempts:
    """Requests of one call or event: `sent` reached the endpoint (model calls, paid or
    not), `unsent` failed to connect before the request went out."""

    sent: int = 0
    unsent: int = 0

    def __add__(self, other: Attempts) -> Attempts:
        return Attempts(self.sent + other.sent, self.unsent + other.unsent)


class CallFailedError(Exception):
    """A call that could not produce a usable answer; `code` is the reason code."""

    def __init__(self, code: str, detail: str, usage: TokenUsage, calls: Attempts) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail
        self.usage = usage
        self.calls = calls

    @property
    def reason(self) -> str:
        return f"{self.code}: {self.detail}"


def error_text(error: openai.APIStatusError) -> str:
    """What an error answer says: its body as text (else the SDK's message)."""
    try:
        text = error.response.text
    except Exception:  # a streamed or unreadable body
        text = ""
    return text or str(error)


# The HTTP client's errors raised before a request goes out (httpx names, whichever
# httpx generation the SDK uses): refused or unresolvable, connect timeout, no free
# connection in the pool.
_NOT_SENT_ERRORS = frozenset({"ConnectError", "ConnectTimeout", "PoolTimeout"})


def not_sent(error: openai.APIConnectionError) -> bool:
    """Whether the request failed before it was sent, so the endpoint never saw it."""
    cause = error.__cause__
    return cause is not None and any(
        kind.__name__ in _NOT_SENT_ERRORS for kind in type(cause).__mro__
    )


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """Seconds from `retry-after-ms`, or `Retry-After` (seconds or an HTTP date)."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            return max(0.0, float(raw_ms) / 1000)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
