"""The LLM judge: two phases over any OpenAI-compatible endpoint.

Phase 1 asks once per distinct normalised query for the requirement list (memoised in
the process, de-duplicated while in flight, and kept in the optional store so K stays the
same across days and processes). Phase 2 asks once per event which passages support which
requirement, with a quote for each citation. So an event costs at most two calls whatever
its number of passages, and one when its query was seen before.

Every reply is validated (pydantic); a bad one gets one repair attempt and then becomes an
error outcome with a reason code, never a NaN and never a silent skip. A reply cut at the
completion cap is asked again once with twice the cap (up to a ceiling). The SDK's own
retries are off: this module retries transport errors, 429s and 5xx itself, honouring
`Retry-After`, and paces its requests under the configured requests- and tokens-per-minute
so a large partition does not set off a storm of 429s.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

if TYPE_CHECKING:  # imported where used: the SDK takes ~0.5 s, every step process pays it
    import openai

from seer_metrics.evaluators import prompts
from seer_metrics.evaluators.answers import RequirementsAnswer, SupportAnswer, SupportItem
from seer_metrics.evaluators.base import EvaluationOutcome, OutcomeCallback, TokenUsage
from seer_metrics.evaluators.replies import (
    API_ERROR,
    INTERNAL_ERROR,
    INVALID_JSON,
    RATE_LIMITED,
    TIMEOUT,
    TRUNCATED,
    ReplyError,
    chat_request,
    check_requirements,
    read_reply,
    requirements_from_answer,
    shorten,
)
from seer_metrics.events import RetrievalEvent
from seer_metrics.judgment import Judgment, Requirement
from seer_metrics.judgment_store import (
    JudgmentStore,
    RequirementsRecord,
    normalise_text,
    requirements_key,
)
from seer_metrics.text.redaction import redact_url

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "gpt-4o-mini"
DEFAULT_BASE_URL = "https://api.openai.com/v1"  # the SDK's, when neither setting nor env

# USD per one million (input, output) tokens, from the providers' public price lists.
# Override or extend through `LLMSettings(prices=...)` or SEER_LLM_PRICES (JSON, e.g.
# '{"my-deployment": [0.15, 0.6]}'); a model missing here costs 0.0
# (with a warning), e.g. a local vLLM or Ollama model.
DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
}


# Expected completion size used in the token estimate before a call; the real usage
# corrects the limiter afterwards.
_EXPECTED_COMPLETION_TOKENS = 256
_CHARACTERS_PER_TOKEN = 4


def parse_prices(text: str, where: str) -> dict[str, tuple[float, float]]:
    """`{"model": [input_per_1M, output_per_1M], ...}` as JSON, e.g. from SEER_LLM_PRICES."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{where} is not valid JSON ({error.msg})") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{where} must be a JSON object of model -> [input, output] prices")
    prices: dict[str, tuple[float, float]] = {}
    for model, price in raw.items():
        if (
            not isinstance(price, list)
            or len(price) != 2
            or not all(isinstance(p, int | float) and not isinstance(p, bool) for p in price)
        ):
            raise ValueError(
                f"{where}: price of {model!r} must be [input_per_1M, output_per_1M] in USD, "
                f"got {price!r}"
            )
        prices[model] = (float(price[0]), float(price[1]))
    return prices


@dataclass(frozen=True)
class LLMSettings:
    """Everything the LLM judge can be told. `api_key`/`base_url` default as the SDK does.

    `requests_per_minute` / `tokens_per_minute` are the endpoint's limits (None: no client
    pacing); the client paces itself `rate_limit_headroom` below them. `max_retries` is
    the number of retries after a transport error, 429 or 5xx (each call, not each event).
    """

    model: str = DEFAULT_MODEL
    temperature: float = 0.0
    timeout_seconds: float = 60.0
    max_concurrency: int = 16
    requests_per_minute: float | None = 500.0
    tokens_per_minute: float | None = 200_000.0
    max_retries: int = 4
    max_completion_tokens: int = 1500
    max_completion_tokens_ceiling: int = 6000
    backoff_initial_seconds: float = 1.0
    backoff_max_seconds: float = 60.0
    rate_limit_headroom: float = 0.02
    prices: Mapping[str, tuple[float, float]] = field(default_factory=lambda: dict(DEFAULT_PRICES))
    api_key: str | None = field(default=None, repr=False)
    base_url: str | None = None

    def __post_init__(self) -> None:
        if not self.model or not self.model.strip():
            raise ValueError("LLM setting 'model' must be a non-empty model name")
        positive = {
            "timeout_seconds": self.timeout_seconds,
            "max_concurrency": self.max_concurrency,
            "max_completion_tokens": self.max_completion_tokens,
            "max_completion_tokens_ceiling": self.max_completion_tokens_ceiling,
            "requests_per_minute": self.requests_per_minute,
            "tokens_per_minute": self.tokens_per_minute,
        }
        for name, value in positive.items():
            if value is not None and not (isinstance(value, int | float) and value > 0):
                raise ValueError(f"LLM setting {name!r} must be a positive number, got {value!r}")
        non_negative = {
            "temperature": self.temperature,
            "max_retries": self.max_retries,
            "backoff_initial_seconds": self.backoff_initial_seconds,
            "backoff_max_seconds": self.backoff_max_seconds,
        }
        for name, value in non_negative.items():
            if not (isinstance(value, int | float) and value >= 0):
                raise ValueError(f"LLM setting {name!r} must be >= 0, got {value!r}")
        if not 0 <= self.rate_limit_headroom < 1:
            raise ValueError(
                f"LLM setting 'rate_limit_headroom' must be in [0, 1), "
                f"got {self.rate_limit_headroom!r}"
            )
        for model, price in self.prices.items():
            if len(price) != 2 or any(p < 0 for p in price):
                raise ValueError(
                    f"LLM price of {model!r} must be (input_per_1M, output_per_1M) >= 0, "
                    f"got {price!r}"
                )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> LLMSettings:
        """Settings from `environ` (the caller's environment mapping: `SEER_EVALUATOR_MODEL`,
        `SEER_LLM_*`, `OPENAI_API_KEY`, `OPENAI_BASE_URL`), then overrides.

        The library never reads the process environment itself; None means an empty one.
        """
        environ = {} if environ is None else environ
        values: dict[str, Any] = {}
        for variable, name in (("OPENAI_API_KEY", "api_key"), ("OPENAI_BASE_URL", "base_url")):
            if environ.get(variable, "").strip():
                values[name] = environ[variable].strip()
        if environ.get("SEER_EVALUATOR_MODEL"):
            values["model"] = environ["SEER_EVALUATOR_MODEL"]
        numeric = {
            "SEER_LLM_TIMEOUT_SECONDS": ("timeout_seconds", float),
            "SEER_LLM_MAX_CONCURRENCY": ("max_concurrency", int),
            "SEER_LLM_REQUESTS_PER_MINUTE": ("requests_per_minute", float),
            "SEER_LLM_TOKENS_PER_MINUTE": ("tokens_per_minute", float),
            "SEER_LLM_MAX_RETRIES": ("max_retries", int),
        }
        unlimited = {"SEER_LLM_REQUESTS_PER_MINUTE", "SEER_LLM_TOKENS_PER_MINUTE"}
        for variable, (name, kind) in numeric.items():
            raw = environ.get(variable)
            if raw is None or not raw.strip():
                continue
            if variable in unlimited and raw.strip().lower() in ("none", "0", "unlimited"):
                values[name] = None  # no client-side pacing (e.g. a local server)
                continue
            try:
                values[name] = kind(raw)
            except ValueError:
                raise ValueError(
                    f"environment variable {variable} must be a {kind.__name__}, got {raw!r}"
                ) from None
        if environ.get("SEER_LLM_PRICES", "").strip():
            values["prices"] = {
                **DEFAULT_PRICES,
                **parse_prices(environ["SEER_LLM_PRICES"], "SEER_LLM_PRICES"),
            }
        known = {f.name for f in fields(cls)}
        unknown = set(overrides) - known
        if unknown:
            raise ValueError(f"unknown LLM settings: {', '.join(sorted(unknown))}")
        # `model=None` (and a None key or endpoint) means "not given" (the factory passes it
        # through); any other None is meant, e.g. `requests_per_minute=None` for no pacing.
        not_given = {"model", "api_key", "base_url"}
        values.update({k: v for k, v in overrides.items() if not (k in not_given and v is None)})
        return cls(**values)

    def price_for(self, model: str) -> tuple[float, float] | None:
        """Exact model name, else the longest listed prefix (dated snapshots)."""
        if model in self.prices:
            return self.prices[model]
        prefixes = [name for name in self.prices if model.startswith(name)]
        return self.prices[max(prefixes, key=len)] if prefixes else None

    def usage(self, prompt_tokens: int, completion_tokens: int) -> TokenUsage:
        price = self.price_for(self.model)
        cost = 0.0
        if price is not None:
            cost = (prompt_tokens * price[0] + completion_tokens * price[1]) / 1_000_000
        return TokenUsage(prompt_tokens, completion_tokens, cost)


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


AnswerT = TypeVar("AnswerT", bound=BaseModel)


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
class _CallResult:
    answer: Any
    usage: TokenUsage
    calls: Attempts


@dataclass
class _Phase1:
    """The requirement list of one query, shared by every event asking that query."""

    requirements: tuple[Requirement, ...] | None = None
    error: CallFailedError | None = None
    usage: TokenUsage = field(default_factory=TokenUsage)
    calls: Attempts = field(default_factory=Attempts)
    claimed: bool = False

    def claim(self) -> tuple[TokenUsage, Attempts]:
        """The first event to read the result carries the phase-1 cost; the rest carry 0."""
        if self.claimed:
            return TokenUsage(), Attempts()
        self.claimed = True
        return self.usage, self.calls


@dataclass
class _Request:
    """One chat completion waiting for a worker."""

    arguments: dict[str, Any]
    estimated_tokens: int
    reply: asyncio.Future[Any]


@dataclass
class _LoopState:
    """Things bound to one event loop: the HTTP client, the workers, in-flight phase 1.

    `max_concurrency` workers take requests from one queue. A worker that gets a reply
    starts the next queued request at once, in the same task: with a semaphore instead,
    each hand-over waits for a turn of a busy event loop, which at 100+ calls a second
    costs a visible share of the throughput.
    """

    loop: asyncio.AbstractEventLoop
    client: openai.AsyncOpenAI
    queue: asyncio.Queue[_Request] = field(default_factory=asyncio.Queue)
    workers: list[asyncio.Task[None]] = field(default_factory=list)
    in_flight: dict[str, asyncio.Future[_Phase1]] = field(default_factory=dict)
    active: int = 0


class LLMEvaluator:
    """Two-phase judge on `openai.AsyncOpenAI` (OpenAI, Azure OpenAI, vLLM, Ollama, ...)."""

    name = "openai"

    def __init__(
        self,
        settings: LLMSettings | None = None,
        *,
        requirement_store: JudgmentStore | None = None,
    ) -> None:
        self.settings = settings or LLMSettings()
        self.model = self.settings.model
        self.prompt_version = prompts.PROMPT_VERSION
        self._store = requirement_store
        if not self.settings.api_key:
            raise ValueError(
                "the openai evaluator needs an API key: set OPENAI_API_KEY (for a local "
                "endpoint such as vLLM or Ollama any non-empty value works)"
            )
        if self.settings.price_for(self.model) is None:
            logger.warning(
                "no price listed for model %r: its cost is recorded as 0.0 "
                "(add it to LLMSettings.prices)",
                self.model,
            )
        self._limiter = RateLimiter(
            self.settings.requests_per_minute,
            self.settings.tokens_per_minute,
            self.settings.rate_limit_headroom,
        )
        self._requirements: dict[str, tuple[Requirement, ...]] = {}
        self._loop_state: _LoopState | None = None
        # Where requests go, without credentials: for logs and failure messages.
        self.endpoint = redact_url(self.settings.base_url or DEFAULT_BASE_URL)

    async def evaluate(
        self, events: Sequence[RetrievalEvent], on_outcome: OutcomeCallback | None = None
    ) -> list[EvaluationOutcome]:
        """One outcome per event, in order; one event's failure never raises.

        `on_outcome(index, outcome)` is called as each event completes.
        """
        state = self._enter()

        async def one(index: int, event: RetrievalEvent, key: str) -> EvaluationOutcome:
            outcome = await self._evaluate_event(event, key, state)
            if on_outcome is not None:
                on_outcome(index, outcome)
            return outcome

        try:
            keys = [
                requirements_key(event.task, self.model, self.prompt_version) for event in events
            ]
            self._load_stored_requirements(keys)
            return list(
                await asyncio.gather(
                    *(
                        one(index, event, key)
                        for index, (event, key) in enumerate(zip(events, keys, strict=True))
                    )
                )
            )
        finally:
            await self._leave(state)

    def _enter(self) -> _LoopState:
        """The state of the running loop, shared by concurrent `evaluate` calls in it.

        The HTTP client lives while at least one `evaluate` runs and is closed by the last
        one, so a caller may use `asyncio.run` once per batch without leaking connections
        bound to a closed loop.
        """
        loop = asyncio.get_running_loop()
        if self._loop_state is None or self._loop_state.loop is not loop:
            import openai

            client = openai.AsyncOpenAI(
                api_key=self.settings.api_key,
                base_url=self.settings.base_url,
                timeout=self.settings.timeout_seconds,
                max_retries=0,
            )
            state = _LoopState(loop, client)
            state.workers = [
                loop.create_task(self._work(state)) for _ in range(self.settings.max_concurrency)
            ]
            self._loop_state = state
        self._loop_state.active += 1
        return self._loop_state

    async def _leave(self, state: _LoopState) -> None:
        state.active -= 1
        if state.active == 0:
            if self._loop_state is state:
                self._loop_state = None
            for worker in state.workers:
                worker.cancel()
            await asyncio.gather(*state.workers, return_exceptions=True)
            await state.client.close()

    async def _work(self, state: _LoopState) -> None:
        """A worker: paces, sends and answers queued requests, one at a time."""
        while True:
            request = await state.queue.get()
            if request.reply.done():
                continue  # its caller is gone
            delay = self._limiter.reserve(request.estimated_tokens)
            if delay > 0:
                await asyncio.sleep(delay)
            try:
                completion = await state.client.chat.completions.create(**request.arguments)
            except asyncio.CancelledError:
                request.reply.cancel()
                raise
            except Exception as error:
                if not request.reply.done():
                    request.reply.set_exception(error)
            else:
                if not request.reply.done():
                    request.reply.set_result(completion)

    def _load_stored_requirements(self, keys: Sequence[str]) -> None:
        if self._store is None:
            return
        missing = [key for key in dict.fromkeys(keys) if key not in self._requirements]
        if not missing:
            return
        try:
            self._requirements.update(self._store.get_requirements(missing))
        except Exception:
            logger.exception("could not read stored requirement lists; asking the model")

    async def _evaluate_event(
        self, event: RetrievalEvent, key: str, state: _LoopState
    ) -> EvaluationOutcome:
        usage = TokenUsage()
        calls = Attempts()
        try:
            phase1 = await self._phase1(event.task, key, state)
            phase1_usage, phase1_calls = phase1.claim()
            usage += phase1_usage
            calls += phase1_calls
            if phase1.error is not None:
                return self._error(event, phase1.error.reason, usage, calls)
            requirements = phase1.requirements or ()
            if not requirements or not event.context:
                # Nothing to check: K = 0 or N = 0 makes phase 2 pointless.
                return self._outcome(event, Judgment(requirements), None, usage, calls)
            result = await self._ask(
                prompts.support_messages(
                    event.task,
                    [(r.id, r.text) for r in requirements],
                    [(item.id, item.text) for item in event.context],
                ),
                prompts.SUPPORT_SCHEMA_NAME,
                prompts.SUPPORT_SCHEMA,
                SupportAnswer,
                state,
            )
        except CallFailedError as failure:
            return self._error(event, failure.reason, usage + failure.usage, calls + failure.calls)
        except Exception as error:  # one event's bug must not sink the batch
            logger.exception("evaluating event %s failed", event.event_id)
            return self._error(
                event, f"{INTERNAL_ERROR}: {type(error).__name__}: {error}", usage, calls
            )
        judgment = build_judgment(event, requirements, result.answer)
        return self._outcome(event, judgment, None, usage + result.usage, calls + result.calls)

    def _error(
        self, event: RetrievalEvent, reason: str, usage: TokenUsage, calls: Attempts
    ) -> EvaluationOutcome:
        return self._outcome(event, None, reason, usage, calls)

    def _outcome(
        self,
        event: RetrievalEvent,
        judgment: Judgment | None,
        reason: str | None,
        usage: TokenUsage,
        calls: Attempts,
    ) -> EvaluationOutcome:
        return EvaluationOutcome(
            event.event_id,
            "ok" if judgment is not None else "error",
            judgment,
            reason,
            usage,
            model_calls=calls.sent,
            unsent_requests=calls.unsent,
        )

    async def _phase1(self, query: str, key: str, state: _LoopState) -> _Phase1:
        known = self._requirements.get(key)
        if known is not None:
            return _Phase1(requirements=known, claimed=True)
        pending = state.in_flight.get(key)
        if pending is None:
            pending = asyncio.ensure_future(self._ask_requirements(query, key, state))
            state.in_flight[key] = pending
            pending.add_done_callback(lambda _: state.in_flight.pop(key, None))
        return await asyncio.shield(pending)

    async def _ask_requirements(self, query: str, key: str, state: _LoopState) -> _Phase1:
        try:
            result = await self._ask(
                prompts.requirements_messages(query),
                prompts.REQUIREMENTS_SCHEMA_NAME,
                prompts.REQUIREMENTS_SCHEMA,
                RequirementsAnswer,
                state,
                check=check_requirements,
            )
        except CallFailedError as failure:
            return _Phase1(error=failure, usage=failure.usage, calls=failure.calls)
        requirements = requirements_from_answer(result.answer)
        self._requirements[key] = requirements
        if self._store is not None:
            try:
                self._store.put_requirements(
                    [RequirementsRecord(key, query, self.model, self.prompt_version, requirements)]
                )
            except Exception:
                logger.exception("could not store the requirement list of a query")
        return _Phase1(requirements=requirements, usage=result.usage, calls=result.calls)

    async def _ask(
        self,
        messages: list[dict[str, str]],
        schema_name: str,
        schema: dict[str, Any],
        answer_type: type[AnswerT],
        state: _LoopState,
        check: Callable[[AnswerT], None] | None = None,
    ) -> _CallResult:
        """One structured question, with one repair attempt for a reply that does not fit and
        one retry with twice the completion cap (up to the ceiling) for a reply cut short."""
        usage = TokenUsage()
        calls = Attempts()
        conversation = messages
        code, detail = INVALID_JSON, ""
        cap = self.settings.max_completion_tokens
        attempt = 0
        while attempt < 2:
            try:
                completion, call_usage, call_count = await self._complete(
                    conversation, schema_name, schema, state, cap
                )
            except CallFailedError as failure:
                raise CallFailedError(
                    failure.code, failure.detail, usage + failure.usage, calls + failure.calls
                ) from None
            usage += call_usage
            calls += call_count
            try:
                return _CallResult(read_reply(completion, answer_type, check), usage, calls)
            except ReplyError as error:
                if error.code == TRUNCATED:
                    larger = min(2 * cap, self.settings.max_completion_tokens_ceiling)
                    if larger > cap and cap == self.settings.max_completion_tokens:
                        cap = larger  # the same question once more, with room to finish
                        continue
                    raise CallFailedError(
                        TRUNCATED, f"the reply hit max_completion_tokens={cap}", usage, calls
                    ) from None
                if not error.repairable:
                    raise CallFailedError(error.code, error.detail, usage, calls) from None
                code, detail = error.code, error.detail
                if attempt == 0:
                    conversation = prompts.repair_messages(
                        messages, error.content, error.reason, schema_name
                    )
            attempt += 1
        raise CallFailedError(code, f"{detail} (after one repair attempt)", usage, calls)

    async def _complete(
        self,
        messages: list[dict[str, str]],
        schema_name: str,
        schema: dict[str, Any],
        state: _LoopState,
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
            request = _Request(arguments, estimated, state.loop.create_future())
            state.queue.put_nowait(request)
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
                    self._limiter.pause(wait)
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
                usage = _usage_of(completion, estimated)
                self._limiter.settle(estimated, usage.total_tokens)
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


def build_judgment(
    event: RetrievalEvent, requirements: Sequence[Requirement], answer: SupportAnswer
) -> Judgment:
    """Turn a phase-2 answer into a judgment the event can trust.

    Unknown requirement ids are ignored and missing ones stay unsupported. A cited passage
    that the context lacks is dropped and counted as hallucinated; a cited passage of the
    context counts only when one of its quotes is found in its text (after whitespace and
    case normalisation), else it is dropped and counted as unverified.
    """
    texts = {item.id: normalise_text(item.text) for item in event.context}
    by_requirement: dict[str, list[SupportItem]] = {}
    for item in answer.requirements:
        by_requirement.setdefault(prompts.unescape_untrusted(item.id), []).append(item)
    unverified = 0
    result: list[Requirement] = []
    for requirement in requirements:
        cited: list[str] = []
        quotes: dict[str, list[str]] = {}
        for item in by_requirement.get(requirement.id, []):
            cited.extend(prompts.unescape_untrusted(pid) for pid in item.supported_by)
            for evidence in item.evidence:
                passage = prompts.unescape_untrusted(evidence.passage)
                quotes.setdefault(passage, []).append(evidence.quote)
        kept: list[str] = []
        for passage_id in dict.fromkeys(cited):
            if passage_id not in texts:
                kept.append(passage_id)  # dropped and counted by `restricted_to`
            elif any(
                _quote_found(quote, texts[passage_id]) for quote in quotes.get(passage_id, [])
            ):
                kept.append(passage_id)
            else:
                unverified += 1
        result.append(Requirement(requirement.id, requirement.text, tuple(kept)))
    judgment = Judgment(tuple(result), unverified_citations=unverified)
    return judgment.restricted_to(texts)


def _quote_found(quote: str, normalised_passage: str) -> bool:
    candidates = {normalise_text(quote), normalise_text(prompts.unescape_untrusted(quote))}
    return any(candidate and candidate in normalised_passage for candidate in candidates)


def estimate_tokens(messages: Sequence[Mapping[str, str]]) -> int:
    """Rough prompt size (4 characters a token) plus an expected completion."""
    characters = sum(len(message.get("content") or "") for message in messages)
    return math.ceil(characters / _CHARACTERS_PER_TOKEN) + _EXPECTED_COMPLETION_TOKENS


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


def _usage_of(completion: Any, estimated: int) -> TokenUsage:
    usage = getattr(completion, "usage", None)
    if usage is None:
        # Some compatible servers send no usage: fall back to the estimate.
        return TokenUsage(estimated - _EXPECTED_COMPLETION_TOKENS, _EXPECTED_COMPLETION_TOKENS)
    return TokenUsage(int(usage.prompt_tokens or 0), int(usage.completion_tokens or 0))
