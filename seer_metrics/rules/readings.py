"""Reading a slice row for a rule: numbers, counts, trailing days, effective settings."""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from datetime import date, timedelta
from typing import Any

import pandas as pd

from seer_metrics.rules.model import SHARE_STATISTICS, STATISTICS, Rule, Severity
from seer_metrics.rules.scope import slice_matches
from seer_metrics.rules.statistics import share_std

TOLERANCE = 1e-12


def number_or_none(value: Any) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def event_count(value: Any) -> int:
    number = number_or_none(value)
    return int(number) if number is not None else 0


@dataclass(frozen=True)
class Effective:
    """A rule's settings on one slice, after its overrides."""

    threshold: float
    severity: Severity
    enabled: bool
    minimum_sample: int


def effective(rule: Rule, label: str, default_minimum: int) -> Effective:
    settings = Effective(
        threshold=rule.threshold,
        severity=rule.severity,
        enabled=True,
        minimum_sample=rule.minimum_sample or default_minimum,
    )
    for override in rule.overrides:
        if slice_matches(label, override.slices):
            settings = replace(
                settings,
                threshold=override.threshold
                if override.threshold is not None
                else settings.threshold,
                severity=override.severity or settings.severity,
                enabled=override.enabled if override.enabled is not None else settings.enabled,
                minimum_sample=override.minimum_sample or settings.minimum_sample,
            )
    return settings


def represented_events(row: Any, count: int) -> float:
    """How many events the `count` judged events behind a statistic stand for: `count`
    itself when every event was judged, more on a sampled day (the judged share of the
    slice's events that were to be judged)."""
    judged = event_count(row.get("evaluated"))
    unjudged = event_count(row.get("not_sampled")) + event_count(row.get("skipped_budget"))
    if not judged or not unjudged:
        return float(count)
    return count * (judged + unjudged) / judged


def sampling_error(row: Any, statistic: str) -> float:
    """The sampling standard error of a slice statistic (0 when every event was judged)."""
    return number_or_none(row.get(f"se_{statistic.removeprefix('mean_')}")) or 0.0


def day_variance(row: Any, statistic: str, std: float, count: int) -> float:
    """Variance of one day's statistic: the events' own noise over the events it stands
    for, plus the sampling variance. For a fully judged day, std^2 / count."""
    return std**2 / represented_events(row, count) + sampling_error(row, statistic) ** 2


def effective_count(row: Any, statistic: str, share: float, count: int) -> float:
    """The sample size a share behaves like once the sampling is counted: `count` when
    every event was judged; fewer when a sample of a large slice carries a wide error."""
    variance = day_variance(row, statistic, math.sqrt(max(share * (1 - share), 0.0)), count)
    if represented_events(row, count) == count and sampling_error(row, statistic) == 0:
        return float(count)
    if variance <= 0:
        return float(count)
    return min(share * (1 - share) / variance, represented_events(row, count))


def statistic_std(row: Any, statistic: str, value: float, count: int) -> float:
    """The spread of the events behind one day's statistic: binomial for a share, the
    row's `std_*` column for a mean (0 when unknown)."""
    if statistic in SHARE_STATISTICS:
        return share_std(value, count)
    return number_or_none(row.get(statistic.replace("mean_", "std_"))) or 0.0


@dataclass(frozen=True)
class DailyValues:
    """One slice's trailing days for one statistic: value, spread and count per day, and
    on sampled days the events each count stands for and the sampling error."""

    values: list[float]
    stds: list[float]
    counts: list[int]
    populations: list[float] = field(default_factory=list)
    standard_errors: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class SliceHistory:
    """What a rule may learn its baseline from on one slice: the earlier days' rows, the
    days it must not learn (`excluded`: a breakage, another judge) and how far back the
    window may reach over them."""

    past: pd.DataFrame | None = None
    excluded: frozenset[date] = frozenset()
    lookback_days: int = 0
    judge_note: str = ""
    # the days another judge judged (also in `excluded`): never compared with today's
    judged_apart: frozenset[date] = frozenset()


def window_start(
    day: date,
    trailing_days: int,
    excluded: Collection[date] = (),
    lookback_days: int = 0,
    skip_recent_days: int = 0,
) -> date:
    """The first day of a trailing window of `trailing_days` calendar days that are not
    `excluded`, ending `skip_recent_days` before `day`: the window reaches back over
    excluded days (a breakage the baseline must not learn), at most `lookback_days`
    before `day` (when larger than the window)."""
    start, counted = day - timedelta(days=skip_recent_days), 0
    limit = max(lookback_days, trailing_days + skip_recent_days)
    while counted < trailing_days and (day - start).days < limit:
        start -= timedelta(days=1)
        counted += start not in excluded
    return start


def day_reading(row: Any, statistic: str) -> tuple[float, int] | None:
    """(value, events behind it) of one day's statistic; None when the day has none."""
    value = number_or_none(row.get(statistic))
    count = event_count(row.get(STATISTICS[statistic][0]))
    return None if value is None or count == 0 else (value, count)


def daily_values(
    rule: Rule,
    past: pd.DataFrame | None,
    day: date,
    excluded: Collection[date] = (),
    lookback_days: int = 0,
) -> DailyValues:
    """The slice's trailing days for the rule's statistic, `excluded` days left out (and
    the window reaching back over them, up to `lookback_days`)."""
    statistic = rule.statistic
    result = DailyValues([], [], [], [], [])
    if past is None or past.empty or rule.baseline is None:
        return result
    skipped = rule.baseline.skip_recent_days
    start = window_start(day, rule.baseline.trailing_days, excluded, lookback_days, skipped)
    end = day - timedelta(days=skipped)
    for row in past.to_dict("records"):
        if not start <= row["_day"] < end or row["_day"] in excluded:
            continue
        reading = day_reading(row, statistic)
        if reading is None:
            continue
        value, count = reading
        result.values.append(value)
        result.counts.append(count)
        result.populations.append(represented_events(row, count))
        result.standard_errors.append(sampling_error(row, statistic))
        result.stds.append(statistic_std(row, statistic, value, count))
    return result


def recent_reading(
    rule: Rule, history: SliceHistory, day: date, observed: float | None, count: int
) -> tuple[float | None, int, int]:
    """(mean, events, days) of the statistic over the days a drift rule's baseline skips
    and today, event-weighted, days another judge judged left out; (None, 0, 0) for a rule
    that skips none. A drift is the change of those days: read over all of them, a small
    slice's chance move of one day averages out."""
    skipped = rule.baseline.skip_recent_days if rule.baseline is not None else 0
    if not skipped or observed is None or count <= 0:
        return None, 0, 0
    total, events, days = observed * count, count, 1
    past = history.past
    if past is not None and not past.empty:
        start = day - timedelta(days=skipped)
        for row in past.to_dict("records"):
            if not start <= row["_day"] < day or row["_day"] in history.judged_apart:
                continue
            reading = day_reading(row, rule.statistic)
            if reading is None:
                continue
            value, number = reading
            total, events, days = total + value * number, events + number, days + 1
    return total / events, events, days
