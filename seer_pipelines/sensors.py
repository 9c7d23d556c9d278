"""Operational alerts: pending-alert retries, crashed runs, and late partitions.

- `seer_pending_alerts_sensor` delivers outbox rows left `pending` (Slack down, rate
  limited, bad token) every few minutes, honouring Slack's Retry-After.
- `seer_run_failure_sensor` posts crashed runs with the failing step's error (class and
  message, secrets redacted). A failed check does not fail a run (it is alerted by the
  checks themselves, see `checks.py`); this one is for runs that crash. The failures of a
  backfill are held while it runs and go out as ONE message listing the days.
- Freshness is Dagster's own time-partition freshness check on `slice_metrics`
  (`freshness_check`: yesterday's partition exists once the deadline passed,
  $SEER_FRESHNESS_DEADLINE, HH:MM UTC, default 06:00), run when due by Dagster's
  `seer_freshness_checks_sensor`. `seer_freshness_sensor` delivers its results: a failing
  result is posted once through the outbox, a passing one resolves it, and after a late
  partition lands it asks for the check again (Dagster does not re-run a failed one).

Every alert goes through the same `seer_alerts` outbox, so none is lost or posted twice;
if the warehouse itself is unreachable, a crashed run is posted directly.
"""

import re
import warnings
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime, time, timedelta

from dagster import (
    AssetCheckKey,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetKey,
    AssetRecordsFilter,
    DagsterInstance,
    DefaultSensorStatus,
    RunFailureSensorContext,
    RunRequest,
    SensorEvaluationContext,
    SkipReason,
    SupersessionWarning,
    build_sensor_for_freshness_checks,
    build_time_partition_freshness_checks,
    run_failure_sensor,
    sensor,
)

from seer_metrics.text.redaction import redact_secrets, shorten
from seer_pipelines.alerts import (
    KIND_FRESHNESS,
    KIND_RUN_FAILURE,
    Alert,
    AlertDispatcher,
    AlertOutbox,
    SlackAlertResource,
    build_run_failure_message,
)
from seer_pipelines.checks import SLICE_METRICS_ASSET, dispatcher_for
from seer_pipelines.resources import WarehouseResource
from seer_pipelines.settings import setting

FRESHNESS_DEADLINE_ENV = "SEER_FRESHNESS_DEADLINE"
DEFAULT_FRESHNESS_DEADLINE = "06:00"
PENDING_ALERTS_INTERVAL_SECONDS = 300
FRESHNESS_INTERVAL_SECONDS = 600
_DEADLINE = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")


def freshness_deadline(value: str | None = None) -> time:
    """The deadline (UTC) by which yesterday's partition must exist; HH:MM."""
    raw = (value or setting(FRESHNESS_DEADLINE_ENV) or DEFAULT_FRESHNESS_DEADLINE).strip()
    match = _DEADLINE.match(raw)
    if not match:
        raise ValueError(f"{FRESHNESS_DEADLINE_ENV} must be HH:MM (UTC), e.g. 06:00; got {raw!r}")
    return time(int(match.group(1)), int(match.group(2)))


def _summary(results) -> str:
    if not results:
        return "no pending alerts"
    sent = sum(r.delivered for r in results)
    failed = [r for r in results if not r.delivered]
    text = f"{sent} alert message(s) delivered"
    if failed:
        text += f", {len(failed)} still pending ({failed[0].error})"
    return text


@sensor(
    name="seer_pending_alerts_sensor",
    minimum_interval_seconds=PENDING_ALERTS_INTERVAL_SECONDS,
    default_status=DefaultSensorStatus.RUNNING,
    description="Retries Slack alerts left pending in seer_alerts (Slack down, rate limited).",
)
def seer_pending_alerts_sensor(
    context: SensorEvaluationContext, warehouse: WarehouseResource, slack: SlackAlertResource
) -> SkipReason:
    dispatcher = dispatcher_for(warehouse, slack)
    dispatcher.log = context.log
    dispatcher.hold_run_failures = backfill_hold(context.instance)
    results = dispatcher.deliver_due()
    return SkipReason(_summary(results))


# Backfill states in which more runs may still fail (Dagster's BulkActionStatus values).
BACKFILL_IN_PROGRESS = frozenset({"REQUESTED", "CANCELING", "FAILING"})
# Runs tagged with a backfill the instance has no record of (`dagster job backfill` from
# the command line): their failures wait until none came for this long.
BACKFILL_QUIET_PERIOD = timedelta(minutes=10)
BACKFILL_TAG = "dagster/backfill"


def backfill_hold(instance, now: datetime | None = None) -> Callable[[Sequence[Alert]], bool]:
    """Hold the failures of a backfill while it runs, so they go out as one message."""

    def hold(group: Sequence[Alert]) -> bool:
        backfill_id = group[0].payload.get("backfill")
        if not backfill_id:
            return False
        backfill = instance.get_backfill(backfill_id)
        if backfill is not None:
            return backfill.status.value in BACKFILL_IN_PROGRESS
        newest = max((a.created_at for a in group if a.created_at), default=None)
        current = now or datetime.now(tz=UTC)
        return newest is not None and current - newest < BACKFILL_QUIET_PERIOD

    return hold


def failure_cause(context: RunFailureSensorContext) -> str:
    """The failing steps' errors (innermost cause: class and message), secrets redacted,
    cut to a readable length; the run's own error when no step failed."""
    causes = []
    for event in context.get_step_failure_events():
        error = event.step_failure_data.error
        while error is not None and error.cause is not None:
            error = error.cause
        if error is not None:
            causes.append(f"{event.step_key}: {error.message.strip()}")
    if not causes:
        error = getattr(context.failure_event.event_specific_data, "error", None)
        causes.append(
            error.message.strip() if error else context.failure_event.message or "run failed"
        )
    return shorten(redact_secrets("\n".join(causes)), 1000, one_line=False)


def _failure_partition(context: RunFailureSensorContext) -> date:
    tag = context.dagster_run.tags.get("dagster/partition")
    if tag:
        try:
            return date.fromisoformat(tag)
        except ValueError:
            pass
    return datetime.now(tz=UTC).date()


@run_failure_sensor(
    name="seer_run_failure_sensor",
    default_status=DefaultSensorStatus.RUNNING,
    description="Posts crashed Seer runs to Slack (through the seer_alerts outbox).",
)
def seer_run_failure_sensor(
    context: RunFailureSensorContext, warehouse: WarehouseResource, slack: SlackAlertResource
) -> None:
    run = context.dagster_run
    partition = _failure_partition(context)
    payload = {
        "rule": "run_failure",
        "slice": run.run_id,
        "status": "fail",
        "severity": "ERROR",
        "job": run.job_name,
        "run_id": run.run_id,
        "partition": run.tags.get("dagster/partition"),
        "backfill": run.tags.get(BACKFILL_TAG),
        "error": failure_cause(context),
    }
    try:
        dispatcher = dispatcher_for(warehouse, slack)
        dispatcher.log = context.log
        dispatcher.hold_run_failures = backfill_hold(context.instance)
        dispatcher.outbox.record(
            partition,
            KIND_RUN_FAILURE,
            [("run_failure", run.run_id, "ERROR", payload)],
            run.run_id,
        )
        result = dispatcher.deliver(partition, KIND_RUN_FAILURE)
        context.log.info(f"run failure of {run.run_id}: {_summary([result])}")
    except Exception as error:  # the warehouse may be why the run crashed: post directly
        context.log.warning(f"outbox unavailable ({error!r}); posting the run failure directly")
        alert = Alert(
            id=0,
            partition_date=partition,
            kind=KIND_RUN_FAILURE,
            rule="run_failure",
            slice=run.run_id,
            severity="ERROR",
            state="pending",
            fingerprint="",
            payload=payload,
            run_id=run.run_id,
        )
        slack.send(build_run_failure_message([alert], slack.resolved_dagster_url()))


def latest_materialized_partition(instance, asset_key: AssetKey) -> str | None:
    partitions = instance.get_materialized_partitions(asset_key)
    return max(partitions) if partitions else None


def is_materialized(instance, asset_key: AssetKey, partition: str) -> bool:
    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=asset_key, asset_partitions=[partition]), limit=1
    )
    return bool(records.records)


# The name Dagster gives the check `build_time_partition_freshness_checks` builds.
FRESHNESS_CHECK_NAME = "freshness_check"
FRESHNESS_CHECK_KEY = AssetCheckKey(SLICE_METRICS_ASSET, FRESHNESS_CHECK_NAME)
_LATEST_CRON_TICK = "dagster/latest_cron_tick_timestamp"


def build_freshness_checks(
    deadline: time, asset_key: AssetKey = SLICE_METRICS_ASSET
) -> list[AssetChecksDefinition]:
    """Dagster's time-partition freshness check: the partition of the last complete UTC
    day exists once `deadline` (UTC) passed.

    Dagster marks these factories superseded by `FreshnessPolicy`; that policy judges the
    latest materialization of any partition (a backfill of an old day would look fresh)
    and produces no check result to deliver, so the per-day check is the one that fits.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SupersessionWarning)
        return list(
            build_time_partition_freshness_checks(
                assets=[asset_key],
                deadline_cron=f"{deadline.minute} {deadline.hour} * * *",
                timezone="UTC",
                severity=AssetCheckSeverity.ERROR,
            )
        )


def build_freshness_checks_sensor(checks: Sequence[AssetChecksDefinition]):
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
        "deadline": f"{freshness_deadline():%H:%M} UTC",
        "expected_partition": day.isoformat(),
        "latest_partition": latest_materialized_partition(instance, asset_key),
        "check": check_key.to_user_string(),
    }
    outbox.record(
        day, KIND_FRESHNESS, [("freshness", asset_name, "ERROR", payload)], completed.run_id
    )
    result = dispatcher.deliver(day, KIND_FRESHNESS)
    status = f"{asset_name} {day} is late: {_summary([result])}"
    in_flight = summary.last_check_execution_record is not None and (
        summary.last_check_execution_record.run_id != completed.run_id
    )
    if not in_flight and is_materialized(instance, asset_key, day.isoformat()):
        return RunRequest(
            run_key=f"freshness-recheck-{completed.run_id}", asset_check_keys=[check_key]
        )
    return SkipReason(status)


FRESHNESS_CHECKS = build_freshness_checks(freshness_deadline())
seer_freshness_checks_sensor = build_freshness_checks_sensor(FRESHNESS_CHECKS)


@sensor(
    name="seer_freshness_sensor",
    minimum_interval_seconds=FRESHNESS_INTERVAL_SECONDS,
    default_status=DefaultSensorStatus.RUNNING,
    description="Posts a failing freshness check of slice_metrics (yesterday's partition "
    "missing at $SEER_FRESHNESS_DEADLINE, HH:MM UTC, default 06:00) to Slack once, resolves "
    "it when the check passes, and re-runs the check once the late partition lands.",
)
def seer_freshness_sensor(
    context: SensorEvaluationContext, warehouse: WarehouseResource, slack: SlackAlertResource
) -> RunRequest | SkipReason:
    dispatcher = dispatcher_for(warehouse, slack)
    dispatcher.log = context.log
    return deliver_freshness(context.instance, dispatcher)


SENSORS = [
    seer_pending_alerts_sensor,
    seer_run_failure_sensor,
    seer_freshness_sensor,
    seer_freshness_checks_sensor,
]
