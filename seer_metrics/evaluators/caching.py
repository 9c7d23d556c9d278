"""`CachingEvaluator`: stored judgments are re-used, only misses reach the model.

New judgments are committed to the store as they complete, in small batches (a few
events, or a fraction of a second), not once per chunk: a run killed half-way repays at
most the calls that were in flight and the last unflushed batch when it is started again.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from sqlalchemy import exc

from seer_metrics.evaluators.base import EvaluationOutcome, Evaluator, OutcomeCallback, TokenUsage
from seer_metrics.events import RetrievalEvent
from seer_metrics.judgment import Judgment
from seer_metrics.judgment_store import JudgmentRecord, JudgmentStore, judgment_key

logger = logging.getLogger(__name__)

# A batch of finished judgments is committed when it holds this many ...
DEFAULT_FLUSH_EVENTS = 8
# ... or when its oldest judgment has waited this long, whichever comes first.
DEFAULT_FLUSH_SECONDS = 0.5


class _PendingJudgments:
    """Finished judgments waiting for their commit, flushed by size or by age."""

    def __init__(
        self,
        store: JudgmentStore,
        flush_events: int,
        flush_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._flush_events = flush_events
        self._flush_seconds = flush_seconds
        self._clock = clock
        self._records: list[JudgmentRecord] = []
        self._oldest = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self.flushes = 0

    def add(self, record: JudgmentRecord) -> None:
        if not self._records:
            self._oldest = self._clock()
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
            if loop is not None:
                # The tail of a batch is committed even when no later judgment arrives.
                self._timer = loop.call_later(self._flush_seconds, self.flush)
        self._records.append(record)
        full = len(self._records) >= self._flush_events
        if full or self._clock() - self._oldest >= self._flush_seconds:
            self.flush()

    def flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        records, self._records = self._records, []
        if not records:
            return
        try:
            self._store.put_judgments(records)
            self.flushes += 1
        except exc.SQLAlchemyError:
            # The judgments are still valid and returned; only re-use is lost.
            logger.exception("could not store %d judgments in the cache", len(records))


def accepts_outcome_callback(evaluator: Evaluator) -> bool:
    """Whether `evaluator.evaluate` reports each outcome as it completes (`on_outcome`)."""
    try:
        return "on_outcome" in inspect.signature(evaluator.evaluate).parameters
    except (TypeError, ValueError):
        return False


class CachingEvaluator:
    """Wraps an evaluator: stored judgments are re-used, only misses reach the model.

    Events that repeat within one batch are judged once. Every ok judgment of a miss is
    committed as it completes (batched by `flush_events` / `flush_seconds`) when the inner
    evaluator reports outcomes one by one, else when its batch returns; so a crashed run
    that is started again re-judges almost nothing it already paid for. Errors are never
    stored: they are retried on the next run. `on_outcome` hears of each event as its
    outcome is known: cache hits at once, misses as the inner evaluator completes them.
    """

    def __init__(
        self,
        inner: Evaluator,
        store: JudgmentStore,
        *,
        flush_events: int = DEFAULT_FLUSH_EVENTS,
        flush_seconds: float = DEFAULT_FLUSH_SECONDS,
    ) -> None:
        if flush_events < 1 or flush_seconds <= 0:
            raise ValueError("flush_events must be >= 1 and flush_seconds > 0")
        self.inner = inner
        self.store = store
        self.name = inner.name
        self.model = inner.model
        self.prompt_version = inner.prompt_version
        self.price = inner.price
        self.endpoint: str | None = getattr(inner, "endpoint", None)
        self.flush_events = flush_events
        self.flush_seconds = flush_seconds
        self._streams = accepts_outcome_callback(inner)

    async def evaluate(
        self, events: Sequence[RetrievalEvent], on_outcome: OutcomeCallback | None = None
    ) -> list[EvaluationOutcome]:
        keys = [judgment_key(event, self.model, self.prompt_version) for event in events]
        stored = self.store.get_judgments(keys)
        first_miss: dict[str, int] = {}
        for index, key in enumerate(keys):
            if key not in stored and key not in first_miss:
                first_miss[key] = index
        miss_keys = list(first_miss)
        miss_events = [events[index] for index in first_miss.values()]
        repeats: dict[str, list[int]] = {}
        for index, key in enumerate(keys):
            if key not in stored and first_miss[key] != index:
                repeats.setdefault(key, []).append(index)
        if on_outcome is not None:
            for index, key in enumerate(keys):
                if key in stored:
                    on_outcome(index, _cache_hit(events[index], stored[key]))
        # An evaluator that returns its batch at once has nothing to commit early: its
        # judgments go in one transaction, not one per `flush_events`.
        flush_events = self.flush_events if self._streams else max(len(miss_events), 1)
        pending = _PendingJudgments(self.store, flush_events, self.flush_seconds)

        def completed(position: int, outcome: EvaluationOutcome) -> None:
            key = miss_keys[position]
            if outcome.status == "ok" and outcome.judgment is not None:
                pending.add(
                    JudgmentRecord(
                        key, outcome.event_id, self.model, self.prompt_version, outcome.judgment
                    )
                )
            if on_outcome is not None:
                on_outcome(first_miss[key], outcome)
                for index in repeats.get(key, ()):
                    on_outcome(index, _repeated(events[index], outcome))

        try:
            fresh = await self._evaluate_misses(miss_events, completed)
        finally:
            pending.flush()
        if len(fresh) != len(miss_events):
            raise RuntimeError(
                f"evaluator {self.name!r} returned {len(fresh)} outcomes "
                f"for {len(miss_events)} events"
            )
        fresh_by_key = dict(zip(miss_keys, fresh, strict=True))
        outcomes: list[EvaluationOutcome] = []
        for index, (event, key) in enumerate(zip(events, keys, strict=True)):
            if key in stored:
                outcomes.append(_cache_hit(event, stored[key]))
            elif first_miss[key] == index:
                outcomes.append(fresh_by_key[key])
            else:
                outcomes.append(_repeated(event, fresh_by_key[key]))
        return outcomes

    async def _evaluate_misses(
        self, events: list[RetrievalEvent], completed: OutcomeCallback
    ) -> list[EvaluationOutcome]:
        if not events:
            return []
        if self._streams:
            return await self.inner.evaluate(events, on_outcome=completed)  # type: ignore[call-arg]
        fresh = await self.inner.evaluate(events)
        if len(fresh) == len(events):
            for position, outcome in enumerate(fresh):
                completed(position, outcome)
        return fresh


def _repeated(event: RetrievalEvent, first: EvaluationOutcome) -> EvaluationOutcome:
    """The outcome of an event repeating one judged earlier in the same batch."""
    if first.status == "ok" and first.judgment is not None:
        return _cache_hit(event, first.judgment)
    # Its usage was spent (and is counted) on the first occurrence.
    return replace(
        first, event_id=event.event_id, model_calls=0, unsent_requests=0, usage=TokenUsage()
    )


def _cache_hit(event: RetrievalEvent, judgment: Judgment) -> EvaluationOutcome:
    return EvaluationOutcome(
        event_id=event.event_id, status="ok", judgment=judgment, model_calls=0, cache_hit=True
    )
