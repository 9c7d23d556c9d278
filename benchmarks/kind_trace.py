"""The day-by-day trace of a scenario of the kinds of trouble (`--trace`): what each
replayed day did on the slices overlapping the trouble."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kind_targets import message_lead, overlaps

from seer_metrics.rules import alert_order
from seer_metrics.rules.incidents import Incident
from seer_metrics.slices.identity import SliceIdentity
from seer_pipelines.demo.replay import ReplayedDay


def _figures(incident: Incident) -> str:
    return (
        f"opened {incident.opened_on} at {incident.opened_observed} vs {incident.opened_baseline}"
    )


def trace_days(replayed: Sequence[ReplayedDay], where: Mapping[str, str], title: str) -> str:
    """What each replayed day did on the slices overlapping the trouble: the lead (and,
    on a day that pages, its headline), the pages, the closures, the readings of the
    incidents open at the end and of those of the trouble's own slice while they are open
    (held: a pass a slice sharing its events held; paused: it neither counted nor started
    the count again; waiting: it counted but could not close); then those incidents. A
    fix's slice that closes late shows the days it waited and what it read on them."""
    lines = [f"trace: {title}"]
    opened: dict[tuple[str, str], Incident] = {}
    still = {i.key for i in replayed[-1].open_incidents} if replayed else set()
    own = set(where.items())
    open_before: set[tuple[str, str]] = set()
    for day in replayed:
        items = alert_order(day.outcomes, day.rows)
        first = f"{items[0].outcome.rule} {items[0].outcome.slice}" if items else "none"
        shown = message_lead(day, items)
        lead = "none" if shown is None else f"{shown.outcome.rule} {shown.outcome.slice}"
        unshown = f" (first in the day's order: {first})" if lead != first else ""
        lines.append(f"  {day.day}: lead {lead}{unshown}")
        if shown is not None:
            lines.append(f"    headline: {shown.headline()}")
            leads = [
                f"{i.outcome.rule} {i.outcome.slice}"
                + (f" (explains {i.explanation.parent})" if i.explanation else "")
                for i in items
                if i.leads
            ]
            lines.append(f"    leads: {'; '.join(leads)}")
        for page in day.pages:
            if overlaps(page.slice, where):
                lines.append(
                    f"    page {page.rule} {page.slice}: {page.observed} vs {page.baseline} "
                    f"(noise {page.noise})"
                )
        for incident in day.changes.closed:
            if overlaps(incident.slice, where):
                lines.append(
                    f"    closed {incident.rule} {incident.slice} ({_figures(incident)}, "
                    f"last {incident.last_observed}, paged {incident.paged})"
                )
        if any(verdict.held for verdict in day.changes.verdicts):
            holding = [
                f"{v.rule} {v.slice}"
                for v in day.changes.verdicts
                if v.kind == "drop" and v.status == "fail"
            ]
            lines.append(f"    failing changes (they may hold): {', '.join(holding) or 'none'}")
        for verdict in day.changes.verdicts:  # the daily readings of what stays open
            key = (verdict.rule, verdict.slice)
            mine = key in open_before and set(SliceIdentity.decode(verdict.slice).pairs) == own
            if (key in still and overlaps(verdict.slice, where)) or mine:
                states = [
                    name
                    for name, flag in (
                        ("held", verdict.held),
                        ("paused", verdict.paused),
                        ("waiting", verdict.waiting),
                    )
                    if flag
                ]
                shown = f" ({', '.join(states)})" if states else ""
                lines.append(
                    f"    read {verdict.rule} {verdict.slice}: {verdict.status}{shown} "
                    f"{verdict.observed} vs "
                    f"{verdict.baseline} (noise {verdict.noise})"
                )
        open_before = {i.key for i in day.open_incidents}
        opened.update((i.key, i) for i in day.changes.opened if overlaps(i.slice, where))
    for key in sorted(set(opened) & still):
        lines.append(f"  still open: {key[0]} {key[1]} ({_figures(opened[key])})")
    return "\n".join(lines)
