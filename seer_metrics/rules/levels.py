"""Service levels: a slice statistic against a fixed line, or against its normal level."""

from __future__ import annotations

import math
from collections.abc import Mapping
from statistics import median
from typing import Any

from seer_metrics.rules import wording
from seer_metrics.rules.model import SHARE_STATISTICS, STATISTICS, CheckOutcome, Rule
from seer_metrics.rules.readings import (
    TOLERANCE,
    Effective,
    SliceHistory,
    daily_values,
    day_variance,
    effective_count,
    event_count,
    number_or_none,
)
from seer_metrics.rules.statistics import (
    one_sided_p_value,
    pool_groups,
    share_std,
    wilson_interval,
    z_value,
)


def evaluate_level(
    rule: Rule,
    row: Mapping[str, Any],
    settings: Effective,
    base: dict[str, Any],
    history: SliceHistory,
) -> CheckOutcome:
    statistic = rule.statistic
    observed = number_or_none(row.get(statistic))
    sample = event_count(row.get(STATISTICS[statistic][0]))
    label = base["slice"]
    if observed is None or sample < settings.minimum_sample:
        return CheckOutcome(
            **base,
            status="not_enough_data",
            observed=observed,
            sample_size=sample,
            message=wording.not_enough_data(
                label, sample, wording.statistic_label(statistic), settings.minimum_sample
            ),
        )
    if rule.baseline is not None:
        return _evaluate_normal_level(rule, settings, base, observed, sample, history, row)
    beyond = (
        observed < settings.threshold
        if rule.comparison == "below"
        else observed > settings.threshold
    )
    bound_note: tuple[float, float] | None = None
    inconclusive = False
    # How much two days' readings differ by chance: what an open incident's worsening
    # must exceed to page again (None without a confidence: any move of the step counts).
    noise: float | None = None
    if rule.confidence is not None:
        # A sampled day's statistic carries its sampling error too (see day_variance).
        if statistic in SHARE_STATISTICS:
            count = effective_count(row, statistic, observed, sample)
            low, high = wilson_interval(observed, count, rule.confidence)
        else:
            std = number_or_none(row.get(statistic.replace("mean_", "std_"))) or 0.0
            half = z_value(rule.confidence) * math.sqrt(day_variance(row, statistic, std, sample))
            low, high = observed - half, observed + half
        # towards the breach, and towards health
        breach, health = (high, low) if rule.comparison == "below" else (low, high)
        if rule.comparison == "below":
            clearly_beyond, clearly_within = (
                breach < settings.threshold,
                health >= settings.threshold,
            )
        else:
            clearly_beyond, clearly_within = (
                breach > settings.threshold,
                health <= settings.threshold,
            )
        noise = math.sqrt(2) * (high - low) / 2
        if beyond:
            bound_note = (rule.confidence, breach)
        beyond = clearly_beyond
        inconclusive = not clearly_beyond and not clearly_within
    return CheckOutcome(
        **base,
        status="fail" if beyond else "pass",
        observed=observed,
        sample_size=sample,
        inconclusive=inconclusive,
        noise=noise,
        message=wording.threshold_message(
            _reading(rule, settings, label, observed, sample), beyond, bound_note
        ),
    )


def _evaluate_normal_level(
    rule: Rule,
    settings: Effective,
    base: dict[str, Any],
    observed: float,
    sample: int,
    history: SliceHistory,
    row: Mapping[str, Any],
) -> CheckOutcome:
    """A share against the slice's normal share: the median of its trailing daily shares.

    The median ignores a regression until it has lasted half the window, so an open
    incident is not closed by its own days becoming "normal" the day after it opened.
    """
    label = base["slice"]
    statistic = rule.statistic
    assert rule.baseline is not None
    baseline_label = f"its normal over {rule.baseline.describe()}"
    daily = daily_values(
        rule, history.past, base["partition_date"], history.excluded, history.lookback_days
    )
    total = sum(daily.counts)
    if total < settings.minimum_sample:
        return CheckOutcome(
            **base,
            status="no_baseline",
            observed=observed,
            sample_size=sample,
            baseline_label=baseline_label,
            baseline_sample_size=total,
            message=wording.no_baseline(
                label,
                wording.statistic_label(statistic),
                rule.baseline.describe(),
                total,
                settings.minimum_sample,
            ),
        )
    normal = median(daily.values)
    pooled = pool_groups(
        daily.values, daily.stds, daily.counts, daily.populations, daily.standard_errors
    )
    spread = share_std(normal, max(sample, 2)) if statistic in SHARE_STATISTICS else pooled.std
    # Today's and the baseline's sampling variances join the noise on sampled days.
    standard_error = math.sqrt(
        day_variance(row, statistic, spread, sample)
        + spread**2 / (pooled.population or total)
        + pooled.sampling_variance
        + pooled.between_day_variance
    )
    moved = observed - normal if rule.comparison == "above" else normal - observed
    noise = z_value(rule.confidence) * standard_error if rule.confidence is not None else 0.0
    failed = moved >= settings.threshold - TOLERANCE and moved > noise
    clearly_within = moved + noise < settings.threshold
    return CheckOutcome(
        **base,
        status="fail" if failed else "pass",
        observed=observed,
        sample_size=sample,
        inconclusive=not failed and not clearly_within,
        baseline=normal,
        baseline_label=baseline_label,
        baseline_sample_size=total,
        delta=moved,
        noise=noise,
        p_value=one_sided_p_value(moved, standard_error),
        message=wording.normal_level_message(
            _reading(rule, settings, label, observed, sample),
            normal,
            len(daily.values),
            noise,
            failed,
        ),
    )


def _reading(
    rule: Rule, settings: Effective, label: str, observed: float, sample: int
) -> wording.LevelReading:
    return wording.LevelReading(
        label, rule.statistic, rule.comparison, settings.threshold, observed, sample
    )
