"""The `budget` check: a day whose budget stopped the judging fails, with WARN.

The events the budget left unjudged are stored as `skipped_budget` (never missing), and
the day's slice figures are estimated from the events judged before the cap; the check
makes that visible on the day instead of leaving it to the metadata.
"""

from typing import Any

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    DailyPartitionsDefinition,
)

from seer_pipelines.defs.assets.judgments import EVENT_JUDGMENTS_KEY
from seer_pipelines.defs.assets.metadata_display import display_metadata
from seer_pipelines.defs.checks.accounting import judging_figures
from seer_pipelines.defs.partitions import daily_asset_check


def budget_result(day: str, judged: dict[str, Any] | None) -> AssetCheckResult:
    """The check result for a day, from the figures `event_judgments` reported."""
    if judged is None:
        return AssetCheckResult(
            passed=True,
            description=f"{day}: not judged yet (nothing spent)",
        )
    skipped = int(judged.get("skipped_budget") or 0)
    figures = {
        "skipped_budget": skipped,
        "budget": str(judged.get("budget") or "no cap"),
        "estimated_cost_usd": float(judged.get("estimated_cost_usd") or 0.0),
        "tokens": int(judged.get("tokens") or 0),
    }
    if skipped:
        return AssetCheckResult(
            passed=False,
            severity=AssetCheckSeverity.WARN,
            description=(
                f"{day}: the budget ({figures['budget']}) stopped the judging; {skipped} "
                "events are stored as skipped_budget and the day's slices rest on the events "
                "judged before it. Raise SEER_BUDGET_USD / SEER_BUDGET_TOKENS or lower "
                "SEER_SAMPLE_SIZE, then re-run the day (judged events are cached)."
            ),
            metadata=display_metadata(figures),
        )
    return AssetCheckResult(
        passed=True,
        description=f"{day}: every event to judge was judged within the budget "
        f"({figures['budget']})",
        metadata=display_metadata(figures),
    )


def define_budget_check(partitions: DailyPartitionsDefinition) -> AssetChecksDefinition:
    """The `budget` check of `event_judgments`, one result per day of `partitions`."""

    @daily_asset_check(
        asset=EVENT_JUDGMENTS_KEY,
        name="budget",
        description=(
            "WARN when the day's budget (SEER_BUDGET_USD, SEER_BUDGET_TOKENS) stopped the "
            "judging and events were stored as skipped_budget."
        ),
        partitions_def=partitions,
    )
    def budget_check(context: AssetCheckExecutionContext) -> AssetCheckResult:
        return budget_result(
            context.partition_key, judging_figures(context.instance, context.partition_key)
        )

    return budget_check
