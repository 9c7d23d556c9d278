"""Materialize the Seer assets on a SQLite warehouse: counts, idempotence, backfill, resume."""

from __future__ import annotations

import gc
import itertools
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest
import sqlalchemy as sa
from dagster import (
    AssetKey,
    DagsterInstance,
    Definitions,
    FloatMetadataValue,
    IntMetadataValue,
    TableSchemaMetadataValue,
    instance_for_test,
    materialize,
)

from seer_metrics.evaluators.base import EvaluationOutcome
from seer_metrics.evaluators.lexical import LexicalEvaluator
from seer_metrics.events import InvalidEventError, RetrievalEvent
from seer_metrics.judgment_store import judgment_key
from seer_pipelines.defs.assets.metadata_display import rounded
from seer_pipelines.defs.checks.freshness import build_freshness_checks
from seer_pipelines.defs.jobs import define_daily_job
from seer_pipelines.defs.resources.evaluator import EvaluatorResource
from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.demo.source_table import write_events
from seer_pipelines.demo.synthetic import generate_events
from seer_pipelines.judging.partition import judge_partition
from seer_pipelines.warehouse.schema import (
    EVENT_METRICS_TABLE,
    JUDGMENTS_TABLE,
    PASSAGE_JUDGMENTS_TABLE,
    SLICE_METRICS_TABLE,
)
from tests.default_location import (
    DEFAULT_SETTINGS,
    event_judgments,
    event_metrics,
    passage_judgments,
    retrieval_events,
    slice_metrics,
)

ASSETS = [retrieval_events, event_judgments, event_metrics, passage_judgments, slice_metrics]
OUTPUT_TABLES = (JUDGMENTS_TABLE, EVENT_METRICS_TABLE, PASSAGE_JUDGMENTS_TABLE, SLICE_METRICS_TABLE)
LAST_DAY = date(2026, 11, 29)
CHUNK_SIZE = 16


class CountingEvaluator:
    """The lexical judge, counting the events it is asked to judge (each one 'model call').

    With `fail_after_batches`, it raises on the batch after that many: a crash mid-run.
    """

    name = "lexical"
    price = None
    calls: ClassVar[list[str]] = []

    def __init__(self, fail_after_batches: int | None = None) -> None:
        self.inner = LexicalEvaluator()
        self.model = self.inner.model
        self.prompt_version = self.inner.prompt_version
        self.fail_after_batches = fail_after_batches
        self.batches = 0

    async def evaluate(self, events: Sequence[RetrievalEvent]) -> list[EvaluationOutcome]:
        if self.fail_after_batches is not None and self.batches >= self.fail_after_batches:
            raise RuntimeError("evaluator crashed (injected)")
        self.batches += 1
        CountingEvaluator.calls.extend(event.event_id for event in events)
        outcomes = await self.inner.evaluate(events)
        return [replace(outcome, model_calls=1) for outcome in outcomes]


class CountingEvaluatorResource(EvaluatorResource):
    """EvaluatorResource whose `build` returns the counting lexical judge."""

    fail_after_batches: int | None = None

    def build(self, store: Any = None) -> CountingEvaluator:
        return CountingEvaluator(self.fail_after_batches)


@pytest.fixture(autouse=True)
def _reset_calls() -> None:
    CountingEvaluator.calls.clear()


def broken_records(day: date) -> list[dict[str, Any]]:
    """Two rows of `day` that must be stored as invalid (a blank query, cut-off context)."""
    noon = datetime.combine(day, time(12))
    return [
        {
            "event_id": f"bad-task-{day}",
            "event_ts": noon,
            "task": "   ",
            "context": '["a passage"]',
            "metadata": '{"env": "prod", "feature_flag": "retrieval-v1"}',
        },
        {
            "event_id": f"bad-context-{day}",
            "event_ts": noon + timedelta(seconds=1),
            "task": "what is the refund window",
            "context": '[{"id": "kb-1", "text": "cut off',
            "metadata": '{"env": "prod"}',
        },
    ]


def seed_warehouse(
    warehouse: WarehouseResource,
    days: int = 3,
    events_per_day: int = 60,
    with_event_id: bool = True,
) -> list[dict[str, Any]]:
    """Synthetic events plus two invalid rows a day, so every day mixes ok and invalid rows."""
    records = list(generate_events(days, end_day=LAST_DAY, events_per_day=events_per_day, seed=11))
    for offset in range(days):
        records.extend(broken_records(LAST_DAY - timedelta(days=offset)))
    write_events(
        warehouse.get_engine(),
        records,
        schema=warehouse.resolved_schema(),
        table_name=warehouse.resolved_events_table(),
        with_event_id=with_event_id,
    )
    return records


def records_of(records: list[dict[str, Any]], day: date) -> list[dict[str, Any]]:
    return [r for r in records if r["event_ts"].date() == day]


def distinct_judgment_keys(records: list[dict[str, Any]]) -> set[str]:
    keys = set()
    for record in records:
        try:
            event = RetrievalEvent.from_record(record)
        except InvalidEventError:
            continue
        evaluator = LexicalEvaluator()
        keys.add(judgment_key(event, evaluator.model, evaluator.prompt_version))
    return keys


def resources(warehouse: WarehouseResource, **evaluator: Any) -> dict[str, Any]:
    return {"warehouse": warehouse, "evaluator": CountingEvaluatorResource(**evaluator)}


def run_day(
    warehouse: WarehouseResource,
    instance: DagsterInstance,
    day: date,
    raise_on_error: bool = True,
    assets: list = ASSETS,
    **evaluator: Any,
):
    return materialize(
        assets,
        partition_key=day.isoformat(),
        resources=resources(warehouse, **evaluator),
        instance=instance,
        raise_on_error=raise_on_error,
    )


def table_counts(warehouse: WarehouseResource, day: date) -> dict[str, int]:
    return {table: warehouse.count_partition(table, day) for table in OUTPUT_TABLES}


def metadata_of(result, asset: str) -> dict[str, Any]:
    [materialization] = result.asset_materializations_for_node(asset)
    return materialization.metadata


@pytest.fixture
def warehouse(tmp_path) -> WarehouseResource:
    resource = WarehouseResource(
        url=f"sqlite:///{tmp_path / 'warehouse.sqlite'}", chunk_size=CHUNK_SIZE
    )
    yield resource
    resource.dispose()


def check_no_missing_value_leaks(warehouse: WarehouseResource, day: date) -> None:
    """Read straight from SQL (pandas would hide it): ok rows have a NULL reason, and no
    text column of any output table holds the text 'NaN' or 'NaT' (a pandas placeholder)."""
    tables = warehouse.output_tables()
    with warehouse.get_engine().connect() as connection:
        for name in (JUDGMENTS_TABLE, EVENT_METRICS_TABLE):
            table = tables[name]
            reasons = connection.execute(
                sa.select(table.c.reason).where(
                    table.c.partition_date == day, table.c.status == "ok"
                )
            ).scalars()
            assert set(reasons) == {None}, name
        for name in OUTPUT_TABLES:
            table = tables[name]
            for column in table.columns:
                if not isinstance(column.type, sa.String):
                    continue
                leaked = connection.execute(
                    sa.select(sa.func.count())
                    .select_from(table)
                    .where(table.c.partition_date == day, column.in_(["NaN", "nan", "NaT"]))
                ).scalar_one()
                assert leaked == 0, f"{name}.{column.name}"


def check_partition(warehouse: WarehouseResource, records: list[dict[str, Any]], result) -> None:
    """The invariants of one materialized day, shared with the PostgreSQL tests."""
    day_records = records_of(records, LAST_DAY)
    assert result.success
    check_no_missing_value_leaks(warehouse, LAST_DAY)
    metrics = warehouse.read_partition_frame(EVENT_METRICS_TABLE, LAST_DAY)
    # Every ingested event exactly once, with a status.
    assert len(metrics) == len(day_records)
    assert sorted(metrics["event_id"]) == sorted(r["event_id"] for r in day_records)
    assert set(metrics["status"]) <= {"ok", "invalid", "error"}
    invalid = 0
    for record in day_records:
        try:
            RetrievalEvent.from_record(record)
        except InvalidEventError:
            invalid += 1
    assert invalid >= 2  # the seeded broken rows: chunks mix ok and invalid rows
    assert (metrics["status"] == "invalid").sum() == invalid
    invalid_rows = metrics[metrics["status"] == "invalid"]
    assert invalid_rows["recall"].isna().all()
    assert all(reason and ":" in reason for reason in invalid_rows["reason"])
    ok = metrics[metrics["status"] == "ok"]
    assert ok["recall"].between(0, 1).all()
    assert ok["k"].min() >= 1

    passages = warehouse.read_partition_frame(PASSAGE_JUDGMENTS_TABLE, LAST_DAY)
    assert len(passages) == int(ok["n"].sum())
    assert passages["cited"].sum() == sum(len(ids) for ids in ok["cited_ids"])

    slices = warehouse.read_partition_frame(SLICE_METRICS_TABLE, LAST_DAY)
    everything = slices[slices["slice"] == "all"].iloc[0]
    assert everything["events"] == len(day_records)
    assert everything["invalid"] == invalid
    assert everything["mean_recall"] == pytest.approx(ok["recall"].mean())
    assert {"env=prod", "feature_flag=retrieval-v2"} <= set(slices["slice"])

    judged = metadata_of(result, "event_judgments")
    assert judged["events"] == IntMetadataValue(len(day_records))
    assert judged["invalid"] == IntMetadataValue(invalid)
    assert isinstance(judged["dagster/column_schema"], TableSchemaMetadataValue)
    scored = metadata_of(result, "event_metrics")
    assert isinstance(scored["mean_recall"], FloatMetadataValue)
    # Rounded for display; the table above keeps full precision.
    assert scored["mean_recall"].value == rounded(ok["recall"].mean())
    for metric in ("mean_precision", "mean_f1", "mean_ndcg"):
        assert isinstance(scored[metric], FloatMetadataValue)
    sliced = metadata_of(result, "slice_metrics")
    prod = slices[slices["slice"] == "env=prod"].iloc[0]
    assert sliced["recall/env=prod"] == FloatMetadataValue(rounded(prod["mean_recall"]))
    assert sliced["events/env=prod"] == IntMetadataValue(int(prod["events"]))


def test_materialize_every_asset_for_one_partition(warehouse) -> None:
    records = seed_warehouse(warehouse)
    gc.unfreeze()
    with instance_for_test() as instance:
        result = run_day(warehouse, instance, LAST_DAY)
        # The heavy steps froze what was loaded before them out of the GC's scans.
        assert gc.get_freeze_count() > 0
        check_partition(warehouse, records, result)
        # Chunks were small, so the day went through the pipeline in several pieces.
        assert metadata_of(result, "event_judgments")["chunks"].value > 2
        # Only the requested day was written.
        assert warehouse.count_partition(EVENT_METRICS_TABLE, LAST_DAY - timedelta(days=1)) == 0


def test_injected_regression_shows_in_prod_and_v2_slices(warehouse) -> None:
    seed_warehouse(warehouse, days=3, events_per_day=150)
    with instance_for_test() as instance:
        run_day(warehouse, instance, LAST_DAY - timedelta(days=2))
        run_day(warehouse, instance, LAST_DAY)
    before = warehouse.read_partition_frame(SLICE_METRICS_TABLE, LAST_DAY - timedelta(days=2))
    after = warehouse.read_partition_frame(SLICE_METRICS_TABLE, LAST_DAY)

    def recall(frame, label):
        return float(frame.loc[frame["slice"] == label, "mean_recall"].iloc[0])

    assert recall(before, "env=prod") == 1.0
    assert recall(after, "env=prod") < 0.8
    assert recall(after, "feature_flag=retrieval-v2") < recall(before, "feature_flag=retrieval-v2")
    assert recall(after, "feature_flag=retrieval-v1") > 0.95


def test_rematerializing_a_partition_keeps_counts_and_makes_no_model_call(warehouse) -> None:
    records = seed_warehouse(warehouse)
    with instance_for_test() as instance:
        first = run_day(warehouse, instance, LAST_DAY)
        counts = table_counts(warehouse, LAST_DAY)
        first_calls = len(CountingEvaluator.calls)
        assert first_calls == len(distinct_judgment_keys(records_of(records, LAST_DAY)))
        assert metadata_of(first, "event_judgments")["model_calls"].value == first_calls

        CountingEvaluator.calls.clear()
        second = run_day(warehouse, instance, LAST_DAY)
        assert CountingEvaluator.calls == []
        assert table_counts(warehouse, LAST_DAY) == counts
        judged = metadata_of(second, "event_judgments")
        assert judged["model_calls"].value == 0
        ok = (warehouse.read_partition_frame(EVENT_METRICS_TABLE, LAST_DAY)["status"] == "ok").sum()
        assert judged["cache_hits"].value == ok
        # The metrics do not move when the judgments come from the cache.
        assert (
            metadata_of(second, "event_metrics")["mean_f1"]
            == metadata_of(first, "event_metrics")["mean_f1"]
        )
        # No staging rows are left behind.
        with warehouse.get_engine().connect() as connection:
            for table in OUTPUT_TABLES:
                staged = connection.execute(
                    sa.text(f"select count(*) from {table}__staging")
                ).scalar_one()
                assert staged == 0


def test_three_day_backfill_through_the_job(warehouse) -> None:
    records = seed_warehouse(warehouse, days=3)
    days = [LAST_DAY - timedelta(days=offset) for offset in (2, 1, 0)]
    # The job leaves the freshness check out by its key, so the check must be defined.
    freshness_checks = build_freshness_checks(DEFAULT_SETTINGS.freshness_deadline)
    definitions = Definitions(
        assets=ASSETS,
        asset_checks=freshness_checks,
        jobs=[define_daily_job(ASSETS, freshness_checks, "lexical")],
        resources=resources(warehouse),
    )
    job = definitions.resolve_job_def("seer_daily_job")
    with instance_for_test() as instance:
        for day in days:  # what `dagster job backfill` launches: one run per partition
            assert job.execute_in_process(partition_key=day.isoformat(), instance=instance).success
        materialized = instance.get_materialized_partitions(AssetKey("slice_metrics"))
        assert materialized == {day.isoformat() for day in days}
        runs = instance.get_runs()
        assert len(runs) == 3
        assert all(run.tags.get("seer/evaluator") for run in runs)
    for day in days:
        assert warehouse.count_partition(EVENT_METRICS_TABLE, day) == len(records_of(records, day))
    history = warehouse.read_table_range(SLICE_METRICS_TABLE, days[0], days[-1])
    assert sorted(set(history["partition_date"])) == days


def test_crashed_run_resumes_without_rejudging(warehouse) -> None:
    records = seed_warehouse(warehouse, days=1, events_per_day=90)
    keys = distinct_judgment_keys(records_of(records, LAST_DAY))
    with instance_for_test() as instance:
        crashed = run_day(warehouse, instance, LAST_DAY, raise_on_error=False, fail_after_batches=2)
        assert not crashed.success
        judged_before_crash = len(CountingEvaluator.calls)
        assert 0 < judged_before_crash < len(keys)
        # The crash left no half partition behind.
        assert warehouse.count_partition(JUDGMENTS_TABLE, LAST_DAY) == 0

        CountingEvaluator.calls.clear()
        resumed = run_day(warehouse, instance, LAST_DAY)
        assert resumed.success
        # Only the events the crashed run had not judged reach the evaluator.
        assert len(CountingEvaluator.calls) == len(keys) - judged_before_crash
        judged = metadata_of(resumed, "event_judgments")
        assert judged["model_calls"].value == len(keys) - judged_before_crash
    assert warehouse.count_partition(EVENT_METRICS_TABLE, LAST_DAY) == len(
        records_of(records, LAST_DAY)
    )


def test_a_table_without_event_id_gets_stable_derived_ids(tmp_path) -> None:
    warehouse = WarehouseResource(
        url=f"sqlite:///{tmp_path / 'no_ids.sqlite'}", chunk_size=CHUNK_SIZE
    )
    records = seed_warehouse(warehouse, days=1, events_per_day=40, with_event_id=False)
    with instance_for_test() as instance:
        run_day(warehouse, instance, LAST_DAY)
        first = sorted(warehouse.read_partition_frame(EVENT_METRICS_TABLE, LAST_DAY)["event_id"])
        run_day(warehouse, instance, LAST_DAY)
        second = sorted(warehouse.read_partition_frame(EVENT_METRICS_TABLE, LAST_DAY)["event_id"])
    warehouse.dispose()
    assert first == second
    assert len(first) == len(set(first)) == len(records_of(records, LAST_DAY))
    assert all(event_id.startswith("h_") for event_id in first)


def test_duplicate_event_ids_are_kept_once(warehouse) -> None:
    records = list(generate_events(1, end_day=LAST_DAY, events_per_day=30, seed=3))
    # The same event logged twice (a retried log shipper) under the same id.
    copy = dict(records[0], event_ts=records[0]["event_ts"] + timedelta(seconds=1))
    table = sa.Table(
        "retrieval_events",
        sa.MetaData(),
        sa.Column("event_id", sa.String(255)),
        sa.Column("event_ts", sa.DateTime),
        sa.Column("task", sa.Text),
        sa.Column("context", sa.Text),
        sa.Column("metadata", sa.Text),
    )
    table.metadata.create_all(warehouse.get_engine())
    with warehouse.get_engine().begin() as connection:
        connection.execute(table.insert(), [*records, copy])
    with instance_for_test() as instance:
        result = run_day(warehouse, instance, LAST_DAY)
    assert metadata_of(result, "event_judgments")["duplicate_event_ids"].value == 1
    metrics = warehouse.read_partition_frame(EVENT_METRICS_TABLE, LAST_DAY)
    assert len(metrics) == len(records) == metrics["event_id"].nunique()


def text_events_table(warehouse: WarehouseResource) -> sa.Table:
    """An events table whose timestamps are text, as many logging pipelines write them."""
    table = sa.Table(
        "retrieval_events",
        sa.MetaData(schema=warehouse.resolved_schema()),
        sa.Column("event_id", sa.Text),
        sa.Column("event_ts", sa.Text),
        sa.Column("task", sa.Text),
        sa.Column("context", sa.Text),
        sa.Column("metadata", sa.Text),
    )
    table.metadata.create_all(warehouse.get_engine())
    return table


def inception_row(event_id: str, event_ts: str, **metadata: str) -> dict[str, Any]:
    return {
        "event_id": event_id,
        "event_ts": event_ts,
        "task": "Who directed Inception?",
        "context": '[{"id": "p1", "text": "Christopher Nolan directed Inception.", "score": 0.9}]',
        "metadata": json.dumps({"env": "prod", "feature_flag": "retrieval-v1", **metadata}),
    }


def test_an_unparseable_timestamp_makes_its_row_invalid_not_the_day_fail(warehouse) -> None:
    table = text_events_table(warehouse)
    rows = [inception_row(f"e{hour}", f"2026-11-29 0{hour}:00:00") for hour in range(1, 6)]
    rows.append(inception_row("bad-ts", "2026-11-29 junk"))
    with warehouse.get_engine().begin() as connection:
        connection.execute(table.insert(), rows)
    with instance_for_test() as instance:
        result = run_day(warehouse, instance, LAST_DAY, raise_on_error=False)
    assert result.success
    check_no_missing_value_leaks(warehouse, LAST_DAY)
    metrics = warehouse.read_partition_frame(EVENT_METRICS_TABLE, LAST_DAY)
    assert len(metrics) == 6
    bad = metrics[metrics["event_id"] == "bad-ts"].iloc[0]
    assert bad["status"] == "invalid" and bad["reason"].startswith("event_ts_invalid")
    assert (metrics["status"] == "ok").sum() == 5
    with warehouse.get_engine().connect() as connection:
        stored = connection.execute(
            sa.text("select event_ts from seer_event_metrics where event_id = 'bad-ts'")
        ).scalar_one()
    assert stored is None


def test_events_are_judged_on_the_utc_day_of_their_text_timestamp(warehouse) -> None:
    table = text_events_table(warehouse)
    rows = {
        "new-york-late": "2026-11-28T23:30:00-05:00",  # 11-29 04:30 UTC
        "sqlite-next-midnight": "2026-11-29 00:00:00",
        "athens-early": "2026-11-29T01:00:00+02:00",  # 11-28 23:00 UTC
        "utc-midnight": "2026-11-28T00:00:00Z",
        "noon": "2026-11-28 12:00:00",
        "new-york-evening-before": "2026-11-27T21:00:00-05:00",  # 11-28 02:00 UTC
    }
    with warehouse.get_engine().begin() as connection:
        connection.execute(table.insert(), [inception_row(k, v) for k, v in rows.items()])
    day_before = LAST_DAY - timedelta(days=1)
    with instance_for_test() as instance:
        run_day(warehouse, instance, day_before)
        run_day(warehouse, instance, LAST_DAY)
    before = warehouse.read_partition_frame(EVENT_METRICS_TABLE, day_before)
    last = warehouse.read_partition_frame(EVENT_METRICS_TABLE, LAST_DAY)
    assert sorted(before["event_id"]) == sorted(
        ["athens-early", "utc-midnight", "noon", "new-york-evening-before"]
    )
    assert sorted(last["event_id"]) == ["new-york-late", "sqlite-next-midnight"]
    assert (before["status"] == "ok").all() and (last["status"] == "ok").all()
    for frame, day in ((before, day_before), (last, LAST_DAY)):
        # Stored in UTC (SQLite keeps the UTC wall time without an offset).
        assert {(ts.astimezone(UTC) if ts.tzinfo else ts).date() for ts in frame["event_ts"]} == {
            day
        }


def test_timestamps_not_starting_with_a_date_are_judged_or_counted(warehouse) -> None:
    table = text_events_table(warehouse)
    rows = {
        "compact": "20261129T120000Z",
        "leading-space": " 2026-11-29T13:00:00Z",
        "epoch-text": "1795953600",  # 2026-11-29T12:00:00Z
        "compact-next-day": "20261129T220000-0300",  # 2026-11-30T01:00:00Z
        "no-date": "yesterday",
    }
    with warehouse.get_engine().begin() as connection:
        connection.execute(table.insert(), [inception_row(k, v) for k, v in rows.items()])
    with instance_for_test() as instance:
        result = run_day(warehouse, instance, LAST_DAY)
    metrics = warehouse.read_partition_frame(EVENT_METRICS_TABLE, LAST_DAY)
    assert sorted(metrics["event_id"]) == ["compact", "epoch-text", "leading-space"]
    assert (metrics["status"] == "ok").all()
    assert {ts.replace(tzinfo=None) for ts in metrics["event_ts"]} == {
        datetime(2026, 11, 29, 12),
        datetime(2026, 11, 29, 13),
    }
    assert metadata_of(result, "event_judgments")["unplaced_event_ts"].value == 1


def test_event_judgments_never_store_an_event_of_another_day(warehouse) -> None:
    """Whatever the read hands over, an event whose UTC time is off the day is left out."""

    class LeakyWarehouse(WarehouseResource):
        def iter_event_chunks(self, day):
            yield [
                inception_row("on-day", "2026-11-29T10:00:00+00:00"),
                inception_row("day-after", "2026-11-29T23:30:00-05:00"),
                dict(inception_row("invalid-day-before", "2026-11-28T23:00:00"), task=" "),
                dict(inception_row("invalid-on-day", "2026-11-29T23:00:00"), task=" "),
            ]

    leaky = LeakyWarehouse(url=warehouse.resolved_url())
    summary = judge_partition(leaky, LexicalEvaluator(), LAST_DAY)
    leaky.dispose()
    stored = warehouse.read_partition_frame(JUDGMENTS_TABLE, LAST_DAY)
    assert sorted(stored["event_id"]) == ["invalid-on-day", "on-day"]
    assert summary.outside_day == 2
    assert summary.metadata()["outside_day"] == 2


def test_a_missing_events_table_fails_with_a_clear_error(warehouse) -> None:
    with instance_for_test() as instance:
        result = run_day(warehouse, instance, LAST_DAY, raise_on_error=False)
    assert not result.success
    [failure] = [event for event in result.all_events if event.is_step_failure]
    message = failure.step_failure_data.error.message + str(failure.step_failure_data.error.cause)
    assert "retrieval_events" in message and "not found" in message


def test_evaluator_errors_are_stored_with_a_reason(warehouse) -> None:
    class FlakyEvaluator(CountingEvaluator):
        async def evaluate(self, events):
            outcomes = await super().evaluate(events)
            return [
                EvaluationOutcome(o.event_id, "error", reason="timeout: judge did not answer")
                if index % 10 == 0
                else o
                for index, o in zip(itertools.count(), outcomes)
            ]

    class FlakyResource(EvaluatorResource):
        def build(self, store: Any = None) -> CountingEvaluator:
            return FlakyEvaluator()

    records = seed_warehouse(warehouse, days=1)
    with instance_for_test() as instance:
        result = materialize(
            ASSETS,
            partition_key=LAST_DAY.isoformat(),
            resources={"warehouse": warehouse, "evaluator": FlakyResource()},
            instance=instance,
        )
    metrics = warehouse.read_partition_frame(EVENT_METRICS_TABLE, LAST_DAY)
    errors = metrics[metrics["status"] == "error"]
    assert len(errors) > 0
    assert len(metrics) == len(records_of(records, LAST_DAY))
    assert set(errors["reason"]) == {"timeout: judge did not answer"}
    assert errors["recall"].isna().all() and errors["f1"].isna().all()
    assert metadata_of(result, "event_metrics")["errors"].value == len(errors)
    assert metadata_of(result, "event_judgments")["error_reasons"].value == {"timeout": len(errors)}


def test_seer_demo_end_to_end(tmp_path) -> None:
    """`seer demo` as a user runs it (small), in its own process: it changes the env."""
    seer = Path(sys.executable).with_name("seer")
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("SEER_", "DAGSTER_", "SLACK_", "OPENAI_"))
    }
    completed = subprocess.run(
        [str(seer), "demo", "--days", "3", "--events-per-day", "60"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = completed.stdout
    assert completed.returncode == 0, output + completed.stderr
    assert "[ 3/3]" in output
    assert "env=prod" in output and "feature_flag=retrieval-v2" in output
    assert f"DAGSTER_HOME={tmp_path / '.dagster_home'}" in output
    assert "dagster dev -w workspace.yaml" in output
    # The same instance and warehouse are left behind for `dagster dev`.
    with DagsterInstance.from_config(str(tmp_path / ".dagster_home")) as instance:
        materialized = instance.get_materialized_partitions(AssetKey("slice_metrics"))
    assert len(materialized) == 3
    # `make dev` starts the UI's partitions at the demo's first day.
    start_date = (tmp_path / ".dagster_home" / "seer_demo_start_date").read_text().strip()
    assert start_date == min(materialized)
    assert f"SEER_START_DATE={start_date}" in output
    warehouse = WarehouseResource(url=f"sqlite:///{tmp_path / '.seer' / 'warehouse.sqlite'}")
    assert (
        warehouse.read_table_range(SLICE_METRICS_TABLE, date(2000, 1, 1), date(2100, 1, 1))[
            "partition_date"
        ].nunique()
        == 3
    )
    warehouse.dispose()


def test_a_repeated_event_id_keeps_its_earliest_row_whatever_its_status(warehouse) -> None:
    table = text_events_table(warehouse)
    late_invalid = dict(inception_row("dup-2", "2026-11-29 09:00:00"), task="   ")
    rows = [
        inception_row("dup-1", "2026-11-29 07:00:00"),
        late_invalid,  # invalid rows skip the judge: they must not win by coming back first
        inception_row("dup-2", "2026-11-29 08:00:00"),
    ]
    with warehouse.get_engine().begin() as connection:
        connection.execute(table.insert(), rows)
    with instance_for_test() as instance:
        result = run_day(warehouse, instance, LAST_DAY)
    assert metadata_of(result, "event_judgments")["duplicate_event_ids"].value == 1
    metrics = warehouse.read_partition_frame(EVENT_METRICS_TABLE, LAST_DAY)
    kept = metrics[metrics["event_id"] == "dup-2"]
    assert len(kept) == 1
    assert kept.iloc[0]["status"] == "ok"
    assert kept.iloc[0]["event_ts"].hour == 8


POISON_CONTEXT = json.dumps(
    [
        {"id": "p\u0000", "text": "Christopher Nolan directed Inception.\ud800", "score": 0.9},
        {"id": "p\udfff", "text": "Nolan is British\u0000-American.", "score": 0.5},
    ]
)


def poison_rows() -> list[dict[str, Any]]:
    """Valid events whose JSON text holds NUL and lone surrogates, next to a plain one."""
    poisoned = dict(inception_row("poison", "2026-11-29 10:00:00"), context=POISON_CONTEXT)
    poisoned["metadata"] = json.dumps({"env": "prod\u0000", "feature_flag": "v\ud800"})
    poisoned_task = dict(inception_row("poison-task", "2026-11-29 10:30:00"))
    poisoned_task["task"] = "Who directed Inception?\u0000"  # text columns hold no surrogate
    return [inception_row("plain", "2026-11-29 09:00:00"), poisoned, poisoned_task]


def check_poison_day(warehouse: WarehouseResource, result) -> None:
    assert result.success
    metrics = warehouse.read_partition_frame(EVENT_METRICS_TABLE, LAST_DAY)
    assert sorted(metrics["status"]) == ["ok", "ok", "ok"]
    poison = metrics[metrics["event_id"] == "poison"].iloc[0]
    assert poison["metadata"] == {"env": "prod\ufffd", "feature_flag": "v\ufffd"}
    passages = warehouse.read_partition_frame(PASSAGE_JUDGMENTS_TABLE, LAST_DAY)
    assert {"p\ufffd", "p\ufffd#2"} <= set(passages["passage_id"])
    slices = warehouse.read_partition_frame(SLICE_METRICS_TABLE, LAST_DAY)
    assert "env=prod\ufffd" in set(slices["slice"])


def test_nul_and_lone_surrogates_in_a_row_never_fail_the_day(warehouse) -> None:
    table = text_events_table(warehouse)
    with warehouse.get_engine().begin() as connection:
        connection.execute(table.insert(), poison_rows())
    with instance_for_test() as instance:
        check_poison_day(warehouse, run_day(warehouse, instance, LAST_DAY))


def test_nul_and_lone_surrogates_in_json_columns_on_postgres(
    postgres_url: str, postgres_schema: str
) -> None:
    resource = WarehouseResource(url=postgres_url, db_schema=postgres_schema, chunk_size=16)
    table = sa.Table(
        "retrieval_events",
        sa.MetaData(schema=postgres_schema),
        sa.Column("event_id", sa.Text),
        sa.Column("event_ts", sa.DateTime(timezone=True)),
        sa.Column("task", sa.Text),
        sa.Column("context", sa.JSON),  # json, not jsonb: it keeps \u0000 and \ud800
        sa.Column("metadata", sa.JSON),
    )
    table.metadata.create_all(resource.get_engine())
    rows = []
    for row in poison_rows():
        rows.append(
            {
                "event_id": row["event_id"],
                "event_ts": datetime.fromisoformat(row["event_ts"]).replace(tzinfo=UTC),
                # A NUL in a text column is refused by PostgreSQL itself: keep it in JSON.
                "task": row["task"].replace("\u0000", ""),
                "context": json.loads(row["context"]),
                "metadata": json.loads(row["metadata"]),
            }
        )
    with resource.get_engine().begin() as connection:
        connection.execute(table.insert(), rows)
    try:
        with instance_for_test() as instance:
            check_poison_day(resource, run_day(resource, instance, LAST_DAY))
    finally:
        resource.dispose()


class AlwaysFailingEvaluator(CountingEvaluator):
    """A judge whose endpoint is down: every event ends in error."""

    endpoint = "http://judge.internal:8000/v1"

    def __init__(self) -> None:
        super().__init__()
        self.prompt_version = "judge-down"  # misses the cache filled by the good run

    async def evaluate(self, events):
        await super().evaluate(events)
        return [
            EvaluationOutcome(e.event_id, "error", reason="api_error: connection failed")
            for e in events
        ]


class AlwaysFailingResource(EvaluatorResource):
    def build(self, store: Any = None) -> CountingEvaluator:
        return AlwaysFailingEvaluator()


def test_a_judge_outage_fails_the_step_and_keeps_the_days_good_rows(warehouse) -> None:
    seed_warehouse(warehouse, days=1)
    with instance_for_test() as instance:
        run_day(warehouse, instance, LAST_DAY)
        before = warehouse.read_partition_frame(JUDGMENTS_TABLE, LAST_DAY)
        result = materialize(
            ASSETS,
            partition_key=LAST_DAY.isoformat(),
            resources={"warehouse": warehouse, "evaluator": AlwaysFailingResource()},
            instance=instance,
            raise_on_error=False,
        )
    assert not result.success
    (failure,) = [event for event in result.all_events if event.event_type_value == "STEP_FAILURE"]
    # Dagster wraps the step's exception: the operator's message is the error's cause.
    message = failure.step_failure_data.error.cause.message
    assert message.startswith("seer_pipelines.judging.partition.JudgeFailingError: ")
    assert "judge failing on 2026-11-29" in message
    assert "(100%) ended in error, above the 20% limit" in message
    assert "api_error" in message and "http://judge.internal:8000/v1" in message
    after = warehouse.read_partition_frame(JUDGMENTS_TABLE, LAST_DAY)
    assert len(after) == len(before) and (after["status"] != "error").all()
    assert warehouse.count_partition(EVENT_METRICS_TABLE, LAST_DAY) == len(before)


def test_the_error_share_limit_is_asset_config(warehouse) -> None:
    seed_warehouse(warehouse, days=1)
    with instance_for_test() as instance:
        result = materialize(
            ASSETS,
            partition_key=LAST_DAY.isoformat(),
            resources={"warehouse": warehouse, "evaluator": AlwaysFailingResource()},
            instance=instance,
            run_config={"ops": {"event_judgments": {"config": {"max_error_share": 1.0}}}},
        )
    assert result.success
    assert metadata_of(result, "event_judgments")["error_share"].value == 1.0
