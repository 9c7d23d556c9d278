"""A tested change's outcome, and the test of a change on a slice below the minimum sample.

Kept apart from `evaluation` (which reads the slices and chooses the test) so that each
stays one concern: here, what a change that was tested says, however it was tested.
"""

from __future__ import annotations

import math
from typing import Any

from seer_metrics.rules import wording
from seer_metrics.rules.field_types import statistic_range
from seer_metrics.rules.model import CheckOutcome, Rule, moved_bad_way
from seer_metrics.rules.readings import TOLERANCE, Effective
from seer_metrics.rules.statistics import PooledSample, z_value


def change_outcome(
    rule: Rule,
    settings: Effective,
    base: dict[str, Any],
    baseline: PooledSample,
    baseline_label: str,
    observed: float,
    sample: int,
    worse: float,
    noise: float,
    failed: bool,
) -> CheckOutcome:
    """A tested change's outcome and its message (the p-value and flags are the caller's)."""
    return CheckOutcome(
        **base,
        status="fail" if failed else "pass",
        observed=observed,
        sample_size=sample,
        baseline=baseline.mean,
        baseline_label=baseline_label,
        baseline_sample_size=baseline.count,
        delta=worse,
        noise=noise,
        message=wording.drop_message(
            base["slice"],
            rule.statistic,
            observed,
            sample,
            baseline.mean,
            baseline.count,
            baseline_label,
            worse,
            settings.threshold,
            noise,
            failed,
            rule.comparison,
        ),
    )


# The fewest events a drop below the minimum sample is tested on (see `extreme_small_drop`).
SMALL_SAMPLE_FLOOR = 10


def extreme_small_drop(
    rule: Rule,
    settings: Effective,
    base: dict[str, Any],
    baseline: PooledSample | None,
    baseline_label: str,
    observed: float,
    sample: int,
) -> CheckOutcome | None:
    """A slice below the minimum sample fails a change only when the change is beyond a
    bound that holds for any distribution of values in [0, 1] (Hoeffding:
    P(mean falls by t) <= exp(-2 n t^2)), beyond the baseline's own noise; otherwise it
    stays `not_enough_data` (None). A tenant of 16 events served from a wrong index
    (recall 0.00, normally 0.78) is news on its first day; a normal approximation on 16
    events is not to be trusted, this bound is."""
    lowest, highest, _ = statistic_range(rule.statistic)
    if (
        sample < SMALL_SAMPLE_FLOOR
        or (lowest, highest) != (0.0, 1.0)
        or rule.confidence is None
        or baseline is None
        or baseline.count < settings.minimum_sample
    ):
        return None
    worse = moved_bad_way(observed, baseline.mean, rule.comparison) or 0.0
    z = z_value(rule.confidence)
    margin = z * math.sqrt(baseline.mean_variance + baseline.between_day_variance)
    excess = worse - margin
    noise = margin + math.sqrt(math.log(1 / (1 - rule.confidence)) / (2 * sample))
    if worse < settings.threshold - TOLERANCE or worse <= noise:
        return None
    outcome = change_outcome(
        rule, settings, base, baseline, baseline_label, observed, sample, worse, noise, True
    )
    return outcome.replace(
        p_value=math.exp(-2 * sample * excess * excess),
        message=wording.few_events_note(outcome.message, sample, settings.minimum_sample),
    )
