"""The rows of the `seer_alerts` outbox: their kinds and states, what a row holds, and
the fingerprint that decides whether a re-run posts again (`outbox` reads and writes
them)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from seer_metrics.rules import CheckOutcome

KIND_CHECK = "check"
KIND_RUN_FAILURE = "run_failure"
KIND_FRESHNESS = "freshness"
KIND_RECOVERED = "recovered"
PENDING, SENT, RESOLVED = "pending", "sent", "resolved"
# A failing service level whose incident is already open: shown as "still open" in the
# day's message when something else pages, never a page by itself.
CARRIED = "carried"


def as_utc(value: datetime | None) -> datetime | None:
    """Stored timestamps are UTC; SQLite (and older naive columns) hand them back naive."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Alert:
    """One outbox row."""

    id: int
    partition_date: date
    kind: str
    rule: str
    slice: str
    severity: str
    state: str
    fingerprint: str
    payload: dict[str, Any]
    run_id: str | None
    attempts: int = 0
    last_error: str | None = None
    next_attempt_at: datetime | None = None
    delivered_to: str | None = None
    slack_ts: str | None = None
    sent_at: datetime | None = None
    created_at: datetime | None = None


def outcome_fingerprint(outcome: CheckOutcome | Mapping[str, Any]) -> str:
    """The verdict of a check on a slice, not its exact numbers (which an LLM judge wobbles)."""
    data = outcome.to_dict() if isinstance(outcome, CheckOutcome) else dict(outcome)
    keys = ("rule", "slice", "status", "severity", "statistic", "threshold", "baseline_label")
    verdict = {key: data.get(key) for key in keys}
    if isinstance(data.get("incident"), Mapping):
        verdict["incident"] = [data["incident"].get("state"), data["incident"].get("opened_on")]
    return hashlib.sha256(json.dumps(verdict, sort_keys=True).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class RecordSummary:
    """What recording one partition's outcomes changed in the outbox."""

    new_or_changed: int
    unchanged: int
    resolved: int


AlertItem = tuple[str, str, str, dict[str, Any]]  # rule, slice, severity, payload
