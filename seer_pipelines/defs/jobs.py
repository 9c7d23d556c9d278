"""The daily job and its schedule."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from dagster import (
    AssetChecksDefinition,
    AssetsDefinition,
    AssetSelection,
    ScheduleDefinition,
    build_schedule_from_partitioned_job,
    define_asset_job,
)

from seer_pipelines.judging import EVALUATOR_TAG

if TYPE_CHECKING:  # what `define_asset_job` returns; Dagster does not export the name
    from dagster._core.definitions.unresolved_asset_job_definition import (
        UnresolvedAssetJobDefinition,
    )

DAILY_JOB_NAME = "seer_daily_job"


def define_daily_job(
    assets: Sequence[AssetsDefinition],
    freshness_checks: Sequence[AssetChecksDefinition],
    evaluator_kind: str,
) -> UnresolvedAssetJobDefinition:
    """One day of `assets`, their checks but the freshness check (about the newest day,
    not the run's: its own sensors run it), tagged with the evaluator kind so the run
    queue's tag limit (dagster.yaml) keeps backfills with a paid judge under its rate
    limit."""
    return define_asset_job(
        name=DAILY_JOB_NAME,
        # The source is observed first: the day's row count is recorded before any judging.
        selection=AssetSelection.assets(*assets) - AssetSelection.checks(*freshness_checks),
        tags={EVALUATOR_TAG: evaluator_kind},
        description="One day: observe the source, judge the events, score them, aggregate per "
        "slice, run the checks.",
    )


def define_daily_schedule(
    job: UnresolvedAssetJobDefinition, hour_of_day_utc: int
) -> ScheduleDefinition:
    """Yesterday's partition (the last complete UTC day), every day at `hour_of_day_utc`:
    late enough for late events."""
    return build_schedule_from_partitioned_job(
        job, name="seer_daily_schedule", hour_of_day=hour_of_day_utc
    )
