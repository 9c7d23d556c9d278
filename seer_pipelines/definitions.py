"""The Seer code location: `dagster dev -w workspace.yaml` loads `defs` from here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dagster import (
    AssetsDefinition,
    AssetSelection,
    AssetSpec,
    DagsterInvalidDefinitionError,
    Definitions,
    build_schedule_from_partitioned_job,
    define_asset_job,
    map_asset_specs,
)

from seer_pipelines.accounting import rows_accounted_for
from seer_pipelines.alerts import SlackAlertResource
from seer_pipelines.assets.events import retrieval_events
from seer_pipelines.assets.judgments import event_judgments
from seer_pipelines.assets.metrics import event_metrics, passage_judgments, slice_metrics_asset
from seer_pipelines.batch_sensor import seer_batch_sensor
from seer_pipelines.budget_check import budget
from seer_pipelines.checks import build_slice_checks
from seer_pipelines.instance import EVALUATOR_TAG
from seer_pipelines.resources import EvaluatorResource, WarehouseResource
from seer_pipelines.sensors import FRESHNESS_CHECKS
from seer_pipelines.sensors import SENSORS as ALERT_SENSORS
from seer_pipelines.settings import load_settings, number_setting, secret, setting

# Hour (UTC) at which yesterday's partition is processed: late enough for late events.
SCHEDULE_HOUR_UTC = load_settings().schedule_hour_utc

OWNERS_ENV = "SEER_ASSET_OWNERS"
TAGS_ENV = "SEER_ASSET_TAGS"


def configured_owners(value: str | None) -> list[str]:
    """Owners from $SEER_ASSET_OWNERS: comma-separated emails or `team:` names."""
    owners = (owner.strip() for owner in (value or "").split(","))
    return list(dict.fromkeys(owner for owner in owners if owner))


def configured_tags(value: str | None) -> dict[str, str]:
    """Tags from $SEER_ASSET_TAGS: comma-separated `key=value` or bare `key` (a label with
    an empty value), e.g. `domain=search,tier=1,pii`."""
    tags: dict[str, str] = {}
    for item in (value or "").split(","):
        key, _, tag_value = item.partition("=")
        if key.strip():
            tags[key.strip()] = tag_value.strip()
    return tags


def with_owners_and_tags(
    assets: Sequence[AssetsDefinition | AssetSpec], owners: Sequence[str], tags: Mapping[str, str]
) -> list[AssetsDefinition | AssetSpec]:
    """Every asset with the configured owners and tags added (the catalog filters on them)."""
    if not owners and not tags:
        return list(assets)
    try:
        return list(
            map_asset_specs(
                lambda spec: spec.merge_attributes(owners=list(owners), tags=dict(tags)), assets
            )
        )
    except DagsterInvalidDefinitionError as error:
        raise ValueError(
            f"{OWNERS_ENV} / {TAGS_ENV}: {error} (owners: an email or team:name; tags: "
            "key=value with letters, digits, '-', '_' and '.')"
        ) from None


ASSETS = with_owners_and_tags(
    [retrieval_events, event_judgments, event_metrics, passage_judgments, slice_metrics_asset],
    configured_owners(setting(OWNERS_ENV)),
    configured_tags(setting(TAGS_ENV)),
)


def evaluator_kind() -> str:
    return EvaluatorResource().resolved_kind()


def judging_limits() -> dict[str, object]:
    """Sampling and budget of the judging step: $SEER_SAMPLE_SIZE (unset: every event),
    $SEER_SAMPLE_MIN_PER_SLICE (30), $SEER_BUDGET_USD and $SEER_BUDGET_TOKENS (unset: no
    cap), stratified by the slice keys ($SEER_SLICE_KEYS)."""
    keys = [key.strip() for key in (setting("SEER_SLICE_KEYS") or "").split(",")]
    limits = {
        "sample_size": number_setting("SEER_SAMPLE_SIZE", int),
        "sample_minimum_per_slice": number_setting("SEER_SAMPLE_MIN_PER_SLICE", int),
        "sample_slice_keys": [key for key in keys if key] or None,
        "budget_usd": number_setting("SEER_BUDGET_USD", float),
        "budget_tokens": number_setting("SEER_BUDGET_TOKENS", int),
    }
    return {name: value for name, value in limits.items() if value is not None}


def build_resources() -> dict[str, object]:
    """Resources from the settings; the secrets are EnvVars, so Dagster never shows them.

    Settings left out here (the warehouse URL, the Slack channel, ...) are read from the
    settings when the resource is used, after any Dagster config given for the run.
    """
    return {
        "warehouse": WarehouseResource(),
        "evaluator": EvaluatorResource(api_key=secret("OPENAI_API_KEY"), **judging_limits()),
        "slack": SlackAlertResource(token=secret("SLACK_BOT_TOKEN")),
    }


# Every run of this job is tagged with the evaluator kind, so the run queue's tag
# concurrency limit (dagster.yaml) keeps backfills with a paid judge under its rate limit.
seer_daily_job = define_asset_job(
    name="seer_daily_job",
    # The source is observed first: the day's row count is recorded before any judging.
    # The freshness check is about the newest day, not the run's: its own sensors run it.
    selection=AssetSelection.assets(
        retrieval_events, event_judgments, event_metrics, passage_judgments, slice_metrics_asset
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

# Asset checks, sensors and the Slack resource of the alerting side are added here.
# One check per rule of seer_rules.yaml ($SEER_RULES_FILE); see docs/alerts.md.
ASSET_CHECKS: list = [build_slice_checks(), rows_accounted_for, budget, *FRESHNESS_CHECKS]
SENSORS: list = [*ALERT_SENSORS, seer_batch_sensor]

defs = Definitions(
    assets=ASSETS,
    asset_checks=ASSET_CHECKS,
    jobs=[seer_daily_job],
    schedules=[seer_daily_schedule],
    sensors=SENSORS,
    resources=build_resources(),
)
