"""Pacing: how the judge keeps under an endpoint's requests- and tokens-per-minute, and
how fast the endpoint answers.

`RateLimiter` spreads call starts evenly under both budgets; `estimate_tokens` is the size
a call reserves before it is sent, corrected by the real usage afterwards. `EndpointSpeed`
is the generation speed the endpoint has shown, so the judge does not send a request that
cannot finish within the timeout (a slow CPU server at 10 tokens a second).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence

# Expected completion size used in the token estimate before a call; the real usage
# corrects the limiter afterwards.
EXPECTED_COMPLETION_TOKENS = 256
CHARACTERS_PER_TOKEN = 4


class RateLimiter:
    """Paces call starts under requests- and tokens-per-minute budgets.

    Generic cell rate algorithm without burst: each call reserves the next free slot, so
    calls are spread evenly and no rolling minute ever sees more than the budget (a burst
    at the start of a run is exactly what makes servers answer 429). Reservations are
    synchronous, so the limiter needs no lock and works from any event loop.
    """

    def __init__(
        self,
        requests_per_minute: float | None,
        tokens_per_minute: float | None,
        headroom: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        factor = 1.0 - headroom
        self._request_interval = 60.0 / (requests_per_minute * factor) if requests_per_minute else 0
        self._token_interval = 60.0 / (tokens_per_minute * factor) if tokens_per_minute else 0
        self._clock = clock
        self._next_request = 0.0
        self._next_tokens = 0.0

    def reserve(self, estimated_tokens: int) -> float:
        """Reserve a slot for one call; returns the seconds to wait before sending it."""
        now = self._clock()
        start = max(now, self._next_request, self._next_tokens)
        self._next_request = start + self._request_interval
        self._next_tokens = max(self._next_tokens, now) + estimated_tokens * self._token_interval
        return start - now

    def settle(self, estimated_tokens: int, actual_tokens: int) -> None:
        """Correct the token budget once the real usage of a call is known."""
        self._next_tokens += (actual_tokens - estimated_tokens) * self._token_interval

    def pause(self, seconds: float) -> None:
        """Hold every new call for `seconds` (the server said Retry-After)."""
        resume = self._clock() + seconds
        self._next_request = max(self._next_request, resume)


def estimate_tokens(messages: Sequence[Mapping[str, str]]) -> int:
    """Rough prompt size (4 characters a token) plus an expected completion."""
    characters = sum(len(message.get("content") or "") for message in messages)
    return math.ceil(characters / CHARACTERS_PER_TOKEN) + EXPECTED_COMPLETION_TOKENS


# Replies shorter than this are not timed: their time is mostly the round trip and the
# prompt, and would make a fast endpoint look slow.
MIN_TIMED_TOKENS = 64


class EndpointSpeed:
    """The completion tokens a second an endpoint has shown over the run's replies of at
    least `MIN_TIMED_TOKENS` (their whole time, prompt processing included), to tell what
    fits a timeout."""

    def __init__(self) -> None:
        self._tokens = 0
        self._seconds = 0.0

    def record(self, completion_tokens: int, seconds: float) -> None:
        if completion_tokens >= MIN_TIMED_TOKENS and seconds > 0:
            self._tokens += completion_tokens
            self._seconds += seconds

    @property
    def tokens_per_second(self) -> float | None:
        """None until a reply has been timed."""
        return self._tokens / self._seconds if self._seconds > 0 else None

    def seconds_for(self, completion_tokens: int) -> float | None:
        """How long a reply of `completion_tokens` would take; None when not known yet."""
        speed = self.tokens_per_second
        return None if speed is None else completion_tokens / speed
