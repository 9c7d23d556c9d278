"""Dispatch: one message per (partition, kind) with pending outbox rows, delivered once."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

import pandas as pd

from seer_metrics.rules import CheckOutcome, alert_order, as_date
from seer_pipelines.alerts.alert_row import (
    CARRIED,
    KIND_CHECK,
    KIND_RECOVERED,
    KIND_RUN_FAILURE,
    PENDING,
    SENT,
    Alert,
    RecordSummary,
)
from seer_pipelines.alerts.blocks import SlackMessage
from seer_pipelines.alerts.incident_store import DayIncidents, IncidentStore
from seer_pipelines.alerts.message import (
    build_check_message,
    build_freshness_message,
    build_recovered_message,
    build_run_failure_message,
    render_console,
)
from seer_pipelines.alerts.outbox import AlertOutbox
from seer_pipelines.alerts.slack import AlertDeliveryError, SlackAlertResource, logger


@dataclass(frozen=True)
class DeliveryResult:
    partition_date: date
    kind: str
    delivered: bool
    alerts: int
    destination: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class DayAlerts:
    """What alerting did for one evaluated day: the basis of each check's metadata."""

    partition_date: date
    recorded: RecordSummary
    incidents: DayIncidents | None
    delivery: DeliveryResult
    recoveries: DeliveryResult
    retried: list[DeliveryResult]
    paged: frozenset[tuple[str, str]]  # (rule, slice) rows the day's message pages


ExamplesProvider = Callable[[date, Sequence[str]], Mapping[str, Sequence[tuple[str, int]]]]


@dataclass
class AlertDispatcher:
    """Builds one message per (partition, kind) with pending rows and delivers it."""

    outbox: AlertOutbox
    slack: SlackAlertResource
    examples: ExamplesProvider | None = None
    log: logging.Logger | Any = field(default_factory=lambda: logger)
    incidents: IncidentStore | None = None
    # Whether a group of run failures (same backfill, or one run) must wait: a backfill
    # that is still running may fail more days, and its failures go out as ONE message.
    hold_run_failures: Callable[[Sequence[Alert]], bool] | None = None

    def alert_on_day(
        self,
        partition_date: date,
        outcomes: Sequence[CheckOutcome],
        run_id: str | None,
        slice_rows: pd.DataFrame | None = None,
    ) -> DayAlerts:
        """Follow the day's incidents, record its alerts, deliver them and any still due.

        Drops page on every failing day; a service level pages the day its incident opens
        and is carried after that; a pass closes an incident with one reply in the thread
        of the alert that announced it. The message leads with the slice that explains the
        most of the day's drops (`alert_order` over the day's `slice_rows`).
        """
        changes = self.incidents.advance(partition_date, outcomes) if self.incidents else None
        # a slice's judge change, said on every page of it (a level breached the day a
        # stricter judge took over is the judge's reading, not yet a regression)
        judge_changes = {o.slice: o.judge_note for o in outcomes if o.judge_note}
        order = {
            (item.outcome.rule, item.outcome.slice): {
                "alert_rank": rank,
                "headline": item.headline(),
                "explains": item.explains,
                "leads": item.leads,
                "explained_by": item.explained_by,
                "judge_change": judge_changes.get(item.outcome.slice),
            }
            for rank, item in enumerate(alert_order(outcomes, slice_rows))
        }
        recorded = self.outbox.record_check_outcomes(
            partition_date, outcomes, run_id, changes, order
        )
        if changes is not None:
            statistics = {(o.rule, o.slice): o.statistic for o in outcomes}
            self.outbox.record_recoveries(partition_date, changes.closed, run_id, statistics)
        delivery = self.deliver(partition_date, KIND_CHECK)
        # Alerts of other partitions still pending (Slack was down): retried first, so the
        # day's recovered replies find the alerts they answer already posted.
        retried = self.deliver_due(
            exclude={(partition_date, KIND_CHECK), (partition_date, KIND_RECOVERED)}
        )
        recoveries = self.deliver_recoveries(partition_date)
        paged = frozenset(
            (a.rule, a.slice)
            for a in self.outbox.rows(partition_date, KIND_CHECK, states=(PENDING, SENT))
        )
        return DayAlerts(partition_date, recorded, changes, delivery, recoveries, retried, paged)

    def message_for(self, partition_date: date, kind: str) -> tuple[SlackMessage, list[Alert]]:
        """The message of a (partition, kind) group and the rows it pages."""
        dagster_url = self.slack.resolved_dagster_url()
        if kind == KIND_CHECK:
            rows = self.outbox.rows(partition_date, kind, states=(PENDING, SENT, CARRIED))
            alerts = [a for a in rows if a.state != CARRIED]
            carried = [a for a in rows if a.state == CARRIED]
            examples: Mapping[str, Sequence[tuple[str, int]]] = {}
            if self.examples is not None and alerts:
                try:
                    examples = self.examples(partition_date, sorted({a.slice for a in alerts}))
                except Exception as error:  # examples are a nicety; never block the alert
                    self.log.warning(f"could not read missing-requirement examples: {error}")
            message = build_check_message(
                partition_date, alerts, examples, dagster_url, carried=carried
            )
            return message, alerts
        alerts = self.outbox.rows(partition_date, kind, states=(PENDING,))
        if kind == KIND_RUN_FAILURE:
            return build_run_failure_message(alerts, dagster_url), alerts
        return build_freshness_message(alerts, dagster_url), alerts

    def deliver(self, partition_date: date, kind: str) -> DeliveryResult:
        if kind == KIND_RECOVERED:
            return self.deliver_recoveries(partition_date)
        if kind == KIND_RUN_FAILURE:
            return self.deliver_run_failures(partition_date)
        message, alerts = self.message_for(partition_date, kind)
        if not any(a.state == PENDING for a in alerts):
            return DeliveryResult(partition_date, kind, delivered=True, alerts=0)
        try:
            receipt = self.slack.send(message, self.log)
        except AlertDeliveryError as error:
            self.outbox.mark_failed(alerts, str(error), error.retry_after_seconds)
            self.log.warning(
                f"alert for {partition_date} ({kind}) kept pending: {error}; "
                "it is retried on the next run and by the pending-alerts sensor"
            )
            return DeliveryResult(partition_date, kind, False, len(alerts), error=str(error))
        self.outbox.mark_sent(alerts, receipt.destination, receipt.slack_ts)
        return DeliveryResult(partition_date, kind, True, len(alerts), receipt.destination)

    def deliver_run_failures(self, partition_date: date) -> DeliveryResult:
        """Every pending run failure (all days), one message per backfill (or lone run)."""
        pending = self.outbox.rows(kind=KIND_RUN_FAILURE, states=(PENDING,))
        groups: dict[str, list[Alert]] = {}
        for row in pending:
            groups.setdefault(str(row.payload.get("backfill") or row.slice), []).append(row)
        dagster_url = self.slack.resolved_dagster_url()
        messages = [
            (build_run_failure_message(group, dagster_url), group, None)
            for group in groups.values()
            if self.hold_run_failures is None or not self.hold_run_failures(group)
        ]
        return self._send_each(partition_date, KIND_RUN_FAILURE, messages, errors=[])

    def deliver_recoveries(self, partition_date: date) -> DeliveryResult:
        """The pending `recovered` rows of a day: ONE reply per thread (the alert they
        close), listing every check of it that recovered."""
        pending = self.outbox.rows(partition_date, KIND_RECOVERED, states=(PENDING,))
        threads: dict[str, tuple[Alert, list[Alert]]] = {}
        errors: list[str] = []
        for row in pending:
            first = as_date(row.payload.get("opened_on", partition_date))
            last = as_date(row.payload.get("last_failed_on", partition_date))
            root = self.outbox.thread_root(row.rule, row.slice, first, last)
            if root is None:  # never posted (resolved first): nothing to recover from
                self.outbox.record(
                    partition_date, KIND_RECOVERED, [], None, resolve={(row.rule, row.slice)}
                )
                continue
            if root.sent_at is None:
                errors.append(f"{row.rule} on {row.slice}: waiting for the alert it replies to")
                continue
            threads.setdefault(str(root.slack_ts), (root, []))[1].append(row)
        messages = [
            (build_recovered_message(rows), rows, root.slack_ts) for root, rows in threads.values()
        ]
        return self._send_each(partition_date, KIND_RECOVERED, messages, errors)

    def _send_each(
        self,
        partition_date: date,
        kind: str,
        messages: Sequence[tuple[SlackMessage, list[Alert], str | None]],
        errors: list[str],
    ) -> DeliveryResult:
        """Send each (message, its rows, the thread it replies in): a failed send keeps
        its rows pending and the others still go; `errors` are the day's earlier ones."""
        delivered, destination = 0, None
        for message, rows, thread in messages:
            try:
                receipt = self.slack.send(message, self.log, thread)
            except AlertDeliveryError as error:
                self.outbox.mark_failed(rows, str(error), error.retry_after_seconds)
                errors.append(str(error))
                continue
            self.outbox.mark_sent(rows, receipt.destination, receipt.slack_ts)
            delivered += len(rows)
            destination = receipt.destination
        return DeliveryResult(
            partition_date,
            kind,
            delivered=not errors,
            alerts=delivered,
            destination=destination,
            error="; ".join(errors) or None,
        )

    def deliver_due(
        self,
        now: datetime | None = None,
        limit: int = 50,
        exclude: Collection[tuple[date, str]] = (),
    ) -> list[DeliveryResult]:
        """Deliver every due (partition, kind) group but `exclude`, oldest first."""
        groups = [g for g in self.outbox.due_groups(now, limit) if g not in exclude]
        # Replies after the alerts they answer: every alert first, then the replies.
        groups.sort(key=lambda group: (group[1] == KIND_RECOVERED, group[0]))
        return [self.deliver(day, kind) for day, kind in groups]


def alerts_report(dispatcher: AlertDispatcher, days: Sequence[date]) -> str:
    """What alerting did on each day, for the terminal: the days that paged (their message,
    as posted or as it would be) and the days whose failing checks were all carried by
    incidents opened earlier (one line each: no page)."""
    parts: list[str] = []
    paged_days = failing_days = 0
    for day in days:
        rows = dispatcher.outbox.rows(day, KIND_CHECK, states=(PENDING, SENT, CARRIED))
        if not rows:
            continue
        failing_days += 1
        carried = [a for a in rows if a.state == CARRIED]
        if len(carried) == len(rows):
            checks = "check" if len(carried) == 1 else "checks"
            parts.append(
                f"== {day}: {len(carried)} failing {checks}, no page: each is an incident "
                "opened earlier, still open"
            )
            continue
        paged_days += 1
        message, alerts = dispatcher.message_for(day, KIND_CHECK)
        states = Counter(a.state for a in alerts)
        where = sorted({a.delivered_to for a in alerts if a.delivered_to})
        status = ", ".join(f"{count} {state}" for state, count in sorted(states.items()))
        if carried:
            status += f", {len(carried)} carried"
        parts.append(f"== {day}: {status}; delivered to {', '.join(where) or 'nowhere yet'}")
        parts.append(render_console(message))
    destination = dispatcher.slack.describe()
    if not failing_days:
        return f"Alerts: none, every check passed on all {len(days)} days ({destination})."
    header = (
        f"Alerts: {paged_days} of {len(days)} days paged; {failing_days} of {len(days)} days "
        f"have failing checks (open incidents are carried without a new page); alerts go "
        f"to {destination}."
    )
    return "\n".join([header, *parts])
