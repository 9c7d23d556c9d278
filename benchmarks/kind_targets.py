"""What the targets of the kinds of trouble read off a replay: which slices overlap a
trouble, its slice's recall and events, a day's lead, a judge change's pages, a fix's
recoveries (`trouble_kinds.run_scenario` measures the targets with them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date

import numpy as np
import pandas as pd

from seer_metrics.rules import AlertItem, CheckOutcome, RulesConfig, alert_order
from seer_metrics.rules.alert_item import headline_check
from seer_metrics.rules.incidents import Incident
from seer_metrics.rules.model import RECOVERY_MARGIN_SHARE, VOLUME_STATISTIC, moved_bad_way
from seer_metrics.rules.readings import number_or_none
from seer_metrics.slices.identity import SliceIdentity, is_narrower
from seer_pipelines.alerts.outbox import RECENT_RECOVERY_DAYS
from seer_pipelines.demo.replay import ReplayedDay
from seer_pipelines.demo.trouble import Trouble

WEEK = 7
# words a statistic about volume (event counts) has in its name
VOLUME_WORDS = ("events", "volume", "count")


def overlaps(label: str, where: Mapping[str, str]) -> bool:
    """Whether the slice `label` shares events with the trouble's slice `where`: no key of
    it has another value there (`all` overlaps everything)."""
    pairs = SliceIdentity.decode(label).pairs
    return all(where.get(key, value) == value for key, value in pairs)


def slice_recall(
    scores: pd.DataFrame, where: Mapping[str, str], days: Sequence[date]
) -> list[float]:
    """The mean recall of the events of the slice `where` on each of `days` (NaN: none),
    from the event scores, so a slice the table has no row for has its figures too."""
    inside = scores["metadata"].map(lambda meta: all(meta.get(k) == v for k, v in where.items()))
    by_day = scores[inside].groupby("partition_date")["recall"].mean()
    return [float(by_day.get(day, np.nan)) for day in days]


def slice_events(scores: pd.DataFrame, where: Mapping[str, str], day: date) -> int:
    today = scores[scores["partition_date"] == day]
    return int(today["metadata"].map(lambda m: all(m.get(k) == v for k, v in where.items())).sum())


def pages_slice(day: ReplayedDay, label: str) -> bool:
    """Whether the day pages the slice `label` (on any rule)."""
    return any(page.slice == label for page in day.pages)


def message_lead(day: ReplayedDay, items: Sequence[AlertItem] | None = None) -> AlertItem | None:
    """The failing outcome the day's message leads with (None: nothing paged), as the
    message chooses it among what pages (an incident opening, or getting much worse): the
    first lead in alert order, whose headline it shows; without one, the open incident
    that explains the first page, else that page (`headline_check`). An incident carried
    without a page is only on the message's "Still open" line and never leads it
    otherwise: a drift over tenant=acme was first named by acme's precision tail getting
    worse while the carried precision tail of env=prod came first in the day's order
    (ideal judge, seed 186). `items`: the day's `alert_order`, when the caller has it."""
    if items is None:
        items = alert_order(day.outcomes, day.rows)
    paged = {(page.rule, page.slice) for page in day.pages}
    shown = [item for item in items if item.key in paged]
    if not shown:
        return None
    open_stories = {(incident.rule, incident.slice) for incident in day.open_incidents}
    chosen = headline_check([item.paged() for item in shown], open_stories)
    return next((item for item in items if item.key == chosen), shown[0])


def lead_slice(day: ReplayedDay) -> str | None:
    """The slice that leads the day's message (None: nothing paged)."""
    lead = message_lead(day)
    return None if lead is None else lead.outcome.slice


@dataclass(frozen=True)
class MissedLead:
    """The message a trouble's lead is read on (its first page; a drift not caught by its
    deadline, that day's), led by another slice than the trouble's."""

    day: date
    lead: str  # the slice it led with ("none": nothing paged that day)
    headline: str
    relation: str  # of the lead to the trouble's slice: narrower, wider, crossing, apart, none


def missed_lead(day: ReplayedDay, label: str) -> MissedLead | None:
    """What led the day's message when its trouble's slice `label` did not (None: it did):
    whether the lead is narrower than the trouble's slice, wider or crossing it says
    which reading of the day took it there (a part read as all of the change, a rest read
    as changed too, or another cut of the same events); `apart`, sharing no events with
    it, another story headed the message."""
    item = message_lead(day)
    if item is not None and item.outcome.slice == label:
        return None
    if item is None:
        return MissedLead(day.day, "none", "nothing paged", "none")
    lead = item.outcome.slice
    relation = "crossing"
    if not SliceIdentity.decode(lead).may_overlap(SliceIdentity.decode(label)):
        relation = "apart"
    elif is_narrower(lead, label):
        relation = "narrower"
    elif is_narrower(label, lead):
        relation = "wider"
    return MissedLead(day.day, lead, item.headline(), relation)


def window_days(config: RulesConfig, rule_name: str) -> int:
    """The days back a change rule's baseline reaches: on the day a judge change is that
    many days old or more, it compares the new judge with itself only, and a page is one
    of clean traffic (a same-day baseline always does)."""
    baseline = config.rule(rule_name).baseline
    if baseline is None or baseline.slice is not None:
        return 0
    return baseline.trailing_days + baseline.skip_recent_days


def judge_change_pages(
    config: RulesConfig,
    pages: Sequence[tuple[date, CheckOutcome]],
    new_judge_pages: Mapping[date, Sequence[tuple[str, str]]] | None,
) -> list[CheckOutcome]:
    """The change pages (day, page) after a judge change that the change made: all of
    them but those on a day when the same traffic, judged by the new judge all along,
    pages a change on an overlapping slice too. That day's readings page either way (7
    days into the ideal judge, lexical seed 109: retrieval-v1 × acme 0.18 lower over 37
    events, paged by the new judge's own clean stream as well). `new_judge_pages`: the
    (rule, slice) that stream pages on each day; without them, every one."""
    if new_judge_pages is None:
        return [page for _, page in pages]
    return [
        page
        for day, page in pages
        if not any(
            config.rule(rule).kind == "drop"
            and overlaps(label, dict(SliceIdentity.decode(page.slice).pairs))
            for rule, label in new_judge_pages.get(day, ())
        )
    ]


def is_volume(statistic: str) -> bool:
    return any(word in statistic for word in VOLUME_WORDS)


def recovered_after_fix(
    replayed: Sequence[ReplayedDay],
    days: int,
    trouble: Trouble,
    own_within: int = WEEK,
    all_within: int = 2 * WEEK,
) -> bool:
    """The trouble's own slice's incidents (its "Recovered" reply) closed within
    `own_within` days of the fix, and every incident opened on an overlapping slice while
    it lasted within `all_within` (and its own slice opened one). A fix opens ~60
    incidents on overlapping slices; one of them reads low by chance for a week now and
    then (tenant=acme 0.06-0.07 below its 28-day level three days running, in the clean
    stream itself), so "every one within a week" measures that tail more than the rules.
    The report also says how often every one closed within a week."""
    opened, own = _opened_by(replayed, days, trouble)

    def closed_within(limit: int) -> set[tuple[str, str]]:
        return {i.key for d in replayed[days : days + limit] for i in d.changes.closed}

    return bool(own) and own <= closed_within(own_within) and opened <= closed_within(all_within)


def _opened_by(
    replayed: Sequence[ReplayedDay], days: int, trouble: Trouble
) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """The incidents opened on slices overlapping the trouble over its `days`, and those
    of its own slice."""
    opened = {
        i.key for d in replayed[:days] for i in d.changes.opened if overlaps(i.slice, trouble.where)
    }
    return opened, {key for key in opened if key[1] == trouble.slice_label}


def days_to_close(
    replayed: Sequence[ReplayedDay], days: int, trouble: Trouble
) -> tuple[int | None, int | None]:
    """The day after the fix (from 1) by which its own slice's incidents had all closed,
    and every incident it opened (None: one was still open at the end): how near a miss
    of `recovered_after_fix` is to its week. Only incidents opened before the fix count:
    a chance page of the slice after it opens another, which is not the trouble's
    (lexical judge, seed 110: env=prod × acme's precision drop closed 6 days after a
    bloat's fix, paged again on the 8th and closed on the 14th)."""
    opened, own = _opened_by(replayed, days, trouble)
    closed_on: dict[tuple[str, str], int] = {}
    for index, day in enumerate(replayed[days:], start=1):
        for incident in day.changes.closed:
            if incident.key in opened and incident.opened_on < replayed[days].day:
                closed_on[incident.key] = index

    def by(keys: set[tuple[str, str]]) -> int | None:
        if not keys or not keys <= set(closed_on):
            return None
        return max(closed_on[key] for key in keys)

    return by(own), by(opened)


def _day_value(table: pd.DataFrame, label: str, day: date, statistic: str) -> float | None:
    rows = table[(table["slice"] == label) & (table["partition_date"] == day)]
    return number_or_none(rows[statistic].iloc[0]) if len(rows) else None


def still_moved(
    incident: Incident, config: RulesConfig, table: pd.DataFrame, clean: pd.DataFrame
) -> bool:
    """Whether, on the day the incident closed, the trouble still moved its slice's
    statistic the rule's bad way by at least a quarter of the rule's step (a change rule's
    recovery margin): the same events without the trouble (`clean`) read that much
    better. It tells a "Recovered" said while the trouble still holds the slice (ideal
    judge, seed 114: acme's bloated share read 0.466 on the day it recovered, the same
    events without the drift 0.397) from one of a chance dip the trouble barely touches
    (lexical judge, seed 120: tenant=globex's precision beside a drift of prod × v2). A
    volume statistic is read as a share of the clean count."""
    rule = config.rule(incident.rule)
    day = incident.closed_on
    if day is None:
        return False
    observed = _day_value(table, incident.slice, day, rule.statistic)
    normal = _day_value(clean, incident.slice, day, rule.statistic)
    moved = moved_bad_way(observed, normal, rule.worse_when)
    if moved is None:
        return False
    if rule.statistic == VOLUME_STATISTIC:
        if not normal:
            return False
        moved /= normal
    return moved >= RECOVERY_MARGIN_SHARE * rule.escalation_step


def corrected(incident: Incident, replayed: Sequence[ReplayedDay]) -> bool:
    """Whether a page of the incident's slice, on any check, followed its "Recovered"
    within `RECENT_RECOVERY_DAYS` in the replay: the page that says "failing again"."""
    closed = incident.closed_on
    if closed is None:
        return False
    return any(
        0 < (day.day - closed).days <= RECENT_RECOVERY_DAYS and pages_slice(day, incident.slice)
        for day in replayed
    )
