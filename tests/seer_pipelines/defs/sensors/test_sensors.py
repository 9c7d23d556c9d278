"""Operational sensors: pending-alert retries, crashed runs, late partitions."""

from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

import pytest
from dagster import (
    DagsterInstance,
    SkipReason,
    asset,
    build_run_status_sensor_context,
    build_sensor_context,
    define_asset_job,
    materialize,
)
from dagster import (
    Definitions as DagsterDefinitions,
)

from seer_metrics.rules import CheckOutcome
from seer_pipelines.alerts import (
    KIND_RUN_FAILURE,
    PENDING,
    SENT,
    AlertOutbox,
    SlackAlertResource,
)
from seer_pipelines.defs.checks.slice_rules import dispatcher_for
from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.defs.sensors.alerts import (
    BACKFILL_QUIET_PERIOD,
    backfill_hold,
    seer_pending_alerts_sensor,
    seer_run_failure_sensor,
)
from seer_pipelines.settings import load_settings, parse_deadline
from seer_testing.fake_slack import FakeSlack
from tests.default_location import DAILY_PARTITIONS

DAY = date(2026, 11, 29)


@pytest.fixture
def warehouse(tmp_path: Path) -> WarehouseResource:
    return WarehouseResource(url=f"sqlite:///{tmp_path / 'warehouse.sqlite'}")


def slack_for(fake: FakeSlack) -> SlackAlertResource:
    return SlackAlertResource(
        token="xoxb-test", channel="#ops", api_url=fake.base_url, dagster_url="https://d.example"
    )


def failing_outcome() -> CheckOutcome:
    return CheckOutcome(
        rule="recall_other_slices",
        slice="env=dev",
        status="fail",
        severity="WARN",
        statistic="mean_recall",
        observed=0.6,
        threshold=0.85,
        sample_size=80,
        message="low",
        partition_date=DAY.isoformat(),
    )


def test_pending_alerts_sensor_delivers_after_slack_recovers(warehouse) -> None:
    outbox = AlertOutbox(warehouse.get_engine())
    outbox.record_check_outcomes(DAY, [failing_outcome()], "run-1")
    with FakeSlack() as fake:
        resources = {"warehouse": warehouse, "slack": slack_for(fake)}

        def evaluate() -> SkipReason:
            with build_sensor_context(
                resources=resources, instance=DagsterInstance.ephemeral()
            ) as context:
                return seer_pending_alerts_sensor(context)

        fake.start_outage("server_error")
        result = evaluate()
        assert isinstance(result, SkipReason)
        assert "1 still pending" in result.skip_message
        assert outbox.rows(DAY)[0].state == PENDING
        fake.end_outage()
        assert evaluate().skip_message == "1 alert message(s) delivered"
        assert outbox.rows(DAY)[0].state == SENT
        assert evaluate().skip_message == "no pending alerts"
        assert len(fake.messages) == 1


def test_run_failure_sensor_posts_the_crashed_run(warehouse) -> None:
    @asset(partitions_def=DAILY_PARTITIONS)
    def exploding() -> None:
        raise RuntimeError(
            "warehouse said <!channel> no to postgresql://seer:hunter2@db.example/seer"
        )

    job = define_asset_job("exploding_job", selection=[exploding])
    defs = DagsterDefinitions(assets=[exploding], jobs=[job])
    instance = DagsterInstance.ephemeral()
    result = defs.resolve_job_def("exploding_job").execute_in_process(
        instance=instance, partition_key=DAY.isoformat(), raise_on_error=False
    )
    assert not result.success
    with FakeSlack() as fake:
        with build_run_status_sensor_context(
            sensor_name="seer_run_failure_sensor",
            dagster_instance=instance,
            dagster_run=result.dagster_run,
            dagster_event=result.get_run_failure_event(),
            resources={"warehouse": warehouse, "slack": slack_for(fake)},
        ).for_run_failure() as context:
            seer_run_failure_sensor(context)
            seer_run_failure_sensor(context)  # evaluated twice: still one post
        assert len(fake.messages) == 1
        text = fake.messages[0]["blocks"][1]["text"]["text"]
    run_id = result.dagster_run.run_id
    assert "Job `exploding_job` failed on 1 day(s): 2026-11-29" in text
    assert f"<https://d.example/runs/{run_id}|run {run_id[:8]}>" in text
    # the failing step's error, class and message, with the password redacted
    assert "```exploding: RuntimeError: warehouse said &lt;!channel&gt; no to " in text
    assert "postgresql://seer:***@db.example/seer" in text
    assert "hunter2" not in str(fake.messages[0])
    assert "<!channel>" not in str(fake.messages[0])
    [row] = AlertOutbox(warehouse.get_engine()).rows(DAY, KIND_RUN_FAILURE)
    assert row.state == SENT


def test_a_failed_backfill_is_one_message_listing_its_days(warehouse) -> None:
    @asset(partitions_def=DAILY_PARTITIONS)
    def exploding() -> None:
        raise ValueError("Partition key range start is before the partitions start")

    job = define_asset_job("exploding_job", selection=[exploding])
    defs = DagsterDefinitions(assets=[exploding], jobs=[job])
    instance = DagsterInstance.ephemeral()
    days = [DAY - timedelta(days=i) for i in range(3, 0, -1)]
    with FakeSlack() as fake:
        resources = {"warehouse": warehouse, "slack": slack_for(fake)}
        for day in days:  # a command-line backfill: runs tagged, no backfill record
            result = defs.resolve_job_def("exploding_job").execute_in_process(
                instance=instance,
                partition_key=day.isoformat(),
                raise_on_error=False,
                tags={"dagster/backfill": "bkfl1"},
            )
            with build_run_status_sensor_context(
                sensor_name="seer_run_failure_sensor",
                dagster_instance=instance,
                dagster_run=result.dagster_run,
                dagster_event=result.get_run_failure_event(),
                resources=resources,
            ).for_run_failure() as context:
                seer_run_failure_sensor(context)
        assert fake.messages == []  # held while failures keep coming
        dispatcher = dispatcher_for(warehouse, slack_for(fake))
        dispatcher.hold_run_failures = backfill_hold(instance, datetime.now(tz=UTC))
        dispatcher.deliver_due()
        assert fake.messages == []
        later = datetime.now(tz=UTC) + BACKFILL_QUIET_PERIOD + timedelta(seconds=1)
        dispatcher.hold_run_failures = backfill_hold(instance, later)
        dispatcher.deliver_due()
        dispatcher.deliver_due()
        [message] = fake.messages
    assert message["text"] == "Seer: 3 run(s) failed in backfill bkfl1 of exploding_job"
    text = message["blocks"][1]["text"]["text"]
    assert "failed on 3 day(s): 2026-11-26, 2026-11-27, 2026-11-28" in text
    assert "exploding: ValueError: Partition key range start is before" in text
    rows = AlertOutbox(warehouse.get_engine()).rows(kind=KIND_RUN_FAILURE)
    assert [r.state for r in rows] == [SENT] * 3


def run_failure(run_id: str, backfill: str) -> tuple[str, str, str, dict]:
    payload = {
        "rule": "run_failure",
        "slice": run_id,
        "status": "fail",
        "severity": "ERROR",
        "job": "seer_daily",
        "run_id": run_id,
        "partition": DAY.isoformat(),
        "backfill": backfill,
        "error": f"ingest: ValueError: broken in {backfill}",
    }
    return ("run_failure", run_id, "ERROR", payload)


def test_one_failed_post_keeps_its_backfill_pending_and_the_others_still_go(warehouse) -> None:
    """Two backfills failed: Slack refuses the first message, the second still posts, and
    the refused one goes out on the next pass (never lost, never posted twice)."""
    with FakeSlack() as fake:
        dispatcher = dispatcher_for(warehouse, slack_for(fake))
        dispatcher.outbox.record(
            DAY,
            KIND_RUN_FAILURE,
            [run_failure("run-a", "bkflA"), run_failure("run-b", "bkflB")],
            None,
        )
        fake.fail_next("server_error")
        first = dispatcher.deliver(DAY, KIND_RUN_FAILURE)
        assert (first.delivered, first.alerts) == (False, 1)
        assert first.error
        states = sorted(r.state for r in dispatcher.outbox.rows(DAY, KIND_RUN_FAILURE))
        assert states == [PENDING, SENT]
        assert len(fake.messages) == 1
        second = dispatcher.deliver(DAY, KIND_RUN_FAILURE)
        assert (second.delivered, second.alerts, second.error) == (True, 1, None)
        assert len(fake.messages) == 2
        texts = [m["text"] for m in fake.messages]
    assert sorted(texts) == [
        "Seer: 1 run(s) failed in backfill bkflA of seer_daily",
        "Seer: 1 run(s) failed in backfill bkflB of seer_daily",
    ]
    rows = dispatcher.outbox.rows(DAY, KIND_RUN_FAILURE)
    assert [r.state for r in rows] == [SENT, SENT]


def test_run_failure_sensor_posts_directly_when_the_warehouse_is_down() -> None:
    @asset
    def exploding_too() -> None:
        raise RuntimeError("boom")

    instance = DagsterInstance.ephemeral()
    result = materialize([exploding_too], instance=instance, raise_on_error=False)
    broken = WarehouseResource(url="postgresql://postgres@127.0.0.1:9/unreachable")
    with FakeSlack() as fake:
        with build_run_status_sensor_context(
            sensor_name="seer_run_failure_sensor",
            dagster_instance=instance,
            dagster_run=result.dagster_run,
            dagster_event=result.get_run_failure_event(),
            resources={"warehouse": broken, "slack": slack_for(fake)},
        ).for_run_failure() as context:
            seer_run_failure_sensor(context)
        assert len(fake.messages) == 1
        assert "__ephemeral_asset_job__" in fake.messages[0]["text"]


def test_freshness_deadline_parsing() -> None:
    assert parse_deadline("06:30") == time(6, 30)
    assert parse_deadline(None) == time(6, 0)
    assert load_settings({"SEER_FRESHNESS_DEADLINE": "9:05"}).freshness_deadline == time(9, 5)
    with pytest.raises(ValueError, match="SEER_FRESHNESS_DEADLINE must be HH:MM"):
        parse_deadline("25:00")


def test_sensors_load_in_definitions() -> None:
    from seer_pipelines.definitions import defs

    names = {s.name for s in defs.sensors}
    assert names == {
        "seer_pending_alerts_sensor",
        "seer_run_failure_sensor",
        "seer_freshness_sensor",
        "seer_freshness_checks_sensor",
        "seer_batch_sensor",
    }
