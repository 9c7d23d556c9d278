"""The daily job and its schedule."""

from __future__ import annotations

from dagster import AssetSelection, build_schedule_from_partitioned_job, define_asset_job

from seer_pipelines.defs.assets.events import retrieval_events
from seer_pipelines.defs.assets.judgments import event_judgments
from seer_pipelines.defs.assets.metrics import event_metrics, passage_judgments, slice_metrics
from seer_pipelines.defs.checks.freshness import FRESHNESS_CHECKS
from seer_pipelines.defs.resources.evaluator import EvaluatorResource
from seer_pipelines.judging import EVALUATOR_TAG
from seer_pipelines.settings import load_settings

# Hour (UTC) at which yesterday's partition is processed: late enough for late events.
SCHEDULE_HOUR_UTC = load_settings().schedule_hour_utc


def evaluator_kind() -> str:
    return EvaluatorResource().resolved_kind()


# Every run of this job is tagged with the evaluator kind, so the run queue's tag
# concurrency limit (dagster.yaml) keeps backfills with a paid judge under its rate limit.
seer_daily_job = define_asset_job(
    name="seer_daily_job",
    # The source is observed first: the day's row count is recorded before any judging.
    # The freshness check is about the newest day, not the run's: its own sensors run it.
    selection=AssetSelection.assets(
        retrieval_events, event_judgments, event_metrics, passage_judgments, slice_metrics
    )
    - AssetSelection.checks(*FRESHNESS_CHECKS),
    tags={EVALUATOR_TAG: evaluator_kind()},
    description="One day: observe the source, judge the events, score them, aggregate per "
    "slice, run the checks.",
)

# Yesterday's partition (the last complete UTC day), every day at SCHEDULE_HOUR_UTC.
seer_daily_schedule = build_schedule_from_partitioned_job(
    seer_daily_job, name="seer_daily_schedule", hour_of_day=SCHEDULE_HOUR_UTC
)
