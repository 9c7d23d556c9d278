"""Freshness: Dagster's time-partition freshness check on slice_metrics, delivered to Slack
through the outbox by seer_freshness_sensor."""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from pathlib import Path

import pytest
from dagster import (
    AssetSelection,
    DagsterInstance,
    Definitions,
    RunRequest,
    SkipReason,
    asset,
    define_asset_job,
    materialize,
)
from dagster._core.test_utils import freeze_time

from seer_pipelines.alerts import KIND_FRESHNESS, RESOLVED, AlertOutbox, SlackAlertResource
from seer_pipelines.defs.checks.freshness import FRESHNESS_CHECK_KEY, build_freshness_checks
from seer_pipelines.defs.checks.slice_rules import dispatcher_for
from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.defs.sensors.freshness import checked_partition, deliver_freshness
from seer_testing.fake_slack import FakeSlack
from tests.default_location import DAILY_PARTITIONS

DAY = date(2026, 11, 29)
NOW = datetime(2026, 11, 30, 7, 0, tzinfo=UTC)  # after the 06:00 deadline for DAY
DEADLINE = time(6, 0)


@asset(name="slice_metrics", partitions_def=DAILY_PARTITIONS)
def stand_in() -> None:
    return None


@pytest.fixture
def warehouse(tmp_path: Path) -> WarehouseResource:
    return WarehouseResource(url=f"sqlite:///{tmp_path / 'warehouse.sqlite'}")


def run_freshness_check(instance: DagsterInstance, now: datetime, day: date) -> bool:
    """Evaluate the freshness check at `now`, as its sensor's run does; returns passed.
    `day` is the partition it must be about."""
    checks = build_freshness_checks(time(6, 0))
    definitions = Definitions(
        assets=[stand_in],
        asset_checks=checks,
        jobs=[define_asset_job("freshness", selection=AssetSelection.checks(*checks))],
    )
    with freeze_time(now):
        result = definitions.resolve_job_def("freshness").execute_in_process(instance=instance)
    [evaluation] = result.get_asset_check_evaluations()
    assert evaluation.check_name == FRESHNESS_CHECK_KEY.name
    assert checked_partition(evaluation) == day
    return evaluation.passed


def test_the_code_location_uses_dagsters_freshness_check() -> None:
    from seer_pipelines.definitions import defs

    graph = defs.resolve_asset_graph()
    assert FRESHNESS_CHECK_KEY in graph.asset_check_keys
    sensors = {sensor.name for sensor in defs.get_repository_def().sensor_defs}
    assert {"seer_freshness_checks_sensor", "seer_freshness_sensor"} <= sensors
    # The daily job checks its own day; the freshness check is about the newest day.
    job = defs.resolve_job_def("seer_daily_job")
    in_job = {key.to_user_string() for key in job.asset_layer.asset_graph.asset_check_keys}
    assert "slice_metrics:f1_drop" in in_job
    assert FRESHNESS_CHECK_KEY.to_user_string() not in in_job


def test_deadline_cron_follows_the_setting() -> None:
    [checks] = build_freshness_checks(time(9, 5))
    [spec] = checks.check_specs
    params = spec.metadata["dagster/freshness_params"].value
    assert params["deadline_cron"] == "5 9 * * *"
    assert params["timezone"] == "UTC"


def test_a_late_partition_is_posted_once_then_resolved(warehouse) -> None:
    instance = DagsterInstance.ephemeral()
    materialize([stand_in], partition_key="2026-11-28", instance=instance)
    slack = SlackAlertResource
    with FakeSlack() as fake:
        dispatcher = dispatcher_for(
            warehouse,
            slack(token="xoxb-t", channel="#ops", api_url=fake.base_url, dagster_url="https://d"),
        )
        assert isinstance(
            deliver_freshness(instance, dispatcher, DEADLINE), SkipReason
        )  # no result yet
        assert not run_freshness_check(instance, NOW, DAY)
        outcome = deliver_freshness(instance, dispatcher, DEADLINE)
        assert isinstance(outcome, SkipReason)
        assert "slice_metrics 2026-11-29 is late" in outcome.skip_message
        deliver_freshness(instance, dispatcher, DEADLINE)  # the next tick: not posted again
        assert len(fake.messages) == 1
        text = fake.messages[0]["blocks"][1]["text"]["text"]
        assert "Partition *2026-11-29* of `slice_metrics` has not materialized" in text
        assert "Last materialized partition: 2026-11-28" in text
        # The partition lands: the sensor asks for the check again, once per failed result.
        materialize([stand_in], partition_key="2026-11-29", instance=instance)
        request = deliver_freshness(instance, dispatcher, DEADLINE)
        assert isinstance(request, RunRequest)
        assert request.asset_check_keys == [FRESHNESS_CHECK_KEY]
        assert run_freshness_check(instance, NOW, DAY)
        outcome = deliver_freshness(instance, dispatcher, DEADLINE)
        assert isinstance(outcome, SkipReason)
        assert outcome.skip_message.endswith("materialized (freshness check passed)")
        assert len(fake.messages) == 1
    [row] = AlertOutbox(warehouse.get_engine()).rows(DAY, KIND_FRESHNESS)
    assert row.state == RESOLVED


def test_before_the_deadline_the_day_before_is_checked(warehouse) -> None:
    instance = DagsterInstance.ephemeral()
    materialize([stand_in], partition_key="2026-11-28", instance=instance)
    early = datetime(2026, 11, 30, 5, 59, tzinfo=UTC)
    assert run_freshness_check(instance, early, date(2026, 11, 28))
