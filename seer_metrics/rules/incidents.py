"""Incidents and pages: the one place where a verdict opens, carries or closes an incident.

A threshold rule is a service level. When a slice starts failing it (or fails it on its
first evaluation) an incident opens, once; while the slice keeps failing the incident is
carried (a "still open" line, no new page). It closes only after `close_after_passes`
consecutive clear passes (hysteresis in time, default 3): a slice hovering at its line,
failing one day and passing the next, stays ONE open incident instead of paging every
other day. A pass within noise of the line (`inconclusive`) is not a clear pass: it
carries the incident and restarts the count. A day that says nothing about the level
(not enough data, no baseline, a rule that did not run) carries it unchanged and does not
count either: silence is not recovery.

Drop rules are followed the same way (their runs of failing days, for the "recovered"
reply), but a drop's run closes on its first pass: a drop is a change, and every failing
drop pages anyway.

A page is what deserves a notification: a failing drop outcome (the evaluation has already
held the false-discovery rate across the day's drop tests), or an incident opened today.
A chronic breach therefore pages once, not every day.

`follow` is the transition; `advance_incidents` applies a day's outcomes to the incidents
open before it (the daily replay, the benchmarks), and `incident_runs` / `open_before`
fold it over a stored day sequence of verdicts (the warehouse, which backfills in any
order): both are the same rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import date
from typing import Any, Literal

from seer_metrics.rules.model import (
    DEFAULT_CLOSE_AFTER_PASSES,
    CheckOutcome,
    RuleKind,
    Severity,
    as_date,
)

VerdictStatus = Literal["fail", "pass", "inconclusive"]
# The statuses of `Verdict`, as stored in the warehouse's day sequence.
VERDICT_STATUSES: tuple[VerdictStatus, ...] = ("fail", "pass", "inconclusive")
Transition = Literal["opened", "carried", "closed", "quiet"]


@dataclass(frozen=True)
class Verdict:
    """What one day said about one rule on one slice, as far as incidents care.

    `fail`, a clear `pass`, or an `inconclusive` pass (a service level whose bounds
    straddle its line). Outcomes that say nothing (`not_enough_data`, `no_baseline`) have
    no verdict.
    """

    day: date
    rule: str
    slice: str
    kind: RuleKind
    status: VerdictStatus
    severity: Severity
    message: str = ""

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
        )


@dataclass(frozen=True)
class Incident:
    """An open (or just closed) breach of one rule on one slice: a run of failing days.

    `failed_days` counts the failing days of the run; `clear_passes` the consecutive clear
    passes since its last failure (it closes when they reach the rule kind's count).
    """

    rule: str
    slice: str
    severity: Severity
    opened_on: date
    last_failed_on: date
    last_message: str
    closed_on: date | None = None
    kind: RuleKind = "threshold"
    failed_days: int = 1
    clear_passes: int = 0

    @property
    def key(self) -> tuple[str, str]:
        return (self.rule, self.slice)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values (days as ISO text); `Incident.from_dict` reads it back."""
        data = asdict(self)
        for name in ("opened_on", "last_failed_on", "closed_on"):
            if data[name] is not None:
                data[name] = data[name].isoformat()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Incident:
        closed = data.get("closed_on")
        return cls(
            rule=str(data["rule"]),
            slice=str(data["slice"]),
            severity=data["severity"],
            opened_on=as_date(data["opened_on"]),
            last_failed_on=as_date(data["last_failed_on"]),
            last_message=str(data.get("last_message", "")),
            closed_on=None if closed is None else as_date(closed),
            kind=data.get("kind", "threshold"),
            failed_days=int(data.get("failed_days", 1)),
            clear_passes=int(data.get("clear_passes", 0)),
        )


def passes_to_close(kind: RuleKind, close_after_passes: int) -> int:
    """Consecutive clear passes that close an incident of a rule of this kind."""
    return max(1, close_after_passes) if kind == "threshold" else 1


def follow(
    incident: Incident | None,
    verdict: Verdict,
    close_after_passes: int = DEFAULT_CLOSE_AFTER_PASSES,
) -> tuple[Incident | None, Transition]:
    """The incident after one verdict about its (rule, slice), and what happened to it.

    `opened`: a failure with no incident open. `carried`: the incident stays open (failing
    again, an inconclusive pass, or a clear pass short of the count). `closed`: the clear
    pass that completed the count (the incident returned has `closed_on` set). `quiet`: a
    pass with no incident open (None returned).
    """
    day = verdict.day
    if verdict.status == "fail":
        if incident is None:
            opened = Incident(
                rule=verdict.rule,
                slice=verdict.slice,
                severity=verdict.severity,
                opened_on=day,
                last_failed_on=day,
                last_message=verdict.message,
                kind=verdict.kind,
            )
            return opened, "opened"
        return (
            replace(
                incident,
                severity=verdict.severity,
                last_failed_on=max(incident.last_failed_on, day),
                last_message=verdict.message,
                failed_days=incident.failed_days + (day > incident.last_failed_on),
                clear_passes=0,
            ),
            "carried",
        )
    if incident is None:
        return None, "quiet"
    if verdict.status == "inconclusive":
        return replace(incident, clear_passes=0), "carried"
    passes = incident.clear_passes + 1
    if passes >= passes_to_close(incident.kind, close_after_passes):
        return replace(incident, clear_passes=passes, closed_on=day), "closed"
    return replace(incident, clear_passes=passes), "carried"


@dataclass(frozen=True)
class IncidentChanges:
    """What one day did to the incidents, and what it pages.

    `opened`: incidents opened today. `carried`: incidents still open after today (failing
    again, recovering but not yet closed, or not evaluated conclusively). `closed`:
    incidents closed today (with `closed_on` set). `pages`: the outcomes worth a
    notification (failing drops, then the service-level outcomes that opened an
    incident). The incidents open after the day are `opened` plus `carried`.
    """

    opened: tuple[Incident, ...]
    carried: tuple[Incident, ...]
    closed: tuple[Incident, ...]
    pages: tuple[CheckOutcome, ...]

    @property
    def still_open(self) -> tuple[Incident, ...]:
        return (*self.opened, *self.carried)

    def of_kind(self, kind: RuleKind) -> IncidentChanges:
        """The same changes restricted to the incidents (and pages) of one kind of rule."""
        return IncidentChanges(
            opened=tuple(i for i in self.opened if i.kind == kind),
            carried=tuple(i for i in self.carried if i.kind == kind),
            closed=tuple(i for i in self.closed if i.kind == kind),
            pages=tuple(o for o in self.pages if o.kind == kind),
        )


def advance_incidents(
    open_incidents: Iterable[Incident],
    outcomes: Sequence[CheckOutcome],
    close_after_passes: int = DEFAULT_CLOSE_AFTER_PASSES,
) -> IncidentChanges:
    """Apply one day's outcomes (of `evaluate_rules`) to the incidents open before it.

    Each outcome with a verdict moves its (rule, slice) by `follow`. Pages: every failing
    drop, and every service-level outcome that opened an incident. Running the same day
    twice with the result of the first run gives no new page: the incident opened by the
    first run is carried by the second.
    """
    state = {incident.key: incident for incident in open_incidents}
    opened: dict[tuple[str, str], Incident] = {}
    closed: list[Incident] = []
    pages: list[CheckOutcome] = [o for o in outcomes if o.kind == "drop" and o.failed]
    for outcome in outcomes:
        verdict = Verdict.of(outcome)
        if verdict is None:
            continue
        key = (outcome.rule, outcome.slice)
        incident, transition = follow(state.get(key), verdict, close_after_passes)
        if transition == "opened":
            opened[key] = incident  # type: ignore[assignment]
            if outcome.kind == "threshold":
                pages.append(outcome)
        if transition == "closed":
            closed.append(incident)  # type: ignore[arg-type]
            state.pop(key, None)
            opened.pop(key, None)
        elif incident is not None:
            state[key] = incident
            if key in opened:
                opened[key] = incident
    carried = tuple(incident for key, incident in state.items() if key not in opened)
    return IncidentChanges(
        opened=tuple(opened.values()), carried=carried, closed=tuple(closed), pages=tuple(pages)
    )


def incident_runs(
    verdicts: Sequence[Verdict], close_after_passes: int = DEFAULT_CLOSE_AFTER_PASSES
) -> list[Incident]:
    """The incidents of one (rule, slice)'s day sequence of verdicts, oldest first.

    `verdicts` are in day order, one per day; each run ends with the verdict that closed it
    (`closed_on` set), the last one may still be open (`closed_on` None).
    """
    runs: list[Incident] = []
    current: Incident | None = None
    for verdict in verdicts:
        current, transition = follow(current, verdict, close_after_passes)
        if transition == "closed":
            runs.append(current)  # type: ignore[arg-type]
            current = None
    if current is not None:
        runs.append(current)
    return runs


def open_before(
    verdicts: Sequence[Verdict],
    day: date,
    close_after_passes: int = DEFAULT_CLOSE_AFTER_PASSES,
) -> Incident | None:
    """The incident open when `day` is evaluated: the sequence's days before it, folded."""
    runs = incident_runs([v for v in verdicts if v.day < day], close_after_passes)
    if runs and runs[-1].closed_on is None:
        return runs[-1]
    return None
