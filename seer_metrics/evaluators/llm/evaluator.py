"""The LLM judge: two phases over any OpenAI-compatible endpoint.

Phase 1 asks once per distinct normalised query for the requirement list (memoised in
the process, de-duplicated while in flight, and kept in the optional store so K stays the
same across days and processes). Phase 2 asks once per event which passages support which
requirement, with a quote for each citation. So an event costs at most two calls whatever
its number of passages, and one when its query was seen before.

Every reply is validated (pydantic); a bad one gets one repair attempt and then becomes an
error outcome with a reason code, never a NaN and never a silent skip. No judgment, no
score: a requirement list that is empty or longer than `max_requirements` ends its events
as errors (`no_requirements`, `too_many_requirements`). A reply cut at the completion cap
is asked again once with twice the cap (up to a ceiling), when that larger reply can
arrive within the timeout at the speed the endpoint has shown. Sending, pacing, retrying
and the negotiated output mode are the client's (`client.py`, `pacing.py`,
`structured_output.py`); the mode of each judgment is recorded in it (`output_mode`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from pydantic import BaseModel

from seer_metrics.evaluators.base import EvaluationOutcome, OutcomeCallback, TokenUsage
from seer_metrics.evaluators.llm import prompts
from seer_metrics.evaluators.llm.answers import RequirementsAnswer, SupportAnswer
from seer_metrics.evaluators.llm.citations import build_judgment
from seer_metrics.evaluators.llm.client import Connection
from seer_metrics.evaluators.llm.pacing import EndpointSpeed, RateLimiter
from seer_metrics.evaluators.llm.replies import (
    INTERNAL_ERROR,
    INVALID_JSON,
    TRUNCATED,
    ReplyError,
    check_requirements,
    read_reply,
    requirement_count_problem,
    requirements_from_answer,
)
from seer_metrics.evaluators.llm.retries import Attempts, CallFailedError
from seer_metrics.evaluators.llm.settings import DEFAULT_BASE_URL, LLMSettings
from seer_metrics.evaluators.llm.structured_output import (
    OutputProfile,
    remember_profile,
    stored_profile,
)
from seer_metrics.events import RetrievalEvent
from seer_metrics.judgment import Judgment, Requirement
from seer_metrics.judgment_store import JudgmentStore, RequirementsRecord, requirements_key
from seer_metrics.text.redaction import error_text, redact_url, traceback_text

logger = logging.getLogger(__name__)

AnswerT = TypeVar("AnswerT", bound=BaseModel)


@dataclass
class _CallResult:
    answer: Any
    usage: TokenUsage
    calls: Attempts
    mode: str  # the output mode of the reply that was used


@dataclass
class _Phase1:
    """The requirement list of one query, shared by every event asking that query."""

    requirements: tuple[Requirement, ...] | None = None
    error: CallFailedError | None = None
    usage: TokenUsage = field(default_factory=TokenUsage)
    calls: Attempts = field(default_factory=Attempts)
    claimed: bool = False
    mode: str | None = None  # of the reply asked in this run (None: known before)

    def claim(self) -> tuple[TokenUsage, Attempts]:
        """The first event to read the result carries the phase-1 cost; the rest carry 0."""
        if self.claimed:
            return TokenUsage(), Attempts()
        self.claimed = True
        return self.usage, self.calls


@dataclass
class _LoopState:
    """Things bound to one event loop: the connection and the phase-1 calls in flight."""

    loop: asyncio.AbstractEventLoop
    connection: Connection
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
        self.price = self.settings.price_for(self.model)
        if self.price is None:
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
        # What the endpoint takes and how fast it answers, learned over the run (and the
        # shape remembered in the store, read at the first `evaluate`).
        self.output_profile = OutputProfile(on_change=self._remember_profile)
        self._profile_read = False
        self.speed = EndpointSpeed()

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
            self._read_stored_profile()
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
            connection = Connection.open(
                self.settings, self._limiter, self.output_profile, self.speed
            )
            self._loop_state = _LoopState(loop, connection)
        self._loop_state.active += 1
        return self._loop_state

    async def _leave(self, state: _LoopState) -> None:
        state.active -= 1
        if state.active == 0:
            if self._loop_state is state:
                self._loop_state = None
            await state.connection.close()

    def _read_stored_profile(self) -> None:
        """Start from the shape a previous run learned for this endpoint and model."""
        if self._store is None or self._profile_read:
            return
        self._profile_read = True
        known = stored_profile(self._store, self.endpoint, self.model)
        if known is not None and not self.output_profile.settled:
            self.output_profile.mode, self.output_profile.cap_field = known
            self.output_profile.settled = True

    def _remember_profile(self, profile: OutputProfile) -> None:
        if self._store is not None:
            remember_profile(self._store, self.endpoint, self.model, profile)

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
            problem = requirement_count_problem(len(requirements), self.settings.max_requirements)
            if problem is not None:  # no judgment, no score
                return self._error(event, problem.reason, usage, calls)
            if not event.context:
                # Nothing to check: N = 0 makes phase 2 pointless.
                judgment = Judgment(requirements, output_mode=phase1.mode)
                return self._outcome(event, judgment, None, usage, calls)
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
            logger.error("evaluating event %s failed:\n%s", event.event_id, traceback_text(error))
            return self._error(event, f"{INTERNAL_ERROR}: {error_text(error)}", usage, calls)
        judgment = replace(
            build_judgment(event, requirements, result.answer), output_mode=result.mode
        )
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
        phase1 = _Phase1(requirements, usage=result.usage, calls=result.calls, mode=result.mode)
        if requirement_count_problem(len(requirements), self.settings.max_requirements):
            # No judgment for this query's events (`_evaluate_event`); known for the run,
            # never stored, so the next run asks again.
            return phase1
        if self._store is not None:
            try:
                self._store.put_requirements(
                    [RequirementsRecord(key, query, self.model, self.prompt_version, requirements)]
                )
            except Exception:
                logger.exception("could not store the requirement list of a query")
        return phase1

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
        one retry with twice the completion cap (up to the ceiling) for a reply cut short,
        when the endpoint can send that much within the timeout."""
        usage = TokenUsage()
        calls = Attempts()
        conversation = messages
        code, detail = INVALID_JSON, ""
        cap = self.settings.max_completion_tokens
        attempt = 0
        while attempt < 2:
            try:
                completed = await state.connection.complete(conversation, schema_name, schema, cap)
            except CallFailedError as failure:
                raise CallFailedError(
                    failure.code, failure.detail, usage + failure.usage, calls + failure.calls
                ) from None
            usage += completed.usage
            calls += completed.calls
            try:
                answer = read_reply(completed.completion, answer_type, check)
            except ReplyError as error:
                if error.code == TRUNCATED:
                    larger = min(2 * cap, self.settings.max_completion_tokens_ceiling)
                    if larger > cap and cap == self.settings.max_completion_tokens:
                        # The reply took `seconds` for `cap` tokens: a larger one, longer.
                        needed = completed.seconds * larger / cap
                        if needed <= self.settings.timeout_seconds:
                            cap = larger  # the same question once more, with room to finish
                            continue
                        detail = (
                            f"the reply hit max_completion_tokens={cap} after "
                            f"{completed.seconds:.0f} s; {larger} tokens would need about "
                            f"{needed:.0f} s, more than the {self.settings.timeout_seconds:g} s "
                            "timeout, so it is not asked again (raise the timeout or the cap)"
                        )
                        raise CallFailedError(TRUNCATED, detail, usage, calls) from None
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
            else:
                return _CallResult(answer, usage, calls, completed.mode)
            attempt += 1
        raise CallFailedError(code, f"{detail} (after one repair attempt)", usage, calls)
