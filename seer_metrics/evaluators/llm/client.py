"""The judge's client: chat completions sent to one endpoint, paced, with retries.

A `Connection` is the HTTP client of one event loop and the workers that send its queued
requests. `Connection.complete` sends one request in the shape the endpoint takes
(`structured_output`) and retries only what can succeed: transport errors, 429 (honouring
`Retry-After`), 5xx outages and timeouts, with jittered exponential back-off. A rejected
request (400, 401, 403, 404, 422, or a 500 whose body is a request validation error) is
not sent again as it was, and neither is one that timed out at an endpoint too slow for a
reply of its cap. The SDK's own retries are off, so every request that reaches the
endpoint is counted (`Attempts`), and a call that gives up raises `CallFailedError` with
its reason code.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: the SDK takes ~0.5 s, every step process pays it
    import openai

from seer_metrics.evaluators.base import TokenUsage
from seer_metrics.evaluators.llm.pacing import (
    EXPECTED_COMPLETION_TOKENS,
    EndpointSpeed,
    RateLimiter,
    estimate_tokens,
)
from seer_metrics.evaluators.llm.replies import (
    API_ERROR,
    RATE_LIMITED,
    REQUEST_REJECTED,
    TIMEOUT,
    chat_request,
    shorten,
)
from seer_metrics.evaluators.llm.reported_usage import estimated_usage_note, reported_tokens
from seer_metrics.evaluators.llm.retries import (
    Attempts,
    CallFailedError,
    error_text,
    not_sent,
    retry_after_seconds,
)
from seer_metrics.evaluators.llm.settings import DEFAULT_BASE_URL, LLMSettings
from seer_metrics.evaluators.llm.structured_output import (
    CAP_FIELDS,
    OUTPUT_MODES,
    OutputProfile,
    rejection_kind,
)
from seer_metrics.text.redaction import redact_url

logger = logging.getLogger(__name__)


@dataclass
class _Request:
    """One chat completion waiting for a worker; its reply is (completion, seconds)."""

    arguments: dict[str, Any]
    estimated_tokens: int
    reply: asyncio.Future[tuple[Any, float]]


class _RejectedError(Exception):
    """The endpoint refused the request itself (`structured_output.rejection_kind`)."""

    def __init__(self, kind: str, detail: str, calls: Attempts) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail
        self.calls = calls


@dataclass(frozen=True)
class Completed:
    """A chat completion, what it cost, and how it was asked for."""

    completion: Any
    usage: TokenUsage
    calls: Attempts
    mode: str
    seconds: float  # from sending the request to its whole reply


@dataclass
class Connection:
    """The HTTP client of one event loop and the workers that send its requests.

    `max_concurrency` workers take requests from one queue. A worker that gets a reply
    starts the next queued request at once, in the same task: with a semaphore instead,
    each hand-over waits for a turn of a busy event loop, which at 100+ calls a second
    costs a visible share of the throughput. `profile` (the output mode and cap name the
    endpoint takes) and `speed` are the evaluator's, shared by its connections.
    """

    settings: LLMSettings
    limiter: RateLimiter
    profile: OutputProfile
    speed: EndpointSpeed
    loop: asyncio.AbstractEventLoop
    client: openai.AsyncOpenAI
    queue: asyncio.Queue[_Request] = field(default_factory=asyncio.Queue)
    workers: list[asyncio.Task[None]] = field(default_factory=list)
    # Held by the one request that probes a shape not yet accepted (`complete`).
    probing: asyncio.Lock = field(default_factory=asyncio.Lock)

    @classmethod
    def open(
        cls,
        settings: LLMSettings,
        limiter: RateLimiter,
        profile: OutputProfile,
        speed: EndpointSpeed,
    ) -> Connection:
        """A connection bound to the running loop, its workers started."""
        import openai

        loop = asyncio.get_running_loop()
        client = openai.AsyncOpenAI(
            api_key=settings.api_key,
            base_url=settings.base_url,
            timeout=settings.timeout_seconds,
            max_retries=0,
        )
        connection = cls(settings, limiter, profile, speed, loop, client)
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
        """A worker: paces, sends and answers queued requests, one at a time.

        The timeout bounds the whole call: the HTTP client's own timeout is per read, so a
        reply that trickles in a byte at a time would never hit it.
        """
        while True:
            request = await self.queue.get()
            if request.reply.done():
                continue  # its caller is gone
            delay = self.limiter.reserve(request.estimated_tokens)
            if delay > 0:
                await asyncio.sleep(delay)
            started = self.loop.time()
            try:
                completion = await asyncio.wait_for(
                    self.client.chat.completions.create(**request.arguments),
                    self.settings.timeout_seconds,
                )
            except asyncio.CancelledError:
                request.reply.cancel()
                raise
            except Exception as error:
                if not request.reply.done():
                    request.reply.set_exception(error)
            else:
                if not request.reply.done():
                    request.reply.set_result((completion, self.loop.time() - started))

    def fits_timeout(self, completion_tokens: int) -> bool:
        """Whether a reply of `completion_tokens` can arrive within the timeout at the speed
        the endpoint has shown (True while it has shown none)."""
        seconds = self.speed.seconds_for(completion_tokens)
        return seconds is None or seconds <= self.settings.timeout_seconds

    async def complete(
        self,
        messages: list[dict[str, str]],
        schema_name: str,
        schema: dict[str, Any],
        max_completion_tokens: int,
    ) -> Completed:
        """One chat completion in the shape the endpoint takes, with retries.

        A request the endpoint rejects for its shape is sent again changed (the next output
        mode, the other name of the cap), never as it was. Until a shape has been accepted,
        one request at a time probes it, so the others are sent in the shape it learns.
        """
        profile = self.profile
        calls = Attempts()
        before = profile.snapshot()
        probe = False  # whether this call holds `probing`: from its first unsettled pass on
        try:
            # Each pass changes the request: at most every mode and both names of the cap.
            for _ in range(len(OUTPUT_MODES) + len(CAP_FIELDS)):
                if not profile.settled and not probe:
                    await self.probing.acquire()
                    probe = not profile.settled  # else learned while this call waited
                    if not probe:
                        self.probing.release()
                mode, cap_field = profile.mode, profile.cap_field
                try:
                    completed = await self._send(
                        messages, schema_name, schema, max_completion_tokens, mode, cap_field
                    )
                except _RejectedError as rejected:
                    calls += rejected.calls
                    if rejected.kind != REQUEST_REJECTED and profile.step_down(
                        rejected.kind, mode, cap_field
                    ):
                        logger.info(
                            "%s rejected a %s request with %s (%s); asking as %s with %s",
                            redact_url(self.settings.base_url or DEFAULT_BASE_URL),
                            mode,
                            cap_field,
                            rejected.detail,
                            profile.mode,
                            profile.cap_field,
                        )
                        continue
                    # Rejected in every shape tried: the request was at fault (a prompt
                    # too long, say), not the shape it was first sent in.
                    profile.restore(before, after=(mode, cap_field))
                    raise CallFailedError(
                        REQUEST_REJECTED, rejected.detail, TokenUsage(), calls
                    ) from None
                except CallFailedError as failure:
                    raise CallFailedError(
                        failure.code, failure.detail, failure.usage, calls + failure.calls
                    ) from None
                profile.settle()
                if completed.usage.completion_tokens > max_completion_tokens:
                    profile.cap_ignored(cap_field)
                return replace(completed, calls=calls + completed.calls)
        finally:
            if probe:
                self.probing.release()
        raise CallFailedError(
            REQUEST_REJECTED, "the endpoint rejected every request shape", TokenUsage(), calls
        )

    async def _send(
        self,
        messages: list[dict[str, str]],
        schema_name: str,
        schema: dict[str, Any],
        max_completion_tokens: int,
        mode: str,
        cap_field: str,
    ) -> Completed:
        """One request, retried while a retry can succeed (transport errors, timeouts
        that the endpoint's speed does not explain, 429, 5xx outages)."""
        import openai

        settings = self.settings
        sent = unsent = 0
        code, detail = API_ERROR, ""
        arguments = chat_request(
            settings.model,
            settings.temperature,
            messages,
            schema_name,
            schema,
            max_completion_tokens,
            mode=mode,
            cap_field=cap_field,
        )
        estimated = estimate_tokens(arguments["messages"])
        for attempt in range(settings.max_retries + 1):
            wait: float | None = None
            request = _Request(arguments, estimated, self.loop.create_future())
            self.queue.put_nowait(request)
            try:
                completion, seconds = await request.reply
            except (TimeoutError, openai.APIConnectionError) as error:
                # A timeout is a connection error too; only a failed connect (or no free
                # connection) means the request never left.
                if isinstance(error, openai.APIConnectionError) and not_sent(error):
                    unsent += 1
                else:
                    sent += 1
                if isinstance(error, TimeoutError | openai.APITimeoutError):
                    code = TIMEOUT
                    detail = f"no reply within {settings.timeout_seconds:g} s"
                    if not self.fits_timeout(max_completion_tokens):
                        # The endpoint is too slow for a reply of up to the cap: the same
                        # deterministic request would time out again.
                        detail += self._too_slow(max_completion_tokens)
                        break
                else:
                    code, detail = API_ERROR, f"connection failed: {shorten(str(error))}"
            except openai.RateLimitError as error:
                sent += 1
                code, detail = RATE_LIMITED, "HTTP 429 from the endpoint"
                wait = retry_after_seconds(error.response.headers)
                if wait is not None:
                    self.limiter.pause(wait)
            except openai.APIStatusError as error:
                sent += 1
                status = error.status_code
                text = error_text(error)
                kind = rejection_kind(status, text, cap_field, self.profile.settled)
                if kind is not None:
                    raise _RejectedError(
                        kind, f"HTTP {status}: {shorten(text)}", Attempts(sent, unsent)
                    ) from None
                code, detail = API_ERROR, f"HTTP {status}: {shorten(str(error))}"
                if status < 500 and status not in (408, 409):
                    raise CallFailedError(
                        code, detail, TokenUsage(), Attempts(sent, unsent)
                    ) from None
                wait = retry_after_seconds(error.response.headers)
            else:
                sent += 1
                usage = usage_of(completion, estimated)
                self.limiter.settle(estimated, usage.total_tokens)
                if usage.note is None:  # an estimate says nothing of the endpoint's speed
                    self.speed.record(usage.completion_tokens, seconds)
                priced = settings.usage(usage.prompt_tokens, usage.completion_tokens)
                return Completed(
                    completion,
                    replace(priced, note=usage.note),
                    Attempts(sent, unsent),
                    mode,
                    seconds,
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

    def _too_slow(self, completion_tokens: int) -> str:
        speed = self.speed.tokens_per_second or 0.0
        seconds = self.speed.seconds_for(completion_tokens) or 0.0
        return (
            f"; at the {speed:.0f} tokens/s the endpoint has shown, a reply of up to "
            f"{completion_tokens} tokens needs about {seconds:.0f} s, so the same request is "
            "not sent again (raise the timeout, or lower the completion cap)"
        )


def usage_of(completion: Any, estimated: int) -> TokenUsage:
    """The tokens a completion says it used (priced later); the estimate when it says none,
    and the estimate with a note when what it says is not a usable count (negative, huge,
    not a whole number: `reported_usage`)."""
    usage = getattr(completion, "usage", None)
    estimate = TokenUsage(estimated - EXPECTED_COMPLETION_TOKENS, EXPECTED_COMPLETION_TOKENS)
    if usage is None:
        # Some compatible servers send no usage: fall back to the estimate.
        return estimate
    reported = reported_tokens(usage)
    if isinstance(reported, str):
        return replace(estimate, note=estimated_usage_note(reported))
    return TokenUsage(*reported)
