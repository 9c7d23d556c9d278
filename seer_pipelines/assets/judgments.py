"""`event_judgments`: one day's events, parsed, judged (through the cache) and stored.

The day is streamed in chunks: parse -> cache look-up -> evaluator for the misses ->
stage the rows. Judgments go to the cache (committed) chunk by chunk, so a run that
crashes half-way is re-run without paying again for what it had judged; the partition of
`seer_judgments` itself is swapped in only at the end, in one transaction.
"""

import asyncio
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from dagster import (
    AssetExecutionContext,
    BackfillPolicy,
    MaterializeResult,
    MetadataValue,
    asset,
)

from seer_metrics.cache import CachingEvaluator, JudgmentStore, judgment_key
from seer_metrics.evaluators.base import EvaluationOutcome, Evaluator
from seer_metrics.events import (
    InvalidEventError,
    RetrievalEvent,
    derive_event_id,
    finite_json,
    parse_timestamp,
)
from seer_pipelines.assets.events import GROUP_NAME, retrieval_events
from seer_pipelines.assets.table_schemas import table_metadata
from seer_pipelines.partitions import daily_partitions, partition_day
from seer_pipelines.resources import EvaluatorResource, WarehouseResource
from seer_pipelines.warehouse.day import day_bounds
from seer_pipelines.warehouse.schema import JUDGMENTS_TABLE

# Evaluator-heavy steps share this pool; `dagster instance concurrency set seer_evaluator N`
# (or dagster.yaml `concurrency.pools`) caps how many judge at once across all runs.
EVALUATOR_POOL = "seer_evaluator"

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
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    chunks: int = 0
    invalid_reasons: dict[str, int] = field(default_factory=dict)
    error_reasons: dict[str, int] = field(default_factory=dict)

    def metadata(self) -> dict[str, Any]:
        return {
            "events": self.rows,
            "rows_read": self.events,
            "invalid": self.invalid,
            "errors": self.errors,
            "duplicate_event_ids": self.duplicate_event_ids,
            "outside_day": self.outside_day,
            "cache_hits": self.cache_hits,
            "judged": self.judged,
            "model_calls": self.model_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "tokens": self.prompt_tokens + self.completion_tokens,
            "estimated_cost_usd": float(self.cost_usd),
            "chunks": self.chunks,
            "invalid_reasons": MetadataValue.json(self.invalid_reasons),
            "error_reasons": MetadataValue.json(self.error_reasons),
        }


def _reason_code(reason: str | None) -> str:
    return (reason or "unknown").split(":", 1)[0].strip() or "unknown"


def _fallback_event_id(record: Mapping[str, Any]) -> str:
    raw = record.get("event_id")
    if isinstance(raw, str | int) and not isinstance(raw, bool) and str(raw).strip():
        return str(raw).strip()
    return derive_event_id(record)


def _fallback_metadata(raw: Any) -> dict[str, Any]:
    """Best-effort metadata of an invalid row, so it still lands in its slices."""
    if isinstance(raw, bytes | bytearray):
        raw = raw.decode("utf-8", errors="replace")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            return {}
    # NaN and infinities (Python's json reads them) are refused by JSON columns.
    return finite_json(dict(raw)) if isinstance(raw, Mapping) else {}


def _fallback_timestamp(raw: Any) -> Any:
    try:
        return parse_timestamp(raw)
    except InvalidEventError:
        return None


def _off_the_day(event_ts: datetime | None, start: datetime, end: datetime) -> bool:
    return event_ts is not None and not start <= event_ts < end


def invalid_row(record: Mapping[str, Any], error: InvalidEventError) -> dict[str, Any]:
    """The `seer_judgments` row of a row that could not be parsed."""
    return {
        "event_id": _fallback_event_id(record),
        "event_ts": _fallback_timestamp(record.get("event_ts")),
        "status": "invalid",
        "reason": error.reason,
        "metadata": _fallback_metadata(record.get("metadata")),
        "cache_hit": False,
        "model_calls": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "cost_usd": 0.0,
    }


def judged_row(
    event: RetrievalEvent, outcome: EvaluationOutcome, evaluator: Evaluator
) -> dict[str, Any]:
    """The `seer_judgments` row of a parsed event and its evaluation outcome."""
    ok = outcome.status == "ok" and outcome.judgment is not None
    judgment = outcome.judgment.restricted_to(event.context_ids) if ok else None
    return {
        "event_id": event.event_id,
        "event_ts": event.event_ts,
        "status": "ok" if ok else "error",
        "reason": None if ok else (outcome.reason or "evaluator_error: no reason given"),
        "judgment_key": judgment_key(event, evaluator.model, evaluator.prompt_version),
        "judgment": judgment.to_dict() if judgment is not None else None,
        "ranked_context": [[item.id, item.position] for item in event.context],
        "has_ranking": event.has_ranking,
        "n": event.n,
        "duplicate_ids": event.duplicate_ids,
        "metadata": dict(event.metadata),
        "cache_hit": bool(outcome.cache_hit),
        "model_calls": int(outcome.model_calls),
        "prompt_tokens": int(outcome.usage.prompt_tokens),
        "completion_tokens": int(outcome.usage.completion_tokens),
        "cost_usd": float(outcome.usage.cost_usd),
        "evaluator": evaluator.name,
        "model": evaluator.model,
        "prompt_version": evaluator.prompt_version,
    }


async def _judge_partition(
    warehouse: WarehouseResource,
    evaluator: Evaluator,
    day: date,
    progress: Callable[[JudgingSummary], None],
) -> JudgingSummary:
    summary = JudgingSummary()
    start, end = day_bounds(day)
    with warehouse.partition_writer(JUDGMENTS_TABLE, day) as writer:
        for records in warehouse.iter_event_chunks(day):
            rows: list[dict[str, Any]] = []
            events: list[RetrievalEvent] = []
            for record in records:
                try:
                    event = RetrievalEvent.from_record(record)
                except InvalidEventError as error:
                    row = invalid_row(record, error)
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
            outcomes = await evaluator.evaluate(events) if events else []
            if len(outcomes) != len(events):
                raise RuntimeError(
                    f"evaluator {evaluator.name!r} returned {len(outcomes)} outcomes "
                    f"for {len(events)} events"
                )
            for event, outcome in zip(events, outcomes, strict=True):
                row = judged_row(event, outcome, evaluator)
                rows.append(row)
                summary.cache_hits += int(outcome.cache_hit)
                summary.model_calls += int(outcome.model_calls)
                summary.judged += int(not outcome.cache_hit and row["status"] == "ok")
                summary.prompt_tokens += int(outcome.usage.prompt_tokens)
                summary.completion_tokens += int(outcome.usage.completion_tokens)
                summary.cost_usd += float(outcome.usage.cost_usd)
                if row["status"] == "error":
                    code = _reason_code(row["reason"])
                    summary.error_reasons[code] = summary.error_reasons.get(code, 0) + 1
            writer.write(rows)
            summary.events += len(records)
            summary.chunks += 1
            progress(summary)
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
) -> JudgingSummary:
    """Judge one day's events with `evaluator` and replace that day in `seer_judgments`.

    `evaluator` should be a `CachingEvaluator` so that stored judgments are re-used and
    new ones are committed chunk by chunk.
    """
    return asyncio.run(_judge_partition(warehouse, evaluator, day, progress or (lambda _: None)))


def caching_evaluator(
    warehouse: WarehouseResource, evaluator: EvaluatorResource
) -> CachingEvaluator:
    """The configured evaluator behind the judgment cache kept in the warehouse."""
    store = JudgmentStore(warehouse.get_engine())
    return CachingEvaluator(evaluator.build(store=store), store)


@asset(
    partitions_def=daily_partitions,
    deps=[retrieval_events],
    group_name=GROUP_NAME,
    kinds={"sql", "python"},
    pool=EVALUATOR_POOL,
    backfill_policy=BackfillPolicy.multi_run(1),
    description=(
        "One row per ingested event: its status (ok, invalid, error), the evaluator's "
        "requirements and supporting passages, and the model usage. Judgments are cached by "
        "content hash, so a re-run makes no model call."
    ),
    metadata=table_metadata(JUDGMENTS_TABLE),
)
def event_judgments(
    context: AssetExecutionContext, warehouse: WarehouseResource, evaluator: EvaluatorResource
) -> MaterializeResult:
    day = partition_day(context.partition_key)
    judge = caching_evaluator(warehouse, evaluator)
    context.log.info(
        f"judging {day} from {warehouse.describe()} table {warehouse.resolved_events_table()} "
        f"with {judge.name} ({judge.model}), chunks of {warehouse.chunk_size}"
    )

    def progress(summary: JudgingSummary) -> None:
        context.log.info(
            f"{day}: {summary.events} events read ({summary.chunks} chunks), "
            f"{summary.cache_hits} cache hits, {summary.model_calls} model calls, "
            f"{sum(summary.invalid_reasons.values())} invalid"
        )

    summary = judge_partition(warehouse, judge, day, progress)
    unplaced = warehouse.count_unplaced_events()
    if unplaced:
        context.log.warning(
            f"{unplaced} source rows have an event_ts that neither parses nor starts with "
            "a date: they are on no day and never judged (see unplaced_event_ts)"
        )
    return MaterializeResult(
        metadata={
            **summary.metadata(),
            "unplaced_event_ts": unplaced,
            "evaluator": judge.name,
            "model": judge.model,
            "prompt_version": judge.prompt_version,
            **table_metadata(JUDGMENTS_TABLE, summary.rows),
        }
    )
