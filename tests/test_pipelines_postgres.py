"""The same materializations with the warehouse AND the Dagster instance on PostgreSQL.

Skips with a reason when no server is reachable; fails instead under CI=true.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa
from dagster import AssetKey, instance_for_test
from test_pipelines import (
    LAST_DAY,
    OUTPUT_TABLES,
    CountingEvaluator,
    check_partition,
    distinct_judgment_keys,
    records_of,
    run_day,
    seed_warehouse,
    table_counts,
)

from seer_pipelines.assets.tables import EVENT_METRICS_TABLE
from seer_pipelines.resources import WarehouseResource

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
