"""Reading a slice row for a rule: numbers, counts, trailing days, effective settings."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
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


@dataclass(frozen=True)
class DailyValues:
    """One slice's trailing days for one statistic: value, spread and count per day."""

    values: list[float]
    stds: list[float]
    counts: list[int]


def daily_values(rule: Rule, past: pd.DataFrame | None, day: date) -> DailyValues:
    statistic = rule.statistic
    count_column = STATISTICS[statistic][0]
    std_column = statistic.replace("mean_", "std_")
    result = DailyValues([], [], [])
    if past is None or past.empty or rule.baseline is None:
        return result
    start = day - timedelta(days=rule.baseline.trailing_days)
    for row in past.to_dict("records"):
        if not start <= row["_day"] < day:
            continue
        value, count = number_or_none(row.get(statistic)), event_count(row.get(count_column))
        if value is None or count == 0:
            continue
        result.values.append(value)
        result.counts.append(count)
        if statistic in SHARE_STATISTICS:
            result.stds.append(share_std(value, count))
        else:
            result.stds.append(number_or_none(row.get(std_column)) or 0.0)
    return result
