"""The bold headline of a day's check message: the slice that leads its story, as
`seer_metrics.rules.alert_item.headline_check` chooses it from the outbox's rows, and what
already open shares its events."""

from __future__ import annotations

from collections.abc import Sequence

from seer_metrics.rules.alert_item import PagedCheck, headline_check
from seer_metrics.rules.incident_wording import open_story_note
from seer_metrics.slices.groups import ALL_SLICE
from seer_metrics.slices.identity import SliceIdentity
from seer_pipelines.alerts.alert_row import Alert


def leads_its_story(alert: Alert) -> bool:
    """The alert's slice leads its story (rows recorded before `leads`: it explained one)."""
    return bool(alert.payload.get("leads", alert.payload.get("explains")))


def opened_on(alert: Alert) -> str:
    """The day the alert's incident opened, as stored ("?" when unknown)."""
    return str((alert.payload.get("incident") or {}).get("opened_on") or "?")


def message_headline(alerts: Sequence[Alert], carried: Sequence[Alert]) -> str | None:
    """The day's bold headline, as `headline_check` chooses it: the first lead among what
    pages, else the story of an incident already open that explains the first page, with
    the day it opened; None: no headline. Rows recorded before ranks come last."""
    ordered = sorted(
        alerts,
        key=lambda a: (a.payload.get("alert_rank") is None, a.payload.get("alert_rank") or 0),
    )
    paged = [
        PagedCheck(
            a.rule,
            a.slice,
            leads=leads_its_story(a) and bool(a.payload.get("headline")),
            explained_by=a.payload.get("explained_by") or None,
        )
        for a in ordered
    ]
    stories = {(a.rule, a.slice): a for a in carried if a.payload.get("headline")}
    leading = {(c.rule, c.slice): a for a, c in zip(ordered, paged, strict=True) if c.leads}
    chosen = headline_check(paged, stories)
    if chosen in leading:
        shared = open_story_sharing(leading[chosen], carried)
        if shared is None:
            return leading[chosen].payload["headline"]
        note = open_story_note(shared.slice, shared.rule, opened_on(shared))
        return f"{leading[chosen].payload['headline']}; {note}"
    if chosen not in stories:
        return None
    story = stories[chosen]
    return f"{story.payload['headline']}; its incident open since {opened_on(story)}"


def open_story_sharing(lead: Alert, carried: Sequence[Alert]) -> Alert | None:
    """The open incident on the lead's statistic (a drift's beside a drop's) that leads
    its own story on another slice sharing the lead's events (not `all`, which shares
    every slice's), first in the day's order; None: none."""
    statistic = lead.payload.get("statistic")
    mine = SliceIdentity.decode(lead.slice)
    sharing = [
        a
        for a in carried
        if a.payload.get("statistic") == statistic
        and a.slice not in (lead.slice, ALL_SLICE)
        and leads_its_story(a)
        and SliceIdentity.decode(a.slice).may_overlap(mine)
    ]
    return min(sharing, key=lambda a: a.payload.get("alert_rank") or 0, default=None)
