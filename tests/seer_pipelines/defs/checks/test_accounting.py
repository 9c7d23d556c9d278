"""The accounting check on event_metrics: rows read = rows stored + duplicate ids."""

from __future__ import annotations

import json
from datetime import date

import pytest
import sqlalchemy as sa
from dagster import AssetCheckSeverity, DagsterInstance, materialize

from seer_pipelines.defs.checks.accounting import (
    account_for_day,
    define_rows_accounted_for,
    judging_figures,
)
from seer_pipelines.defs.resources.evaluator import EvaluatorResource
from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.warehouse.schema import EVENT_METRICS_TABLE
from tests.default_location import (
    DAILY_PARTITIONS,
    event_judgments,
    event_metrics,
    retrieval_events,
)

DAY = date(2026, 11, 29)
rows_accounted_for = define_rows_accounted_for(DAILY_PARTITIONS)


def row(event_id: str | None, event_ts: str | None) -> dict:
    return {
        "event_id": event_id,
        "event_ts": event_ts,
        "task": "Who directed Inception?",
        "context": json.dumps([{"id": "p1", "text": "Christopher Nolan directed Inception."}]),
        "metadata": json.dumps({"env": "prod"}),
    }


def seed(warehouse: WarehouseResource, rows: list[dict]) -> None:
    table = sa.Table(
        "retrieval_events",
        sa.MetaData(schema=warehouse.resolved_schema()),
        *(sa.Column(name, sa.Text) for name in ("event_id", "event_ts", "task", "context")),
        sa.Column("metadata", sa.Text),
    )
    table.metadata.create_all(warehouse.get_engine())
    with warehouse.get_engine().begin() as connection:
        connection.execute(table.insert(), rows)


ON_THE_DAY = [
    row("a", "2026-11-29T08:00:00Z"),
    row("a", "2026-11-29T09:00:00Z"),  # a repeated id: kept once
    row("b", "2026-11-29 not a time"),  # invalid, stored on its day
    row(None, "2026-11-29T10:00:00Z"),  # derived id
]
ON_NO_DAY = [row("n", None), row("x", "2026-11-31T10:00:00Z"), row("y", "yesterday")]


def run_day(warehouse: WarehouseResource, instance: DagsterInstance):
    result = materialize(
        [retrieval_events, event_judgments, event_metrics, rows_accounted_for],
        partition_key=DAY.isoformat(),
        resources={"warehouse": warehouse, "evaluator": EvaluatorResource(kind="lexical")},
        instance=instance,
    )
    [evaluation] = result.get_asset_check_evaluations()
    return evaluation


def check_accounting(warehouse: WarehouseResource) -> None:
    instance = DagsterInstance.ephemeral()
    seed(warehouse, ON_THE_DAY)
    evaluation = run_day(warehouse, instance)
    assert evaluation.passed, evaluation.description
    figures = {key: value.value for key, value in evaluation.metadata.items()}
    assert figures == {
        "rows_read": 4,
        "rows_stored": 3,
        "duplicates": 1,
        "unplaced_rows": 0,
        "rows_read_when_judged": 4,
    }

    seed(warehouse, ON_NO_DAY)
    evaluation = run_day(warehouse, instance)
    assert not evaluation.passed and evaluation.severity == AssetCheckSeverity.WARN
    assert evaluation.metadata["unplaced_rows"].value == 3
    assert evaluation.metadata["rows_stored"].value == 3

    # A row lost after the day was stored fails loudly.
    table = warehouse.output_tables()[EVENT_METRICS_TABLE]
    with warehouse.get_engine().begin() as connection:
        connection.execute(table.delete().where(table.c.event_id == "b"))
    lost = account_for_day(warehouse, DAY, judging_figures(instance, DAY.isoformat()))
    assert not lost.passed and lost.severity == AssetCheckSeverity.ERROR
    assert lost.metadata["unaccounted"].value == 1
    assert "re-run the day" in (lost.description or "")


def test_accounting_check_on_sqlite(tmp_path) -> None:
    warehouse = WarehouseResource(url=f"sqlite:///{tmp_path / 'w.sqlite'}", chunk_size=2)
    try:
        check_accounting(warehouse)
    finally:
        warehouse.dispose()


@pytest.mark.postgres
def test_accounting_check_on_postgres(postgres_url, postgres_schema) -> None:
    warehouse = WarehouseResource(url=postgres_url, db_schema=postgres_schema, chunk_size=2)
    try:
        check_accounting(warehouse)
    finally:
        warehouse.dispose()


def test_a_day_never_judged_fails_the_check(tmp_path) -> None:
    warehouse = WarehouseResource(url=f"sqlite:///{tmp_path / 'w.sqlite'}")
    seed(warehouse, ON_THE_DAY)
    warehouse.ensure_output_tables()
    result = account_for_day(warehouse, DAY, None)
    assert not result.passed and result.severity == AssetCheckSeverity.ERROR
    warehouse.dispose()
