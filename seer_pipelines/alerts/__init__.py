"""Slack alerts: the `seer_alerts` outbox, the Block Kit message, and delivery.

Flow: a check run records its failing outcomes in the outbox (`outbox`, its rows in
`alert_row`), then the dispatcher (`dispatch`) builds ONE message per partition
(`message`, from the pieces in `blocks`, within Slack's limits; examples from
`examples`) and delivers it through the Slack resource (`slack`). See docs/alerts.md.
"""

from seer_pipelines.alerts.alert_row import (
    CARRIED,
    KIND_CHECK,
    KIND_FRESHNESS,
    KIND_RECOVERED,
    KIND_RUN_FAILURE,
    PENDING,
    RESOLVED,
    SENT,
    Alert,
    RecordSummary,
    outcome_fingerprint,
)
from seer_pipelines.alerts.blocks import SlackMessage, escape_mrkdwn, slack_link
from seer_pipelines.alerts.dispatch import (
    AlertDispatcher,
    DayAlerts,
    DeliveryResult,
    ExamplesProvider,
    alerts_report,
)
from seer_pipelines.alerts.examples import top_missing_requirements
from seer_pipelines.alerts.incident_store import DayIncidents, IncidentStore
from seer_pipelines.alerts.message import (
    build_check_message,
    build_freshness_message,
    build_recovered_message,
    build_run_failure_message,
    render_console,
)
from seer_pipelines.alerts.outbox import AlertOutbox
from seer_pipelines.alerts.slack import (
    AlertDeliveryError,
    DeliveryReceipt,
    SlackAlertResource,
)
from seer_pipelines.warehouse.schema import ALERTS_TABLE, alerts_table

__all__ = [
    "ALERTS_TABLE",
    "CARRIED",
    "KIND_CHECK",
    "KIND_FRESHNESS",
    "KIND_RECOVERED",
    "KIND_RUN_FAILURE",
    "PENDING",
    "RESOLVED",
    "SENT",
    "Alert",
    "AlertDeliveryError",
    "AlertDispatcher",
    "AlertOutbox",
    "DayAlerts",
    "DayIncidents",
    "DeliveryReceipt",
    "DeliveryResult",
    "ExamplesProvider",
    "IncidentStore",
    "RecordSummary",
    "SlackAlertResource",
    "SlackMessage",
    "alerts_report",
    "alerts_table",
    "build_check_message",
    "build_freshness_message",
    "build_recovered_message",
    "build_run_failure_message",
    "escape_mrkdwn",
    "outcome_fingerprint",
    "render_console",
    "slack_link",
    "top_missing_requirements",
]
