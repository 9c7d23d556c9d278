"""A verdict: what one day said about one rule on one slice, as incidents read it and the
warehouse stores it (`figures`), with the judge of its reading."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any, Literal

from seer_metrics.rules.model import (
    CheckOutcome,
    RuleKind,
    Severity,
    moved_bad_way,
    recovery_margin,
)
from seer_metrics.rules.readings import number_or_none

VerdictStatus = Literal["fail", "pass", "inconclusive"]  # as stored, a day at a time


@dataclass(frozen=True)
class Verdict:
    """What one day said about one rule on one slice, as far as incidents care.

    `fail`, a clear `pass`, or an `inconclusive` one (not clearly within the line, or not
    back within noise); `not_enough_data` and `no_baseline` are no verdict.
    """

    day: date
    rule: str
    slice: str
    kind: RuleKind
    status: VerdictStatus
    severity: Severity
    message: str = ""
    observed: float | None = None
    baseline: float | None = None
    noise: float | None = None
    escalation_step: float | None = None
    # A change's gap from the level before its incident too small to matter: a quarter of
    # the change the rule pages on (`model.recovery_margin`).
    margin: float | None = None
    # A level against the slice's normal: how far above (or below) it the line lies, so
    # its readings can be pooled on the way back (`pooled_level_recovery`).
    threshold: float | None = None
    worse_when: str = "below"
    # A change's pass held as inconclusive because a slice sharing its events still fails
    # (`verdict_holds.day_verdicts`): it restarts a recovery, an inconclusive reading of
    # the slice's own only pauses it.
    held: bool = False
    # Held only because a slice sharing its events is not back from its own incident (not
    # failing): the reading says nothing either way, so it neither counts nor restarts.
    paused: bool = False
    # A clear pass while the same slice's incident on another change rule, of the same
    # trouble, reads not clearly back and is together still low: it counts, but the
    # incident does not close that day (`verdict_holds.day_verdicts`).
    waiting: bool = False
    # The judge of the reading: readings of two judges are not compared for a worsening.
    judge: str | None = None

    def figures(self) -> dict[str, Any]:
        """The numbers behind the verdict, as stored with it (`figure_fields` reads them)."""
        names = (*_FIGURES, "worse_when", *_FLAGS, "judge")
        return {name: getattr(self, name) for name in names}

    @staticmethod
    def figure_fields(figures: Mapping[str, Any] | None) -> dict[str, Any]:
        """The keyword arguments of `Verdict` that `figures()` stored (missing: None)."""
        figures = figures or {}
        fields = {name: number_or_none(figures.get(name)) for name in _FIGURES}
        flags = {name: figures.get(name) is True for name in _FLAGS}
        judge = figures.get("judge")
        return (
            fields
            | {"worse_when": str(figures.get("worse_when") or "below")}
            | flags
            | {"judge": judge if isinstance(judge, str) and judge else None}
        )

    @classmethod
    def of(cls, outcome: CheckOutcome) -> Verdict | None:
        """The verdict of an outcome of `evaluate_rules`, or None when it says nothing."""
        if outcome.status == "fail":
            status: VerdictStatus = "fail"
        elif outcome.status == "pass":
            status = "inconclusive" if outcome.inconclusive else "pass"
        else:
            return None
        return cls(
            day=outcome.partition_date or date.min,
            rule=outcome.rule,
            slice=outcome.slice,
            kind=outcome.kind,
            status=status,
            severity=outcome.severity,
            message=outcome.message,
            observed=outcome.observed,
            baseline=outcome.baseline,
            noise=outcome.noise,
            escalation_step=outcome.escalation_step,
            margin=recovery_margin(outcome),
            threshold=outcome.threshold if _against_normal(outcome) else None,
            worse_when=outcome.worse_when,
            judge=outcome.judge,
        )


_FIGURES = ("observed", "baseline", "noise", "escalation_step", "margin", "threshold")
_FLAGS = ("held", "paused", "waiting")


def _against_normal(outcome: CheckOutcome) -> bool:
    return outcome.kind == "threshold" and outcome.baseline is not None


def worsened_by(verdict: Verdict, reference: float | None) -> float | None:
    """How far the verdict's statistic moved the bad way from `reference` (None: unknown)."""
    return moved_bad_way(verdict.observed, reference, verdict.worse_when)


def judged_apart(judge: str | None, other: str | None) -> bool:
    """Two readings by known, different judges: not to be compared as a change."""
    return None not in (judge, other) and judge != other
