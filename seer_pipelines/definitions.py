"""The Seer code location: `dagster dev -w workspace.yaml` loads `defs` from here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dagster import (
    AssetsDefinition,
    AssetSpec,
    DagsterInvalidDefinitionError,
    Definitions,
    map_asset_specs,
)

from seer_pipelines.alerts import SlackAlertResource
from seer_pipelines.defs.assets.events import retrieval_events
from seer_pipelines.defs.assets.judgments import event_judgments
from seer_pipelines.defs.assets.metrics import event_metrics, passage_judgments, slice_metrics
from seer_pipelines.defs.checks.accounting import rows_accounted_for
from seer_pipelines.defs.checks.budget import budget_check
from seer_pipelines.defs.checks.freshness import FRESHNESS_CHECKS
from seer_pipelines.defs.checks.slice_rules import build_slice_checks
from seer_pipelines.defs.jobs import seer_daily_job, seer_daily_schedule
from seer_pipelines.defs.resources.evaluator import EvaluatorResource
from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.defs.sensors.alerts import seer_pending_alerts_sensor, seer_run_failure_sensor
from seer_pipelines.defs.sensors.batches import seer_batch_sensor
from seer_pipelines.defs.sensors.freshness import (
    seer_freshness_checks_sensor,
    seer_freshness_sensor,
)
from seer_pipelines.settings import number_setting, secret, setting

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
    [retrieval_events, event_judgments, event_metrics, passage_judgments, slice_metrics],
    configured_owners(setting(OWNERS_ENV)),
    configured_tags(setting(TAGS_ENV)),
)


def sampling_and_budget() -> dict[str, object]:
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
        "evaluator": EvaluatorResource(api_key=secret("OPENAI_API_KEY"), **sampling_and_budget()),
        "slack": SlackAlertResource(token=secret("SLACK_BOT_TOKEN")),
    }


# Asset checks, sensors and the Slack resource of the alerting side are added here.
# One check per rule of seer_rules.yaml ($SEER_RULES_FILE); see docs/alerts.md.
ASSET_CHECKS: list = [build_slice_checks(), rows_accounted_for, budget_check, *FRESHNESS_CHECKS]
SENSORS: list = [
    seer_pending_alerts_sensor,
    seer_run_failure_sensor,
    seer_freshness_sensor,
    seer_freshness_checks_sensor,
    seer_batch_sensor,
]

defs = Definitions(
    assets=ASSETS,
    asset_checks=ASSET_CHECKS,
    jobs=[seer_daily_job],
    schedules=[seer_daily_schedule],
    sensors=SENSORS,
    resources=build_resources(),
)
