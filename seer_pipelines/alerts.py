"""Slack alerts: the `seer_alerts` outbox, the Block Kit message, and delivery.

Flow: a check run records its failing outcomes in the outbox (one row per partition,
rule and slice) and then delivers what is pending: ONE Slack message per partition
summarising every failing check of that partition. A row is `pending` until a message
carrying it was accepted, then `sent`; a Slack failure leaves it `pending` with the error
and the attempt count, for the next run or the retry sensor. Re-running a partition
re-posts only when the outcome fingerprint (rule, slice, status, severity, threshold,
baseline) of some row changed; a row whose check passes again becomes `resolved`.

Everything user-controlled that reaches mrkdwn (slice labels, metadata values, requirement
texts, error messages) goes through `escape_mrkdwn`, so `<!channel>` is shown, not sent.
Without a token and channel the message goes to the log and the console instead.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from typing import Any
from urllib.parse import quote

import pandas as pd
import sqlalchemy as sa
from dagster import ConfigurableResource
from pydantic import Field

from seer_metrics.rules import SHARE_STATISTICS, STATISTICS, CheckOutcome
from seer_metrics.slices import ALL_SLICE, metadata_value

logger = logging.getLogger("seer.alerts")

ALERTS_TABLE = "seer_alerts"
KIND_CHECK = "check"
KIND_RUN_FAILURE = "run_failure"
KIND_FRESHNESS = "freshness"
PENDING, SENT, RESOLVED = "pending", "sent", "resolved"
DEFAULT_SLACK_API_URL = "https://slack.com/api/"
DEFAULT_DAGSTER_URL = "http://localhost:3000"
MAX_SLICE_SECTIONS = 20
MAX_SECTION_CHARS = 2900
EXAMPLES_PER_SLICE = 3
SEVERITY_ICONS = {"ERROR": ":red_circle:", "WARN": ":large_orange_circle:"}


def utc_now() -> datetime:
    """Naive UTC now: the outbox stores naive UTC timestamps on every backend."""
    return datetime.now(tz=UTC).replace(tzinfo=None)


# ---------------------------------------------------------------------------------------
# Escaping and formatting (pure).


def escape_mrkdwn(text: Any) -> str:
    """Escape Slack's control characters so user text can never form a link or mention."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def slack_link(url: str, label: str) -> str:
    """`<url|label>` with the label escaped and the URL unable to break out of the link."""
    safe_url = quote(url, safe=":/?#[]@!$&'()*+,;=%-._~")
    return f"<{safe_url}|{escape_mrkdwn(label).replace('|', '¦')}>"


def run_url(dagster_url: str, run_id: str) -> str:
    return f"{dagster_url.rstrip('/')}/runs/{run_id}"


def _value(statistic: str, value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:.1%}" if statistic in SHARE_STATISTICS else f"{value:.3f}"


def describe_outcome(outcome: Mapping[str, Any]) -> str:
    """One mrkdwn line: what moved, by how much, against what (every user value escaped)."""
    statistic = str(outcome.get("statistic", ""))
    label = STATISTICS.get(statistic, (None, statistic))[1]
    observed = outcome.get("observed")
    sample = int(outcome.get("sample_size") or 0)
    threshold = float(outcome.get("threshold") or 0.0)
    if outcome.get("delta") is not None and outcome.get("baseline") is not None:
        delta = float(outcome["delta"])
        noise = outcome.get("noise")
        noise_text = f" beyond noise {float(noise):.3f}" if noise is not None else ""
        return (
            f"*{escape_mrkdwn(label)} fell by {delta:.3f}*: {_value(statistic, observed)} over "
            f"{sample:,} events vs {_value(statistic, outcome['baseline'])} in "
            f"{escape_mrkdwn(outcome.get('baseline_label') or 'the baseline')} "
            f"({int(outcome.get('baseline_sample_size') or 0):,} events); alerts on a drop "
            f">= {threshold:.2f}{noise_text}"
        )
    if statistic == "share_recall_below_1" and threshold == 0 and observed is not None:
        affected = round(float(observed) * sample)
        return (
            f"*{affected:,} of {sample:,} events have recall < 1.0* ({float(observed):.1%}); "
            "alerts on any"
        )
    word = "above" if observed is not None and float(observed) > threshold else "below"
    return (
        f"*{escape_mrkdwn(label)} is {_value(statistic, observed)}* over {sample:,} events; "
        f"alerts {word} {_value(statistic, threshold)}"
    )


# ---------------------------------------------------------------------------------------
# The message (pure).


@dataclass(frozen=True)
class SlackMessage:
    """What is posted: a plain-text fallback (notifications) and Block Kit blocks."""

    text: str
    blocks: list[dict[str, Any]]


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
    sent_at: datetime | None = None


def _events(count: int) -> str:
    return "event" if count == 1 else "events"


def _section(text: str) -> dict[str, Any]:
    return {
        "type": "section",
        "text": {"type": "mrkdwn", "text": _truncate(text, MAX_SECTION_CHARS)},
    }


def _context(text: str) -> dict[str, Any]:
    return {
        "type": "context",
        "elements": [{"type": "mrkdwn", "text": _truncate(text, MAX_SECTION_CHARS)}],
    }


def _header(text: str) -> dict[str, Any]:
    return {"type": "header", "text": {"type": "plain_text", "text": _truncate(text, 150)}}


def _latest_run(alerts: Sequence[Alert]) -> str | None:
    runs = [a.run_id for a in alerts if a.run_id]
    return runs[-1] if runs else None


def build_check_message(
    partition_date: date | str,
    alerts: Sequence[Alert],
    examples: Mapping[str, Sequence[tuple[str, int]]] | None = None,
    dagster_url: str = DEFAULT_DAGSTER_URL,
    asset: str = "slice_metrics",
) -> SlackMessage:
    """ONE message for all failing checks of a partition, grouped by slice.

    Slices come worst first (any ERROR, then high priority, the `all` aggregate last);
    each lists its failing rules (what moved, by how much, against which baseline) and
    the most frequent missing requirements of its events as examples.
    """
    examples = examples or {}
    order = {"ERROR": 0, "WARN": 1}
    by_slice: dict[str, list[Alert]] = {}
    for alert in alerts:
        by_slice.setdefault(alert.slice, []).append(alert)
    for group in by_slice.values():
        group.sort(key=lambda a: (order.get(a.severity, 2), a.rule))

    def slice_order(label: str) -> tuple:
        group = by_slice[label]
        return (
            min(order.get(a.severity, 2) for a in group),
            not any(a.payload.get("high_priority") for a in group),
            label == ALL_SLICE,
            label,
        )

    slices = sorted(by_slice, key=slice_order)
    counts = Counter(a.severity for a in alerts)
    severity_text = ", ".join(f"{counts[s]} {s}" for s in ("ERROR", "WARN") if counts[s])
    run_id = _latest_run(list(alerts))
    where = (
        slack_link(run_url(dagster_url, run_id), f"Dagster run {run_id[:8]}") if run_id else "n/a"
    )
    plural = "s" if len(alerts) != 1 else ""
    slice_names = ", ".join(f"*{escape_mrkdwn(label)}*" for label in slices[:8])
    if len(slices) > 8:
        slice_names += f" and {len(slices) - 8} more"
    blocks: list[dict[str, Any]] = [
        _header(f"Seer: retrieval quality alert for {partition_date}"),
        _section(
            f"*{len(alerts)} failing check{plural}* ({severity_text}) on "
            f"`{escape_mrkdwn(asset)}`, partition *{partition_date}*, in {slice_names}. "
            f"Run: {where}"
        ),
        {"type": "divider"},
    ]
    for label in slices[:MAX_SLICE_SECTIONS]:
        group = by_slice[label]
        priority = " (high priority)" if group[0].payload.get("high_priority") else ""
        lines = [f"*{escape_mrkdwn(label)}*{priority}"]
        for alert in group:
            icon = SEVERITY_ICONS.get(alert.severity, ":white_circle:")
            lines.append(
                f"{icon} *{escape_mrkdwn(alert.severity)}* `{escape_mrkdwn(alert.rule)}`: "
                f"{describe_outcome(alert.payload)}"
            )
        blocks.append(_section("\n".join(lines)))
        slice_examples = examples.get(label)
        if slice_examples:
            items = " · ".join(
                f"“{escape_mrkdwn(_truncate(text, 120))}” ({count} {_events(count)})"
                for text, count in slice_examples
            )
            blocks.append(_context(f"Top missing requirements in {escape_mrkdwn(label)}: {items}"))
    hidden = len(slices) - MAX_SLICE_SECTIONS
    if hidden > 0:
        blocks.append(_section(f"…and {hidden} more failing slices: see the run in Dagster."))
    blocks.append(
        _context(
            "Rules from seer_rules.yaml ($SEER_RULES_FILE). Re-running this partition posts "
            "again only if the outcome changes."
        )
    )
    summary = "; ".join(
        f"{label}: {', '.join(a.rule for a in by_slice[label])}" for label in slices[:4]
    )
    more = f"; and {len(slices) - 4} more slices" if len(slices) > 4 else ""
    text = escape_mrkdwn(
        f"Seer {partition_date}: {len(alerts)} failing check{plural} ({severity_text}). "
        f"{summary}{more}"
    )
    return SlackMessage(text=text, blocks=blocks)


def build_run_failure_message(
    alerts: Sequence[Alert], dagster_url: str = DEFAULT_DAGSTER_URL
) -> SlackMessage:
    """Crashed runs: job, partition, error, link."""
    blocks: list[dict[str, Any]] = [_header("Seer: run failed")]
    for alert in alerts:
        payload = alert.payload
        run_id = str(payload.get("run_id", alert.slice))
        partition = payload.get("partition")
        on_partition = f", partition *{escape_mrkdwn(partition)}*" if partition else ""
        error = escape_mrkdwn(_truncate(str(payload.get("error") or "no error message"), 1500))
        blocks.append(
            _section(
                f":x: Job `{escape_mrkdwn(payload.get('job', '?'))}`{on_partition}: "
                f"{slack_link(run_url(dagster_url, run_id), f'run {run_id[:8]}')} failed.\n"
                f"```{error}```"
            )
        )
    jobs = ", ".join(sorted({str(a.payload.get("job", "?")) for a in alerts}))
    text = escape_mrkdwn(f"Seer: {len(alerts)} failed run(s) of {jobs}")
    return SlackMessage(text=text, blocks=blocks)


def build_freshness_message(
    alerts: Sequence[Alert], dagster_url: str = DEFAULT_DAGSTER_URL
) -> SlackMessage:
    """A daily partition that has not materialized by its deadline."""
    blocks: list[dict[str, Any]] = [_header("Seer: metrics are late")]
    for alert in alerts:
        payload = alert.payload
        blocks.append(
            _section(
                f":hourglass: Partition *{alert.partition_date}* of "
                f"`{escape_mrkdwn(payload.get('asset', alert.slice))}` has not materialized by "
                f"the deadline {escape_mrkdwn(payload.get('deadline', '?'))}. Last materialized "
                f"partition: {escape_mrkdwn(payload.get('latest_partition') or 'none')}. "
                f"{slack_link(dagster_url.rstrip('/') + '/runs', 'Open Dagster')}"
            )
        )
    text = f"Seer: {len(alerts)} partition(s) late"
    return SlackMessage(text=text, blocks=blocks)


_CONSOLE_LINK = re.compile(r"<([^<>|]+)\|([^<>]+)>")
_CONSOLE_ICON = re.compile(r":(red_circle|large_orange_circle|white_circle|x|hourglass): ")
_CONSOLE_BOLD = re.compile(r"\*([^*\n]+)\*")


def render_console(message: SlackMessage) -> str:
    """A plain-text rendering for the log and the terminal."""
    lines: list[str] = []
    for block in message.blocks:
        if block["type"] == "divider":
            lines.append("-" * 60)
        elif block["type"] in ("header", "section"):
            lines.append(block["text"]["text"])
        elif block["type"] == "context":
            lines.extend("  " + element["text"] for element in block["elements"])
    text = "\n".join(lines)
    text = _CONSOLE_LINK.sub(lambda m: f"{m.group(2)} ({m.group(1)})", text)
    text = _CONSOLE_ICON.sub("", text)
    text = _CONSOLE_BOLD.sub(lambda m: m.group(1), text)
    for escaped, raw in (("&lt;", "<"), ("&gt;", ">"), ("&amp;", "&")):
        text = text.replace(escaped, raw)
    return text


# ---------------------------------------------------------------------------------------
# Examples: the most frequent missing requirements of a slice (pure over DataFrames).


def _as_list(value: Any) -> list[str]:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return [value]
    if isinstance(value, list | tuple):
        return [str(v) for v in value if v is not None and str(v).strip()]
    return []


def top_missing_requirements(
    event_frames: Iterable[pd.DataFrame],
    slices: Iterable[str],
    limit: int = EXAMPLES_PER_SLICE,
) -> dict[str, list[tuple[str, int]]]:
    """For each slice label, the `limit` most frequent missing requirement texts.

    `event_frames` are chunks of `seer_event_metrics` rows (`status`, `missing_requirements`,
    `metadata`); a requirement counts once per event.
    """
    wanted = sorted(set(slices))
    counters: dict[str, Counter[str]] = {label: Counter() for label in wanted}
    keyed = [(label, *label.partition("=")[::2]) for label in wanted]
    for chunk in event_frames:
        if chunk.empty:
            continue
        ok = chunk[chunk["status"] == "ok"] if "status" in chunk else chunk
        for missing, metadata in zip(ok["missing_requirements"], ok["metadata"], strict=True):
            texts = set(_as_list(missing))
            if not texts:
                continue
            for label, key, value in keyed:
                if label == ALL_SLICE or metadata_value(metadata, key) == value:
                    counters[label].update(texts)
    return {
        label: sorted(counter.items(), key=lambda item: (-item[1], item[0]))[:limit]
        for label, counter in counters.items()
        if counter
    }


# ---------------------------------------------------------------------------------------
# The outbox table.


@lru_cache(maxsize=16)
def alerts_table(schema: str | None = None) -> sa.Table:
    metadata = sa.MetaData(schema=schema)
    return sa.Table(
        ALERTS_TABLE,
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("partition_date", sa.Date, nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("rule", sa.String(128), nullable=False),
        sa.Column("slice", sa.Text, nullable=False),
        sa.Column("severity", sa.String(8), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("payload", sa.JSON, nullable=False),
        sa.Column("run_id", sa.String(64)),
        sa.Column("attempts", sa.Integer, nullable=False, default=0),
        sa.Column("last_error", sa.Text),
        sa.Column("next_attempt_at", sa.DateTime),
        sa.Column("delivered_to", sa.String(255)),
        sa.Column("slack_ts", sa.String(64)),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
        sa.Column("sent_at", sa.DateTime),
        sa.UniqueConstraint("partition_date", "kind", "rule", "slice", name="uq_seer_alerts_key"),
    )


def outcome_fingerprint(outcome: CheckOutcome | Mapping[str, Any]) -> str:
    """The verdict of a check on a slice, not its exact numbers (which an LLM judge wobbles)."""
    data = outcome.to_dict() if isinstance(outcome, CheckOutcome) else dict(outcome)
    verdict = {
        key: data.get(key)
        for key in (
            "rule",
            "slice",
            "status",
            "severity",
            "statistic",
            "threshold",
            "baseline_label",
        )
    }
    return hashlib.sha256(json.dumps(verdict, sort_keys=True).encode("utf-8")).hexdigest()


def _json_safe(data: Mapping[str, Any]) -> dict[str, Any]:
    """Payloads must be valid JSON: NaN and infinities become null."""
    clean: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
            value = None
        clean[key] = value
    return clean


@dataclass(frozen=True)
class RecordSummary:
    """What recording one partition's outcomes changed in the outbox."""

    new_or_changed: int
    unchanged: int
    resolved: int


class AlertOutbox:
    """The `seer_alerts` table in the warehouse; every method is one short transaction."""

    def __init__(self, engine: sa.Engine, schema: str | None = None) -> None:
        self.engine = engine
        self.table = alerts_table(schema)
        self._created = False

    def ensure_table(self) -> None:
        if not self._created:
            self.table.metadata.create_all(self.engine, tables=[self.table], checkfirst=True)
            self._created = True

    def _alert(self, row: Any) -> Alert:
        values = dict(row._mapping)
        payload = values.pop("payload")
        if isinstance(payload, str):
            payload = json.loads(payload)
        partition = values["partition_date"]
        if isinstance(partition, str):
            partition = date.fromisoformat(partition[:10])
        return Alert(
            id=values["id"],
            partition_date=partition,
            kind=values["kind"],
            rule=values["rule"],
            slice=values["slice"],
            severity=values["severity"],
            state=values["state"],
            fingerprint=values["fingerprint"],
            payload=payload or {},
            run_id=values["run_id"],
            attempts=values["attempts"] or 0,
            last_error=values["last_error"],
            next_attempt_at=values["next_attempt_at"],
            delivered_to=values["delivered_to"],
            sent_at=values["sent_at"],
        )

    def record(
        self,
        partition_date: date,
        kind: str,
        items: Sequence[tuple[str, str, str, dict[str, Any]]],
        run_id: str | None,
        resolve_missing: bool,
    ) -> RecordSummary:
        """Upsert (rule, slice, severity, payload) rows of one partition and kind.

        A row whose fingerprint is unchanged keeps its state (no new post); a new or
        changed one becomes pending. With `resolve_missing`, active rows not in `items`
        become resolved (their check passes now).
        """
        self.ensure_table()
        table = self.table
        now = utc_now()
        new_or_changed = unchanged = resolved = 0
        with self.engine.begin() as connection:
            existing = {
                (row.rule, row.slice): row
                for row in connection.execute(
                    sa.select(table).where(
                        table.c.partition_date == partition_date, table.c.kind == kind
                    )
                )
            }
            seen: set[tuple[str, str]] = set()
            for rule, slice_label, severity, payload in items:
                payload = _json_safe(payload)
                fingerprint = outcome_fingerprint(payload)
                seen.add((rule, slice_label))
                row = existing.get((rule, slice_label))
                if row is not None and row.fingerprint == fingerprint and row.state != RESOLVED:
                    unchanged += 1
                    continue
                new_or_changed += 1
                values = {
                    "severity": severity,
                    "state": PENDING,
                    "fingerprint": fingerprint,
                    "payload": payload,
                    "run_id": run_id,
                    "attempts": 0,
                    "last_error": None,
                    "next_attempt_at": None,
                    "updated_at": now,
                }
                if row is None:
                    connection.execute(
                        table.insert().values(
                            partition_date=partition_date,
                            kind=kind,
                            rule=rule,
                            slice=slice_label,
                            created_at=now,
                            **values,
                        )
                    )
                else:
                    connection.execute(table.update().where(table.c.id == row.id).values(**values))
            if resolve_missing:
                for key, row in existing.items():
                    if key not in seen and row.state != RESOLVED:
                        resolved += 1
                        connection.execute(
                            table.update()
                            .where(table.c.id == row.id)
                            .values(state=RESOLVED, updated_at=now, next_attempt_at=None)
                        )
        return RecordSummary(new_or_changed, unchanged, resolved)

    def record_check_outcomes(
        self, partition_date: date, outcomes: Iterable[CheckOutcome], run_id: str | None
    ) -> RecordSummary:
        """Record the failing outcomes of a partition; passing ones resolve earlier rows."""
        items = [(o.rule, o.slice, o.severity, o.to_dict()) for o in outcomes if o.failed]
        return self.record(partition_date, KIND_CHECK, items, run_id, resolve_missing=True)

    def rows(
        self,
        partition_date: date | None = None,
        kind: str | None = None,
        states: Sequence[str] | None = None,
    ) -> list[Alert]:
        self.ensure_table()
        table = self.table
        query = sa.select(table).order_by(table.c.partition_date, table.c.id)
        if partition_date is not None:
            query = query.where(table.c.partition_date == partition_date)
        if kind is not None:
            query = query.where(table.c.kind == kind)
        if states is not None:
            query = query.where(table.c.state.in_(list(states)))
        with self.engine.connect() as connection:
            return [self._alert(row) for row in connection.execute(query)]

    def due_groups(self, now: datetime | None = None, limit: int = 50) -> list[tuple[date, str]]:
        """(partition_date, kind) groups with pending rows whose retry time has come."""
        self.ensure_table()
        table = self.table
        now = now or utc_now()
        query = (
            sa.select(table.c.partition_date, table.c.kind)
            .where(
                table.c.state == PENDING,
                sa.or_(table.c.next_attempt_at.is_(None), table.c.next_attempt_at <= now),
            )
            .group_by(table.c.partition_date, table.c.kind)
            .order_by(table.c.partition_date, table.c.kind)
            .limit(limit)
        )
        with self.engine.connect() as connection:
            groups = []
            for partition, kind in connection.execute(query):
                if isinstance(partition, str):
                    partition = date.fromisoformat(partition[:10])
                groups.append((partition, kind))
            return groups

    def mark_sent(self, alerts: Sequence[Alert], delivered_to: str, slack_ts: str | None) -> None:
        """Mark the rows that the delivered message carried (unless they changed since)."""
        table = self.table
        now = utc_now()
        with self.engine.begin() as connection:
            for alert in alerts:
                values: dict[str, Any] = {
                    "state": SENT,
                    "delivered_to": delivered_to,
                    "slack_ts": slack_ts,
                    "updated_at": now,
                    "next_attempt_at": None,
                    "last_error": None,
                }
                if alert.state == PENDING:
                    values.update(sent_at=now, attempts=alert.attempts + 1)
                connection.execute(
                    table.update()
                    .where(
                        table.c.id == alert.id,
                        table.c.fingerprint == alert.fingerprint,
                        table.c.state != RESOLVED,
                    )
                    .values(**values)
                )

    def mark_failed(
        self, alerts: Sequence[Alert], error: str, retry_after_seconds: float | None = None
    ) -> None:
        """Keep pending rows pending, counting the attempt and keeping the error."""
        table = self.table
        now = utc_now()
        next_attempt = now + timedelta(seconds=retry_after_seconds) if retry_after_seconds else None
        with self.engine.begin() as connection:
            for alert in alerts:
                if alert.state != PENDING:
                    continue
                connection.execute(
                    table.update()
                    .where(table.c.id == alert.id, table.c.fingerprint == alert.fingerprint)
                    .values(
                        attempts=table.c.attempts + 1,
                        last_error=_truncate(error, 1000),
                        next_attempt_at=next_attempt,
                        updated_at=now,
                    )
                )


# ---------------------------------------------------------------------------------------
# Delivery through Slack (a Dagster resource) or the console.


class AlertDeliveryError(RuntimeError):
    """Slack did not take the message; `retry_after_seconds` when it said so."""

    def __init__(self, message: str, retry_after_seconds: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_seconds = retry_after_seconds


@dataclass(frozen=True)
class DeliveryReceipt:
    destination: str
    slack_ts: str | None = None


class SlackAlertResource(ConfigurableResource):
    """Posts alerts with `slack_sdk.WebClient`; without token and channel, to the console.

    Every field falls back to its environment variable; the token is never logged.
    """

    token: str | None = Field(
        default=None, repr=False, description="Bot token; default $SLACK_BOT_TOKEN. Never logged."
    )
    channel: str | None = Field(
        default=None, description="Channel id or #name; default $SEER_SLACK_CHANNEL."
    )
    api_url: str | None = Field(
        default=None,
        description="Base URL of the Slack Web API; default $SEER_SLACK_API_URL, else "
        "https://slack.com/api/ (set it for proxies and tests).",
    )
    dagster_url: str | None = Field(
        default=None,
        description="Base URL of the Dagster UI for links; default $SEER_DAGSTER_URL, else "
        "http://localhost:3000.",
    )
    timeout_seconds: int = Field(default=10, description="HTTP timeout of one Slack call.")

    def resolved_token(self) -> str | None:
        return self.token or os.environ.get("SLACK_BOT_TOKEN") or None

    def resolved_channel(self) -> str | None:
        return self.channel or os.environ.get("SEER_SLACK_CHANNEL") or None

    def resolved_api_url(self) -> str:
        url = self.api_url or os.environ.get("SEER_SLACK_API_URL") or DEFAULT_SLACK_API_URL
        return url if url.endswith("/") else url + "/"

    def resolved_dagster_url(self) -> str:
        return self.dagster_url or os.environ.get("SEER_DAGSTER_URL") or DEFAULT_DAGSTER_URL

    def is_configured(self) -> bool:
        return bool(self.resolved_token() and self.resolved_channel())

    def describe(self) -> str:
        """Where alerts go, without the token."""
        if self.is_configured():
            return f"Slack channel {self.resolved_channel()} via {self.resolved_api_url()}"
        if self.resolved_token():
            return "console (SLACK_BOT_TOKEN is set but SEER_SLACK_CHANNEL is not)"
        return "console (set SLACK_BOT_TOKEN and SEER_SLACK_CHANNEL to post to Slack)"

    def client(self) -> Any:
        from slack_sdk import WebClient

        return WebClient(
            token=self.resolved_token(),
            base_url=self.resolved_api_url(),
            timeout=self.timeout_seconds,
        )

    def send(self, message: SlackMessage, log: Any = None) -> DeliveryReceipt:
        """Post one message; raises `AlertDeliveryError` (never with the token) on failure.

        Without token and channel the message is written to `log` (the Dagster run log when
        called from a check or sensor, else the `seer.alerts` logger on the console).
        """
        if not self.is_configured():
            (log or logger).warning(f"Seer alert ({self.describe()}):\n{render_console(message)}")
            return DeliveryReceipt(destination="console")
        from slack_sdk.errors import SlackApiError

        channel = self.resolved_channel()
        try:
            response = self.client().chat_postMessage(
                channel=channel,
                text=message.text,
                blocks=message.blocks,
                unfurl_links=False,
                unfurl_media=False,
            )
        except SlackApiError as error:
            response = error.response
            code = response.get("error") if isinstance(response.data, dict) else None
            status = response.status_code
            retry_after = response.headers.get("Retry-After") or response.headers.get("retry-after")
            seconds = float(retry_after) if retry_after and retry_after.isdigit() else None
            detail = f"Slack answered {code or 'an error'} (HTTP {status})"
            if seconds is not None:
                detail += f", retry after {seconds:.0f} s"
            raise AlertDeliveryError(detail, seconds) from None
        except Exception as error:  # network down, timeout, DNS: keep the alert pending
            raise AlertDeliveryError(
                f"Slack unreachable: {type(error).__name__}: {error}"
            ) from None
        return DeliveryReceipt(destination=f"slack:{channel}", slack_ts=response.get("ts"))


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
