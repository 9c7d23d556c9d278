"""Incidents in the warehouse: the day sequence of verdicts and the incidents it holds.

Backfills evaluate days in any order, so incidents follow the day sequence, not the order
of evaluation. For a rule on a slice only `fail`, `pass` and `inconclusive` (a pass within
noise of a service level's line) are verdicts, stored per day in `seer_check_verdicts`
(`not_enough_data`, `no_baseline`, errors and missing slices say nothing). What a verdict
does to an incident is the rules' pure transition (`seer_metrics.rules.incidents`):
this module only reads and writes the tables.

Evaluating day D: the incidents open on D are the stored verdicts of the days before D,
folded (`open_before`); D's outcomes are applied to them (`advance_incidents`), D's
verdicts are stored, and `seer_incidents` is re-derived (`incident_runs`) for the rules
concerned. Service levels (threshold rules) and drop rules are followed alike; only what
pages differs (see `alerts.dispatch`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date

import sqlalchemy as sa

from seer_metrics.rules import CheckOutcome, as_date
from seer_metrics.rules.breakage import baseline_exclusions
from seer_metrics.rules.incident_day import IncidentChanges, advance_incidents
from seer_metrics.rules.incidents import Incident, Verdict, incident_runs, open_before
from seer_metrics.rules.model import DEFAULT_CLOSE_AFTER_PASSES, RulesConfig
from seer_pipelines.warehouse.schema import incidents_table, verdicts_table
from seer_pipelines.warehouse.writer import add_missing_columns, utc_now


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

    def state_of(self, rule: str, slice_label: str) -> tuple[str, Incident] | None:
        """("opened" | "escalated" | "carried", incident) of a rule on a slice after the day."""
        return self.levels.state_of(rule, slice_label) or self.drops.state_of(rule, slice_label)


class IncidentStore:
    """`seer_check_verdicts` and `seer_incidents` in the warehouse."""

    def __init__(
        self,
        engine: sa.Engine,
        schema: str | None = None,
        close_after_passes: int = DEFAULT_CLOSE_AFTER_PASSES,
    ) -> None:
        self.engine = engine
        self.close_after_passes = close_after_passes
        self.verdicts = verdicts_table(schema)
        self.incidents = incidents_table(schema)
        self._created = False

    def ensure_tables(self) -> None:
        if not self._created:
            for table in (self.verdicts, self.incidents):
                table.metadata.create_all(self.engine, tables=[table], checkfirst=True)
            add_missing_columns(self.engine, self.verdicts)
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
                day=as_date(row.partition_date),
                rule=row.rule,
                slice=row.slice,
                kind=row.rule_kind,
                status=row.status,
                severity=row.severity,
                message=row.message,
                **Verdict.figure_fields(row.figures),
            )
            for row in connection.execute(query)
        ]

    def baseline_exclusions(
        self, day: date, config: RulesConfig
    ) -> dict[tuple[str, str], frozenset[date]]:
        """The days before `day` each (statistic, slice)'s baselines must not learn: the
        days of its change rules' failures and open incidents (see `baseline_exclusions`).
        A database failure raises: evaluating without them could call a breakage normal."""
        change_rules = config.change_rules()
        if not change_rules:
            return {}
        self.ensure_tables()
        with self.engine.connect() as connection:
            verdicts = self._verdicts(connection, change_rules)
        return baseline_exclusions(verdicts, change_rules, day, self.close_after_passes)

    def advance(self, day: date, outcomes: Sequence[CheckOutcome]) -> DayIncidents:
        """Apply `day`'s outcomes to the incidents open on it; store the day's verdicts."""
        self.ensure_tables()
        rules = {o.rule for o in outcomes}
        with self.engine.begin() as connection:
            history = self._verdicts(connection, rules)
            by_pair: dict[tuple[str, str], list[Verdict]] = {}
            for verdict in history:
                by_pair.setdefault((verdict.rule, verdict.slice), []).append(verdict)
            still_open = [
                incident
                for verdicts in by_pair.values()
                if (incident := open_before(verdicts, day, self.close_after_passes)) is not None
            ]
            changes = advance_incidents(still_open, outcomes, self.close_after_passes)
            self._store_verdicts(connection, day, changes.verdicts)
            self._derive_incidents(connection, rules)
        return DayIncidents(changes.of_kind("threshold"), changes.of_kind("drop"))

    def _store_verdicts(
        self, connection: sa.Connection, day: date, decided: Sequence[Verdict]
    ) -> None:
        table = self.verdicts
        now = utc_now()
        for verdict in decided:  # a verdict replaces the day's earlier one; others stay
            connection.execute(
                table.delete().where(
                    table.c.partition_date == day,
                    table.c.rule == verdict.rule,
                    table.c.slice == verdict.slice,
                )
            )
        if decided:
            connection.execute(
                table.insert(),
                [
                    {
                        "partition_date": day,
                        "rule": v.rule,
                        "slice": v.slice,
                        "rule_kind": v.kind,
                        "status": v.status,
                        "severity": v.severity,
                        "message": v.message,
                        "updated_at": now,
                        "figures": v.figures(),
                    }
                    for v in decided
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
                "rule": incident.rule,
                "slice": incident.slice,
                "rule_kind": incident.kind,
                "severity": incident.severity,
                "opened_on": incident.opened_on,
                "last_failed_on": incident.last_failed_on,
                "closed_on": incident.closed_on,
                "failed_days": incident.failed_days,
                "last_message": incident.last_message,
                "updated_at": now,
            }
            for verdicts in by_pair.values()
            for incident in incident_runs(verdicts, self.close_after_passes)
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
                        kind=row.rule_kind,
                        failed_days=row.failed_days,
                    ),
                    row.rule_kind,
                    row.failed_days,
                )
                for row in connection.execute(query)
            ]
