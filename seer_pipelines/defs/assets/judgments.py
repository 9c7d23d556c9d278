"""`event_judgments`: one day's events, parsed, judged (through the cache) and stored
(`seer_pipelines.judging.partition` does the judging)."""

from collections.abc import Iterator

from dagster import (
    AssetExecutionContext,
    AssetKey,
    AssetsDefinition,
    BackfillPolicy,
    Config,
    DailyPartitionsDefinition,
    MaterializeResult,
    asset,
)
from pydantic import Field

from seer_metrics.text.redaction import errors_redacted
from seer_pipelines.defs.assets.events import GROUP_NAME, RETRIEVAL_EVENTS_KEY
from seer_pipelines.defs.assets.table_schemas import table_metadata
from seer_pipelines.defs.resources.evaluator import EvaluatorResource
from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.judging.partition import DEFAULT_MAX_ERROR_SHARE, judge_day
from seer_pipelines.warehouse.schema import JUDGMENTS_TABLE

# Evaluator-heavy steps share this pool; `dagster instance concurrency set seer_evaluator N`
# (or dagster.yaml `concurrency.pools`) caps how many judge at once across all runs.
EVALUATOR_POOL = "seer_evaluator"
EVENT_JUDGMENTS_KEY = AssetKey("event_judgments")


class EventJudgmentsConfig(Config):
    max_error_share: float = Field(
        default=DEFAULT_MAX_ERROR_SHARE,
        ge=0.0,
        le=1.0,
        description="Fail the step, keeping the day's previous rows, when more than this "
        "share of the judged events ends in error (the judge is failing).",
    )


def define_event_judgments(partitions: DailyPartitionsDefinition) -> AssetsDefinition:
    """`event_judgments` on `partitions`."""

    @asset(
        key=EVENT_JUDGMENTS_KEY,
        partitions_def=partitions,
        deps=[RETRIEVAL_EVENTS_KEY],
        group_name=GROUP_NAME,
        kinds={"sql", "python"},
        pool=EVALUATOR_POOL,
        backfill_policy=BackfillPolicy.multi_run(1),
        # In batch mode a run that only submits or waits for batches yields nothing.
        output_required=False,
        description=(
            "One row per ingested event: its status (ok, invalid, error), the evaluator's "
            "requirements and supporting passages, and the model usage. Judgments are cached "
            "by content hash, so a re-run makes no model call."
        ),
        metadata=table_metadata(JUDGMENTS_TABLE),
    )
    def event_judgments(
        context: AssetExecutionContext,
        config: EventJudgmentsConfig,
        warehouse: WarehouseResource,
        evaluator: EvaluatorResource,
    ) -> Iterator[MaterializeResult]:
        # Its errors go to the event log and the run-failure alert: secrets hidden first.
        with errors_redacted():
            yield from judge_day(context, warehouse, evaluator, config.max_error_share)

    return event_judgments
