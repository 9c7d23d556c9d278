"""A day's outcomes applied to the incidents open before it: what opens, carries, closes
and pages (`advance_incidents`).

It looks across slices, where `follow` sees one (rule, slice) at a time: it takes the
day's verdicts as `verdict_holds.day_verdicts` decides them (a pass held, paused or
waiting while its trouble is still around it), and a level a slice first breaches under
its parent's open breach opens without a page (`under_parent`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from seer_metrics.rules.attribution import parent_slices
from seer_metrics.rules.incidents import (
    Incident,
    Verdict,
    beyond_the_step,
    follow,
    worsened_by,
)
from seer_metrics.rules.model import (
    DEFAULT_CLOSE_AFTER_PASSES,
    CheckOutcome,
    RuleKind,
    moved_bad_way,
)
from seer_metrics.rules.verdict_holds import day_verdicts


@dataclass(frozen=True)
class IncidentChanges:
    """What one day did to the incidents, and what it pages.

    `opened`: incidents opened today. `carried`: incidents still open after today (failing
    again, recovering but not yet closed, or not evaluated conclusively). `escalated`: the
    carried incidents that got much worse today (they page again). `closed`: incidents
    closed today (with `closed_on` set). `pages`: the outcomes worth a notification (those
    that opened an incident, then those that escalated one). `under_parent`: service-level
    incidents opened today without a page, because a parent slice has the same breach open
    and the slice is no worse than it. The incidents open after the day are `opened`,
    `under_parent` and `carried`. `verdicts`: the day's verdicts as the incidents took
    them (`day_verdicts`), what a store keeps so that folding them gives these incidents.
    """

    opened: tuple[Incident, ...]
    carried: tuple[Incident, ...]
    closed: tuple[Incident, ...]
    pages: tuple[CheckOutcome, ...]
    escalated: tuple[Incident, ...] = ()
    under_parent: tuple[Incident, ...] = ()
    verdicts: tuple[Verdict, ...] = ()

    @property
    def still_open(self) -> tuple[Incident, ...]:
        return (*self.opened, *self.under_parent, *self.carried)

    def state_of(self, rule: str, slice_label: str) -> tuple[str, Incident] | None:
        """("opened" | "under_parent" | "escalated" | "carried", incident) of a (rule,
        slice) after the day."""
        for state, incidents in (
            ("opened", self.opened),
            ("under_parent", self.under_parent),
            ("escalated", self.escalated),
            ("carried", self.carried),
        ):
            for incident in incidents:
                if incident.key == (rule, slice_label):
                    return state, incident
        return None

    def of_kind(self, kind: RuleKind) -> IncidentChanges:
        """The same changes restricted to the incidents (and pages) of one kind of rule."""
        return IncidentChanges(
            opened=tuple(i for i in self.opened if i.kind == kind),
            carried=tuple(i for i in self.carried if i.kind == kind),
            closed=tuple(i for i in self.closed if i.kind == kind),
            pages=tuple(o for o in self.pages if o.kind == kind),
            escalated=tuple(i for i in self.escalated if i.kind == kind),
            under_parent=tuple(i for i in self.under_parent if i.kind == kind),
            verdicts=tuple(v for v in self.verdicts if v.kind == kind),
        )


def advance_incidents(
    open_incidents: Iterable[Incident],
    outcomes: Sequence[CheckOutcome],
    close_after_passes: int = DEFAULT_CLOSE_AFTER_PASSES,
) -> IncidentChanges:
    """Apply one day's outcomes (of `evaluate_rules`) to the incidents open before it.

    Each outcome with a verdict moves its (rule, slice) by `follow`. Pages: every outcome
    that opened an incident, then every one that escalated one. Running the same day twice
    with the result of the first run gives no new page: the incident opened by the first
    run is carried by the second.
    """
    state = {incident.key: incident for incident in open_incidents}
    opened: dict[tuple[str, str], Incident] = {}
    escalated: dict[tuple[str, str], Incident] = {}
    closed: list[Incident] = []
    opening: list[CheckOutcome] = []
    worsening: list[CheckOutcome] = []
    decided = tuple(day_verdicts(outcomes, state.values(), close_after_passes))
    verdicts = {(v.rule, v.slice): v for v in decided}
    for outcome in outcomes:
        key = (outcome.rule, outcome.slice)
        verdict = verdicts.get(key)
        if verdict is None:
            continue
        incident, transition = follow(state.get(key), verdict, close_after_passes)
        if transition == "opened":
            opened[key] = incident  # type: ignore[assignment]
            opening.append(outcome)
        elif transition == "escalated":
            escalated[key] = incident  # type: ignore[assignment]
            worsening.append(outcome)
        if transition == "closed":
            closed.append(incident)  # type: ignore[arg-type]
            state.pop(key, None)
            opened.pop(key, None)
        elif incident is not None:
            state[key] = incident
            if key in opened:
                opened[key] = incident
    shared = {
        key
        for key in opened
        if opened[key].kind == "threshold" and _shares_parent_breach(key, verdicts, state)
    }
    for key in shared:
        state[key] = opened[key] = replace(opened[key], paged=False)
    carried = tuple(state[key] for key in state if key not in opened)
    return IncidentChanges(
        opened=tuple(i for key, i in opened.items() if key not in shared),
        carried=carried,
        closed=tuple(closed),
        pages=(*(o for o in opening if (o.rule, o.slice) not in shared), *worsening),
        escalated=tuple(escalated.values()),
        under_parent=tuple(opened[key] for key in opened if key in shared),
        verdicts=decided,
    )


def _shares_parent_breach(
    key: tuple[str, str],
    verdicts: Mapping[tuple[str, str], Verdict],
    open_after: Mapping[tuple[str, str], Incident],
) -> bool:
    """Whether a service level a slice breaches for the first time is a breach its parent
    already has open (on the same rule) and the slice is not much worse than that parent:
    worse by less than the rule's escalation step beyond their noise, the test an open
    incident re-pages by (`incidents.beyond_the_step`). On a real retriever the levels
    are breached chronically: a small tenant that first reaches the minimum sample, or a
    new tenant, breaches them too, and paging it said nothing its parent's incident had
    not (10 pages in 112 clean days of a mix of 20 tenants; at 900 events a day, with any
    gap beyond noise paging, 6 of a mix's 14). A slice much worse than its parent still
    pages: that is news."""
    rule, label = key
    child = verdicts[key]
    for parent in parent_slices(label):
        theirs = verdicts.get((rule, parent))
        if theirs is None or (rule, parent) not in open_after or theirs.status != "fail":
            continue
        gap = _worse_than(child, theirs)
        if gap is None:
            continue
        noise = math.hypot(child.noise or 0.0, theirs.noise or 0.0) / math.sqrt(2)
        # without a step (a verdict stored before steps were), worse beyond noise pages
        if not beyond_the_step(gap, noise, child.escalation_step or 0.0):
            return True
    return False


def _worse_than(child: Verdict, parent: Verdict) -> float | None:
    """How much worse the child's reading is than its parent's: for a level against the
    slice's own normal, its move from that normal; else the reading itself."""
    if child.baseline is not None and parent.baseline is not None:
        child_move = worsened_by(child, child.baseline)
        parent_move = worsened_by(parent, parent.baseline)
        if child_move is None or parent_move is None:
            return None
        return child_move - parent_move
    return moved_bad_way(child.observed, parent.observed, child.worse_when)
