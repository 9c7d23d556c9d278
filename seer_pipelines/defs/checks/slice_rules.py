"""Asset checks on `slice_metrics`: one check per rule of the rules file, per day.

All rules run in one op (`seer_slice_checks`) because they read the same rows: the
partition's slice table and the trailing days for baselines. The op then records the
failing outcomes in the `seer_alerts` outbox and posts ONE Slack message for the
partition. Alerting problems (Slack down, bad token) are logged and kept pending; they
never fail the checks or the metrics.
"""

import warnings
from collections.abc import Iterator, Sequence
from datetime import date, timedelta
from typing import Any

import pandas as pd
from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetKey,
    MetadataValue,
    PartitionsDefinition,
    PreviewWarning,
    multi_asset_check,
)

from seer_metrics.rules import (
    DEFAULT_CLOSE_AFTER_PASSES,
    CheckOutcome,
    RulesConfig,
    evaluate_rules,
)
from seer_pipelines.alerts import (
    AlertDispatcher,
    AlertOutbox,
    DayAlerts,
    IncidentStore,
    SlackAlertResource,
    top_missing_requirements,
)
from seer_pipelines.defs.assets.metadata_display import display_metadata, markdown_cell
from seer_pipelines.defs.assets.metrics import SLICE_METRICS_KEY
from seer_pipelines.defs.partitions import partition_day
from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.warehouse.schema import EVENT_METRICS_TABLE, SLICE_METRICS_TABLE

SEVERITY = {"WARN": AssetCheckSeverity.WARN, "ERROR": AssetCheckSeverity.ERROR}


def _number(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def outcomes_markdown(outcomes: Sequence[CheckOutcome]) -> str:
    """Every slice the rule looked at, failing first."""
    order = {"fail": 0, "no_baseline": 1, "not_enough_data": 2, "pass": 3}
    lines = [
        "| slice | status | severity | observed | threshold | baseline | delta | events |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for o in sorted(outcomes, key=lambda o: (order[o.status], o.slice)):
        lines.append(
            f"| {markdown_cell(o.slice)} | {o.status} | {o.severity} | {_number(o.observed)} | "
            f"{o.threshold:g} | {_number(o.baseline)} | {_number(o.delta)} | {o.sample_size} |"
        )
    return "\n".join(lines)


def check_result_metadata(rule_name: str, outcomes: Sequence[CheckOutcome]) -> dict[str, Any]:
    """Failing slices (JSON and markdown), counts, and flat numeric keys per slice."""
    failing = [o for o in outcomes if o.failed]
    metadata: dict[str, Any] = {
        "rule": rule_name,
        "slices_checked": len(outcomes),
        "slices_failing": len(failing),
        "slices_not_enough_data": sum(o.status == "not_enough_data" for o in outcomes),
        "slices_no_baseline": sum(o.status == "no_baseline" for o in outcomes),
        "failing_slices": MetadataValue.json([o.to_dict() for o in failing]),
        "slices": MetadataValue.md(outcomes_markdown(outcomes) if outcomes else "no slices"),
    }
    judge_notes = sorted({o.judge_note for o in outcomes if o.judge_note})
    if judge_notes:
        metadata["judge_change"] = "; ".join(judge_notes)
    for o in outcomes:
        if o.observed is not None:
            metadata[f"observed/{o.slice}"] = float(o.observed)
        if o.delta is not None:
            metadata[f"delta/{o.slice}"] = float(o.delta)
        if o.baseline is not None:
            metadata[f"baseline/{o.slice}"] = float(o.baseline)
        metadata[f"events/{o.slice}"] = int(o.sample_size)
    return metadata


def read_slice_rows(
    warehouse: WarehouseResource, day: date, history_days: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the day's slice rows, the `history_days` before it) from `seer_slice_metrics`."""
    warehouse.ensure_output_tables()
    today = warehouse.read_partition_frame(SLICE_METRICS_TABLE, day)
    if history_days > 0:
        history = warehouse.read_table_range(
            SLICE_METRICS_TABLE, day - timedelta(days=history_days), day - timedelta(days=1)
        )
    else:
        history = today.iloc[0:0]
    for frame in (today, history):
        if len(frame):
            frame["partition_date"] = frame["partition_date"].astype(str).str.slice(0, 10)
    return today, history


def examples_provider(warehouse: WarehouseResource):
    """Top missing requirements of failing slices, read from `seer_event_metrics`."""

    def provide(day: date, slices: Sequence[str]) -> dict[str, list[tuple[str, int]]]:
        chunks = warehouse.read_partition(
            EVENT_METRICS_TABLE,
            day,
            columns=["event_id", "status", "missing_requirements", "metadata"],
        )
        return top_missing_requirements(chunks, slices)

    return provide


def dispatcher_for(
    warehouse: WarehouseResource,
    slack: SlackAlertResource,
    close_after_passes: int = DEFAULT_CLOSE_AFTER_PASSES,
    incidents: IncidentStore | None = None,
) -> AlertDispatcher:
    """The dispatcher of the warehouse's outbox; `close_after_passes` is the rules' count
    of consecutive clear passes that close an incident; `incidents` a store the caller
    already opened (the checks read the baseline exclusions from it first)."""
    engine, schema = warehouse.get_engine(), warehouse.resolved_schema()
    return AlertDispatcher(
        AlertOutbox(engine, schema),
        slack,
        examples_provider(warehouse),
        incidents=incidents or IncidentStore(engine, schema, close_after_passes),
    )


def _slices(keys: Sequence[str]) -> str:
    shown = ", ".join(keys[:5])
    return shown + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")


def alert_metadata(rule_name: str, day_alerts: DayAlerts | None, error: str | None) -> dict:
    """What this check's alerting did on the day (not what the whole day's message did)."""
    if day_alerts is None:
        return {"alerts": f"alerting failed: {error}; the check results stand"}
    changes = day_alerts.incidents
    paged = sorted(label for rule, label in day_alerts.paged if rule == rule_name)
    parts: list[str] = []
    delivery = day_alerts.delivery
    if paged:
        where = f"{len(paged)} slice(s) ({_slices(paged)}) in the {day_alerts.partition_date} alert"
        if not delivery.delivered:
            parts.append(f"{where}, pending: {delivery.error}; retried by the next run")
        elif delivery.alerts:
            parts.append(f"alerted: {where}, sent to {delivery.destination}")
        else:
            parts.append(f"already alerted: {where}; unchanged, not posted again")
    metadata: dict[str, Any] = {}
    if changes is not None:
        still_open = [i for i in changes.levels.still_open if i.rule == rule_name]
        carried = sorted(i.slice for i in changes.levels.carried if i.rule == rule_name)
        closed = [i for i in changes.closed if i.rule == rule_name]
        if carried:
            parts.append(f"incident still open on {_slices(carried)}; no new page")
        if closed:
            state = "posted" if day_alerts.recoveries.delivered else "pending"
            parts.append(
                f"recovered on {_slices(sorted(i.slice for i in closed))}: "
                f"reply in the alert's thread {state}"
            )
        metadata["incidents_open"] = MetadataValue.json(
            [{"slice": i.slice, "opened_on": i.opened_on.isoformat()} for i in still_open]
        )
        metadata["incidents_closed"] = MetadataValue.json([i.to_dict() for i in closed])
    metadata["alerts"] = "; ".join(parts) or "nothing to alert"
    return metadata


def _check_specs(
    rules: RulesConfig, partitions_def: PartitionsDefinition, asset_key: AssetKey
) -> list[AssetCheckSpec]:
    return [
        AssetCheckSpec(
            name=rule.name,
            asset=asset_key,
            description=rule.description or f"{rule.kind} rule on {rule.statistic}",
            partitions_def=partitions_def,
            metadata={
                "kind": rule.kind,
                "statistic": rule.statistic,
                "threshold": rule.threshold,
                "default_severity": rule.severity,
            },
        )
        for rule in rules.rules
    ]


def build_slice_checks(
    rules: RulesConfig,
    partitions_def: PartitionsDefinition,
    asset_key: AssetKey = SLICE_METRICS_KEY,
):
    """One partitioned asset check per rule of `rules`, all evaluated by one op."""
    with warnings.catch_warnings():
        # Partitioned checks are a Dagster preview feature, used knowingly (per-day results).
        warnings.simplefilter("ignore", PreviewWarning)
        specs = _check_specs(rules, partitions_def, asset_key)
    history_days = rules.history_days

    @multi_asset_check(
        name="seer_slice_checks",
        specs=specs,
        description="The alert rules (the rules file) on one day of the slice table.",
    )
    def seer_slice_checks(
        context: AssetCheckExecutionContext,
        warehouse: WarehouseResource,
        slack: SlackAlertResource,
    ) -> Iterator[AssetCheckResult]:
        day = partition_day(context.partition_key)
        today, history = read_slice_rows(warehouse, day, history_days)
        # The breakage the baselines must not learn, from the stored verdicts. Read outside
        # the alerting guard: without it a broken index would become the "normal" level.
        store = IncidentStore(
            warehouse.get_engine(), warehouse.resolved_schema(), rules.close_after_passes
        )
        excluded = store.baseline_exclusions(day, rules) if len(today) else {}
        outcomes = evaluate_rules(rules, today, history, day, excluded) if len(today) else []
        failing = [o for o in outcomes if o.failed]
        context.log.info(
            f"{day}: {len(today)} slices, {len(outcomes)} rule outcomes, {len(failing)} failing"
        )
        day_alerts, error = None, None
        try:
            dispatcher = dispatcher_for(warehouse, slack, rules.close_after_passes, store)
            dispatcher.log = context.log
            day_alerts = dispatcher.alert_on_day(day, outcomes, context.run.run_id, today)
            retried = sum(r.delivered and r.alerts > 0 for r in day_alerts.retried)
            context.log.info(
                f"alerts for {day}: {day_alerts.delivery}; recoveries {day_alerts.recoveries}; "
                f"{retried} earlier pending alert message(s) delivered"
            )
        except Exception as exception:  # alerting must never fail the checks or the metrics
            error = f"{type(exception).__name__}: {exception}"
            context.log.error(f"alerting failed for {day}; the check results stand: {error}")
        for rule in rules.rules:
            rule_outcomes = [o for o in outcomes if o.rule == rule.name]
            rule_failing = [o for o in rule_outcomes if o.failed]
            severity = (
                ("ERROR" if any(o.severity == "ERROR" for o in rule_failing) else "WARN")
                if rule_failing
                else rule.severity
            )
            metadata = check_result_metadata(rule.name, rule_outcomes)
            metadata.update(alert_metadata(rule.name, day_alerts, error))
            if not len(today):
                metadata["note"] = "no slice rows for this day (no events)"
            yield AssetCheckResult(
                asset_key=asset_key,
                check_name=rule.name,
                passed=not rule_failing,
                severity=SEVERITY[severity],
                metadata=display_metadata(metadata),
                description="; ".join(o.message for o in rule_failing[:5]) or None,
            )

    return seer_slice_checks
