"""Incidents in the warehouse: the day sequence of verdicts and the runs of failing days.

Backfills evaluate days in any order, so incidents follow the day sequence, not the order
of evaluation. For a rule on a slice only `pass` and `fail` are verdicts (`not_enough_data`,
`no_baseline`, errors and missing slices say nothing). An incident is open on day D when
the latest day before D with a verdict failed and no pass came since; it opened on the
first failing day of that run and closes on the first pass after it.

Evaluating day D: the incidents open on D are read from `seer_check_verdicts`, D's outcomes
are applied to them by the rules' pure `advance_incidents` (opened / carried / closed), D's
verdicts are stored, and `seer_incidents` is re-derived for the rules concerned. Service
levels (threshold rules) and drop rules are followed alike; only what pages differs (see
`alerts.dispatch`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import date

import sqlalchemy as sa

from seer_metrics.rules import CheckOutcome, as_date
from seer_metrics.rules.incidents import Incident, IncidentChanges, advance_incidents
from seer_pipelines.warehouse.schema import incidents_table, verdicts_table
from seer_pipelines.warehouse.writer import utc_now

VERDICTS = ("pass", "fail")


@dataclass(frozen=True)
class Verdict:
    day: date
    rule: str
    slice: str
    rule_kind: str
    status: str
    severity: str
    message: str


@dataclass(frozen=True)
class IncidentRun:
    """One run of failing days (a row of `seer_incidents`)."""

    incident: Incident
    rule_kind: str
    failed_days: int


@dataclass(frozen=True)
class DayIncidents:
    """What one day did: service-level incidents, and runs of failing drop days."""

    levels: IncidentChanges
    drops: IncidentChanges

    @property
    def closed(self) -> tuple[Incident, ...]:
        return (*self.levels.closed, *self.drops.closed)

    def level_state(self, rule: str, slice_label: str) -> tuple[str, Incident] | None:
        """("opened" | "carried", incident) of a service level on a slice after the day."""
        for state, incidents in (("opened", self.levels.opened), ("carried", self.levels.carried)):
            for incident in incidents:
                if incident.key == (rule, slice_label):
                    return state, incident
        return None


def incident_runs(verdicts: Sequence[Verdict]) -> list[IncidentRun]:
    """The runs of failing days in one pair's verdicts (sorted by day), each closed by the
    first pass after it (an open run has `closed_on` None)."""
    runs: list[IncidentRun] = []
    current: Incident | None = None
    count = 0
    kind = ""
    for verdict in verdicts:
        if verdict.status == "fail":
            if current is None:
                count, kind, opened_on = 0, verdict.rule_kind, verdict.day
            else:
                opened_on = current.opened_on
            count += 1
            current = Incident(
                rule=verdict.rule,
                slice=verdict.slice,
                severity=verdict.severity,  # type: ignore[arg-type]
                opened_on=opened_on,
                last_failed_on=verdict.day,
                last_message=verdict.message,
            )
        elif current is not None:
            runs.append(IncidentRun(replace(current, closed_on=verdict.day), kind, count))
            current = None
    if current is not None:
        runs.append(IncidentRun(current, kind, count))
    return runs


def open_before(verdicts: Sequence[Verdict], day: date) -> Incident | None:
    """The incident open on `day`: the run holding the latest verdict before it, if a fail."""
    earlier = [v for v in verdicts if v.day < day]
    runs = incident_runs(earlier)
    if runs and runs[-1].incident.closed_on is None:
        return runs[-1].incident
    return None


class IncidentStore:
    """`seer_check_verdicts` and `seer_incidents` in the warehouse."""

    def __init__(self, engine: sa.Engine, schema: str | None = None) -> None:
        self.engine = engine
        self.verdicts = verdicts_table(schema)
        self.incidents = incidents_table(schema)
        self._created = False

    def ensure_tables(self) -> None:
        if not self._created:
            for table in (self.verdicts, self.incidents):
                table.metadata.create_all(self.engine, tables=[table], checkfirst=True)
            self._created = True

    def _verdicts(self, connection: sa.Connection, rules: Iterable[str]) -> list[Verdict]:
        table = self.verdicts
        query = (
            sa.select(table)
            .where(table.c.rule.in_(sorted(set(rules))))
            .order_by(table.c.rule, table.c.slice, table.c.partition_date)
        )
        return [
            Verdict(
                as_date(row.partition_date),
                row.rule,
                row.slice,
                row.rule_kind,
                row.status,
                row.severity,
                row.message,
            )
            for row in connection.execute(query)
        ]

    def advance(self, day: date, outcomes: Sequence[CheckOutcome]) -> DayIncidents:
        """Apply `day`'s outcomes to the incidents open on it; store the day's verdicts."""
        self.ensure_tables()
        rules = {o.rule for o in outcomes}
        with self.engine.begin() as connection:
            history = self._verdicts(connection, rules)
            by_pair: dict[tuple[str, str], list[Verdict]] = {}
            for verdict in history:
                by_pair.setdefault((verdict.rule, verdict.slice), []).append(verdict)
            open_levels, open_drops = [], []
            for verdicts in by_pair.values():
                incident = open_before(verdicts, day)
                if incident is not None:
                    drop = verdicts[-1].rule_kind == "drop"
                    (open_drops if drop else open_levels).append(incident)
            levels = advance_incidents(open_levels, [o for o in outcomes if o.kind != "drop"])
            drops = advance_incidents(
                open_drops, [o.replace(kind="threshold") for o in outcomes if o.kind == "drop"]
            )
            self._store_verdicts(connection, day, outcomes)
            self._derive_incidents(connection, rules)
        return DayIncidents(levels, drops)

    def _store_verdicts(
        self, connection: sa.Connection, day: date, outcomes: Sequence[CheckOutcome]
    ) -> None:
        table = self.verdicts
        decided = [o for o in outcomes if o.status in VERDICTS]
        now = utc_now()
        for outcome in decided:  # a verdict replaces the day's earlier one; others stay
            connection.execute(
                table.delete().where(
                    table.c.partition_date == day,
                    table.c.rule == outcome.rule,
                    table.c.slice == outcome.slice,
                )
            )
        if decided:
            connection.execute(
                table.insert(),
                [
                    {
                        "partition_date": day,
                        "rule": o.rule,
                        "slice": o.slice,
                        "rule_kind": o.kind,
                        "status": o.status,
                        "severity": o.severity,
                        "message": o.message,
                        "updated_at": now,
                    }
                    for o in decided
                ],
            )

    def _derive_incidents(self, connection: sa.Connection, rules: Iterable[str]) -> None:
        rules = sorted(set(rules))
        table = self.incidents
        connection.execute(table.delete().where(table.c.rule.in_(rules)))
        by_pair: dict[tuple[str, str], list[Verdict]] = {}
        for verdict in self._verdicts(connection, rules):
            by_pair.setdefault((verdict.rule, verdict.slice), []).append(verdict)
        now = utc_now()
        rows = [
            {
                "rule": run.incident.rule,
                "slice": run.incident.slice,
                "rule_kind": run.rule_kind,
                "severity": run.incident.severity,
                "opened_on": run.incident.opened_on,
                "last_failed_on": run.incident.last_failed_on,
                "closed_on": run.incident.closed_on,
                "failed_days": run.failed_days,
                "last_message": run.incident.last_message,
                "updated_at": now,
            }
            for verdicts in by_pair.values()
            for run in incident_runs(verdicts)
        ]
        if rows:
            connection.execute(table.insert(), rows)

    def runs(self, rule: str | None = None, open_only: bool = False) -> list[IncidentRun]:
        """Rows of `seer_incidents` (all rules, or one), oldest first."""
        self.ensure_tables()
        table = self.incidents
        query = sa.select(table).order_by(table.c.rule, table.c.slice, table.c.opened_on)
        if rule is not None:
            query = query.where(table.c.rule == rule)
        if open_only:
            query = query.where(table.c.closed_on.is_(None))
        with self.engine.connect() as connection:
            return [
                IncidentRun(
                    Incident(
                        rule=row.rule,
                        slice=row.slice,
                        severity=row.severity,
                        opened_on=as_date(row.opened_on),
                        last_failed_on=as_date(row.last_failed_on),
                        last_message=row.last_message,
                        closed_on=None if row.closed_on is None else as_date(row.closed_on),
                    ),
                    row.rule_kind,
                    row.failed_days,
                )
                for row in connection.execute(query)
            ]
