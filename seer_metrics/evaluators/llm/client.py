"""The judge's client: chat completions sent to one endpoint, paced, with retries.

A `Connection` is the HTTP client of one event loop and the workers that send its queued
requests. `Connection.complete` sends one request and retries what may succeed later:
transport errors, 429 (honouring `Retry-After`) and 5xx, with jittered exponential
back-off. The SDK's own retries are off, so every request that reaches the endpoint is
counted (`Attempts`), and a call that gives up raises `CallFailedError` with its reason code.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: the SDK takes ~0.5 s, every step process pays it
    import openai

from seer_metrics.evaluators.base import TokenUsage
from seer_metrics.evaluators.llm.pacing import (
    EXPECTED_COMPLETION_TOKENS,
    RateLimiter,
    estimate_tokens,
)
from seer_metrics.evaluators.llm.replies import (
    API_ERROR,
    RATE_LIMITED,
    TIMEOUT,
    chat_request,
    shorten,
)
from seer_metrics.evaluators.llm.settings import LLMSettings


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


@dataclass
class _Request:
    """One chat completion waiting for a worker."""

    arguments: dict[str, Any]
    estimated_tokens: int
    reply: asyncio.Future[Any]


@dataclass
class Connection:
    """The HTTP client of one event loop and the workers that send its requests.

    `max_concurrency` workers take requests from one queue. A worker that gets a reply
    starts the next queued request at once, in the same task: with a semaphore instead,
    each hand-over waits for a turn of a busy event loop, which at 100+ calls a second
    costs a visible share of the throughput.
    """

    settings: LLMSettings
    limiter: RateLimiter
    loop: asyncio.AbstractEventLoop
    client: openai.AsyncOpenAI
    queue: asyncio.Queue[_Request] = field(default_factory=asyncio.Queue)
    workers: list[asyncio.Task[None]] = field(default_factory=list)

    @classmethod
    def open(cls, settings: LLMSettings, limiter: RateLimiter) -> Connection:
        """A connection bound to the running loop, its workers started."""
        import openai

        loop = asyncio.get_running_loop()
        client = openai.AsyncOpenAI(
            api_key=settings.api_key,
            base_url=settings.base_url,
            timeout=settings.timeout_seconds,
            max_retries=0,
        )
        connection = cls(settings, limiter, loop, client)
        connection.workers = [
            loop.create_task(connection._work()) for _ in range(settings.max_concurrency)
        ]
        return connection

    async def close(self) -> None:
        for worker in self.workers:
            worker.cancel()
        await asyncio.gather(*self.workers, return_exceptions=True)
        await self.client.close()

    async def _work(self) -> None:
        """A worker: paces, sends and answers queued requests, one at a time."""
        while True:
            request = await self.queue.get()
            if request.reply.done():
                continue  # its caller is gone
            delay = self.limiter.reserve(request.estimated_tokens)
            if delay > 0:
                await asyncio.sleep(delay)
            try:
                completion = await self.client.chat.completions.create(**request.arguments)
            except asyncio.CancelledError:
                request.reply.cancel()
                raise
            except Exception as error:
                if not request.reply.done():
                    request.reply.set_exception(error)
            else:
                if not request.reply.done():
                    request.reply.set_result(completion)

    async def complete(
        self,
        messages: list[dict[str, str]],
        schema_name: str,
        schema: dict[str, Any],
        max_completion_tokens: int,
    ) -> tuple[Any, TokenUsage, Attempts]:
        """One chat completion with retries; returns it with its usage and requests."""
        import openai

        settings = self.settings
        estimated = estimate_tokens(messages)
        sent = unsent = 0
        code, detail = API_ERROR, ""
        arguments = chat_request(
            settings.model,
            settings.temperature,
            messages,
            schema_name,
            schema,
            max_completion_tokens,
        )
        for attempt in range(settings.max_retries + 1):
            wait: float | None = None
            request = _Request(arguments, estimated, self.loop.create_future())
            self.queue.put_nowait(request)
            try:
                completion = await request.reply
            except openai.APIConnectionError as error:
                # A timeout is a connection error too; only a failed connect (or no free
                # connection) means the request never left.
                if not_sent(error):
                    unsent += 1
                else:
                    sent += 1
                if isinstance(error, openai.APITimeoutError):
                    code = TIMEOUT
                    detail = f"no reply within {settings.timeout_seconds:g} s"
                else:
                    code, detail = API_ERROR, f"connection failed: {error}"
            except openai.RateLimitError as error:
                sent += 1
                code, detail = RATE_LIMITED, "HTTP 429 from the endpoint"
                wait = retry_after_seconds(error.response.headers)
                if wait is not None:
                    self.limiter.pause(wait)
            except openai.APIStatusError as error:
                sent += 1
                code, detail = API_ERROR, f"HTTP {error.status_code}: {shorten(str(error))}"
                if error.status_code < 500 and error.status_code not in (408, 409):
                    raise CallFailedError(
                        code, detail, TokenUsage(), Attempts(sent, unsent)
                    ) from None
                wait = retry_after_seconds(error.response.headers)
            else:
                sent += 1
                usage = usage_of(completion, estimated)
                self.limiter.settle(estimated, usage.total_tokens)
                return (
                    completion,
                    settings.usage(usage.prompt_tokens, usage.completion_tokens),
                    Attempts(sent, unsent),
                )
            if attempt == settings.max_retries:
                break
            # Jittered exponential backoff, never shorter than the server's Retry-After:
            # callers told the same Retry-After must not all come back at the same instant.
            backoff = min(
                settings.backoff_max_seconds, settings.backoff_initial_seconds * 2**attempt
            ) * random.uniform(0.5, 1.0)
            await asyncio.sleep(backoff if wait is None else max(wait, backoff))
        attempts = sent + unsent
        raise CallFailedError(
            code,
            f"{detail} (after {attempts} attempt{'s' if attempts != 1 else ''})",
            TokenUsage(),
            Attempts(sent, unsent),
        )


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


def usage_of(completion: Any, estimated: int) -> TokenUsage:
    """The tokens a completion says it used (priced later); the estimate when it says none."""
    usage = getattr(completion, "usage", None)
    if usage is None:
        # Some compatible servers send no usage: fall back to the estimate.
        return TokenUsage(estimated - EXPECTED_COMPLETION_TOKENS, EXPECTED_COMPLETION_TOKENS)
    return TokenUsage(int(usage.prompt_tokens or 0), int(usage.completion_tokens or 0))
