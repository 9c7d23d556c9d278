"""Incidents and pages: the one place where a verdict opens, carries or closes an incident.

A threshold rule is a service level: when a slice starts failing it (or fails its first
evaluation) an incident opens, once, and is carried while the slice keeps failing. It
closes after `close_after_passes` consecutive clear passes (default 3), so a slice
hovering at its line stays ONE incident. An `inconclusive` pass carries it and restarts
the count (a level against the slice's normal pools its passes in a row instead:
`recovery.pooled_level_recovery`); a day that says nothing (not enough data, no
baseline) carries it unchanged.

A drop rule (a change) is followed the same way, and its passes are clear only when the
slice is back within noise of its pre-incident level (its baseline never learns the
breakage: `seer_metrics.rules.breakage`) and half way back from where it opened; it
closes when its latest readings since its last failure (the count and one more) hold
the count of clear passes and, together, are back within their pooled noise (after one
failing day, not before `recovery.seen_long_enough`). A reading
of its own short of back stays in that window (so a residual gap keeps the incident
open, and one chance low day ages out); a pass held because a slice sharing its events
still fails starts the count again, one held because such a slice is not back (or a wider
slice around it is, its readings together) pauses it.
"Recovered" is never said while the trouble lasts.

A page is an incident opened today, or an open incident much worse than where it opened
(`escalated`, once per incident): an ongoing breakage pages once, not every day.

`follow` is the transition; `incident_day.advance_incidents` applies a day's outcomes to
the incidents open before it (the daily replay, the benchmarks, the warehouse), and
`incident_runs` / `open_before` fold it over a stored day sequence of verdicts (the
warehouse, which backfills in any order): both are the same rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from datetime import date
from typing import Any, Literal

from seer_metrics.rules.model import (
    DEFAULT_CLOSE_AFTER_PASSES,
    RuleKind,
    Severity,
    as_date,
)
from seer_metrics.rules.readings import TOLERANCE, number_or_none
from seer_metrics.rules.recovery import (
    back_from_the_drop,
    level_may_close,
    pooled_level,
    pooled_level_recovery,
    pooled_recovery,
    recovery_baseline,
    seen_long_enough,
)
from seer_metrics.rules.verdict import Verdict, judged_apart, worsened_by

Transition = Literal["opened", "carried", "escalated", "closed", "quiet"]


@dataclass(frozen=True)
class Incident:
    """An open (or just closed) breach of one rule on one slice: a run of failing days.

    `failed_days` counts the failing days of the run; `clear_passes` the clear passes
    since its last failure (consecutive for a level; for a change, since its last failure
    or hold, its own readings short of back only pause them); it closes when they reach
    the rule kind's count.
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
    # The statistic when the incident opened, the baseline it was compared with then (the
    # level before the incident), the latest reading, and the day it paged again because
    # it got much worse (once).
    opened_observed: float | None = None
    opened_baseline: float | None = None
    last_observed: float | None = None
    # The level the latest reading was compared with (a change's, inside the incident, the
    # days before it): what the "Recovered" reply says it is back against.
    last_baseline: float | None = None
    escalated_on: date | None = None
    # A change's latest readings since its last failure or hold (at most the count to
    # close and one more): how far below the pre-incident level each was, its noise, and
    # whether it was a clear pass (the pooled recovery test reads them).
    recent_readings: tuple[tuple[float, float, bool], ...] = ()
    # Whether a person was told of it: False for a level opened under its parent's open
    # breach (`under_parent`) until it gets much worse. Only the day's replay
    # (`advance_incidents`) knows it; the warehouse's folded history does not (there the
    # outbox holds what was posted, and a close with nothing posted sends no reply).
    paged: bool = True
    # The judge of the reading a worsening is measured from (`much_worse`), and that
    # reading when another judge took over after the incident opened (None: the opening
    # reading): a stricter judge read recall 0.25 lower on every slice the day it started,
    # and each open level "got much worse" (realistic stream, lexical judge to an LLM).
    judge: str | None = None
    reference_observed: float | None = None
    reference_on: date | None = None
    # The judge of the latest reading: a close read by another judge than `judge` may be
    # the judge's doing (a lenient one read recall 1.0 on every slice), and says so.
    last_judge: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.rule, self.slice)

    @property
    def worse_than(self) -> float | None:
        """The reading a worsening is measured from."""
        return self.opened_observed if self.reference_on is None else self.reference_observed

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values (days as ISO text); `Incident.from_dict` reads it back."""
        data = asdict(self)
        for name in ("opened_on", "last_failed_on", "closed_on", "escalated_on", "reference_on"):
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
            recent_readings=tuple(
                (float(gap), float(noise), bool(clear))
                for gap, noise, clear in data.get("recent_readings", ())
            ),
            opened_observed=number_or_none(data.get("opened_observed")),
            opened_baseline=number_or_none(data.get("opened_baseline")),
            last_observed=number_or_none(data.get("last_observed")),
            last_baseline=number_or_none(data.get("last_baseline")),
            escalated_on=None
            if data.get("escalated_on") is None
            else as_date(data["escalated_on"]),
            paged=bool(data.get("paged", True)),
            judge=data.get("judge") or None,
            last_judge=data.get("last_judge") or None,
            reference_observed=number_or_none(data.get("reference_observed")),
            reference_on=None
            if data.get("reference_on") is None
            else as_date(data["reference_on"]),
        )


def clear_pass(verdict: Verdict, incident: Incident) -> bool:
    """A pass that counts towards closing the incident: clearly within the rule and, for
    a change, back from its drop (`recovery.back_from_the_drop`)."""
    return verdict.status == "pass" and back_from_the_drop(verdict, incident)


def passes_to_close(kind: RuleKind, close_after_passes: int) -> int:
    """Consecutive clear passes that close an incident of a rule of this kind: the same
    hysteresis for levels and changes. A slice a breakage hurts only in part (a tenant
    with a quarter of its events on the broken path) passes a change test on some days by
    chance; closing on the first such pass said "recovered" during 5 of 5 lost top hits
    of the realistic benchmark."""
    del kind  # every kind of rule keeps the same count
    return max(1, close_after_passes)


def _latest(verdict: Verdict) -> dict[str, Any]:
    """An incident's fields that keep its latest reading."""
    return {
        "last_observed": verdict.observed,
        "last_baseline": verdict.baseline,
        "last_judge": verdict.judge,
    }


# What a failure, a hold or a recovery refused by the pooled test starts again from.
_RESTART: dict[str, Any] = {"clear_passes": 0, "recent_readings": ()}


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
                opened_observed=verdict.observed,
                opened_baseline=verdict.baseline,
                judge=verdict.judge,
                **_latest(verdict),
            )
            return opened, "opened"
        carried = replace(
            incident,
            severity=verdict.severity,
            last_failed_on=max(incident.last_failed_on, day),
            last_message=verdict.message,
            failed_days=incident.failed_days + (day > incident.last_failed_on),
            **_latest(verdict),
            **_RESTART,
        )
        if another_judge(verdict, incident):
            # a new judge's first failing reading is where a worsening is measured from
            return replace(
                carried, judge=verdict.judge, reference_observed=verdict.observed, reference_on=day
            ), "carried"
        if incident.escalated_on is None and much_worse(verdict, incident):
            return replace(carried, escalated_on=day, paged=True), "escalated"
        return carried, "carried"
    if incident is None:
        return None, "quiet"
    if verdict.paused:  # set only with `held`
        return replace(incident, **_latest(verdict)), "carried"
    clear = clear_pass(verdict, incident)
    # a waiting pass counts, but never closes (`verdict_holds._beside_another_change`)
    may_close = clear and not verdict.waiting
    pools = incident.kind != "drop" and pooled_level(verdict)
    if verdict.held or (not clear and incident.kind != "drop" and not pools):
        return replace(incident, **_latest(verdict), **_RESTART), "carried"
    needed = passes_to_close(incident.kind, close_after_passes)
    if pools:
        # A level against its normal pools its passes since its last failure or hold.
        move = worsened_by(verdict, verdict.baseline) or 0.0
        window = (*incident.recent_readings, (move, verdict.noise or 0.0, clear))[-needed:]
        recovering = replace(
            incident, **_latest(verdict), recent_readings=window, clear_passes=len(window)
        )
        if (
            level_may_close(clear, move, verdict.waiting)
            and len(window) >= needed
            and seen_long_enough(incident, day, needed)
            and pooled_level_recovery(recovering, verdict.threshold)
        ):
            return replace(recovering, closed_on=day), "closed"
        return recovering, "carried"
    if incident.kind != "drop":
        recovering = replace(incident, clear_passes=incident.clear_passes + 1, **_latest(verdict))
        if may_close and recovering.clear_passes >= needed:
            return replace(recovering, closed_on=day), "closed"
        return recovering, "carried"
    # A change's own reading short of back does not start its count again: it stays in
    # the window of its latest readings, pooled with the clear passes, so a residual gap
    # keeps the incident open and one chance low day ages out.
    window = change_window(incident, verdict, clear, needed)
    recovering = replace(
        incident,
        **_latest(verdict),
        recent_readings=window,
        clear_passes=sum(1 for _, _, was_clear in window if was_clear),
    )
    if (
        may_close
        and recovering.clear_passes >= needed
        and seen_long_enough(incident, day, needed)
        and pooled_recovery(recovering, verdict.margin)
    ):
        return replace(recovering, closed_on=day), "closed"
    return recovering, "carried"


def change_window(
    incident: Incident, verdict: Verdict, clear: bool, needed: int
) -> tuple[tuple[float, float, bool], ...]:
    """A change incident's latest readings with today's: its gap below the pre-incident
    level, noise and clearness, the count to close and one more."""
    gap = worsened_by(verdict, recovery_baseline(verdict.baseline, incident)) or 0.0
    return (*incident.recent_readings, (gap, verdict.noise or 0.0, clear))[-(needed + 1) :]


def still_low(
    incident: Incident, verdict: Verdict, close_after_passes: int = DEFAULT_CLOSE_AFTER_PASSES
) -> bool:
    """A change incident passing today whose latest readings, today's among them, are
    together still short of back (`recovery.pooled_recovery`): it stays open."""
    if incident.kind != "drop" or verdict.status == "fail":
        return False
    clear = clear_pass(verdict, incident)
    window = change_window(incident, verdict, clear, passes_to_close("drop", close_after_passes))
    return not pooled_recovery(replace(incident, recent_readings=window), verdict.margin)


def another_judge(verdict: Verdict, incident: Incident) -> bool:
    """The verdict was judged by another judge than the reading a worsening is measured
    from (both known)."""
    return judged_apart(verdict.judge, incident.judge)


def much_worse(verdict: Verdict, incident: Incident) -> bool:
    """The failing verdict is materially worse than where the incident opened (or where
    the judge of today's reading took over): moved the bad way by the rule's escalation
    step beyond the day's noise (`beyond_the_step`)."""
    if verdict.escalation_step is None:
        return False
    moved = worsened_by(verdict, incident.worse_than)
    return beyond_the_step(moved, verdict.noise or 0.0, verdict.escalation_step)


def beyond_the_step(moved: float | None, noise: float, step: float) -> bool:
    """A move the bad way of at least `step` once the noise of two readings is taken off
    it (its bound clears the step, as a level's its line; 0: beyond noise). A chronic
    level tested daily for weeks re-paged by chance with the two tested apart."""
    if moved is None:
        return False
    beyond_noise = moved - noise
    return beyond_noise > 0 and beyond_noise >= step - TOLERANCE


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
