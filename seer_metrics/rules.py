"""Alert rules on the per-(day, slice) table (SPEC section 5): thresholds, drops, baselines.

Pure Python (no Dagster): `evaluate_rules(config, today, history)` turns the slice rows of
one day, plus earlier days for baselines, into a list of `CheckOutcome`, one per (rule,
slice in the rule's scope). The Dagster checks, the Slack message and the docs
(`docs/alerts.md`) are built on that list.

Two rule kinds:

- `threshold`: a slice statistic (e.g. `mean_recall`, `share_recall_below_1`) is compared
  with a fixed line (`below` or `above`).
- `drop`: a mean metric fell by at least `threshold` against a baseline: the trailing N days
  of the same slice (pooled, the day itself excluded), or another slice on the same day
  (release over release). A drop must ALSO exceed the noise: with `d = baseline - observed`
  and `se = sqrt(s_obs^2/n_obs + s_base^2/n_base + tau^2)`, the rule fails only when
  `d >= threshold` and `d >= z * se`, `z` the one-sided normal quantile of `confidence`.
  `tau^2` is the day-to-day variance of the baseline's daily means beyond their sampling
  noise (a random-effects estimate, 0 for a same-day baseline), so a metric that wobbles
  from day to day needs a larger drop before it pages anyone.

Below the minimum sample size (events with a defined value of the statistic) a rule
reports `not_enough_data`, never a pass or a fail.
"""

from __future__ import annotations

import fnmatch
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from statistics import NormalDist
from typing import Any, Literal

import pandas as pd
import yaml

from seer_metrics.slices import ALL_SLICE, METRICS

Severity = Literal["WARN", "ERROR"]
Status = Literal["pass", "fail", "not_enough_data", "no_baseline"]
RuleKind = Literal["threshold", "drop"]
Comparison = Literal["below", "above"]
Priority = Literal["high", "other", "any"]

SEVERITIES: tuple[str, ...] = ("WARN", "ERROR")
RULES_FILE_ENV = "SEER_RULES_FILE"
DEFAULT_RULES_FILE = "seer_rules.yaml"
DEFAULT_MINIMUM_SAMPLE = 30
DEFAULT_TRAILING_DAYS = 7
DEFAULT_CONFIDENCE = 0.95
RULE_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# statistic -> (column counting the events it is computed over, human label)
STATISTICS: dict[str, tuple[str, str]] = {
    **{f"mean_{m}": (f"count_{m}", f"mean {m}") for m in METRICS},
    "p10_recall": ("count_recall", "p10 recall"),
    "p10_precision": ("count_precision", "p10 precision"),
    "share_recall_below_1": ("count_recall", "share of events with recall < 1.0"),
    "share_precision_below_bloat": (
        "count_precision",
        "share of events with precision below the bloat line",
    ),
}
SHARE_STATISTICS = ("share_recall_below_1", "share_precision_below_bloat")
DROP_STATISTICS = tuple(f"mean_{m}" for m in METRICS)


class RulesConfigError(ValueError):
    """A rules file or mapping that cannot be used; the message names the bad key."""


@dataclass(frozen=True)
class SliceOverride:
    """Per-slice settings of one rule; later overrides win over earlier ones."""

    slices: tuple[str, ...]
    threshold: float | None = None
    severity: Severity | None = None
    enabled: bool | None = None
    minimum_sample: int | None = None


@dataclass(frozen=True)
class Baseline:
    """What a drop rule compares with: trailing days of the same slice, or another slice."""

    trailing_days: int = DEFAULT_TRAILING_DAYS
    slice: str | None = None

    def describe(self) -> str:
        if self.slice is not None:
            return f"{self.slice} on the same day"
        return f"the trailing {self.trailing_days} days"


@dataclass(frozen=True)
class Rule:
    name: str
    kind: RuleKind
    statistic: str
    threshold: float
    severity: Severity
    comparison: Comparison = "below"
    priority: Priority = "any"
    slices: tuple[str, ...] = ("*",)
    exclude_slices: tuple[str, ...] = ()
    baseline: Baseline = field(default_factory=Baseline)
    confidence: float | None = None
    minimum_sample: int | None = None
    overrides: tuple[SliceOverride, ...] = ()
    description: str = ""


@dataclass(frozen=True)
class RulesConfig:
    rules: tuple[Rule, ...]
    high_priority_slices: tuple[str, ...] = ("env=prod",)
    minimum_sample: int = DEFAULT_MINIMUM_SAMPLE

    def rule(self, name: str) -> Rule:
        for rule in self.rules:
            if rule.name == name:
                return rule
        raise KeyError(f"no rule named {name!r}; rules: {[r.name for r in self.rules]}")


@dataclass(frozen=True)
class CheckOutcome:
    """The verdict of one rule on one slice of one day."""

    rule: str
    slice: str
    status: Status
    severity: Severity
    statistic: str
    observed: float | None
    threshold: float
    sample_size: int
    message: str
    partition_date: str = ""
    baseline: float | None = None
    baseline_label: str | None = None
    baseline_sample_size: int | None = None
    delta: float | None = None
    noise: float | None = None
    high_priority: bool = False

    @property
    def failed(self) -> bool:
        return self.status == "fail"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


DEFAULT_RULES = RulesConfig(
    rules=(
        Rule(
            name="recall_high_priority",
            kind="threshold",
            statistic="share_recall_below_1",
            comparison="above",
            threshold=0.0,
            severity="ERROR",
            priority="high",
            description="High-priority slices: any event with recall < 1.0.",
        ),
        Rule(
            name="recall_other_slices",
            kind="threshold",
            statistic="mean_recall",
            comparison="below",
            threshold=0.85,
            severity="WARN",
            priority="other",
            description="Other slices: mean recall below 0.85.",
        ),
        Rule(
            name="precision_tail",
            kind="threshold",
            statistic="share_precision_below_bloat",
            comparison="above",
            threshold=0.25,
            severity="WARN",
            confidence=DEFAULT_CONFIDENCE,
            description="Context bloat: more than 25% of events with precision below 0.35 "
            "(95% Wilson lower bound of the share above 25%).",
        ),
        Rule(
            name="f1_drop",
            kind="drop",
            statistic="mean_f1",
            threshold=0.20,
            severity="ERROR",
            confidence=DEFAULT_CONFIDENCE,
            description="Mean f1 fell by at least 0.20 against the baseline, beyond noise.",
        ),
        Rule(
            name="ndcg_drop",
            kind="drop",
            statistic="mean_ndcg",
            threshold=0.10,
            severity="WARN",
            confidence=DEFAULT_CONFIDENCE,
            description="Mean nDCG fell by at least 0.10 against the baseline, beyond noise.",
        ),
    )
)


# ---------------------------------------------------------------------------------------
# Configuration: YAML -> dataclasses, with errors naming the key at fault.


def _expect_mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise RulesConfigError(f"{where}: expected a mapping, got {type(value).__name__}")
    return value


def _reject_unknown(mapping: Mapping[str, Any], allowed: Iterable[str], where: str) -> None:
    unknown = sorted(str(key) for key in mapping if key not in set(allowed))
    if unknown:
        raise RulesConfigError(
            f"{where}: unknown key(s) {unknown}; allowed: {sorted(set(allowed))}"
        )


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise RulesConfigError(f"{where}: expected a number, got {value!r}")
    return float(value)


def _positive_int(value: Any, where: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise RulesConfigError(f"{where}: expected an integer >= {minimum}, got {value!r}")
    return value


def _choice(value: Any, choices: Sequence[str], where: str) -> str:
    if isinstance(value, str) and value.upper() in choices and choices == SEVERITIES:
        return value.upper()
    if value not in choices:
        raise RulesConfigError(f"{where}: expected one of {list(choices)}, got {value!r}")
    return value


def _patterns(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise RulesConfigError(f"{where}: expected a list of slice patterns, got {value!r}")
    for pattern in value:
        if pattern not in ("*", ALL_SLICE) and "=" not in pattern:
            raise RulesConfigError(
                f"{where}: slice pattern {pattern!r} must be 'all', '*' or 'key=value' "
                "(the value may use * and ? wildcards)"
            )
    return tuple(value)


def _confidence(value: Any, where: str) -> float | None:
    if value is None:
        return None
    number = _number(value, where)
    if not 0.5 <= number < 1.0:
        raise RulesConfigError(f"{where}: expected a probability in [0.5, 1), got {value!r}")
    return number


def _parse_override(raw: Any, where: str) -> SliceOverride:
    raw = _expect_mapping(raw, where)
    _reject_unknown(raw, ("slices", "threshold", "severity", "enabled", "minimum_sample"), where)
    if "slices" not in raw:
        raise RulesConfigError(f"{where}.slices: required")
    enabled = raw.get("enabled")
    if enabled is not None and not isinstance(enabled, bool):
        raise RulesConfigError(f"{where}.enabled: expected true or false, got {enabled!r}")
    return SliceOverride(
        slices=_patterns(raw["slices"], f"{where}.slices"),
        threshold=_number(raw["threshold"], f"{where}.threshold")
        if raw.get("threshold") is not None
        else None,
        severity=_choice(raw["severity"], SEVERITIES, f"{where}.severity")  # type: ignore[arg-type]
        if raw.get("severity") is not None
        else None,
        enabled=enabled,
        minimum_sample=_positive_int(raw["minimum_sample"], f"{where}.minimum_sample")
        if raw.get("minimum_sample") is not None
        else None,
    )


def _parse_baseline(raw: Any, where: str) -> Baseline:
    raw = _expect_mapping(raw, where)
    _reject_unknown(raw, ("trailing_days", "slice"), where)
    if raw.get("slice") is not None and "trailing_days" in raw:
        raise RulesConfigError(f"{where}: give either trailing_days or slice, not both")
    slice_ = raw.get("slice")
    if slice_ is not None:
        _patterns([slice_], f"{where}.slice")
        if any(ch in slice_ for ch in "*?[") or slice_ == "*":
            raise RulesConfigError(f"{where}.slice: must name one slice, got {slice_!r}")
        return Baseline(slice=slice_)
    return Baseline(
        trailing_days=_positive_int(
            raw.get("trailing_days", DEFAULT_TRAILING_DAYS), f"{where}.trailing_days"
        )
    )


RULE_KEYS = (
    "name",
    "kind",
    "statistic",
    "threshold",
    "severity",
    "comparison",
    "priority",
    "slices",
    "exclude_slices",
    "baseline",
    "confidence",
    "minimum_sample",
    "overrides",
    "description",
)


def _parse_rule(raw: Any, where: str) -> Rule:
    raw = _expect_mapping(raw, where)
    _reject_unknown(raw, RULE_KEYS, where)
    for key in ("name", "kind", "statistic", "threshold", "severity"):
        if key not in raw:
            raise RulesConfigError(f"{where}.{key}: required")
    name = raw["name"]
    if not isinstance(name, str) or not RULE_NAME_PATTERN.match(name):
        raise RulesConfigError(
            f"{where}.name: expected an identifier (letters, digits, _), got {name!r}"
        )
    where = f"{where} ({name})"
    kind = _choice(raw["kind"], ("threshold", "drop"), f"{where}.kind")
    allowed_statistics = DROP_STATISTICS if kind == "drop" else tuple(STATISTICS)
    statistic = _choice(raw["statistic"], allowed_statistics, f"{where}.statistic")
    threshold = _number(raw["threshold"], f"{where}.threshold")
    if kind == "drop" and threshold < 0:
        raise RulesConfigError(f"{where}.threshold: a drop must be >= 0, got {threshold}")
    if kind == "drop" and "comparison" in raw:
        raise RulesConfigError(f"{where}.comparison: only for threshold rules")
    if statistic.startswith("p10_") and raw.get("confidence") is not None:
        raise RulesConfigError(f"{where}.confidence: not available for a p10 statistic")
    if kind == "threshold" and "baseline" in raw:
        raise RulesConfigError(f"{where}.baseline: only for drop rules")
    overrides_raw = raw.get("overrides", [])
    if not isinstance(overrides_raw, list):
        raise RulesConfigError(f"{where}.overrides: expected a list")
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise RulesConfigError(f"{where}.description: expected text")
    return Rule(
        name=name,
        kind=kind,  # type: ignore[arg-type]
        statistic=statistic,
        threshold=threshold,
        severity=_choice(raw["severity"], SEVERITIES, f"{where}.severity"),  # type: ignore[arg-type]
        comparison=_choice(
            raw.get("comparison", "below"), ("below", "above"), f"{where}.comparison"
        ),  # type: ignore[arg-type]
        priority=_choice(raw.get("priority", "any"), ("high", "other", "any"), f"{where}.priority"),  # type: ignore[arg-type]
        slices=_patterns(raw.get("slices", ["*"]), f"{where}.slices"),
        exclude_slices=_patterns(raw.get("exclude_slices", []), f"{where}.exclude_slices")
        if raw.get("exclude_slices")
        else (),
        baseline=_parse_baseline(raw.get("baseline", {}), f"{where}.baseline"),
        confidence=_confidence(
            raw.get("confidence", DEFAULT_CONFIDENCE if kind == "drop" else None),
            f"{where}.confidence",
        ),
        minimum_sample=_positive_int(raw["minimum_sample"], f"{where}.minimum_sample")
        if raw.get("minimum_sample") is not None
        else None,
        overrides=tuple(
            _parse_override(item, f"{where}.overrides[{i}]") for i, item in enumerate(overrides_raw)
        ),
        description=description,
    )


def _high_priority(raw: Mapping[str, Any], source: str) -> tuple[str, ...]:
    if "high_priority_slices" not in raw:
        return DEFAULT_RULES.high_priority_slices
    value = raw["high_priority_slices"]
    if value is None or value == []:
        return ()
    return _patterns(value, f"{source}: high_priority_slices")


def parse_rules_config(raw: Any, source: str = "rules") -> RulesConfig:
    """Validate a mapping (the parsed YAML) into a `RulesConfig`."""
    raw = _expect_mapping(raw if raw is not None else {}, source)
    _reject_unknown(raw, ("rules", "high_priority_slices", "minimum_sample"), source)
    rules_raw = raw.get("rules")
    if rules_raw is None:
        rules = DEFAULT_RULES.rules
    elif not isinstance(rules_raw, list):
        raise RulesConfigError(f"{source}: rules: expected a list of rules")
    else:
        rules = tuple(
            _parse_rule(item, f"{source}: rules[{i}]") for i, item in enumerate(rules_raw)
        )
    names = [rule.name for rule in rules]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise RulesConfigError(f"{source}: rules: duplicate rule name(s) {duplicates}")
    return RulesConfig(
        rules=rules,
        high_priority_slices=_high_priority(raw, source),
        minimum_sample=_positive_int(
            raw.get("minimum_sample", DEFAULT_MINIMUM_SAMPLE), f"{source}: minimum_sample"
        ),
    )


def rules_file_path(path: str | os.PathLike[str] | None = None) -> Path | None:
    """The rules file in effect: `path`, else $SEER_RULES_FILE, else ./seer_rules.yaml if any."""
    if path is not None:
        return Path(path)
    from_env = os.environ.get(RULES_FILE_ENV)
    if from_env:
        return Path(from_env)
    local = Path.cwd() / DEFAULT_RULES_FILE
    return local if local.is_file() else None


def load_rules_config(path: str | os.PathLike[str] | None = None) -> RulesConfig:
    """Load the rules file in effect (see `rules_file_path`); built-in defaults when none."""
    resolved = rules_file_path(path)
    if resolved is None:
        return DEFAULT_RULES
    if not resolved.is_file():
        raise RulesConfigError(
            f"rules file {resolved} does not exist (from {RULES_FILE_ENV} or the path given)"
        )
    try:
        raw = yaml.safe_load(resolved.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise RulesConfigError(f"{resolved}: not valid YAML: {error}") from error
    return parse_rules_config(raw, source=str(resolved))


# ---------------------------------------------------------------------------------------
# Evaluation.


def slice_matches(label: str, patterns: Iterable[str]) -> bool:
    """`*` matches every slice; `env=*` every value of env; `tenant=acme-*` a glob on values."""
    return any(fnmatch.fnmatchcase(label, pattern) for pattern in patterns)


def _float(value: Any) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def _count(value: Any) -> int:
    number = _float(value)
    return int(number) if number is not None else 0


@dataclass(frozen=True)
class _Effective:
    threshold: float
    severity: Severity
    enabled: bool
    minimum_sample: int


def _effective(rule: Rule, label: str, default_minimum: int) -> _Effective:
    settings = _Effective(
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


def in_scope(rule: Rule, label: str, high_priority: bool) -> bool:
    if rule.priority == "high" and not high_priority:
        return False
    if rule.priority == "other" and high_priority:
        return False
    if rule.baseline.slice is not None and label == rule.baseline.slice:
        return False
    return slice_matches(label, rule.slices) and not slice_matches(label, rule.exclude_slices)


@dataclass(frozen=True)
class PooledSample:
    """Mean, spread and size of several groups taken together, plus day-to-day variance."""

    mean: float
    std: float
    count: int
    days: int
    between_day_variance: float


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

    def quantile(q: float) -> float:
        position = q * (len(values) - 1)
        low = math.floor(position)
        high = min(low + 1, len(values) - 1)
        return values[low] + (values[high] - values[low]) * (position - low)

    return ((quantile(0.75) - quantile(0.25)) / 1.349) ** 2


def pool_groups(
    means: Sequence[float], stds: Sequence[float], counts: Sequence[int]
) -> PooledSample:
    """Pool per-day (mean, std with ddof=1, count) into one sample, exactly.

    The between-day variance is the variance of the daily means beyond what their own
    sampling noise explains (method of moments, floored at 0); it needs two days or more.
    From three days on, the spread of the daily means is estimated robustly (see
    `daily_spread`), so one bad day in the window (yesterday's regression) cannot inflate
    the noise enough to hide today's.
    """
    rows = [
        (m, 0.0 if s is None or math.isnan(s) else s, n)
        for m, s, n in zip(means, stds, counts, strict=True)
        if n > 0
    ]
    total = sum(n for _, _, n in rows)
    if total == 0:
        raise ValueError("pool_groups needs at least one group with events")
    mean = sum(m * n for m, _, n in rows) / total
    within = sum((n - 1) * s * s for _, s, n in rows)
    between = sum(n * (m - mean) ** 2 for m, _, n in rows)
    variance = (within + between) / (total - 1) if total > 1 else 0.0
    tau2 = 0.0
    if len(rows) >= 2:
        tau2 = max(
            0.0,
            daily_spread([m for m, _, _ in rows]) - sum(s * s / n for _, s, n in rows) / len(rows),
        )
    return PooledSample(
        mean=mean, std=math.sqrt(variance), count=total, days=len(rows), between_day_variance=tau2
    )


def z_value(confidence: float) -> float:
    """One-sided normal quantile: 1.645 for 0.95."""
    return NormalDist().inv_cdf(confidence)


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


def _format_value(statistic: str, value: float | None) -> str:
    if value is None:
        return "n/a"
    if statistic in SHARE_STATISTICS:
        return f"{value:.1%}"
    return f"{value:.3f}"


def _statistic_label(statistic: str) -> str:
    return STATISTICS[statistic][1]


def _evaluate_threshold(
    rule: Rule, row: Mapping[str, Any], settings: _Effective, base: dict[str, Any]
) -> CheckOutcome:
    observed = _float(row.get(rule.statistic))
    sample = _count(row.get(STATISTICS[rule.statistic][0]))
    label = _statistic_label(rule.statistic)
    line = _format_value(rule.statistic, settings.threshold)
    if observed is None or sample < settings.minimum_sample:
        return CheckOutcome(
            **base,
            status="not_enough_data",
            observed=observed,
            sample_size=sample,
            message=f"{base['slice']}: {sample} events with a defined {label}, fewer than "
            f"the minimum sample of {settings.minimum_sample}; reported, not alerted",
        )
    beyond = (
        observed < settings.threshold
        if rule.comparison == "below"
        else observed > settings.threshold
    )
    noise_note = ""
    if beyond and rule.confidence is not None:
        if rule.statistic in SHARE_STATISTICS:
            low, high = wilson_interval(observed, sample, rule.confidence)
        else:
            std = _float(row.get(rule.statistic.replace("mean_", "std_"))) or 0.0
            half = z_value(rule.confidence) * std / math.sqrt(sample)
            low, high = observed - half, observed + half
        bound = high if rule.comparison == "below" else low
        beyond = (
            bound < settings.threshold if rule.comparison == "below" else bound > settings.threshold
        )
        noise_note = f" ({rule.confidence:.0%} bound {_format_value(rule.statistic, bound)})"
    word = "below" if rule.comparison == "below" else "above"
    if (
        rule.statistic == "share_recall_below_1"
        and rule.comparison == "above"
        and settings.threshold == 0
    ):
        affected = round(observed * sample)
        detail = f"{affected} of {sample} events ({observed:.1%}) have recall < 1.0"
    else:
        detail = f"{label} is {_format_value(rule.statistic, observed)} over {sample} events"
    verdict = f"{word} the line {line}" if beyond else f"within the line ({word} {line} alerts)"
    return CheckOutcome(
        **base,
        status="fail" if beyond else "pass",
        observed=observed,
        sample_size=sample,
        message=f"{base['slice']}: {detail}, {verdict}{noise_note}",
    )


def _evaluate_drop(
    rule: Rule,
    row: Mapping[str, Any],
    settings: _Effective,
    base: dict[str, Any],
    baseline: PooledSample | None,
    baseline_label: str,
) -> CheckOutcome:
    metric = rule.statistic.removeprefix("mean_")
    observed = _float(row.get(rule.statistic))
    sample = _count(row.get(f"count_{metric}"))
    label = _statistic_label(rule.statistic)
    if observed is None or sample < settings.minimum_sample:
        return CheckOutcome(
            **base,
            status="not_enough_data",
            observed=observed,
            sample_size=sample,
            baseline_label=baseline_label,
            message=f"{base['slice']}: {sample} events with a defined {metric}, fewer than "
            f"the minimum sample of {settings.minimum_sample}; reported, not alerted",
        )
    if baseline is None or baseline.count < settings.minimum_sample:
        size = 0 if baseline is None else baseline.count
        return CheckOutcome(
            **base,
            status="no_baseline",
            observed=observed,
            sample_size=sample,
            baseline=None if baseline is None else baseline.mean,
            baseline_label=baseline_label,
            baseline_sample_size=size,
            message=f"{base['slice']}: no baseline to compare {label} with "
            f"({baseline_label}: {size} events, minimum {settings.minimum_sample})",
        )
    delta = baseline.mean - observed
    observed_std = _float(row.get(f"std_{metric}")) or 0.0
    standard_error = math.sqrt(
        observed_std**2 / sample + baseline.std**2 / baseline.count + baseline.between_day_variance
    )
    noise = z_value(rule.confidence) * standard_error if rule.confidence is not None else 0.0
    big_enough = delta >= settings.threshold - 1e-12
    beyond_noise = delta > noise
    failed = big_enough and beyond_noise
    movement = f"fell by {delta:.3f}" if delta >= 0 else f"rose by {-delta:.3f}"
    summary = (
        f"{base['slice']}: {label} {movement} ({observed:.3f} over {sample} events vs "
        f"{baseline.mean:.3f} over {baseline.count} events in {baseline_label})"
    )
    if failed:
        reason = f"a drop of at least {settings.threshold:.2f} and beyond the noise {noise:.3f}"
    elif big_enough:
        reason = f"but within the noise {noise:.3f}: not alerted"
    else:
        reason = f"less than the alerting drop {settings.threshold:.2f}"
    return CheckOutcome(
        **base,
        status="fail" if failed else "pass",
        observed=observed,
        sample_size=sample,
        baseline=baseline.mean,
        baseline_label=baseline_label,
        baseline_sample_size=baseline.count,
        delta=delta,
        noise=noise,
        message=f"{summary}, {reason}",
    )


def _baseline_for(
    rule: Rule,
    label: str,
    today_rows: Mapping[str, Mapping[str, Any]],
    history: pd.DataFrame,
    partition_date: str,
) -> tuple[PooledSample | None, str]:
    metric = rule.statistic.removeprefix("mean_")
    columns = (f"mean_{metric}", f"std_{metric}", f"count_{metric}")
    if rule.baseline.slice is not None:
        description = rule.baseline.describe()
        other = today_rows.get(rule.baseline.slice)
        if other is None:
            return None, description
        mean, std, count = (other.get(c) for c in columns)
        if _float(mean) is None or _count(count) == 0:
            return None, description
        return pool_groups([float(mean)], [_float(std) or 0.0], [_count(count)]), description
    days = rule.baseline.trailing_days
    description = rule.baseline.describe()
    if history.empty:
        return None, description
    start = (pd.Timestamp(partition_date) - pd.Timedelta(days=days)).strftime("%Y-%m-%d")
    dates = history["partition_date"].astype(str).str.slice(0, 10)
    window = history[(history["slice"] == label) & (dates >= start) & (dates < partition_date)]
    means, stds, counts = [], [], []
    for _, row in window.iterrows():
        mean = _float(row[columns[0]])
        count = _count(row[columns[2]])
        if mean is None or count == 0:
            continue
        means.append(mean)
        stds.append(_float(row[columns[1]]) or 0.0)
        counts.append(count)
    if not counts:
        return None, description
    return pool_groups(means, stds, counts), description


def evaluate_rules(
    config: RulesConfig,
    today: pd.DataFrame,
    history: pd.DataFrame | None = None,
    partition_date: str | None = None,
) -> list[CheckOutcome]:
    """Apply every rule to every slice in its scope for one day.

    `today` holds that day's rows of the slice table; `history` earlier days (any range:
    each drop rule takes its own trailing window, the day itself excluded).
    """
    if history is None:
        history = pd.DataFrame(columns=list(today.columns))
    if partition_date is None:
        dates = sorted({str(d)[:10] for d in today["partition_date"]}) if len(today) else []
        if len(dates) > 1:
            raise ValueError(f"evaluate_rules got slice rows of several days: {dates}")
        partition_date = dates[0] if dates else ""
    today_rows = {str(row["slice"]): row for row in today.to_dict("records")}
    outcomes: list[CheckOutcome] = []
    for rule in config.rules:
        for label, row in today_rows.items():
            high = slice_matches(label, config.high_priority_slices)
            if not in_scope(rule, label, high):
                continue
            settings = _effective(rule, label, config.minimum_sample)
            if not settings.enabled:
                continue
            base: dict[str, Any] = {
                "rule": rule.name,
                "slice": label,
                "severity": settings.severity,
                "statistic": rule.statistic,
                "threshold": settings.threshold,
                "partition_date": partition_date,
                "high_priority": high,
            }
            if rule.kind == "threshold":
                outcomes.append(_evaluate_threshold(rule, row, settings, base))
            else:
                baseline, description = _baseline_for(
                    rule, label, today_rows, history, partition_date
                )
                outcomes.append(_evaluate_drop(rule, row, settings, base, baseline, description))
    return outcomes


def failing(outcomes: Iterable[CheckOutcome]) -> list[CheckOutcome]:
    """Failing outcomes, ERROR before WARN, high-priority slices first."""
    order = {"ERROR": 0, "WARN": 1}
    return sorted(
        (o for o in outcomes if o.failed),
        key=lambda o: (order[o.severity], not o.high_priority, o.rule, o.slice),
    )
