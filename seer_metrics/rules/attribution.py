"""Which failing slice leads an alert: the narrowest one, by what it explains.

A release that hurts `env=prod` with `feature_flag=retrieval-v2` also moves `env=prod`,
`feature_flag=retrieval-v2`, `all` and every intersection that overlaps it. The alert
should lead with the slice where the change happened, and say how much of the wider
change it accounts for. Following Adtributor (Bhagwan et al., NSDI 2014), a narrower
slice C of a failing parent P is weighed by its *explanatory power*, the share of the
parent's change it accounts for,

    share = (events_C * drop_C) / (events_P * drop_P),

and by its *surprise*, how far beyond noise its own drop is (`drop / noise`). C explains
P when its share is at least `EXPLAINING_SHARE` (or a majority, when the rest of P only
dipped within its noise and at most `STRONG_CONCENTRATION` times as much as C) and the
change is concentrated in it (the rest of P moved at most `CONCENTRATION` times as much
as C, and less than C beyond the noise of the gap): a change spread evenly over P gives
each child the share of P's events it has, and then P itself leads, as it does when the
day cannot tell the two. For a drift rule (its baseline skips the latest days) the
concentration of a change under way for days is read over those days and today, where a
small rest's chance move of one day averages out (`Explanation.concentrated`). Among
children whose shares tie (within `SHARE_TIE`), the one with fewer keys is preferred,
then the more surprising; of two crossing children with as many keys that both explain
it, the one with fewer events (the nearer to where they meet); the explanation is
followed down while a narrower slice explains the current one. A slice whose own drop is
within noise never leads or explains. The rest of a parent (its events outside the
child) is exact from the slice table (`rest_figures`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import pandas as pd

from seer_metrics.rules import wording
from seer_metrics.rules.alert_item import AlertItem
from seer_metrics.rules.explanation import (
    CONCENTRATION,
    MAJORITY_SHARE,
    Explanation,
    beyond_noise,
    explanation,
)
from seer_metrics.rules.lead_order import Lead, lift_reader, outside_reader, yielding_leads
from seer_metrics.rules.model import STATISTICS, CheckOutcome
from seer_metrics.rules.nested_leads import changes_seen_through, nested_leads
from seer_metrics.rules.readings import event_count, number_or_none, statistic_std
from seer_metrics.rules.rest_figures import today_figures
from seer_metrics.slices.groups import ALL_SLICE
from seer_metrics.slices.identity import SliceIdentity, is_narrower

# Shares this close tie: the slice with fewer keys (the simpler story) is preferred.
SHARE_TIE = 0.05

_SEVERITY_ORDER = {"ERROR": 0, "WARN": 1}


def parent_slices(label: str) -> tuple[str, ...]:
    """The slices one step wider: an intersection's components; `all` for a one-key slice."""
    return tuple(parent.label for parent in SliceIdentity.decode(label).parents)


def key_count(label: str) -> int:
    """How many keys a slice fixes: 0 for `all`, 2 for `env=prod,feature_flag=v2`."""
    return SliceIdentity.decode(label).arity


def _capped(share: float) -> float:
    """Shares above 1 (the rest of the parent rose) are all 'the whole drop'."""
    return min(share, 1.0)


def preferred(explanations: Iterable[Explanation]) -> Explanation | None:
    """The largest share; among shares within `SHARE_TIE` of it, the fewest keys, then the
    largest surprise."""
    found = list(explanations)
    if not found:
        return None
    top = max(_capped(e.share) for e in found)
    tied = [e for e in found if _capped(e.share) >= top - SHARE_TIE]
    return min(tied, key=lambda e: (key_count(e.child), -e.surprise, -e.share, e.child))


def nearest_part(parts: Iterable[Explanation]) -> Explanation | None:
    """The part of a lead's change that comes nearest to explaining it, named in its
    headline when none does: of the parts holding a majority of it whose rest fell at
    most `CONCENTRATION` times as much as they did, the one whose rest fell the least for
    its own fall; else (a change spread evenly) the `preferred` one. By the largest
    share, a flag holding 76% of all's drop with 69% of the events was named beside
    tenant=t2 on a wrong index, 71% of it with 11% (lexical judge, 900 a day, seed 253)."""
    found = list(parts)
    near = [
        (ratio, part)
        for part in found
        if (ratio := _rest_fall_for_own(part)) is not None and ratio <= CONCENTRATION
    ]
    if not near:
        return preferred(found)
    return min(near, key=lambda pair: (pair[0], key_count(pair[1].child), pair[1].child))[1]


def _rest_fall_for_own(part: Explanation) -> float | None:
    """How much the rest of the parent fell for the part's own fall, for a part holding a
    majority of the change; None otherwise or without figures."""
    rest = part.rest_drop
    if part.share <= MAJORITY_SHARE or part.child_drop <= 0 or rest is None:
        return None
    return rest / part.child_drop


def narrower_parts(
    parent: CheckOutcome,
    outcomes: Iterable[CheckOutcome],
    rows: Mapping[str, Mapping[str, Any]],
    failing_only: bool = True,
) -> list[Explanation]:
    """What each narrower slice of the same rule accounts for of `parent`'s drop.

    Only slices with fewer events than the parent (one with the same events is the same
    story told with more keys) and, with `failing_only`, failing drops beyond noise.
    """
    parent_events, _ = today_figures(parent, rows)
    parts = []
    for child in outcomes:
        if child.rule != parent.rule or not is_narrower(child.slice, parent.slice):
            continue
        if failing_only and not (child.failed and beyond_noise(child)):
            continue
        if today_figures(child, rows)[0] >= parent_events:
            continue
        found = explanation(child, parent, rows)
        if found is not None and found.share > 0:
            parts.append(found)
    return parts


def best_explanation(
    parent: CheckOutcome,
    outcomes: Iterable[CheckOutcome],
    rows: Mapping[str, Mapping[str, Any]] | None = None,
) -> Explanation | None:
    """The narrower failing slice that explains `parent`'s drop, if one does: the
    `preferred` one, or a crossing one with as many keys and fewer events. Two crossing
    slices that both explain the change hold it where they meet, and the smaller is the
    nearer to it: with three quarters of tenant=acme losing its top hit (lexical judge,
    seed 142) prod x v1 (83 events, 101% of v1's drop) had explained retrieval-v1's drop
    by its larger share beside v1 x acme (36 events, 85%), and led before acme."""
    explaining = [e for e in narrower_parts(parent, outcomes, rows or {}) if e.explains]
    chosen = preferred(explaining)
    if chosen is None:
        return None
    mine = SliceIdentity.decode(chosen.child)
    crossing = [
        e
        for e in explaining
        if key_count(e.child) == mine.arity and SliceIdentity.decode(e.child).may_overlap(mine)
    ]
    return min(crossing, key=lambda e: (e.child_events, e != chosen, e.child))


def _rows_by_slice(slice_rows: pd.DataFrame | None) -> dict[str, Mapping[str, Any]]:
    if slice_rows is None or slice_rows.empty:
        return {}
    return {str(row["slice"]): row for row in slice_rows.to_dict("records")}


def _rule_items(
    outcomes: Sequence[CheckOutcome], rows: Mapping[str, Mapping[str, Any]]
) -> list[AlertItem]:
    """The failing drops of one rule, each a lead or explained by the lead it leads to."""
    failing = [o for o in outcomes if o.failed]
    leading = [o for o in failing if beyond_noise(o)]
    by_slice = {o.slice: o for o in outcomes}
    best = {o.slice: e for o in leading if (e := best_explanation(o, leading, rows))}

    def story_end(label: str) -> str:
        while label in best:  # each step is strictly narrower, so this ends
            label = best[label].child
        return label

    explained: dict[str, list[Explanation]] = {}
    for found in best.values():
        explained.setdefault(found.child, []).append(found)
    all_events = max((today_figures(o, rows)[0] for o in outcomes), default=0)
    if ALL_SLICE in by_slice:
        all_events = today_figures(by_slice[ALL_SLICE], rows)[0] or all_events
    items = []
    for outcome in failing:
        events, _ = today_figures(outcome, rows)
        impact = events * outcome.delta / all_events if outcome.delta and all_events else None
        if outcome.slice in best:
            end = story_end(outcome.slice)
            share = explanation(by_slice[end], outcome, rows)
            items.append(
                AlertItem(
                    outcome,
                    explained_by=end,
                    explained_share=None if share is None else share.share,
                    impact=impact,
                )
            )
            continue
        parents = explained.get(outcome.slice, [])
        largest = min(
            parents,
            key=lambda e: (-round(e.parent_drop * e.parent_events, 9), e.parent),
            default=None,
        )
        part = None
        if beyond_noise(outcome) and narrower_parts(outcome, leading, rows):
            part = nearest_part(narrower_parts(outcome, outcomes, rows, failing_only=False))
        items.append(
            AlertItem(
                outcome,
                leads=beyond_noise(outcome),
                explanation=largest,
                nearest_part=part,
                impact=impact,
                explained_parents=tuple(e.parent for e in parents),
            )
        )
    return items


def alert_order(
    outcomes: Sequence[CheckOutcome], slice_rows: pd.DataFrame | None = None
) -> list[AlertItem]:
    """The failing outcomes of a day, the slice that explains the most first.

    For each drop rule, each failing drop is either explained by a narrower failing slice
    (followed down to the narrowest one: `explained_by`) or leads. Order: the leads, the
    story (leads whose slices share events) that moved the traffic most first (`_stories`);
    within it those explaining (or carrying, `nested_leads`) a wider slice's change first,
    the widest first, but not one whose told change moved the traffic less than a crossing
    lead on its statistic that explains nothing wider (it is a part of that one's story:
    retrieval-v2 x acme explained acme's drift, its part inside a drift of prod x v2, and
    led it; lexical judge, seed 246); one whose drop a crossing lead on its statistic tells
    (`lead_order`), or that shows a wider lead's spread change through a parent, after it;
    the slice of the largest `standard_impact` first, then ERROR before WARN, then the
    largest impact (with ERROR first, a chance f1 drop of retrieval-v2 x umbrella, 37-48
    events, headed the bloat of prod x v2 twice: lexical judge, 900 events a day). Then the
    other failures (changes before levels, ERROR before WARN, narrower, high-priority,
    larger drops first), then the explained slices. `slice_rows` are the day's slice table
    rows (today's counts and means)."""
    rows = _rows_by_slice(slice_rows)
    by_rule: dict[str, list[CheckOutcome]] = {}
    for outcome in outcomes:
        if outcome.kind == "drop":
            by_rule.setdefault(outcome.rule, []).append(outcome)
    items = [item for group in by_rule.values() for item in _rule_items(group, rows)]
    items.extend(AlertItem(o) for o in outcomes if o.failed and o.kind != "drop")
    parts, inside = nested_leads(items, outcomes, rows)
    carried, seen_through = changes_seen_through(items, outcomes, rows)
    by_key = {item.key: item for item in items}

    def told(item: AlertItem) -> list[AlertItem]:
        """The wider changes it explains, or carries (`changes_seen_through`)."""
        keys = [carried.get(item.key)]
        if item.explanation is not None:
            keys.append((item.outcome.rule, item.explanation.parent))
        return [by_key[key] for key in keys if key in by_key]

    def width(item: AlertItem) -> int | None:
        """The keys of the widest slice whose change it explains, or carries (None: none)."""
        return min((key_count(wider.outcome.slice) for wider in told(item)), default=None)

    # a lead is read against a crossing one as explaining as wide a change as its
    # slice's widest explained change, on any statistic
    slice_width: dict[str, int] = {}
    for item in items:
        found = width(item)
        if item.leads and found is not None:
            label = item.outcome.slice
            slice_width[label] = min(found, slice_width.get(label, found))
    leads = [Lead(i.outcome, i.impact, slice_width.get(i.outcome.slice)) for i in items if i.leads]
    yielding = yielding_leads(leads, outside_reader(outcomes, rows), lift_reader(outcomes))
    yielding |= inside | seen_through
    # a slice's leads weigh as its strongest one: across statistics in units of their
    # spread, while one slice's leads keep their order by impact (recall before f1)
    standard = {item.key: standard_impact(item, rows) for item in items}
    weight: dict[str, float] = {}
    for item in items:
        if item.leads:
            impact = standard[item.key]
            weight[item.outcome.slice] = max(impact, weight.get(item.outcome.slice, impact))

    def told_size(item: AlertItem) -> float:
        """As large as it, or the widest change it explains or carries, moved the traffic."""
        return max(standard[i.key] for i in (item, *told(item)))

    # a lead explaining a wider change that moved the traffic less than a crossing lead
    # on its statistic explaining nothing wider is a part of that one's story
    def smaller_than_a_crossing(item: AlertItem) -> bool:
        size, mine = told_size(item), SliceIdentity.decode(item.outcome.slice)
        return any(
            other.leads
            and width(other) is None
            and other.outcome.statistic == item.outcome.statistic
            and standard[other.key] > size
            and mine.crosses(SliceIdentity.decode(other.outcome.slice))
            for other in items
        )

    shadowed = {
        i.key for i in items if i.leads and width(i) is not None and smaller_than_a_crossing(i)
    }

    story = _stories([item for item in items if item.leads], told_size)

    def order(item: AlertItem) -> tuple[Any, ...]:
        o = item.outcome
        return (
            not item.leads,
            item.explained_by is not None,
            # leads whose slices share no events tell separate stories: the one that moved
            # the whole traffic most first (each as large as the widest change it explains)
            story.get(o.slice, (0.0, 0)),
            # a lead that is only a part of a wider lead's spread change after it
            item.key in parts,
            # a lead that explains a wider slice's change (the end of its story) before
            # one that explains nothing wider (a slice whose drop stays its own), and the
            # one that explains the widest change first (all's before env=prod's)
            width(item) is None or item.key in shadowed,
            width(item) or 0,
            # then one whose drop a crossing lead on the statistic tells, or whose wider
            # lead's rule finds it not explaining that lead's change, after it
            item.key in yielding,
            o.kind != "drop",
            # the slice that moved the whole traffic most, ERROR before WARN among equals:
            # a small slice's chance ERROR does not head a wider trouble's WARN
            -weight.get(o.slice, 0.0),
            _SEVERITY_ORDER.get(o.severity, 2),
            -(item.impact or 0.0),
            -key_count(o.slice),
            not o.high_priority,
            -(o.delta or 0.0),
            o.rule,
            o.slice,
        )

    troubles = wording.slice_troubles(outcomes)
    return [
        replace(item, troubles=troubles.get(item.outcome.slice, ())) if item.leads else item
        for item in sorted(items, key=order)
    ]


def _stories(
    leads: Sequence[AlertItem], size: Callable[[AlertItem], float]
) -> dict[str, tuple[float, int]]:
    """For each lead's slice, its story's place: (minus the story's size, its number).

    A story is the leads whose slices share events, one to the next; its size is the
    largest `size` of its leads. A chance bloat of env=staging x acme (34 events) that
    explained env=staging's rise had headed the first page of a drift of prod x v2 (138
    events, recall 0.09 down) that explained nothing wider yet (lexical judge, seed 239)."""
    labels = list(dict.fromkeys(item.outcome.slice for item in leads))
    identities = {label: SliceIdentity.decode(label) for label in labels}
    story_of: dict[str, int] = {}
    for number, start in enumerate(labels):
        if start in story_of:
            continue
        story_of[start], waiting = number, [start]
        while waiting:  # every slice that shares events with one already in the story
            here = identities[waiting.pop()]
            for label in labels:
                if label not in story_of and here.may_overlap(identities[label]):
                    story_of[label] = number
                    waiting.append(label)
    sizes: dict[int, float] = {}
    for item in leads:
        number = story_of[item.outcome.slice]
        sizes[number] = max(size(item), sizes.get(number, -math.inf))
    return {label: (-sizes[number], number) for label, number in story_of.items()}


def standard_impact(item: AlertItem, rows: Mapping[str, Mapping[str, Any]]) -> float:
    """Its impact in units of the statistic's spread over the day's events (`all`): how
    many standard deviations of one event it moved the whole traffic's mean. Impacts of
    one statistic keep their order; across statistics a bloated share's points and a
    recall's are not alike. On a drift's first page (ideal judge, seed 118) the bloated
    share of retrieval-v2 x acme (+0.19 over 76 events; a share near 0.4 spreads 0.49) had
    led the drift of prod x v2 (recall 0.099 down over ~130 events; recall spreads ~0.3)."""
    impact = item.impact or 0.0
    row = rows.get(ALL_SLICE)
    statistic = item.outcome.statistic
    if row is None or statistic not in STATISTICS:
        return impact
    count = event_count(row.get(STATISTICS[statistic][0]))
    value = number_or_none(row.get(statistic))
    if count < 2 or value is None:
        return impact
    spread = statistic_std(row, statistic, value, count)
    return impact / spread if spread > 0 else impact


def lead_slices(items: Iterable[AlertItem]) -> list[str]:
    """The slices an alert should name first: those of the leads, in order."""
    return list(dict.fromkeys(item.outcome.slice for item in items if item.leads))
