"""The rule model: what a rule says, what the rules file holds, the verdict of a check, and
the figures an alert explains a drop with (the rest of a parent slice).

A rule is one of two kinds. A `threshold` rule is a service level: a slice statistic
against a fixed line, or against the slice's own normal level; its failure is an incident,
opened once and closed by a pass. A `drop` rule is a change alert: a mean metric fell
against a baseline by at least the rule's threshold and beyond noise; its failure pages.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from datetime import date, datetime
from typing import Any, Literal

from seer_metrics.scoring import METRICS

Severity = Literal["WARN", "ERROR"]
Status = Literal["pass", "fail", "not_enough_data", "no_baseline"]
RuleKind = Literal["threshold", "drop"]
Comparison = Literal["below", "above"]
Priority = Literal["high", "other", "any"]

SEVERITIES: tuple[Severity, ...] = ("WARN", "ERROR")
RULE_KINDS: tuple[RuleKind, ...] = ("threshold", "drop")
DEFAULT_MINIMUM_SAMPLE = 30
DEFAULT_TRAILING_DAYS = 7
DEFAULT_CONFIDENCE = 0.95
DEFAULT_FALSE_DISCOVERY_RATE = 0.05
# Consecutive clear passes that close a service-level incident (hysteresis in time).
DEFAULT_CLOSE_AFTER_PASSES = 3
DEFAULT_HIGH_PRIORITY_SLICES = ("env=prod",)
# How far back a baseline may reach over the days of a breakage it must not learn: an
# incident that lasts longer keeps its pre-incident baseline for this many days, then
# the rule reports "no baseline" until it has clean days again.
DEFAULT_BASELINE_LOOKBACK_DAYS = 42

# The share of a change rule's threshold a slice inside its incident may still read short
# of its level before the incident and be back (`recovery_margin`).
RECOVERY_MARGIN_SHARE = 0.25

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
    "mean_n": ("count_n", "passages an event"),
    "share_empty_context": ("count_n", "share of empty contexts"),
    "share_failed": ("attempted", "share of events that could not be judged"),
    "events": ("events", "events"),
}
SHARE_STATISTICS = (
    "share_recall_below_1",
    "share_precision_below_bloat",
    "share_empty_context",
    "share_failed",
)
# The statistic of the volume rule: a slice's event count against its own normal count.
VOLUME_STATISTIC = "events"
# Statistics a change rule (kind drop) can follow: a mean falling, or a share rising
# (`comparison: above`).
DROP_STATISTICS = (
    *(f"mean_{m}" for m in METRICS),
    "mean_n",
    *SHARE_STATISTICS,
    VOLUME_STATISTIC,
)


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
    """What a rule compares with: trailing days of the same slice, or another slice."""

    trailing_days: int = DEFAULT_TRAILING_DAYS
    slice: str | None = None
    # The latest days the window leaves out: a slow drift moves a window that ends
    # yesterday with it (its days widen the spread too), one that ends a week ago not.
    skip_recent_days: int = 0

    def describe(self) -> str:
        if self.slice is not None:
            return f"{self.slice} on the same day"
        if self.skip_recent_days:
            return f"the {self.trailing_days} days before the last {self.skip_recent_days}"
        return f"the trailing {self.trailing_days} days"


@dataclass(frozen=True)
class Rule:
    """One rule of the rules file.

    A threshold rule with a `baseline` compares the slice with its own normal level (the
    median of its trailing daily values): it fails when the statistic moved past that
    normal by at least `threshold`, in the `comparison` direction, beyond noise.
    `intersections` says whether the rule also runs on intersection slices (several keys
    at once); by default drop rules do (they find where a change happened) and service
    levels do not (a level belongs to a surface, one key at a time).
    """

    name: str
    kind: RuleKind
    statistic: str
    threshold: float
    severity: Severity
    comparison: Comparison = "below"
    priority: Priority = "any"
    slices: tuple[str, ...] = ("*",)
    exclude_slices: tuple[str, ...] = ()
    baseline: Baseline | None = None
    confidence: float | None = None
    minimum_sample: int | None = None
    overrides: tuple[SliceOverride, ...] = ()
    description: str = ""
    intersections: bool | None = None
    worsen_by: float | None = None

    def __post_init__(self) -> None:
        if self.kind == "drop" and self.baseline is None:
            object.__setattr__(self, "baseline", Baseline())
        if self.intersections is None:
            object.__setattr__(self, "intersections", self.kind == "drop")

    @property
    def escalation_step(self) -> float:
        """How much further the statistic must move the bad way, beyond where an open
        incident opened and beyond the noise of the two readings, to page again
        (`incidents.beyond_the_step`): `worsen_by`, else a change rule's own threshold,
        else a fifth (of a share or a mean metric) for a service level: a chronic level's
        opening reading is one ordinary day, and a real retriever's small slices wander a
        tenth around it (a tenth paged 4 times in 56 clean days of the realistic stream)."""
        if self.worsen_by is not None:
            return self.worsen_by
        return self.threshold if self.kind == "drop" else 0.20

    @property
    def worse_when(self) -> Comparison:
        """Which way is worse for the statistic: `below` when falling hurts."""
        return self.comparison

    @property
    def trailing_days(self) -> int:
        """Days of history the rule reads (0 for none)."""
        if self.baseline is None or self.baseline.slice is not None:
            return 0
        return self.baseline.trailing_days + self.baseline.skip_recent_days


@dataclass(frozen=True)
class RulesConfig:
    rules: tuple[Rule, ...]
    high_priority_slices: tuple[str, ...] = DEFAULT_HIGH_PRIORITY_SLICES
    minimum_sample: int = DEFAULT_MINIMUM_SAMPLE
    false_discovery_rate: float | None = DEFAULT_FALSE_DISCOVERY_RATE
    close_after_passes: int = DEFAULT_CLOSE_AFTER_PASSES
    baseline_lookback_days: int = DEFAULT_BASELINE_LOOKBACK_DAYS

    def rule(self, name: str) -> Rule:
        for rule in self.rules:
            if rule.name == name:
                return rule
        raise KeyError(f"no rule named {name!r}; rules: {[r.name for r in self.rules]}")

    @property
    def trailing_days(self) -> int:
        """The longest trailing window of any rule."""
        return max((rule.trailing_days for rule in self.rules), default=0)

    def change_rules(self) -> dict[str, str]:
        """Name -> statistic of the rules compared with their own trailing days: their
        breakage is left out of the statistic's baselines (`baseline_exclusions`)."""
        return {rule.name: rule.statistic for rule in self.rules if rule.trailing_days}

    @property
    def history_days(self) -> int:
        """The days of history the rules read: their windows, reaching back over the days
        of a breakage up to `baseline_lookback_days`."""
        longest = self.trailing_days
        return max(longest, self.baseline_lookback_days) if longest else 0


def recovery_margin(outcome: CheckOutcome) -> float | None:
    """How far short of its pre-incident level a change's slice may read and be back: a
    quarter of the change the rule pages on. Without it a large slice never recovers
    from a shift far below anything the rule would page on: retrieval-v2 (~210 events)
    read 0.02 below its 28-day level all the week after a fix (0.10 pages), 1.7 times
    its pooled noise, and its incident stayed open. A volume rule's threshold is a share,
    not a count: none."""
    if outcome.kind != "drop" or outcome.statistic == VOLUME_STATISTIC:
        return None
    return RECOVERY_MARGIN_SHARE * outcome.threshold


def as_date(value: date | str) -> date:
    """A partition day from a `date`, a `datetime` or ISO text (its first ten characters)."""
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    return date.fromisoformat(str(value)[:10])


@dataclass(frozen=True)
class CheckOutcome:
    """The verdict of one rule on one slice of one day.

    `kind` is the rule's kind: a failing `threshold` outcome is a service-level breach
    (an incident), a failing `drop` outcome a change alert. `p_value` is the one-sided
    p-value of a drop (or of a move against the slice's normal level) when one was tested.
    `inconclusive` marks a pass that is not a clear one: a service level tested with a
    confidence whose breach is neither significant nor clearly absent (the bounds straddle
    the line). It neither opens nor closes an incident, so a slice that hovers at its line
    does not open and close one every other day.
    """

    rule: str
    slice: str
    status: Status
    severity: Severity
    statistic: str
    observed: float | None
    threshold: float
    sample_size: int
    message: str
    partition_date: date | None = None
    baseline: float | None = None
    baseline_label: str | None = None
    # The days a trailing baseline spans, first and last (ISO, "2026-10-01/2026-10-28");
    # the breakage days inside it are left out. Two slices' changes add up only when read
    # over the same days (`rest_figures.same_baseline`). None: a same-day slice baseline.
    baseline_window: str | None = None
    baseline_sample_size: int | None = None
    delta: float | None = None
    noise: float | None = None
    high_priority: bool = False
    kind: RuleKind = "threshold"
    p_value: float | None = None
    inconclusive: bool = False
    # Which way is worse for the statistic, and how much further an open incident on it
    # must move that way to page again (the rule's `escalation_step`).
    worse_when: Comparison = "below"
    escalation_step: float | None = None
    # Set when earlier days were judged by another judge and left out of the baseline.
    judge_note: str = ""
    # The judge of the slice's day (evaluator, model and prompt version), when recorded.
    judge: str | None = None
    # A rule whose baseline skips the latest days (a drift): the statistic over those days
    # and today, event-weighted, read to tell where a drift lives (`attribution`).
    recent_observed: float | None = None
    recent_sample_size: int | None = None
    recent_days: int = 0

    def __post_init__(self) -> None:
        if self.partition_date is not None and not isinstance(self.partition_date, date):
            object.__setattr__(self, "partition_date", as_date(self.partition_date))

    @property
    def failed(self) -> bool:
        return self.status == "fail"

    def replace(self, **changes: Any) -> CheckOutcome:
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values (the day as ISO text); `CheckOutcome(**d)` reads it back."""
        data = asdict(self)
        if self.partition_date is not None:
            data["partition_date"] = self.partition_date.isoformat()
        return data


def moved_bad_way(value: float | None, reference: float | None, worse_when: str) -> float | None:
    """How far `value` lies from `reference` the bad way (`worse_when`: below, a fall)."""
    if value is None or reference is None:
        return None
    return reference - value if worse_when == "below" else value - reference


@dataclass(frozen=True)
class RestOfParent:
    """A parent slice minus one failing child, today and in the baseline, for one rule."""

    parent: str
    statistic: str
    events: int
    observed: float | None
    baseline: float | None
    threshold: float
    worse_when: Comparison = "below"
    # over a drift rule's recent days (the outcomes' `recent_*`), when both have them
    recent_observed: float | None = None
    recent_days: int = 0
    recent_events: int = 0

    @property
    def delta(self) -> float | None:
        """How much the rest moved the rule's bad way (positive: a fall for a drop rule, a
        rise for a rise rule) against its baseline; negative the other way."""
        return moved_bad_way(self.observed, self.baseline, self.worse_when)

    @property
    def recent_delta(self) -> float | None:
        """The same move over the drift rule's recent days."""
        return moved_bad_way(self.recent_observed, self.baseline, self.worse_when)

    @property
    def unchanged(self) -> bool:
        """The rest moved by less than half the rule's alerting drop: the child explains it."""
        return self.delta is not None and abs(self.delta) < self.threshold / 2
