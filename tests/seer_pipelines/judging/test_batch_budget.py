"""Budgets in batch mode, against the fake Batch API through the real `openai` client.

The day's events are projected at the batch price before each submission: only those that
fit in the cap go into the batches, the rest are stored as `skipped_budget` when the day
completes, and the `budget` check fails (WARN) for that day.
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, date, datetime

import pytest
from dagster import (
    AssetCheckSeverity,
    SensorResult,
    build_sensor_context,
    instance_for_test,
    materialize,
)

from seer_metrics.evaluators.batch import REQUIREMENTS_PHASE, SUPPORT_PHASE
from seer_metrics.evaluators.llm import DEFAULT_MODEL, DEFAULT_PRICES
from seer_metrics.judgment import Requirement
from seer_metrics.judgment_store import JudgmentStore, RequirementsRecord
from seer_metrics.spend.cost_estimate import CostEstimator
from seer_pipelines.defs.checks.accounting import judging_figures
from seer_pipelines.defs.checks.budget import budget_result
from seer_pipelines.defs.resources.evaluator import EvaluatorResource
from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.defs.sensors.batches import seer_batch_sensor
from seer_pipelines.judging.batch_ledger import day_events, ledger_for
from seer_pipelines.warehouse.schema import EVENT_METRICS_TABLE
from tests.default_location import event_judgments, event_metrics, retrieval_events

DAY = date(2026, 11, 29)


@pytest.fixture
def warehouse(one_day_warehouse) -> WarehouseResource:
    return one_day_warehouse(DAY, events_per_day=40, chunk_size=16, seed=5, invalid_share=0.0)


def _batch_cost_of_the_day(warehouse: WarehouseResource) -> float:
    """What `seer estimate` projects for judging every event of the day in batch."""
    estimator = CostEstimator(DEFAULT_MODEL, DEFAULT_PRICES[DEFAULT_MODEL])
    estimator.add(day_events(warehouse, DAY))
    cost = estimator.estimate().batch.cost_usd
    assert cost is not None and cost > 0
    return float(cost)


def _run_until_judged(instance, warehouse: WarehouseResource, evaluator: EvaluatorResource):
    """The day's runs as the batch sensor launches them, until `event_judgments` is stored."""
    resources = {"warehouse": warehouse, "evaluator": evaluator}
    assets = [retrieval_events, event_judgments, event_metrics]
    for _ in range(4):
        result = materialize(
            assets, partition_key=DAY.isoformat(), resources=resources, instance=instance
        )
        assert result.success
        if result.asset_materializations_for_node("event_judgments"):
            return result
        for _ in range(4):
            with build_sensor_context(instance=instance, resources=resources) as context:
                if isinstance(seer_batch_sensor(context), SensorResult):
                    break
        else:
            pytest.fail("the sensor never found the day's batches done")
    pytest.fail("the day never completed")


def test_the_budget_caps_what_batches_submit_and_the_rest_is_skipped(
    batch_server, batch_evaluator, warehouse
) -> None:
    events = day_events(warehouse, DAY)
    full_cost = _batch_cost_of_the_day(warehouse)
    cap = round(full_cost * 0.4, 8)
    evaluator = batch_evaluator(budget_usd=cap)
    with instance_for_test() as instance:
        result = _run_until_judged(instance, warehouse, evaluator)
        metadata = {
            key: value.value
            for key, value in result.asset_materializations_for_node("event_judgments")[
                0
            ].metadata.items()
        }
        check = budget_result(DAY.isoformat(), judging_figures(instance, DAY.isoformat()))

        # Only the events within the cap went into the batches.
        records = ledger_for(warehouse).records(DAY)
        phases = Counter(record.phase for record in records)
        assert phases == {REQUIREMENTS_PHASE: 1, SUPPORT_PHASE: 1}
        queries = {event.task for event in events}
        requested = {record.phase: record.requests for record in records}
        assert 0 < requested[REQUIREMENTS_PHASE] < len(queries)
        assert 0 < requested[SUPPORT_PHASE] < len(events)
        assert metadata["batch_over_budget"] > 0

        # Every event has its row: judged (from the batches, or on demand within what the
        # batches left of the cap) or skipped_budget, and the spend stays within the cap.
        rows = warehouse.read_partition_frame(EVENT_METRICS_TABLE, DAY)
        statuses = Counter(rows["status"])
        assert set(statuses) == {"ok", "skipped_budget"}
        assert statuses["ok"] + statuses["skipped_budget"] == len(events) == len(rows)
        assert statuses["skipped_budget"] == metadata["skipped_budget"]
        assert statuses["ok"] >= requested[SUPPORT_PHASE]
        assert metadata["budget_stopped"] and metadata["budget_stopped_by"] == "usd"
        spent = metadata["batch_cost_usd"] + metadata["estimated_cost_usd"]
        assert 0 < metadata["batch_cost_usd"] <= spent <= cap
        assert rows.loc[rows["status"] == "skipped_budget", "recall"].isna().all()

        # The budget check fails with WARN for the day.
        assert not check.passed and check.severity == AssetCheckSeverity.WARN
        assert f"{statuses['skipped_budget']} events" in (check.description or "")

        # A repeated run pays nothing more and skips the same events.
        batches, lines, calls = (
            batch_server.batches_created,
            batch_server.lines_answered,
            batch_server.judge.count(),
        )
        again = _run_until_judged(instance, warehouse, evaluator)
        assert again.asset_materializations_for_node("event_judgments")
        assert (batch_server.batches_created, batch_server.lines_answered) == (batches, lines)
        assert batch_server.judge.count() == calls
        rows_again = warehouse.read_partition_frame(EVENT_METRICS_TABLE, DAY)
        skipped = set(rows.loc[rows["status"] == "skipped_budget", "event_id"])
        assert set(rows_again.loc[rows_again["status"] == "skipped_budget", "event_id"]) == skipped


def test_without_a_cap_the_batches_take_every_event(
    batch_server, batch_evaluator, warehouse
) -> None:
    evaluator = batch_evaluator()
    with instance_for_test() as instance:
        result = _run_until_judged(instance, warehouse, evaluator)
    metadata = result.asset_materializations_for_node("event_judgments")[0].metadata
    assert "batch_over_budget" not in metadata
    assert metadata["skipped_budget"].value == 0
    records = {record.phase: record for record in ledger_for(warehouse).records(DAY)}
    assert records[SUPPORT_PHASE].requests == len(day_events(warehouse, DAY))


def test_the_cache_can_be_read_as_it_was_before_a_moment(tmp_path) -> None:
    """What a batch day's budget gate relies on: its own answers, stored after its first
    batch, are not cache hits to it."""
    store = JudgmentStore(tmp_path / "cache.sqlite")
    before, after = (
        RequirementsRecord(key, key, DEFAULT_MODEL, "v1", (Requirement("r1", "a fact"),))
        for key in ("before", "after")
    )
    store.put_requirements([before])
    moment = datetime.now(UTC)
    time.sleep(0.01)
    store.put_requirements([after])
    assert set(store.get_requirements(["before", "after"])) == {"before", "after"}
    assert set(store.get_requirements(["before", "after"], created_before=moment)) == {"before"}
    assert store.get_judgments(["before"], created_before=moment) == {}
