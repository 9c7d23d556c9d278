"""Dispatch: one message per (partition, kind) with pending outbox rows, delivered once."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from seer_pipelines.alerts.message import (
    SlackMessage,
    build_check_message,
    build_freshness_message,
    build_run_failure_message,
    render_console,
)
from seer_pipelines.alerts.outbox import (
    KIND_CHECK,
    KIND_RUN_FAILURE,
    PENDING,
    SENT,
    Alert,
    AlertOutbox,
)
from seer_pipelines.alerts.slack import AlertDeliveryError, SlackAlertResource, logger


@dataclass(frozen=True)
class DeliveryResult:
    partition_date: date
    kind: str
    delivered: bool
    alerts: int
    destination: str | None = None
    error: str | None = None


ExamplesProvider = Callable[[date, Sequence[str]], Mapping[str, Sequence[tuple[str, int]]]]


@dataclass
class AlertDispatcher:
    """Builds one message per (partition, kind) with pending rows and delivers it."""

    outbox: AlertOutbox
    slack: SlackAlertResource
    examples: ExamplesProvider | None = None
    log: logging.Logger | Any = field(default_factory=lambda: logger)

    def message_for(self, partition_date: date, kind: str) -> tuple[SlackMessage, list[Alert]]:
        dagster_url = self.slack.resolved_dagster_url()
        if kind == KIND_CHECK:
            alerts = self.outbox.rows(partition_date, kind, states=(PENDING, SENT))
            examples: Mapping[str, Sequence[tuple[str, int]]] = {}
            if self.examples is not None:
                try:
                    examples = self.examples(partition_date, sorted({a.slice for a in alerts}))
                except Exception as error:  # examples are a nicety; never block the alert
                    self.log.warning(f"could not read missing-requirement examples: {error}")
            return build_check_message(partition_date, alerts, examples, dagster_url), alerts
        alerts = self.outbox.rows(partition_date, kind, states=(PENDING,))
        if kind == KIND_RUN_FAILURE:
            return build_run_failure_message(alerts, dagster_url), alerts
        return build_freshness_message(alerts, dagster_url), alerts

    def deliver(self, partition_date: date, kind: str) -> DeliveryResult:
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

    def deliver_due(self, now: datetime | None = None, limit: int = 50) -> list[DeliveryResult]:
        """Deliver every due (partition, kind) group, oldest first."""
        return [self.deliver(day, kind) for day, kind in self.outbox.due_groups(now, limit)]


def alerts_report(dispatcher: AlertDispatcher, days: Sequence[date]) -> str:
    """The current alert of each day (as posted, or as it would be), for the terminal."""
    parts: list[str] = []
    alerted = 0
    for day in days:
        message, alerts = dispatcher.message_for(day, KIND_CHECK)
        if not alerts:
            continue
        alerted += 1
        states = Counter(a.state for a in alerts)
        where = sorted({a.delivered_to for a in alerts if a.delivered_to})
        status = ", ".join(f"{count} {state}" for state, count in sorted(states.items()))
        parts.append(f"== {day}: {status}; delivered to {', '.join(where) or 'nowhere yet'}")
        parts.append(render_console(message))
    destination = dispatcher.slack.describe()
    if not alerted:
        return f"Alerts: none, every check passed on all {len(days)} days ({destination})."
    header = (
        f"Alerts: {alerted} of {len(days)} days have failing checks; alerts go to {destination}."
    )
    return "\n".join([header, *parts])
