"""The words of an incident's story across days, as a page or a reply tells it: much
worse since it opened, failing again soon after a "Recovered", or back (the figures
worded by `wording`)."""

from __future__ import annotations

from collections.abc import Sequence

from seer_metrics.rules.verdict import judged_apart
from seer_metrics.rules.wording import format_value, slice_title, statistic_label


def escalation_note(
    statistic: str,
    observed: float | None,
    opened_on: str,
    opened_observed: float | None,
    reference_on: str | None = None,
) -> str:
    """The line of an open incident that got much worse: it pages again, once. With
    `reference_on`, the worsening is measured from that day's reading (`opened_observed`
    then holds it), the first of the judge that took over after the incident opened."""
    now = format_value(statistic, observed)
    was = format_value(statistic, opened_observed)
    since = (
        "when it opened"
        if reference_on is None
        else f"on {reference_on}, the first day of today's judge"
    )
    return (
        f"still open since {opened_on}, now much worse: {statistic_label(statistic)} {now}, "
        f"was {was} {since}"
    )


def failing_again_note(days: int, recovered_on: str, checks: Sequence[str]) -> str:
    """The line of a slice that pages within days of a "Recovered" reply about it: that
    reply may have come early (a drift's first days: a chance dip closed within noise
    while the drift grew, and the slice paged again two days later), and the person who
    read it must hear so where they read the page."""
    named = f" ({', '.join(checks)})" if checks else ""
    return (
        f"failing again {days} day{'s' if days != 1 else ''} after Seer said it recovered "
        f"on {recovered_on}{named}"
    )


def recovery_note(
    statistic: str,
    observed: float | None,
    before: float | None,
    opened_observed: float | None,
    judge: str | None = None,
    last_judge: str | None = None,
) -> str:
    """What a recovered incident reached, against the level before it (and at its start);
    and when another judge read it back than the one that saw it fail, that the judge may
    be what changed."""
    parts = [f"{statistic_label(statistic)} back to {format_value(statistic, observed)}"]
    if before is not None:
        parts.append(f"{format_value(statistic, before)} before the incident")
    if opened_observed is not None:
        parts.append(f"{format_value(statistic, opened_observed)} when it opened")
    note = parts[0] + (f" ({'; '.join(parts[1:])})" if len(parts) > 1 else "")
    if judged_apart(judge, last_judge):
        note += (
            f", read by {last_judge} where {judge} saw it fail: the judge changed, "
            "perhaps not the retrieval"
        )
    return note


def open_story_note(label: str, rule: str, opened_on: str) -> str:
    """What a new page's lead adds to: an incident on the same check already open (and
    leading its story) on a slice sharing its events. A bloat's second day paged
    env=prod × tenant=globex's f1 drop while prod × retrieval-v2's, paged the day before,
    stayed open: the page alone reads as a second trouble."""
    return f"{slice_title(label)} shares its events, its `{rule}` open since {opened_on}"
