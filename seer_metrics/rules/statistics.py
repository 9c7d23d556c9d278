"""The statistics behind the rules: pooling days, noise, Wilson bounds, p-values, FDR.

Everything here is plain arithmetic on (mean, standard deviation, count) summaries, the
figures the slice table keeps, so a rule never needs the events themselves.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

_NORMAL = NormalDist()


@dataclass(frozen=True)
class PooledSample:
    """Mean, spread and size of several groups taken together, plus day-to-day variance."""

    mean: float
    std: float
    count: int
    days: int
    between_day_variance: float
    # Events the judged `count` stands for (more than `count` on sampled days), and the
    # sampling variance of `mean` (0 when every event was judged).
    population: float = 0.0
    sampling_variance: float = 0.0

    @property
    def mean_variance(self) -> float:
        """Variance of `mean` from the events and the sampling (day-to-day spread apart)."""
        return self.std**2 / (self.population or self.count) + self.sampling_variance


def daily_spread(daily_means: Sequence[float]) -> float:
    """Variance of daily means: (IQR / 1.349)^2 from three days on, else the sample variance.

    The interquartile range equals 1.349 standard deviations for a normal variable and
    ignores up to a quarter of outlying days.
    """
    values = sorted(daily_means)
    if len(values) < 2:
        return 0.0
    if len(values) == 2:
        mean = sum(values) / 2
        return sum((v - mean) ** 2 for v in values)
    return ((quantile(values, 0.75) - quantile(values, 0.25)) / 1.349) ** 2


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile of already sorted values (numpy's default)."""
    position = q * (len(sorted_values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def pool_groups(
    means: Sequence[float],
    stds: Sequence[float],
    counts: Sequence[int],
    populations: Sequence[float] | None = None,
    standard_errors: Sequence[float] | None = None,
) -> PooledSample:
    """Pool per-day (mean, std with ddof=1, count) into one sample, exactly.

    On sampled days `counts` are the judged events, `populations` the events they stand
    for and `standard_errors` the sampling errors of the daily means: the pooled mean's
    sampling variance adds up from them, and they count as the days' own noise when the
    day-to-day variance is estimated. Without them every event was judged.

    The between-day variance is the variance of the daily means beyond what their own
    sampling noise explains (method of moments, floored at 0); it needs two days or more.
    From three days on, the spread of the daily means is estimated robustly (see
    `daily_spread`), so one bad day in the window (yesterday's regression) cannot inflate
    the noise enough to hide today's.
    """
    populations = populations if populations is not None else counts
    errors = standard_errors if standard_errors is not None else [0.0] * len(counts)
    groups = [
        (m, 0.0 if s is None or math.isnan(s) else s, n, max(float(p), n), e or 0.0)
        for m, s, n, p, e in zip(means, stds, counts, populations, errors, strict=True)
        if n > 0
    ]
    rows = [(m, s, n) for m, s, n, _, _ in groups]
    total = sum(n for _, _, n in rows)
    if total == 0:
        raise ValueError("pool_groups needs at least one group with events")
    mean = sum(m * n for m, _, n in rows) / total
    within = sum((n - 1) * s * s for _, s, n in rows)
    between = sum(n * (m - mean) ** 2 for m, _, n in rows)
    variance = (within + between) / (total - 1) if total > 1 else 0.0
    sampled = any(p > n or e > 0 for _, _, n, p, e in groups)
    tau2 = 0.0
    if len(rows) >= 2:
        own_noise = (
            sum(s * s / p + e * e for _, s, _, p, e in groups)
            if sampled
            else sum(s * s / n for _, s, n in rows)
        )
        tau2 = max(0.0, daily_spread([m for m, _, _ in rows]) - own_noise / len(rows))
    return PooledSample(
        mean=mean,
        std=math.sqrt(variance),
        count=total,
        days=len(rows),
        between_day_variance=tau2,
        population=sum(p for _, _, _, p, _ in groups) if sampled else float(total),
        sampling_variance=sum((n / total) ** 2 * e * e for _, _, n, _, e in groups),
    )


def share_std(share: float, count: int) -> float:
    """Standard deviation (ddof=1) of the 0/1 indicator behind a share of `count` events."""
    if count < 2:
        return 0.0
    return math.sqrt(max(0.0, share * (1 - share)) * count / (count - 1))


def z_value(confidence: float) -> float:
    """One-sided normal quantile: 1.645 for 0.95."""
    return _NORMAL.inv_cdf(confidence)


def one_sided_p_value(difference: float, standard_error: float) -> float:
    """P(a difference this large or larger | no real change), normal approximation."""
    if standard_error <= 0:
        return 0.0 if difference > 0 else 1.0
    return 1.0 - _NORMAL.cdf(difference / standard_error)


def wilson_interval(share: float, count: int, confidence: float) -> tuple[float, float]:
    """One-sided Wilson score bounds of a proportion observed as `share` of `count`."""
    z = z_value(confidence)
    centre = (share + z * z / (2 * count)) / (1 + z * z / count)
    half = (
        z
        * math.sqrt(share * (1 - share) / count + z * z / (4 * count * count))
        / (1 + z * z / count)
    )
    return max(0.0, centre - half), min(1.0, centre + half)


def benjamini_hochberg(p_values: Sequence[float], rate: float) -> list[bool]:
    """Which hypotheses are discoveries with the false-discovery rate held at `rate`.

    Benjamini-Hochberg step-up: sort the m p-values, find the largest k with
    p_(k) <= k * rate / m, and reject the k smallest. Among the alerts it lets through, the
    expected share of false ones is at most `rate`, however many slices were tested.
    """
    count = len(p_values)
    if count == 0:
        return []
    order = sorted(range(count), key=lambda i: p_values[i])
    cutoff = 0
    for rank, index in enumerate(order, start=1):
        if p_values[index] <= rank * rate / count:
            cutoff = rank
    discoveries = [False] * count
    for index in order[:cutoff]:
        discoveries[index] = True
    return discoveries
