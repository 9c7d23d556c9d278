"""`seer_batch_sensor`: follows the LLM judge's batches and runs a day once they are done.

Each tick reads the days of `seer_batches` with a batch not yet collected, asks the
provider where each running batch stands (and records it, so the table shows live
states), and requests the day's run of `seer_daily_job` when all of that day's batches
have finished. The run key names the batches, so each set of finished batches launches
one run: that run collects them and either submits the next phase (a later tick launches
the day again) or completes the day.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

from dagster import (
    DefaultSensorStatus,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from seer_metrics.text.redaction import errors_redacted
from seer_pipelines.defs.jobs import DAILY_JOB_NAME
from seer_pipelines.defs.resources.evaluator import EvaluatorResource
from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.judging.batch_ledger import batch_judge, ledger_for

# A batch takes minutes to hours: polling every five minutes costs nothing and adds little.
BATCH_POLL_INTERVAL_SECONDS = 300


@sensor(
    job_name=DAILY_JOB_NAME,
    minimum_interval_seconds=BATCH_POLL_INTERVAL_SECONDS,
    default_status=DefaultSensorStatus.RUNNING,
    description="Polls the LLM judge's batches (seer_batches) and runs a day's partition "
    "when all its batches have finished; idle unless SEER_LLM_MODE=batch.",
)
def seer_batch_sensor(
    context: SensorEvaluationContext,
    warehouse: WarehouseResource,
    evaluator: EvaluatorResource,
) -> SensorResult | SkipReason:
    with errors_redacted():  # a provider's error may echo the key: the tick keeps it
        return _follow_batches(context, warehouse, evaluator)


def _follow_batches(
    context: SensorEvaluationContext,
    warehouse: WarehouseResource,
    evaluator: EvaluatorResource,
) -> SensorResult | SkipReason:
    ledger = ledger_for(warehouse)
    days = ledger.days_to_follow()
    if not days:
        return SkipReason("no batch to follow")
    judge = batch_judge(warehouse, evaluator)
    requests: list[RunRequest] = []
    waiting: list[str] = []
    for day, records in days.items():
        current = [record if record.finished else judge.refresh(record) for record in records]
        ledger.save(day, current)
        running = [record for record in current if not record.finished]
        if running:
            states = ", ".join(f"{r.phase} {r.batch_id} {r.status}" for r in running)
            waiting.append(f"{day}: {states}")
            continue
        requests.append(
            RunRequest(
                partition_key=day.isoformat(),
                run_key=_run_key(day.isoformat(), (r.batch_id for r in current)),
                tags={"seer/batches": "collect"},
            )
        )
    for line in waiting:
        context.log.info(f"waiting for batches of {line}")
    if not requests:
        return SkipReason(f"{len(waiting)} day(s) waiting for their batches")
    return SensorResult(run_requests=requests)


def _run_key(partition: str, batch_ids: Iterator[str]) -> str:
    digest = hashlib.sha256("\n".join(sorted(batch_ids)).encode()).hexdigest()[:16]
    return f"seer-batches-{partition}-{digest}"
