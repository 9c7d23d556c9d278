"""A slice's figures today, and a parent's events outside one of its slices.

The rest of a parent (its events outside the child) is exact from the slice table's
counts and means: `n_rest * mean_rest = n_P * mean_P - n_C * mean_C`. Read by
`attribution` (what a child explains of its parent) and `lead_order` (how much a lead
fell outside a crossing one).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from seer_metrics.rules.model import STATISTICS, VOLUME_STATISTIC, CheckOutcome, RestOfParent


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def today_figures(
    outcome: CheckOutcome, rows: Mapping[str, Mapping[str, Any]]
) -> tuple[int, float | None]:
    """(events with a defined value, mean) of the outcome's slice today."""
    row = rows.get(outcome.slice)
    if row is not None:
        # A volume loss has no mean to share out (the count is the statistic): no events.
        count_column = STATISTICS.get(outcome.statistic, ("",))[0]
        volume = outcome.statistic == VOLUME_STATISTIC
        count = None if volume else _number(row.get(count_column))
        return (int(count) if count is not None else 0), _number(row.get(outcome.statistic))
    return outcome.sample_size, outcome.observed


def _remove(total: float, count: int, part: float, part_count: int) -> tuple[int, float | None]:
    rest = count - part_count
    if rest <= 0:
        return 0, None
    return rest, (total * count - part * part_count) / rest


def _rest(
    parent: float | None, parent_count: int | None, child: float | None, child_count: int | None
) -> tuple[int, float | None]:
    """(events, mean) of the parent's events outside the child; (0, None) unless both have
    figures."""
    if parent is None or child is None or not parent_count or not child_count:
        return 0, None
    return _remove(parent, parent_count, child, child_count)


def same_baseline(child: CheckOutcome, parent: CheckOutcome) -> bool:
    """Whether two outcomes of a rule read their change over the same days. Not when one
    slice's open incident keeps its baseline before the incident while the other's is the
    trailing week, which holds the trouble's days: their drops, and the rest of the
    parent's, do not add up. On a drift over tenant=acme (ideal judge, seed 117) prod x
    acme fell 0.16 against the 28 days before its incident, acme 0.11 against a week the
    drift was already in, and prod x acme "explained 100%" of acme's drop. A drift rule's
    windows both end a week back, before the days of a trouble under way, whichever
    incident holds them: they compare (refused, the drift of prod x v2 lost its lead to
    env=prod on its later days). Outcomes without a window (a same-day baseline, or
    stored before windows were) compare."""
    if None in (child.baseline_window, parent.baseline_window):
        return True
    if child.baseline_window == parent.baseline_window:
        return True
    return child.recent_days > 0 and parent.recent_days > 0


def rest_of_parent(
    child: CheckOutcome,
    parent: CheckOutcome,
    slice_rows: Mapping[str, Mapping[str, Any]] | None = None,
) -> RestOfParent:
    """The parent's events outside `child` for the same drop rule, today and in baseline.

    Today's counts and means come from the day's slice rows when given (else from the
    outcomes); the baselines from the two outcomes (mean and event count of each). The
    rest over a drift rule's recent days only where the two were read over as many days:
    a pair the slice table had only today (under the minimum sample before) read against
    its parent's 8 days gave a rest mostly of clean days (tenant=t2 on a wrong index,
    lexical judge, seed 120: 0.03 down over "the last 1 days" where today it fell 0.75).
    """
    rows = slice_rows or {}
    child_count, child_mean = today_figures(child, rows)
    parent_count, parent_mean = today_figures(parent, rows)
    events, observed = 0, None
    if child_mean is not None and parent_mean is not None:
        events, observed = _remove(parent_mean, parent_count, child_mean, child_count)
    baseline = None
    if same_baseline(child, parent):
        _, baseline = _rest(
            parent.baseline,
            parent.baseline_sample_size,
            child.baseline,
            child.baseline_sample_size,
        )
    recent_events, recent = 0, None
    if child.recent_days == parent.recent_days:
        recent_events, recent = _rest(
            parent.recent_observed,
            parent.recent_sample_size,
            child.recent_observed,
            child.recent_sample_size,
        )
    return RestOfParent(
        parent=parent.slice,
        statistic=child.statistic,
        events=max(events, 0),
        observed=observed,
        baseline=baseline,
        threshold=child.threshold,
        worse_when=child.worse_when,
        recent_observed=recent,
        recent_days=child.recent_days if recent is not None else 0,
        recent_events=recent_events if recent is not None else 0,
    )
