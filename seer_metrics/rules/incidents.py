"""Incidents and pages: what a day's outcomes change, as a pure function.

A threshold rule is a service level. When a slice starts failing it (or fails it on its
first evaluation) an incident opens, once; while the slice keeps failing the incident is
carried (a "still open" line, no new page); it closes only on a clear pass. A day that
says nothing about the level (not enough data, no baseline, a rule that did not run, a
pass within noise of the line) carries the incident unchanged: silence is not recovery.

A page is what deserves a notification: a failing drop outcome (the evaluation has already
held the false-discovery rate across the day's drop tests), or an incident opened today.
A chronic breach therefore pages once, not every day.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import date
from typing import Any

from seer_metrics.rules.model import CheckOutcome, Severity, as_date


@dataclass(frozen=True)
class Incident:
    """An open (or just closed) service-level breach of one rule on one slice."""

    rule: str
    slice: str
    severity: Severity
    opened_on: date
    last_failed_on: date
    last_message: str
    closed_on: date | None = None

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
        )


@dataclass(frozen=True)
class IncidentChanges:
    """What one day did to the incidents, and what it pages.

    `opened`: incidents opened today. `carried`: incidents still open after today (failing
    again, or not evaluated conclusively). `closed`: incidents a pass closed today (with
    `closed_on` set). `pages`: the outcomes worth a notification (failing drops, then the
    outcomes that opened an incident). The incidents open after the day are `opened` plus
    `carried`.
    """

    opened: tuple[Incident, ...]
    carried: tuple[Incident, ...]
    closed: tuple[Incident, ...]
    pages: tuple[CheckOutcome, ...]

    @property
    def still_open(self) -> tuple[Incident, ...]:
        return (*self.opened, *self.carried)


def advance_incidents(
    open_incidents: Iterable[Incident], outcomes: Sequence[CheckOutcome]
) -> IncidentChanges:
    """Apply one day's outcomes (of `evaluate_rules`) to the incidents open before it.

    Threshold outcomes: a fail opens an incident for (rule, slice) unless one is open (then
    it is carried, with the day's message); a clear pass closes an open one; any other
    status, and a pass marked `inconclusive`, carries it. Drop outcomes never open
    incidents; each failing one is a page. Running the same day twice with the result of
    the first run gives no new page: the incident opened by the first run is carried by
    the second.
    """
    open_by_key = {incident.key: incident for incident in open_incidents}
    opened: list[Incident] = []
    closed: list[Incident] = []
    updated: dict[tuple[str, str], Incident] = {}
    pages: list[CheckOutcome] = [o for o in outcomes if o.kind == "drop" and o.failed]
    for outcome in outcomes:
        if outcome.kind != "threshold":
            continue
        key = (outcome.rule, outcome.slice)
        day = outcome.partition_date or date.min
        current = open_by_key.get(key)
        if outcome.failed and current is None:
            incident = Incident(
                rule=outcome.rule,
                slice=outcome.slice,
                severity=outcome.severity,
                opened_on=day,
                last_failed_on=day,
                last_message=outcome.message,
            )
            opened.append(incident)
            open_by_key[key] = incident
            pages.append(outcome)
        elif outcome.failed and current is not None and key not in updated:
            if current in opened:
                continue
            updated[key] = replace(
                current,
                severity=outcome.severity,
                last_failed_on=max(current.last_failed_on, day),
                last_message=outcome.message,
            )
        elif (
            outcome.status == "pass"
            and not outcome.inconclusive
            and current is not None
            and current not in opened
        ):
            closed.append(replace(current, closed_on=day))
            del open_by_key[key]
    closed_keys = {incident.key for incident in closed}
    opened_keys = {incident.key for incident in opened}
    carried = tuple(
        updated.get(key, incident)
        for key, incident in open_by_key.items()
        if key not in closed_keys and key not in opened_keys
    )
    return IncidentChanges(
        opened=tuple(opened), carried=carried, closed=tuple(closed), pages=tuple(pages)
    )
