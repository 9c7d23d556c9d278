"""The Slack messages (Block Kit) and their plain-text rendering for the console.

Everything user-controlled that reaches mrkdwn (slice labels, metadata values, requirement
texts, error messages) goes through `escape_mrkdwn`, so `<!channel>` is shown, not sent.

Every message fits Slack's limits (`blocks`: labels and check names cut with an ellipsis,
every text cut without splitting a link, at most 50 blocks); the summary keeps its check
names and run link whatever precedes them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import fields
from datetime import date
from typing import Any

from seer_metrics.rules import CheckOutcome, as_date, outcome_summary
from seer_metrics.rules.incident_wording import (
    escalation_note,
    failing_again_note,
    recovery_note,
)
from seer_metrics.slices.groups import ALL_SLICE
from seer_metrics.slices.identity import display_label
from seer_metrics.text.redaction import shorten
from seer_pipelines.alerts.alert_row import Alert
from seer_pipelines.alerts.blocks import (
    MAX_LABEL_CHARS,
    MAX_SECTION_CHARS,
    SlackMessage,
    context,
    cut_mrkdwn,
    escape_mrkdwn,
    header,
    packed_sections,
    section,
    short_label,
    slack_link,
)
from seer_pipelines.alerts.message_headline import message_headline, opened_on

DEFAULT_DAGSTER_URL = "http://localhost:3000"
MAX_SLICE_SECTIONS = 20
MAX_HEADLINE_CHARS = 600  # a lead's headline, a rule's sentence
MAX_CHECK_NAMES = 5
SEVERITY_ICONS = {"ERROR": ":red_circle:", "WARN": ":large_orange_circle:"}
SEVERITY_ORDER = {"ERROR": 0, "WARN": 1}


def shown_slice(label: str) -> str:
    """A slice as a person reads it (`display_label`: a value with a comma or an equals
    sign quoted), cut to the message's label length; never parsed back."""
    return short_label(display_label(label))


def run_url(dagster_url: str, run_id: str) -> str:
    return f"{dagster_url.rstrip('/')}/runs/{run_id}"


def _events(count: int) -> str:
    return "event" if count == 1 else "events"


_OUTCOME_FIELDS = frozenset(field.name for field in fields(CheckOutcome))


def outcome_of(alert: Alert) -> CheckOutcome:
    """The check outcome a `check` row of the outbox carries."""
    return CheckOutcome(**{k: v for k, v in alert.payload.items() if k in _OUTCOME_FIELDS})


def outcome_line(alert: Alert) -> str:
    """One mrkdwn line per failing rule: severity, rule, and what moved (the rules' wording)."""
    icon = SEVERITY_ICONS.get(alert.severity, ":white_circle:")
    outcome = outcome_of(alert)
    line = (
        f"{icon} *{escape_mrkdwn(alert.severity)}* `{escape_mrkdwn(short_label(alert.rule))}`: "
        f"{escape_mrkdwn(shorten(outcome_summary(outcome), MAX_HEADLINE_CHARS))}"
    )
    incident = alert.payload.get("incident") or {}
    if incident.get("state") == "escalated":
        note = escalation_note(
            outcome.statistic,
            outcome.observed,
            opened_on(alert),
            incident.get("worse_than", incident.get("opened_observed")),  # older rows
            incident.get("reference_on"),
        )
        line += f" *{escape_mrkdwn(shorten(note, MAX_HEADLINE_CHARS))}*"
    return line


def failing_again_line(partition_date: date, group: Sequence[Alert]) -> list[str]:
    """The line of a slice paging within days of a "Recovered" reply about it (the
    outbox's `recoveries_before`), as a one-item list; else none."""
    recovered = [
        incident
        for alert in group
        if (incident := alert.payload.get("incident") or {}).get("recovered_on")
    ]
    if not recovered:
        return []
    latest = max(recovered, key=lambda incident: str(incident["recovered_on"]))
    recovered_on = str(latest["recovered_on"])
    checks = [f"`{short_label(str(rule))}`" for rule in latest.get("recovered_checks") or ()]
    days = (partition_date - as_date(recovered_on)).days
    note = failing_again_note(days, recovered_on, checks)
    return [f":warning: {escape_mrkdwn(shorten(note, MAX_HEADLINE_CHARS))}"]


def _latest_run(alerts: Sequence[Alert]) -> str | None:
    runs = [a.run_id for a in alerts if a.run_id]
    return runs[-1] if runs else None


def slice_order(label: str, group: Sequence[Alert]) -> tuple:
    """In the day's alert order when known (the slice that explains the most of a drop
    first); else worst first: any ERROR, then high priority, the `all` aggregate last."""
    ranks = [a.payload["alert_rank"] for a in group if a.payload.get("alert_rank") is not None]
    return (
        min(ranks) if ranks else len(SEVERITY_ORDER),
        min(SEVERITY_ORDER.get(a.severity, 2) for a in group),
        not any(a.payload.get("high_priority") for a in group),
        label == ALL_SLICE,
        label,
    )


def judge_change_line(notes: Sequence[str]) -> str:
    """The judge changed on the paged slices: changes compare only the new judge's days,
    but levels are read by it, so a level it breaches may be the judge's reading."""
    more = f" (and {len(notes) - 1} more)" if len(notes) > 1 else ""
    return escape_mrkdwn(
        shorten(
            f":information_source: {notes[0]}{more}. Levels are read by the new judge: a "
            "level it breaches may be the judge's reading, not the retrieval's.",
            MAX_HEADLINE_CHARS,
        )
    )


def still_open_line(carried: Sequence[Alert]) -> str:
    """One short line for the service levels that keep failing under an open incident."""
    items = []
    ordered = sorted(carried, key=lambda a: (a.rule, a.slice))
    for alert in ordered[:MAX_SLICE_SECTIONS]:
        since = opened_on(alert)
        rule, label = (
            escape_mrkdwn(short_label(alert.rule)),
            escape_mrkdwn(shown_slice(alert.slice)),
        )
        items.append(f"`{rule}` on {label} since {escape_mrkdwn(short_label(since))}")
    more = (
        f"; and {len(ordered) - MAX_SLICE_SECTIONS} more"
        if len(ordered) > MAX_SLICE_SECTIONS
        else ""
    )
    return "Still open (no new page): " + "; ".join(items) + more


def build_check_message(
    partition_date: date,
    alerts: Sequence[Alert],
    examples: Mapping[str, Sequence[tuple[str, int]]] | None = None,
    dagster_url: str = DEFAULT_DAGSTER_URL,
    asset: str = "slice_metrics",
    carried: Sequence[Alert] = (),
) -> SlackMessage:
    """ONE message for all failing checks of a partition, grouped by slice.

    `alerts` are what pages (drops, newly opened incidents); each slice lists its failing
    rules (what moved, by how much, against which baseline) and the most frequent missing
    requirements of its events as examples. `carried` service levels (incidents opened
    earlier) get one short "still open" line at the end.
    """
    examples = examples or {}
    by_slice: dict[str, list[Alert]] = {}
    for alert in alerts:
        by_slice.setdefault(alert.slice, []).append(alert)
    for group in by_slice.values():
        group.sort(key=lambda a: (SEVERITY_ORDER.get(a.severity, 2), a.rule))
    slices = sorted(by_slice, key=lambda label: slice_order(label, by_slice[label]))
    counts = Counter(a.severity for a in alerts)
    severity_text = ", ".join(f"{counts[s]} {s}" for s in ("ERROR", "WARN") if counts[s])
    run_id = _latest_run(alerts)
    where = (
        slack_link(run_url(dagster_url, run_id), f"Dagster run {run_id[:8]}") if run_id else "n/a"
    )
    plural = "s" if len(alerts) != 1 else ""
    slice_names = ", ".join(f"*{escape_mrkdwn(shown_slice(label))}*" for label in slices[:8])
    if len(slices) > 8:
        slice_names += f" and {len(slices) - 8} more"
    headline = message_headline(alerts, carried)
    lead_text = ""
    if headline:
        lead_text = f"*{escape_mrkdwn(shorten(headline, MAX_HEADLINE_CHARS))}*\n"
    # The check names and the run link end the summary, and what precedes them is cut to
    # leave them room: long labels must not push them out of the section.
    checks = sorted({a.rule for a in alerts})
    check_names = ", ".join(f"`{escape_mrkdwn(short_label(r))}`" for r in checks[:MAX_CHECK_NAMES])
    if len(checks) > MAX_CHECK_NAMES:
        check_names += f" and {len(checks) - MAX_CHECK_NAMES} more"
    tail = f" Checks: {check_names}. Run: {where}"
    summary = (
        f"{lead_text}*{len(alerts)} failing check{plural}* ({severity_text}) on "
        f"`{escape_mrkdwn(asset)}`, partition *{partition_date}*, in {slice_names}."
    )
    blocks: list[dict[str, Any]] = [
        header(f"Seer: retrieval quality alert for {partition_date}"),
        section(cut_mrkdwn(summary, MAX_SECTION_CHARS - len(tail)) + tail),
    ]
    judge_changes = sorted(
        {str(a.payload["judge_change"]) for a in alerts if a.payload.get("judge_change")}
    )
    if judge_changes:
        blocks.append(context(judge_change_line(judge_changes)))
    blocks.append({"type": "divider"})
    for label in slices[:MAX_SLICE_SECTIONS]:
        group = by_slice[label]
        priority = " (high priority)" if group[0].payload.get("high_priority") else ""
        shown = escape_mrkdwn(shown_slice(label))
        again = failing_again_line(partition_date, group)
        lines = [f"*{shown}*{priority}", *again, *(outcome_line(a) for a in group)]
        blocks.append(section("\n".join(lines)))
        slice_examples = examples.get(label)
        if slice_examples:
            items = " · ".join(
                f"“{escape_mrkdwn(shorten(text, 120))}” ({count} {_events(count)})"
                for text, count in slice_examples
            )
            blocks.append(context(f"Top missing requirements in {shown}: {items}"))
    hidden = len(slices) - MAX_SLICE_SECTIONS
    if hidden > 0:
        blocks.append(section(f"…and {hidden} more failing slices: see the run in Dagster."))
    if carried:
        blocks.append(context(still_open_line(carried)))
    blocks.append(
        context(
            "Rules from $SEER_RULES_FILE, else the packaged defaults. Re-running this "
            "partition posts again only if the outcome changes; a passing check replies in "
            "this thread."
        )
    )
    summary = "; ".join(
        f"{shown_slice(label)}: {', '.join(short_label(a.rule) for a in by_slice[label])}"
        for label in slices[:4]
    )
    more = f"; and {len(slices) - 4} more slices" if len(slices) > 4 else ""
    text = escape_mrkdwn(
        f"Seer {partition_date}: {len(alerts)} failing check{plural} ({severity_text}). "
        f"{summary}{more}"
    )
    return SlackMessage(text=text, blocks=blocks)


def recovered_line(alert: Alert) -> str:
    """One recovered check: which, where, since when, and the level it is back at."""
    payload = alert.payload
    opened, last = payload.get("opened_on", "?"), payload.get("last_failed_on", "?")
    failing = f"failing since {opened}" if opened == last else f"failing {opened} to {last}"
    rule, label = escape_mrkdwn(short_label(alert.rule)), escape_mrkdwn(shown_slice(alert.slice))
    line = f"`{rule}` on *{label}* ({escape_mrkdwn(shorten(failing, MAX_LABEL_CHARS))})"
    statistic = payload.get("statistic")
    if statistic and payload.get("last_observed") is not None:
        # the level its last reading was judged back against (older rows: the opening's)
        before = payload.get("last_baseline")
        note = recovery_note(
            statistic,
            payload.get("last_observed"),
            payload.get("opened_baseline") if before is None else before,
            payload.get("opened_observed"),
            payload.get("judge"),
            payload.get("last_judge"),
        )
        line += f": {escape_mrkdwn(shorten(note, MAX_HEADLINE_CHARS))}"
    return line


def build_recovered_message(alerts: Sequence[Alert]) -> SlackMessage:
    """ONE reply in an alert's thread for every check of it that recovered on a day (their
    incidents closed): the level each is back at against the level before the incident."""
    closed = alerts[0].payload.get("closed_on") or alerts[0].partition_date
    plural = "s" if len(alerts) != 1 else ""
    closed = shorten(str(closed), MAX_LABEL_CHARS)
    lines = [
        f":white_check_mark: *Recovered* on {escape_mrkdwn(closed)}: {len(alerts)} check{plural}"
    ]
    lines += [f"• {recovered_line(alert)}" for alert in alerts]
    names = ", ".join(f"{short_label(a.rule)} on {shown_slice(a.slice)}" for a in alerts)
    plain = f"Seer: recovered on {closed}: {names}"
    return SlackMessage(text=escape_mrkdwn(plain), blocks=packed_sections(lines))


def build_run_failure_message(
    alerts: Sequence[Alert], dagster_url: str = DEFAULT_DAGSTER_URL
) -> SlackMessage:
    """Crashed runs, one section per (job, error): the days they covered, the failing
    step's error (already redacted and cut), links to a few of the runs. A failed backfill
    is therefore one message listing its days, not one post per run."""
    groups: dict[tuple[str, str], list[Alert]] = {}
    for alert in alerts:
        key = (short_label(alert.payload.get("job", "?")), str(alert.payload.get("error") or ""))
        groups.setdefault(key, []).append(alert)
    backfills = sorted(
        {short_label(a.payload["backfill"]) for a in alerts if a.payload.get("backfill")}
    )
    title = f"Seer: {len(alerts)} run(s) failed"
    if backfills:
        title += f" in backfill {', '.join(backfills)}"
    blocks: list[dict[str, Any]] = [header(title)]
    for (job, error), group in groups.items():
        days = sorted({str(a.payload["partition"]) for a in group if a.payload.get("partition")})
        on_days = f" on {len(days)} day(s): {escape_mrkdwn(', '.join(days))}" if days else ""
        runs = [short_label(a.payload.get("run_id", a.slice)) for a in group]
        links = ", ".join(slack_link(run_url(dagster_url, r), f"run {r[:8]}") for r in runs[:5])
        more = f" and {len(runs) - 5} more" if len(runs) > 5 else ""
        cause = escape_mrkdwn(shorten(error or "no error message", 1500, one_line=False))
        blocks.append(
            section(
                f":x: Job `{escape_mrkdwn(job)}` failed{on_days} ({links}{more}).\n```{cause}```"
            )
        )
    jobs = ", ".join(sorted({job for job, _ in groups}))
    text = escape_mrkdwn(f"{title} of {jobs}")
    return SlackMessage(text=text, blocks=blocks)


def build_freshness_message(
    alerts: Sequence[Alert], dagster_url: str = DEFAULT_DAGSTER_URL
) -> SlackMessage:
    """A daily partition that has not materialized by its deadline."""
    blocks: list[dict[str, Any]] = [header("Seer: metrics are late")]
    for alert in alerts:
        payload = alert.payload
        blocks.append(
            section(
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
_CONSOLE_ICON = re.compile(
    r":(red_circle|large_orange_circle|white_circle|x|hourglass|white_check_mark): "
)
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
