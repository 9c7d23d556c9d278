"""The same materializations with the warehouse AND the Dagster instance on PostgreSQL.

Skips with a reason when no server is reachable; fails instead under CI=true.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
import sqlalchemy as sa
from dagster import AssetKey, instance_for_test

from seer_pipelines.definitions import define_assets
from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.demo.source_table import write_events
from seer_pipelines.settings import load_settings
from seer_pipelines.warehouse.schema import (
    EVENT_METRICS_TABLE,
    JUDGMENTS_TABLE,
    PASSAGE_JUDGMENTS_TABLE,
    SLICE_METRICS_TABLE,
)
from tests.seer_pipelines.defs.assets.test_pipelines import (
    LAST_DAY,
    OUTPUT_TABLES,
    CountingEvaluator,
    check_partition,
    distinct_judgment_keys,
    inception_row,
    records_of,
    run_day,
    seed_warehouse,
    table_counts,
    text_events_table,
)

pytestmark = pytest.mark.postgres


@pytest.fixture(autouse=True)
def _reset_calls() -> None:
    CountingEvaluator.calls.clear()


@pytest.fixture
def warehouse(postgres_url: str, postgres_schema: str):
    # A plain postgresql:// URL, as users write it: the resource switches it to psycopg2.
    url = postgres_url.replace("postgresql+psycopg2://", "postgresql://")
    resource = WarehouseResource(url=url, db_schema=postgres_schema, chunk_size=16)
    yield resource
    resource.dispose()


@pytest.fixture
def postgres_instance(postgres_url: str):
    """A Dagster instance whose run, event-log and schedule storage is the test database."""
    storage = {"postgres": {"postgres_url": postgres_url}}
    with instance_for_test(overrides={"storage": storage}) as instance:
        yield instance


def test_materialize_every_asset_on_postgres(warehouse, postgres_instance, postgres_schema):
    records = seed_warehouse(warehouse)
    result = run_day(warehouse, postgres_instance, LAST_DAY)
    check_partition(warehouse, records, result)
    assert type(postgres_instance.run_storage).__name__ == "PostgresRunStorage"
    assert type(postgres_instance.event_log_storage).__name__ == "PostgresEventLogStorage"
    stored = postgres_instance.get_run_by_id(result.run_id)
    assert stored is not None and stored.is_success
    # Output tables and the judgment cache live in the configured schema only.
    inspector = sa.inspect(warehouse.get_engine())
    tables = set(inspector.get_table_names(schema=postgres_schema))
    assert set(OUTPUT_TABLES) <= tables
    assert "seer_judgment_cache" in tables


def test_rematerialize_and_backfill_on_postgres(warehouse, postgres_instance) -> None:
    records = seed_warehouse(warehouse)
    days = [LAST_DAY - timedelta(days=offset) for offset in (2, 1, 0)]
    for day in days:
        assert run_day(warehouse, postgres_instance, day).success
    assert len(CountingEvaluator.calls) == len(distinct_judgment_keys(records))
    counts = {day: table_counts(warehouse, day) for day in days}

    CountingEvaluator.calls.clear()
    assert run_day(warehouse, postgres_instance, LAST_DAY).success
    assert CountingEvaluator.calls == []
    assert table_counts(warehouse, LAST_DAY) == counts[LAST_DAY]
    for day in days:
        assert warehouse.count_partition(EVENT_METRICS_TABLE, day) == len(records_of(records, day))
    materialized = postgres_instance.get_materialized_partitions(AssetKey("slice_metrics"))
    assert {day.isoformat() for day in days} <= materialized


def test_crash_and_resume_on_postgres(warehouse, postgres_instance) -> None:
    records = seed_warehouse(warehouse, days=1, events_per_day=90)
    keys = distinct_judgment_keys(records_of(records, LAST_DAY))
    crashed = run_day(
        warehouse, postgres_instance, LAST_DAY, raise_on_error=False, fail_after_batches=2
    )
    assert not crashed.success
    before = len(CountingEvaluator.calls)
    assert 0 < before < len(keys)
    CountingEvaluator.calls.clear()
    assert run_day(warehouse, postgres_instance, LAST_DAY).success
    assert len(CountingEvaluator.calls) == len(keys) - before


def test_long_event_ids_and_metadata_values_are_stored_whole(
    warehouse, postgres_instance, monkeypatch
) -> None:
    """Ids and slice values have no length limit (Text, no unique index on them)."""
    records = seed_warehouse(warehouse, days=1, events_per_day=20)
    long_tenant = "tenant-" + "x" * 993  # 1,000 characters
    long_id = "evt-" + "y" * 996
    longer_id = "evt-" + "z" * 2996  # beyond PostgreSQL's btree entry limit (~2,700 bytes)
    extra = [
        dict(
            records[0],
            event_id=long_id,
            metadata=json.dumps({"env": "prod", "tenant": long_tenant}),
        ),
        dict(records[1], event_id=longer_id),
    ]
    with warehouse.get_engine().begin() as connection:
        # The user's table: ids as long as they like (the synthetic one has varchar(255)).
        connection.execute(
            sa.text("alter table retrieval_events drop constraint retrieval_events_pkey")
        )
        connection.execute(sa.text("alter table retrieval_events alter column event_id type text"))
    write_events(
        warehouse.get_engine(),
        extra,
        schema=warehouse.resolved_schema(),
        replace_days=False,
    )
    by_tenant = define_assets(load_settings({"SEER_SLICE_KEYS": "env,tenant"}))
    result = run_day(warehouse, postgres_instance, LAST_DAY, assets=list(by_tenant))
    assert result.success
    metrics = warehouse.read_partition_frame(EVENT_METRICS_TABLE, LAST_DAY)
    assert {long_id, longer_id} <= set(metrics["event_id"])
    assert len(metrics) == len(records_of(records + extra, LAST_DAY))
    passages = warehouse.read_partition_frame(PASSAGE_JUDGMENTS_TABLE, LAST_DAY)
    assert long_id in set(passages["event_id"])
    slices = warehouse.read_partition_frame(SLICE_METRICS_TABLE, LAST_DAY)
    row = slices[slices["slice"] == f"tenant={long_tenant}"]
    assert len(row) == 1 and row.iloc[0]["slice_value"] == long_tenant
    assert int(row.iloc[0]["events"]) == 1


def test_nan_inside_source_metadata_does_not_fail_the_day(warehouse, postgres_instance) -> None:
    """Python's json reads NaN, PostgreSQL's json refuses it: it is stored as null, for
    valid and invalid rows alike."""
    table = text_events_table(warehouse)
    nan_metadata = '{"env": "prod", "latency_ms": NaN, "nested": {"score": [1.5, Infinity]}}'
    valid = dict(inception_row("nan-valid", "2026-11-29T10:00:00Z"), metadata=nan_metadata)
    invalid = dict(
        inception_row("nan-invalid", "2026-11-29T11:00:00Z"), task=" ", metadata=nan_metadata
    )
    with warehouse.get_engine().begin() as connection:
        connection.execute(table.insert(), [valid, invalid])
    result = run_day(warehouse, postgres_instance, LAST_DAY, raise_on_error=False)
    assert result.success
    stored = {
        row["event_id"]: row
        for chunk in warehouse.read_partition_records(JUDGMENTS_TABLE, LAST_DAY)
        for row in chunk
    }
    assert stored["nan-valid"]["status"] == "ok"
    assert stored["nan-invalid"]["status"] == "invalid"
    for row in stored.values():
        assert row["metadata"] == {
            "env": "prod",
            "latency_ms": None,
            "nested": {"score": [1.5, None]},
        }
    slices = warehouse.read_partition_frame(SLICE_METRICS_TABLE, LAST_DAY)
    assert int(slices[slices["slice"] == "env=prod"].iloc[0]["events"]) == 2
