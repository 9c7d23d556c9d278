"""Volume: a slice's event count against its own normal count.

A day with a tenth of the usual events is not a quality problem the metrics can see: every
slice falls under the minimum sample and says "not enough data". The volume rule says what
happened instead ("28 events, normally about 300: events may be missing upstream").

The normal count is robust and weekday-aware: the median of the same weekday's counts in
the trailing window when there are at least two of them (traffic has a weekly rhythm),
else the median of every day of the window. The day-to-day spread is the median absolute
deviation of those counts (scaled to a standard deviation), added to the Poisson noise of
the count itself. A slice that had events on most days of its window and none today is a
vanished slice: its count is 0, and it is judged like any other.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import date
from statistics import median
from typing import Any

import pandas as pd

from seer_metrics.rules import wording
from seer_metrics.rules.model import CheckOutcome, Rule
from seer_metrics.rules.readings import (
    TOLERANCE,
    Effective,
    SliceHistory,
    event_count,
    window_start,
)
from seer_metrics.rules.statistics import one_sided_p_value, z_value
from seer_metrics.slices.identity import SliceIdentity, SliceLabelError

# Consistency constant of the median absolute deviation for a normal distribution.
_MAD_TO_STD = 1.4826
# Earlier days a normal count needs: a week, one of each weekday. A new tenant's first
# days are no normal (lexical judge, seed 161: 31, 32 and 31 events, then about 22 a day;
# on its sixth day, a Sunday, 12 events read as 61% lost against a median of 31).
_MINIMUM_DAYS = 7
# Same-weekday days needed before the normal is read from them alone.
_SAME_WEEKDAY_DAYS = 2
# A slice seen on more than half of this many recent days and absent today has vanished.
_RECENT_DAYS = 7


def daily_counts(history: SliceHistory, day: date, trailing_days: int) -> dict[date, int]:
    """The slice's event count on each day of its trailing window (excluded days left out)."""
    past = history.past
    if past is None or past.empty or "events" not in past:
        return {}
    start = window_start(day, trailing_days, history.excluded, history.lookback_days)
    counts: dict[date, int] = {}
    for when, events in zip(past["_day"], past["events"], strict=True):
        if start <= when < day and when not in history.excluded:
            counts[when] = counts.get(when, 0) + event_count(events)
    return counts


def normal_count(counts: Mapping[date, int], day: date) -> tuple[float, float, str]:
    """(normal count, its day-to-day standard deviation, what it is) for `day`."""
    same = [n for when, n in counts.items() if when.weekday() == day.weekday()]
    values, what = (
        (same, f"on {day:%A}s")
        if len(same) >= _SAME_WEEKDAY_DAYS
        else (
            list(counts.values()),
            "a day",
        )
    )
    center = float(median(values))
    spread = _MAD_TO_STD * float(median(abs(v - center) for v in values))
    return center, spread, what


def evaluate_volume(
    rule: Rule,
    row: Mapping[str, Any],
    settings: Effective,
    base: dict[str, Any],
    history: SliceHistory,
) -> CheckOutcome:
    """The slice's events today against its normal: fails when the count fell by at least
    the rule's threshold (a share of the normal) and beyond noise."""
    label = base["slice"]
    observed = event_count(row.get("events"))
    assert rule.baseline is not None
    day = base["partition_date"]
    counts = daily_counts(history, day, rule.baseline.trailing_days)
    if len(counts) < _MINIMUM_DAYS:
        return CheckOutcome(
            **base,
            status="no_baseline",
            observed=float(observed),
            sample_size=observed,
            baseline_label=rule.baseline.describe(),
            baseline_sample_size=0,
            message=f"{label}: {observed:,} events; fewer than {_MINIMUM_DAYS} earlier days to "
            "compare the volume with",
        )
    normal, spread, what = normal_count(counts, day)
    if normal < settings.minimum_sample:
        return CheckOutcome(
            **base,
            status="not_enough_data",
            observed=float(observed),
            sample_size=observed,
            baseline=normal,
            message=wording.not_enough_data(
                label, int(normal), "events a day normally", settings.minimum_sample
            ),
        )
    lost = (normal - observed) / normal
    standard_error = math.sqrt(normal + spread**2) / normal
    noise = z_value(rule.confidence) * standard_error if rule.confidence is not None else 0.0
    failed = lost >= settings.threshold - TOLERANCE and lost > noise
    return CheckOutcome(
        **base,
        status="fail" if failed else "pass",
        observed=float(observed),
        sample_size=observed,
        inconclusive=not failed and lost > noise,
        baseline=normal,
        baseline_label=f"its normal {what} over {rule.baseline.describe()}",
        baseline_sample_size=len(counts),
        delta=lost,
        noise=noise,
        p_value=one_sided_p_value(lost, standard_error),
        message=wording.volume_message(label, observed, normal, what, lost, noise, failed),
    )


def _is_intersection_or_unknown(label: str) -> bool:
    """A pair slice, or an earlier day's label the codec does not read (written before
    labels were escaped): neither says a one-key slice vanished."""
    try:
        return SliceIdentity.decode(label).is_intersection
    except SliceLabelError:
        return True


def vanished_slices(
    today_rows: Mapping[str, Any], past_by_slice: Mapping[str, pd.DataFrame], day: date
) -> list[str]:
    """One-key slices with events on most of the last week and no row today (a pair
    slice comes and goes with the volume bound of the slice table: its absence says
    nothing, and its keys' own slices carry the loss)."""
    vanished = []
    for label, past in past_by_slice.items():
        if _is_intersection_or_unknown(label):
            continue
        recent = {when for when in past["_day"] if 0 < (day - when).days <= _RECENT_DAYS}
        if label not in today_rows and len(recent) > _RECENT_DAYS / 2:
            vanished.append(label)
    return sorted(vanished)
