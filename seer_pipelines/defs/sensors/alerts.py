"""Operational alerts: pending-alert retries and crashed runs (late partitions:
`seer_pipelines.defs.sensors.freshness`).

- `seer_pending_alerts_sensor` delivers outbox rows left `pending` (Slack down, rate
  limited, bad token) every few minutes, honouring Slack's Retry-After.
- `seer_run_failure_sensor` posts crashed runs with the failing step's error (class and
  message, secrets redacted). A failed check does not fail a run (it is alerted by the
  checks themselves, see `seer_pipelines.defs.checks.slice_rules`); this one is for runs
  that crash. The failures of a backfill are held while it runs and go out as ONE message
  listing the days.
Every alert goes through the same `seer_alerts` outbox, so none is lost or posted twice;
if the warehouse itself is unreachable, a crashed run is posted directly.
"""

from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime, timedelta

from dagster import (
    DefaultSensorStatus,
    RunFailureSensorContext,
    SensorEvaluationContext,
    SkipReason,
    run_failure_sensor,
    sensor,
)

from seer_metrics.text.redaction import error_text, redact_secrets, shorten
from seer_pipelines.alerts import (
    KIND_RUN_FAILURE,
    Alert,
    SlackAlertResource,
    build_run_failure_message,
)
from seer_pipelines.defs.checks.slice_rules import dispatcher_for
from seer_pipelines.defs.resources.warehouse import WarehouseResource

PENDING_ALERTS_INTERVAL_SECONDS = 300


def delivery_summary(results) -> str:
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
    return SkipReason(delivery_summary(results))


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
        context.log.info(f"run failure of {run.run_id}: {delivery_summary([result])}")
    except Exception as error:  # the warehouse may be why the run crashed: post directly
        context.log.warning(
            f"outbox unavailable ({error_text(error)}); posting the run failure directly"
        )
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
