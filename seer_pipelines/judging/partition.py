"""The judging of one day (the body of the `event_judgments` asset): its events parsed,
judged (through the cache) and stored.

The day is streamed in chunks: parse -> cache look-up -> evaluator for the misses ->
stage the rows. New judgments reach the cache as they complete (small batches), so a run
killed half-way is re-run without paying again for what it had judged; the partition of
`seer_judgments` itself is swapped in only at the end, in one transaction. When too many
events end in error (the judge is down), the step fails and the day keeps its rows.
"""

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from dagster import (
    AssetExecutionContext,
    AssetObservation,
    MaterializeResult,
    MetadataValue,
)

from seer_metrics.evaluators.base import Evaluator
from seer_metrics.evaluators.caching import CachingEvaluator
from seer_metrics.events import SKIPPED_BUDGET, InvalidEventError, RetrievalEvent
from seer_metrics.judgment_store import JudgmentStore
from seer_metrics.rows import first_by_event_ts, invalid_row, judged_row
from seer_metrics.text.redaction import redact_secrets
from seer_pipelines.defs.assets.metadata_display import display_metadata
from seer_pipelines.defs.assets.table_schemas import table_metadata
from seer_pipelines.defs.partitions import partition_day
from seer_pipelines.defs.resources.evaluator import EvaluatorResource
from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.judging.batch_ledger import advance_day, batch_budget_gate, batch_metadata
from seer_pipelines.judging.budget_days import first_judged_at
from seer_pipelines.judging.day_plan import (
    BudgetGate,
    DayLimits,
    JudgingLimits,
    day_records,
    day_valid_events,
    limited_events,
    plan_day,
)
from seer_pipelines.judging.parent_watch import while_parent_lives
from seer_pipelines.judging.sampled_day import write_day_strata
from seer_pipelines.judging.step_process import freeze_loaded_objects
from seer_pipelines.warehouse.day import day_bounds
from seer_pipelines.warehouse.schema import JUDGMENTS_TABLE

logger = logging.getLogger(__name__)


@dataclass
class JudgingSummary:
    """Counts for one partition of `event_judgments` (becomes the asset's metadata)."""

    events: int = 0
    rows: int = 0
    invalid: int = 0
    errors: int = 0
    duplicate_event_ids: int = 0
    outside_day: int = 0
    cache_hits: int = 0
    judged: int = 0
    model_calls: int = 0
    unsent_requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    chunks: int = 0
    not_sampled: int = 0
    skipped_budget: int = 0
    usage_estimated: int = 0  # events whose endpoint reported no usable token count
    usage_example: str | None = None
    invalid_reasons: dict[str, int] = field(default_factory=dict)
    error_reasons: dict[str, int] = field(default_factory=dict)
    error_example: str | None = None
    stored_by_stratum: Counter[str] = field(default_factory=Counter)

    @property
    def evaluated(self) -> int:
        """Events handed to the evaluator (ok or error) so far."""
        return self.judged + self.cache_hits + sum(self.error_reasons.values())

    @property
    def error_share(self) -> float:
        errors = sum(self.error_reasons.values())
        return errors / self.evaluated if self.evaluated else 0.0

    def metadata(self) -> dict[str, Any]:
        return {
            "events": self.rows,
            "rows_read": self.events,
            "invalid": self.invalid,
            "errors": self.errors,
            "error_share": float(self.error_share),
            "duplicate_event_ids": self.duplicate_event_ids,
            "outside_day": self.outside_day,
            "cache_hits": self.cache_hits,
            "judged": self.judged,
            "model_calls": self.model_calls,
            "unsent_requests": self.unsent_requests,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "tokens": self.prompt_tokens + self.completion_tokens,
            "estimated_cost_usd": float(self.cost_usd),
            "chunks": self.chunks,
            "not_sampled": self.not_sampled,
            "skipped_budget": self.skipped_budget,
            "usage_estimated": self.usage_estimated,
            "invalid_reasons": MetadataValue.json(self.invalid_reasons),
            "error_reasons": MetadataValue.json(self.error_reasons),
        }


DEFAULT_MAX_ERROR_SHARE = 0.2


class JudgeFailingError(RuntimeError):
    """Too many of a day's events ended in error: the judge (endpoint, key, model) is
    failing, so the day's previous rows are kept rather than replaced by errors."""


def _reason_code(reason: str | None) -> str:
    return (reason or "unknown").split(":", 1)[0].strip() or "unknown"


def _off_the_day(event_ts: datetime | None, start: datetime, end: datetime) -> bool:
    return event_ts is not None and not start <= event_ts < end


def check_error_share(
    summary: JudgingSummary, evaluator: Evaluator, day: date, max_error_share: float
) -> None:
    """Raise `JudgeFailingError` when the share of judged events in error passes the limit.

    The message is what an operator needs: the share, the commonest cause with an
    example, the endpoint (credentials removed) and the model.
    """
    share = summary.error_share
    if share <= max_error_share:
        return
    errors = sum(summary.error_reasons.values())
    code, count = Counter(summary.error_reasons).most_common(1)[0]
    endpoint = getattr(evaluator, "endpoint", None) or "the evaluator"
    example = (summary.error_example or "")[:200]
    raise JudgeFailingError(
        redact_secrets(
            f"judge failing on {day}: {errors} of {summary.evaluated} judged events "
            f"({share:.0%}) ended in error, above the {max_error_share:.0%} limit; most common "
            f"cause {code} ({count} events), e.g. {example!r}; endpoint {endpoint}, "
            f"evaluator {evaluator.name} model {evaluator.model}. The day's previous rows are "
            "kept; judgments already made are cached, so re-running the partition once the "
            "judge answers again pays only for the rest."
        )
    )


async def _judge_partition(
    warehouse: WarehouseResource,
    evaluator: Evaluator,
    day: date,
    progress: Callable[[JudgingSummary], None],
    max_error_share: float,
    day_limits: DayLimits | None = None,
    chunks: Iterable[list[dict[str, Any]]] | None = None,
) -> JudgingSummary:
    summary = JudgingSummary()
    start, end = day_bounds(day)
    with warehouse.partition_writer(JUDGMENTS_TABLE, day) as writer:
        for records in warehouse.iter_event_chunks(day) if chunks is None else chunks:
            rows: list[dict[str, Any]] = []
            events: list[RetrievalEvent] = []
            for record in records:
                try:
                    event = RetrievalEvent.from_record(record)
                except InvalidEventError as error:
                    row = invalid_row(record, error.reason)
                    if "stratum" in record:  # a sampled row: the warehouse placed it
                        row["stratum"] = record["stratum"]
                    if _off_the_day(row["event_ts"], start, end):
                        summary.outside_day += 1
                        continue
                    rows.append(row)
                    summary.invalid_reasons[error.code] = (
                        summary.invalid_reasons.get(error.code, 0) + 1
                    )
                    continue
                # The partition is the UTC day of event_ts: another day's event (a read
                # that was too wide) belongs to that day's partition, not this one.
                if _off_the_day(event.event_ts, start, end):
                    summary.outside_day += 1
                    continue
                events.append(event)
            events, unjudged, strata = limited_events(events, day_limits, evaluator)
            rows.extend(unjudged)
            summary.skipped_budget += sum(row["status"] == SKIPPED_BUDGET for row in unjudged)
            spent_before = (summary.cost_usd, summary.prompt_tokens + summary.completion_tokens)
            # A step orphaned by a killed launcher stops here instead of paying for nobody.
            outcomes = await while_parent_lives(evaluator.evaluate(events)) if events else []
            if len(outcomes) != len(events):
                raise RuntimeError(
                    f"evaluator {evaluator.name!r} returned {len(outcomes)} outcomes "
                    f"for {len(events)} events"
                )
            for event, outcome in zip(events, outcomes, strict=True):
                row = judged_row(event, outcome, evaluator)
                if strata:
                    row["stratum"] = strata[event.event_id]
                rows.append(row)
                summary.cache_hits += int(outcome.cache_hit)
                summary.model_calls += int(outcome.model_calls)
                summary.unsent_requests += int(outcome.unsent_requests)
                summary.judged += int(not outcome.cache_hit and row["status"] == "ok")
                summary.prompt_tokens += int(outcome.usage.prompt_tokens)
                summary.completion_tokens += int(outcome.usage.completion_tokens)
                summary.cost_usd += float(outcome.usage.cost_usd)
                if outcome.usage.note is not None:
                    summary.usage_estimated += 1
                    summary.usage_example = summary.usage_example or outcome.usage.note
                if row["status"] == "error":
                    code = _reason_code(row["reason"])
                    summary.error_reasons[code] = summary.error_reasons.get(code, 0) + 1
                    summary.error_example = summary.error_example or row["reason"]
            if day_limits is not None and day_limits.gate is not None:
                day_limits.gate.settle(
                    summary.cost_usd - spent_before[0],
                    summary.prompt_tokens + summary.completion_tokens - spent_before[1],
                )
            # A repeated event_id keeps its earliest row (the writer keeps the first
            # staged), whatever its status; rows are read in event_ts order across chunks.
            rows = first_by_event_ts(rows)
            writer.write(rows)
            if chunks is not None:  # a sample: what each stratum stored (seer_day_strata)
                summary.stored_by_stratum.update(row.get("stratum") or "" for row in rows)
            summary.events += len(records)
            summary.chunks += 1
            progress(summary)
            # Checked as the day goes, so an outage stops the run at the first bad chunk
            # instead of spending retries on the whole day; raising discards the staging.
            check_error_share(summary, evaluator, day, max_error_share)
        summary.rows = writer.commit()
    summary.duplicate_event_ids = summary.events - summary.outside_day - summary.rows
    summary.invalid = sum(summary.invalid_reasons.values())
    summary.errors = sum(summary.error_reasons.values())
    return summary


def judge_partition(
    warehouse: WarehouseResource,
    evaluator: Evaluator,
    day: date,
    progress: Callable[[JudgingSummary], None] | None = None,
    max_error_share: float = DEFAULT_MAX_ERROR_SHARE,
    day_limits: DayLimits | None = None,
    chunks: Iterable[list[dict[str, Any]]] | None = None,
) -> JudgingSummary:
    """Judge one day's events with `evaluator` and replace that day in `seer_judgments`.

    `evaluator` should be a `CachingEvaluator` so that stored judgments are re-used and
    new ones are committed as they complete. Raises `JudgeFailingError`, leaving the day
    as it was, when more than `max_error_share` of the judged events end in error.
    `chunks` are the rows to judge (default: the whole day; a sampled day: its sample);
    `day_limits` applies the budget: an event over it gets its row as `skipped_budget`.
    """
    return asyncio.run(
        _judge_partition(
            warehouse,
            evaluator,
            day,
            progress or (lambda _: None),
            max_error_share,
            day_limits,
            chunks,
        )
    )


def caching_evaluator(
    warehouse: WarehouseResource, evaluator: EvaluatorResource
) -> CachingEvaluator:
    """The configured evaluator behind the judgment cache kept in the warehouse."""
    store = JudgmentStore(warehouse.get_engine())
    return CachingEvaluator(evaluator.build(store=store), store)


def judge_day(
    context: AssetExecutionContext,
    warehouse: WarehouseResource,
    evaluator: EvaluatorResource,
    max_error_share: float = DEFAULT_MAX_ERROR_SHARE,
) -> Iterator[MaterializeResult]:
    """`event_judgments` for the context's partition: plan the day (sample, estimate,
    budget gate), advance its batches in batch mode, judge it, and report what it did."""
    freeze_loaded_objects()
    day = partition_day(context.partition_key)
    limits = JudgingLimits.of(evaluator)
    judge = caching_evaluator(warehouse, evaluator)
    price = judge.price
    # First pass: the day's sample and what judging it will cost, before any call.
    day_plan = plan_day(warehouse, day, limits, judge.model if limits.paid else None, price)
    planned = day_plan.metadata()
    if planned:
        context.log.info(f"{day}: {day_plan.summary()}")
        context.log_event(
            AssetObservation(
                asset_key=context.asset_key,
                partition=context.partition_key,
                metadata=display_metadata(planned),
            )
        )
    batches: dict[str, Any] = {}
    day_batches = None
    if evaluator.resolved_mode() == "batch":
        # Batch mode: collect finished batches, submit the next phase, never wait. While a
        # batch runs the asset is not materialized (downstream steps are skipped) and
        # seer_batch_sensor runs the day again once its batches are done.
        chosen = None
        if day_plan.sample is not None:
            chosen = [
                event
                for records in day_records(warehouse, day, day_plan, limits)
                for event in day_valid_events(records, day)
            ]
        day_batches = advance_day(warehouse, evaluator, day, chosen)
        context.log.info(f"{day}: {day_batches.summary()}")
        batches = batch_metadata(day_batches)
        if not day_batches.ready:
            context.log_event(
                AssetObservation(
                    asset_key=context.asset_key,
                    partition=context.partition_key,
                    metadata=display_metadata(batches),
                )
            )
            return
    judge_at = f" at {judge.endpoint}" if judge.endpoint else ""
    context.log.info(
        f"judging {day} from {warehouse.describe()} table {warehouse.resolved_events_table()} "
        f"with {judge.name} ({judge.model}{judge_at}), chunks of {warehouse.chunk_size}"
    )

    def progress(summary: JudgingSummary) -> None:
        context.log.info(
            f"{day}: {summary.events} events read ({summary.chunks} chunks), "
            f"{summary.cache_hits} cache hits, {summary.model_calls} model calls, "
            f"{sum(summary.invalid_reasons.values())} invalid, "
            f"{sum(summary.error_reasons.values())} errors"
        )

    gate = None
    if limits.budget.enabled and day_batches is not None:
        # The line the day's batches were submitted under: the events past it are skipped.
        gate = batch_budget_gate(
            limits.budget, judge.store, judge.model, judge.prompt_version, price, day_batches.as_of
        )
    elif limits.budget.enabled:
        # Every run of the day reads the cache as of its first budgeted run, so a re-run
        # cannot spend another whole cap on the events the first one left out.
        as_of = first_judged_at(warehouse.get_engine(), warehouse.resolved_schema(), day)
        gate = BudgetGate(
            limits.budget,
            judge.store,
            judge.model,
            judge.prompt_version,
            price,
            as_of=as_of,
            paid=limits.paid,
        )
    day_limits = DayLimits(limits, gate)
    summary = judge_partition(
        warehouse,
        judge,
        day,
        progress,
        max_error_share,
        day_limits=day_limits,
        chunks=day_records(warehouse, day, day_plan, limits) if day_plan.strata else None,
    )
    if day_plan.strata is not None:  # counted in the warehouse, never read or stored
        summary.duplicate_event_ids += day_plan.strata.duplicates
        summary.not_sampled = day_plan.strata.population - summary.rows
    write_day_strata(warehouse, day, day_plan.strata, summary.stored_by_stratum)
    if summary.skipped_budget:
        context.log.warning(
            f"{day}: the budget ({limits.budget.describe()}) stopped the judging: "
            f"{summary.skipped_budget} events are stored as skipped_budget, unjudged"
        )
    if summary.usage_estimated:
        context.log.warning(
            f"{day}: for {summary.usage_estimated} events the endpoint reported a token count "
            f"that is no count, e.g. {summary.usage_example!r}; their tokens and cost are the "
            "requests' estimates (the reason column of seer_judgments says so)"
        )
    unplaced = warehouse.count_unplaced_events()
    if unplaced:
        context.log.warning(
            f"{unplaced} source rows have an event_ts that neither parses nor starts with "
            "a date: they are on no day and never judged (see unplaced_event_ts)"
        )
    yield MaterializeResult(
        metadata=display_metadata(
            {
                **summary.metadata(),
                **batches,
                **planned,
                **(gate.metadata() if gate is not None else {}),
                "unplaced_event_ts": unplaced,
                "evaluator": judge.name,
                "model": judge.model,
                "prompt_version": judge.prompt_version,
                **table_metadata(JUDGMENTS_TABLE, summary.rows),
            }
        )
    )
