"""The Seer code location, built from one `Settings` object.

`build_definitions(settings)` builds every Dagster object from the settings it is given
(partitions, assets, checks, job, schedule, sensors, resources), so two code locations
with different settings can live in one process. `defs` is the one Dagster, `dg` and the
code server load: the settings of this process's environment.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, fields

from dagster import (
    AssetsDefinition,
    AssetSpec,
    DagsterInvalidDefinitionError,
    Definitions,
    map_asset_specs,
)

from seer_metrics.rules import RulesConfig, load_rules_config
from seer_pipelines.alerts import SlackAlertResource
from seer_pipelines.defs.assets.events import define_retrieval_events
from seer_pipelines.defs.assets.judgments import define_event_judgments
from seer_pipelines.defs.assets.metrics import (
    SliceDefaults,
    define_event_metrics,
    define_passage_judgments,
    define_slice_metrics,
)
from seer_pipelines.defs.checks.accounting import define_rows_accounted_for
from seer_pipelines.defs.checks.budget import define_budget_check
from seer_pipelines.defs.checks.freshness import build_freshness_checks
from seer_pipelines.defs.checks.slice_rules import build_slice_checks
from seer_pipelines.defs.jobs import define_daily_job, define_daily_schedule
from seer_pipelines.defs.partitions import daily_partitions
from seer_pipelines.defs.resources.evaluator import EvaluatorResource
from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.defs.sensors.alerts import seer_pending_alerts_sensor, seer_run_failure_sensor
from seer_pipelines.defs.sensors.batches import seer_batch_sensor
from seer_pipelines.defs.sensors.freshness import (
    build_freshness_checks_sensor,
    define_freshness_sensor,
)
from seer_pipelines.settings import Settings, load_settings


@dataclass(frozen=True)
class SeerAssets:
    """The five assets of one code location, in the order a day flows through them."""

    retrieval_events: AssetsDefinition
    event_judgments: AssetsDefinition
    event_metrics: AssetsDefinition
    passage_judgments: AssetsDefinition
    slice_metrics: AssetsDefinition

    def __iter__(self) -> Iterator[AssetsDefinition]:
        return iter([getattr(self, field.name) for field in fields(self)])


def define_assets(settings: Settings, rules: RulesConfig | None = None) -> SeerAssets:
    """The assets on the daily partitions from `settings.start_date`; `slice_metrics`
    slices by the settings' keys and bloat line, pairs down to the rules' minimum sample."""
    rules = rules if rules is not None else load_rules_config(settings.rules_file)
    partitions = daily_partitions(settings.start_date)
    slicing = SliceDefaults.of(settings, rules)
    return SeerAssets(
        retrieval_events=define_retrieval_events(partitions),
        event_judgments=define_event_judgments(partitions),
        event_metrics=define_event_metrics(partitions),
        passage_judgments=define_passage_judgments(partitions),
        slice_metrics=define_slice_metrics(partitions, slicing),
    )


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
            f"SEER_ASSET_OWNERS / SEER_ASSET_TAGS: {error} (owners: an email or team:name; "
            "tags: key=value with letters, digits, '-', '_' and '.')"
        ) from None


def sampling_and_budget(settings: Settings) -> dict[str, object]:
    """Sampling and budget of the judging step (unset: every event, no cap), stratified by
    the slice keys."""
    limits = {
        "sample_size": settings.sample_size,
        "sample_minimum_per_slice": settings.sample_minimum_per_slice,
        "sample_slice_keys": list(settings.slice_keys),
        "budget_usd": settings.budget_usd,
        "budget_tokens": settings.budget_tokens,
    }
    return {name: value for name, value in limits.items() if value is not None}


def build_resources(settings: Settings) -> dict[str, object]:
    """Resources from the settings; the secrets are EnvVars, so Dagster never shows them.

    Settings left out here (the warehouse URL, the Slack channel, ...) are read by the
    resource when it is used, after any Dagster config given for the run.
    """
    return {
        "warehouse": WarehouseResource(),
        "evaluator": EvaluatorResource(
            api_key=settings.secret("OPENAI_API_KEY"), **sampling_and_budget(settings)
        ),
        "slack": SlackAlertResource(token=settings.secret("SLACK_BOT_TOKEN")),
    }


def build_definitions(settings: Settings) -> Definitions:
    """Everything the code location holds, from `settings` alone (no environment read)."""
    rules = load_rules_config(settings.rules_file)
    assets = define_assets(settings, rules)
    partitions = assets.event_judgments.partitions_def
    freshness_checks = build_freshness_checks(settings.freshness_deadline)
    job = define_daily_job(list(assets), freshness_checks, settings.evaluator)
    return Definitions(
        assets=with_owners_and_tags(list(assets), settings.asset_owners, settings.asset_tags),
        # One check per rule of the rules file (docs/alerts.md), the accounting and budget
        # checks, and the freshness check its own sensors run.
        asset_checks=[
            build_slice_checks(rules, partitions),
            define_rows_accounted_for(partitions),
            define_budget_check(partitions),
            *freshness_checks,
        ],
        jobs=[job],
        schedules=[define_daily_schedule(job, settings.schedule_hour_utc)],
        sensors=[
            seer_pending_alerts_sensor,
            seer_run_failure_sensor,
            define_freshness_sensor(settings.freshness_deadline),
            build_freshness_checks_sensor(freshness_checks),
            seer_batch_sensor,
        ],
        resources=build_resources(settings),
    )


defs = build_definitions(load_settings())
