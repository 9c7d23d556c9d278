"""Late partitions: `seer_freshness_checks_sensor` (Dagster's) runs the freshness check when
due; `seer_freshness_sensor` delivers its results: a failing result is posted once through
the outbox, a passing one resolves it, and after a late partition lands it asks for the
check again (Dagster does not re-run a failed one).
"""

import warnings
from collections.abc import Sequence
from datetime import UTC, date, datetime, time, timedelta

from dagster import (
    AssetCheckKey,
    AssetChecksDefinition,
    AssetKey,
    AssetRecordsFilter,
    DagsterInstance,
    DefaultSensorStatus,
    RunRequest,
    SensorDefinition,
    SensorEvaluationContext,
    SkipReason,
    SupersessionWarning,
    build_sensor_for_freshness_checks,
    sensor,
)

from seer_pipelines.alerts import (
    KIND_FRESHNESS,
    AlertDispatcher,
    AlertOutbox,
    SlackAlertResource,
)
from seer_pipelines.defs.checks.freshness import FRESHNESS_CHECK_KEY
from seer_pipelines.defs.checks.slice_rules import dispatcher_for
from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.defs.sensors.alerts import delivery_summary

FRESHNESS_INTERVAL_SECONDS = 600
_LATEST_CRON_TICK = "dagster/latest_cron_tick_timestamp"


def latest_materialized_partition(instance, asset_key: AssetKey) -> str | None:
    partitions = instance.get_materialized_partitions(asset_key)
    return max(partitions) if partitions else None


def is_materialized(instance, asset_key: AssetKey, partition: str) -> bool:
    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=asset_key, asset_partitions=[partition]), limit=1
    )
    return bool(records.records)


def build_freshness_checks_sensor(checks: Sequence[AssetChecksDefinition]) -> SensorDefinition:
    """Dagster's sensor that runs the freshness checks whenever they could have changed."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SupersessionWarning)
        return build_sensor_for_freshness_checks(
            freshness_checks=checks,
            name="seer_freshness_checks_sensor",
            minimum_interval_seconds=FRESHNESS_INTERVAL_SECONDS,
            default_status=DefaultSensorStatus.RUNNING,
        )


def checked_partition(evaluation) -> date | None:
    """The day a freshness check result is about: the day before its deadline tick."""
    tick = evaluation.metadata.get(_LATEST_CRON_TICK)
    if tick is None:
        return None
    return datetime.fromtimestamp(float(tick.value), tz=UTC).date() - timedelta(days=1)


def deliver_freshness(
    instance: DagsterInstance,
    dispatcher: AlertDispatcher,
    deadline: time,
    check_key: AssetCheckKey = FRESHNESS_CHECK_KEY,
) -> RunRequest | SkipReason:
    """Post the latest failing freshness result once; resolve it when the check passes.

    Returns a request to evaluate the check again when it failed and the late partition
    has since landed (Dagster's sensor leaves a failed check to the next run of the asset,
    and the daily job does not carry this check).
    """
    summary = instance.event_log_storage.get_asset_check_summary_records([check_key])[check_key]
    completed = summary.last_completed_check_execution_record
    if completed is None or completed.event is None:
        return SkipReason(f"{check_key.to_user_string()} has not been evaluated yet")
    evaluation = completed.event.asset_check_evaluation
    day = checked_partition(evaluation) if evaluation is not None else None
    if evaluation is None or day is None:
        return SkipReason(f"{check_key.to_user_string()}: no result to deliver")
    asset_key = check_key.asset_key
    asset_name = asset_key.to_user_string()
    outbox: AlertOutbox = dispatcher.outbox
    if evaluation.passed:
        outbox.record(day, KIND_FRESHNESS, [], None, resolve={("freshness", asset_name)})
        return SkipReason(f"{asset_name} {day} materialized (freshness check passed)")
    payload = {
        "rule": "freshness",
        "slice": asset_name,
        "status": "fail",
        "severity": "ERROR",
        "asset": asset_name,
        "deadline": f"{deadline:%H:%M} UTC",
        "expected_partition": day.isoformat(),
        "latest_partition": latest_materialized_partition(instance, asset_key),
        "check": check_key.to_user_string(),
    }
    outbox.record(
        day, KIND_FRESHNESS, [("freshness", asset_name, "ERROR", payload)], completed.run_id
    )
    result = dispatcher.deliver(day, KIND_FRESHNESS)
    status = f"{asset_name} {day} is late: {delivery_summary([result])}"
    in_flight = summary.last_check_execution_record is not None and (
        summary.last_check_execution_record.run_id != completed.run_id
    )
    if not in_flight and is_materialized(instance, asset_key, day.isoformat()):
        return RunRequest(
            run_key=f"freshness-recheck-{completed.run_id}", asset_check_keys=[check_key]
        )
    return SkipReason(status)


def define_freshness_sensor(deadline: time) -> SensorDefinition:
    """`seer_freshness_sensor`, naming `deadline` (UTC) in the alerts it posts."""

    @sensor(
        name="seer_freshness_sensor",
        minimum_interval_seconds=FRESHNESS_INTERVAL_SECONDS,
        default_status=DefaultSensorStatus.RUNNING,
        description="Posts a failing freshness check of slice_metrics (yesterday's partition "
        f"missing at {deadline:%H:%M} UTC, $SEER_FRESHNESS_DEADLINE) to Slack once, resolves "
        "it when the check passes, and re-runs the check once the late partition lands.",
    )
    def seer_freshness_sensor(
        context: SensorEvaluationContext, warehouse: WarehouseResource, slack: SlackAlertResource
    ) -> RunRequest | SkipReason:
        dispatcher = dispatcher_for(warehouse, slack)
        dispatcher.log = context.log
        return deliver_freshness(context.instance, dispatcher, deadline)

    return seer_freshness_sensor
