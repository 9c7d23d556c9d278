"""Batch mode in the pipelines: the `seer_batches` ledger and one step of a day's batches.

No run waits for a batch. A run of a day in batch mode calls `advance_day`: it collects
the day's finished batches into the judgment cache and submits the next phase, recording
every batch in `seer_batches`; while a batch runs, `event_judgments` is not materialized
(the run succeeds, its downstream steps are skipped, an observation says what it waits
for). `seer_batch_sensor` polls the batches and launches the day's run once they are all
finished; that run completes the day from the cache, judging on demand only what the
batches could not answer. A killed or repeated run reads the same rows and picks the same
batches up again.

A budget (SEER_BUDGET_USD, SEER_BUDGET_TOKENS) applies to the batches too: the day's
events are projected at the batch price (half of on-demand) against the cache as it was
before the day's first batch, and only those that fit are submitted. Every later run of
the day draws the line at the same event, so the run that completes the day stores the
rest as `skipped_budget`, and a repeated run makes no call.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

import sqlalchemy as sa
from dagster import MetadataValue

from seer_metrics.evaluators.batch import BatchJudge, BatchProgress, BatchRecord, advance
from seer_metrics.evaluators.llm import LLMEvaluator
from seer_metrics.events import RetrievalEvent
from seer_metrics.judgment_store import JudgmentStore
from seer_metrics.spend.budget import Budget
from seer_metrics.spend.cost_estimate import BATCH_PRICE_FACTOR
from seer_pipelines.defs.resources.evaluator import EvaluatorResource
from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.judging.day_plan import BudgetGate, JudgingLimits, day_valid_events
from seer_pipelines.warehouse.schema import batches_table
from seer_pipelines.warehouse.writer import widen_big_integer_columns


class BatchLedger:
    """The rows of `seer_batches`: what each day submitted, and where each batch stands."""

    def __init__(self, engine: sa.Engine, schema: str | None = None) -> None:
        self.engine = engine
        self.table = batches_table(schema)
        self.table.metadata.create_all(engine, tables=[self.table], checkfirst=True)
        widen_big_integer_columns(engine, self.table)  # token counts of earlier versions

    def records(self, day: date) -> list[BatchRecord]:
        """The day's batches, in the order they were submitted."""
        table = self.table
        statement = (
            sa.select(table)
            .where(table.c.partition_date == day)
            .order_by(table.c.submitted_at, table.c.batch_id)
        )
        with self.engine.connect() as connection:
            return [_record(row._mapping) for row in connection.execute(statement)]

    def days_to_follow(self) -> dict[date, list[BatchRecord]]:
        """Every day with a batch not yet collected, with all of that day's batches."""
        table = self.table
        days = sa.select(table.c.partition_date).where(table.c.collected.is_(False)).distinct()
        statement = (
            sa.select(table)
            .where(table.c.partition_date.in_(days))
            .order_by(table.c.partition_date, table.c.submitted_at, table.c.batch_id)
        )
        found: dict[date, list[BatchRecord]] = {}
        with self.engine.connect() as connection:
            for row in connection.execute(statement):
                found.setdefault(row.partition_date, []).append(_record(row._mapping))
        return found

    def first_submitted(self, day: date) -> datetime | None:
        """When the day's first batch was submitted (None: none yet)."""
        table = self.table
        statement = sa.select(sa.func.min(table.c.submitted_at)).where(
            table.c.partition_date == day
        )
        with self.engine.connect() as connection:
            return connection.execute(statement).scalar()

    def save(self, day: date, records: Iterable[BatchRecord]) -> None:
        """Insert new batches and update known ones (one transaction)."""
        now = datetime.now(UTC)
        table = self.table
        with self.engine.begin() as connection:
            for record in records:
                values = _row(record, now)
                updated = connection.execute(
                    sa.update(table).where(table.c.batch_id == record.batch_id).values(**values)
                )
                if updated.rowcount == 0:
                    connection.execute(
                        sa.insert(table).values(
                            batch_id=record.batch_id, partition_date=day, submitted_at=now, **values
                        )
                    )


def _row(record: BatchRecord, now: datetime) -> dict[str, Any]:
    return {
        "phase": record.phase,
        "round": record.round,
        "state": record.status,
        "collected": record.collected,
        "input_file_id": record.input_file_id,
        "requests": record.requests,
        "completed": record.completed,
        "failed": record.failed,
        "stored": record.stored,
        "reasons": dict(record.reasons),
        "prompt_tokens": record.prompt_tokens,
        "completion_tokens": record.completion_tokens,
        "cost_usd": float(record.cost_usd),
        "updated_at": now,
    }


def _record(row: Any) -> BatchRecord:
    return BatchRecord(
        batch_id=row["batch_id"],
        phase=row["phase"],
        status=row["state"],
        requests=int(row["requests"]),
        round=int(row["round"]),
        input_file_id=row["input_file_id"],
        completed=int(row["completed"]),
        failed=int(row["failed"]),
        stored=int(row["stored"]),
        collected=bool(row["collected"]),
        reasons=dict(row["reasons"] or {}),
        prompt_tokens=int(row["prompt_tokens"]),
        completion_tokens=int(row["completion_tokens"]),
        cost_usd=float(row["cost_usd"]),
    )


def ledger_for(warehouse: WarehouseResource) -> BatchLedger:
    return BatchLedger(warehouse.get_engine(), warehouse.resolved_schema())


def batch_judge(warehouse: WarehouseResource, evaluator: EvaluatorResource) -> BatchJudge:
    """The configured LLM judge's settings, on the Batch API, with the warehouse's cache."""
    store = JudgmentStore(warehouse.get_engine())
    built = evaluator.build(store=store)
    if not isinstance(built, LLMEvaluator):
        raise ValueError("batch mode needs the openai evaluator (SEER_EVALUATOR=openai)")
    return BatchJudge(built.settings, store)


def day_events(warehouse: WarehouseResource, day: date) -> list[RetrievalEvent]:
    """The day's valid events, as the judging step would hand them to the evaluator."""
    return [
        event
        for records in warehouse.iter_event_chunks(day)
        for event in day_valid_events(records, day)
    ]


@dataclass(frozen=True)
class DayBatchProgress(BatchProgress):
    """`BatchProgress` of one day, with the events its budget kept out of the batches and
    the moment of its first batch (what its budget gate reads the cache as of)."""

    over_budget: int = 0
    budget: Budget = field(default_factory=Budget)
    as_of: datetime | None = None


def batch_budget_gate(
    budget: Budget,
    store: JudgmentStore,
    model: str,
    prompt_version: str,
    price: tuple[float, float] | None,
    as_of: datetime | None,
) -> BudgetGate:
    """The budget gate of a batch day: projections at the batch price, against the cache
    as it was at the day's first batch (`as_of`; None: as it is now, nothing submitted)."""
    if price is not None:
        price = (price[0] * BATCH_PRICE_FACTOR, price[1] * BATCH_PRICE_FACTOR)
    return BudgetGate(budget, store, model, prompt_version, price, as_of=as_of)


def advance_day(
    warehouse: WarehouseResource,
    evaluator: EvaluatorResource,
    day: date,
    events: Sequence[RetrievalEvent] | None = None,
) -> DayBatchProgress:
    """Collect the day's finished batches and submit its next phase; never waits.

    `events` are the events the day judges (default: all its valid events); the progress
    says whether the day is `ready` to be judged from the cache or still waiting. With a
    budget, only the events whose projected batch cost fits are submitted (`over_budget`
    counts the others).
    """
    ledger = ledger_for(warehouse)
    judge = batch_judge(warehouse, evaluator)
    chosen = day_events(warehouse, day) if events is None else list(events)
    budget = JudgingLimits.of(evaluator).budget
    as_of = ledger.first_submitted(day)
    submit: Sequence[RetrievalEvent] = chosen
    over: list[RetrievalEvent] = []
    if budget.enabled:
        gate = batch_budget_gate(
            budget, judge.store, judge.model, judge.prompt_version, judge.price, as_of
        )
        submit, over = gate.split(chosen)
    progress = advance(
        judge, chosen, ledger.records(day), label=f"seer {day.isoformat()}", submit=submit
    )
    ledger.save(day, progress.records)
    return DayBatchProgress(
        records=progress.records,
        submitted=progress.submitted,
        collected=progress.collected,
        over_budget=len(over),
        budget=budget,
        as_of=ledger.first_submitted(day),
    )


def batch_metadata(progress: BatchProgress) -> dict[str, Any]:
    """What the day's batches did, for the asset's metadata or its observation."""
    records = progress.records
    reasons: dict[str, int] = {}
    for record in records:
        for code, count in record.reasons.items():
            reasons[code] = reasons.get(code, 0) + count
    budget: dict[str, Any] = {}
    if isinstance(progress, DayBatchProgress) and progress.budget.enabled:
        budget = {
            "batch_budget": progress.budget.describe(),
            "batch_over_budget": progress.over_budget,
        }
    return {
        **budget,
        "batch_status": progress.summary(),
        "batches": MetadataValue.json(
            [
                {"batch_id": r.batch_id, "phase": r.phase, "round": r.round, "state": r.status}
                for r in records
            ]
        ),
        "batch_requests": sum(r.requests for r in records),
        "batch_answers_stored": sum(r.stored for r in records),
        "batch_lines_left_to_judge_on_demand": sum(reasons.values()),
        "batch_reasons": MetadataValue.json(dict(sorted(reasons.items()))),
        "batch_cost_usd": float(sum(r.cost_usd for r in records)),
    }
