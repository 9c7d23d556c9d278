"""The `seer_alerts` outbox: one row per (partition day, kind, rule, slice).

A check run records its failing outcomes here, then delivers what is pending. A row is
`pending` until a message carrying it was accepted, then `sent`; a Slack failure leaves
it `pending` with the error and the attempt count, for the next run or the retry sensor.
Re-running a partition re-posts only when the outcome fingerprint (rule, slice, status,
severity, threshold, baseline, incident state) of some row changed. A row is `resolved`
only when its check passes: `not_enough_data`, `no_baseline`, errors or a missing slice
leave it as it is. A failing service level whose incident was already open is `carried`.
`recovered` rows are the replies posted in the thread of an alert when its check passes.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import date, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from seer_metrics.events import finite_json
from seer_metrics.rules import CheckOutcome, as_date
from seer_metrics.rules.incidents import Incident
from seer_metrics.text.redaction import redact_secrets, shorten
from seer_pipelines.alerts.alert_row import (
    CARRIED,
    KIND_CHECK,
    KIND_RECOVERED,
    PENDING,
    RESOLVED,
    SENT,
    Alert,
    AlertItem,
    RecordSummary,
    as_utc,
    outcome_fingerprint,
)
from seer_pipelines.alerts.incident_store import DayIncidents
from seer_pipelines.warehouse.schema import alerts_table
from seer_pipelines.warehouse.writer import utc_now

# A page of a slice that Seer said recovered within this many days says so: on the
# realistic streams a drift's first days closed chance dips within noise, and the slice
# paged again 2 days later in 3 of 5 cases, 10 days later in one (on the same check or
# another one).
RECENT_RECOVERY_DAYS = 14


def _opened(payload: Mapping[str, Any]) -> bool:
    """A row whose check opened its incident today: a page of a new breach."""
    incident = payload.get("incident")
    return isinstance(incident, Mapping) and incident.get("state") == "opened"


class AlertOutbox:
    """The `seer_alerts` table in the warehouse; every method is one short transaction."""

    def __init__(self, engine: sa.Engine, schema: str | None = None) -> None:
        self.engine = engine
        self.table = alerts_table(schema)
        self._created = False

    def ensure_table(self) -> None:
        if not self._created:
            self.table.metadata.create_all(self.engine, tables=[self.table], checkfirst=True)
            self._created = True

    @staticmethod
    def _alert(row: Any) -> Alert:
        values = dict(row._mapping)
        payload = values["payload"]
        if isinstance(payload, str):
            payload = json.loads(payload)
        return Alert(
            id=values["id"],
            partition_date=as_date(values["partition_date"]),
            kind=values["kind"],
            rule=values["rule"],
            slice=values["slice"],
            severity=values["severity"],
            state=values["state"],
            fingerprint=values["fingerprint"],
            payload=payload or {},
            run_id=values["run_id"],
            attempts=values["attempts"] or 0,
            last_error=values["last_error"],
            next_attempt_at=as_utc(values["next_attempt_at"]),
            delivered_to=values["delivered_to"],
            slack_ts=values["slack_ts"],
            sent_at=as_utc(values["sent_at"]),
            created_at=as_utc(values["created_at"]),
        )

    def record(
        self,
        partition_date: date,
        kind: str,
        items: Sequence[AlertItem],
        run_id: str | None,
        resolve: Collection[tuple[str, str]] = (),
        carried: Collection[tuple[str, str]] = (),
    ) -> RecordSummary:
        """Upsert (rule, slice, severity, payload) rows of one partition and kind.

        A row whose fingerprint is unchanged keeps its state (no new post); a new or
        changed one becomes pending (or `carried`, for the keys in `carried`). Active rows
        whose (rule, slice) is in `resolve` (their check passes now) become resolved; every
        other row is left as it is.
        """
        self.ensure_table()
        table = self.table
        now = utc_now()
        new_or_changed = unchanged = resolved = 0
        with self.engine.begin() as connection:
            existing = {
                (row.rule, row.slice): row
                for row in connection.execute(
                    sa.select(table).where(
                        table.c.partition_date == partition_date, table.c.kind == kind
                    )
                )
            }
            for rule, slice_label, severity, payload in items:
                payload = finite_json(payload)
                fingerprint = outcome_fingerprint(payload)
                row = existing.get((rule, slice_label))
                if row is not None and row.fingerprint == fingerprint and row.state != RESOLVED:
                    unchanged += 1
                    continue
                new_or_changed += 1
                values = {
                    "severity": severity,
                    "state": CARRIED if (rule, slice_label) in carried else PENDING,
                    "fingerprint": fingerprint,
                    "payload": payload,
                    "run_id": run_id,
                    "attempts": 0,
                    "last_error": None,
                    "next_attempt_at": None,
                    "updated_at": now,
                }
                if row is None:
                    connection.execute(
                        table.insert().values(
                            partition_date=partition_date,
                            kind=kind,
                            rule=rule,
                            slice=slice_label,
                            created_at=now,
                            **values,
                        )
                    )
                else:
                    connection.execute(table.update().where(table.c.id == row.id).values(**values))
            for key in resolve:
                row = existing.get(key)
                if row is not None and row.state != RESOLVED:
                    resolved += 1
                    connection.execute(
                        table.update()
                        .where(table.c.id == row.id)
                        .values(state=RESOLVED, updated_at=now, next_attempt_at=None)
                    )
        return RecordSummary(new_or_changed, unchanged, resolved)

    def record_check_outcomes(
        self,
        partition_date: date,
        outcomes: Iterable[CheckOutcome],
        run_id: str | None,
        incidents: DayIncidents | None = None,
        annotations: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
    ) -> RecordSummary:
        """Record the failing outcomes of a partition; clear passes resolve earlier rows.

        Only a clear pass resolves: an inconclusive one (not yet back within noise),
        `not_enough_data`, `no_baseline` (e.g. a judge outage left too few judged events)
        and slices without rows leave the row as it was. With `incidents`, a failing rule
        pages on the day its incident opens and on the day it gets much worse
        (escalated); on the other days of the incident its row is `carried`.
        `annotations` add keys to a row's payload (its place in the message, its headline).
        """
        items: list[AlertItem] = []
        carried: set[tuple[str, str]] = set()
        passed: set[tuple[str, str]] = set()
        for outcome in outcomes:
            if outcome.status == "pass" and not outcome.inconclusive:
                passed.add((outcome.rule, outcome.slice))
            if not outcome.failed:
                continue
            payload = outcome.to_dict() | dict(
                (annotations or {}).get((outcome.rule, outcome.slice), {})
            )
            found = incidents.state_of(outcome.rule, outcome.slice) if incidents else None
            if found is not None:
                state, incident = found
                payload["incident"] = {
                    "state": state,
                    "opened_on": incident.opened_on.isoformat(),
                    "opened_observed": incident.opened_observed,
                    "opened_baseline": incident.opened_baseline,
                    # where a worsening is measured from, and since when if a new
                    # judge took over after it opened
                    "worse_than": incident.worse_than,
                    "reference_on": incident.reference_on and incident.reference_on.isoformat(),
                }
                if state in ("carried", "under_parent"):
                    carried.add((outcome.rule, outcome.slice))
            items.append((outcome.rule, outcome.slice, outcome.severity, payload))
        opened = [(label, payload) for _, label, _, payload in items if _opened(payload)]
        recoveries = self.recoveries_before(partition_date, {label for label, _ in opened})
        for label, payload in opened:
            if label in recoveries:
                recovered_on, checks = recoveries[label]
                payload["incident"] |= {
                    "recovered_on": recovered_on.isoformat(),
                    "recovered_checks": checks,
                }
        return self.record(partition_date, KIND_CHECK, items, run_id, passed, carried)

    def recoveries_before(
        self, partition_date: date, slices: Collection[str], days: int = RECENT_RECOVERY_DAYS
    ) -> dict[str, tuple[date, list[str]]]:
        """Per slice of `slices`, the latest day within `days` before `partition_date` with
        a "Recovered" reply about it (sent, or pending while Slack is down), and the checks
        that recovered then. A backfill that evaluates the later day first finds none."""
        if not slices:
            return {}
        self.ensure_table()
        table = self.table
        query = (
            sa.select(table.c.partition_date, table.c.slice, table.c.rule)
            .where(
                table.c.kind == KIND_RECOVERED,
                table.c.state.in_([PENDING, SENT]),
                table.c.slice.in_(sorted(slices)),
                table.c.partition_date >= partition_date - timedelta(days=days),
                table.c.partition_date < partition_date,
            )
            .order_by(table.c.partition_date, table.c.rule)
        )
        latest: dict[str, tuple[date, list[str]]] = {}
        with self.engine.connect() as connection:
            for day, label, rule in connection.execute(query):
                day = as_date(day)
                if label not in latest or latest[label][0] < day:
                    latest[label] = (day, [])
                latest[label][1].append(rule)
        return latest

    def record_recoveries(
        self,
        partition_date: date,
        closed: Iterable[Incident],
        run_id: str | None,
        statistics: Mapping[tuple[str, str], str] | None = None,
    ) -> RecordSummary:
        """One `recovered` row per incident a pass closed on `partition_date`; `statistics`
        names the statistic of each (rule, slice), for the level the reply reports."""
        items = [
            (
                incident.rule,
                incident.slice,
                incident.severity,
                {
                    "rule": incident.rule,
                    "slice": incident.slice,
                    "statistic": (statistics or {}).get(incident.key),
                    **incident.to_dict(),
                },
            )
            for incident in closed
        ]
        return self.record(partition_date, KIND_RECOVERED, items, run_id)

    def thread_root(self, rule: str, slice_label: str, first: date, last: date) -> Alert | None:
        """The first alert delivered for a rule on a slice between two days (the thread a
        reply about it belongs in); else a pending one (not delivered yet); else None."""
        self.ensure_table()
        table = self.table
        query = (
            sa.select(table)
            .where(
                table.c.kind == KIND_CHECK,
                table.c.rule == rule,
                table.c.slice == slice_label,
                table.c.partition_date >= first,
                table.c.partition_date <= last,
                sa.or_(table.c.sent_at.is_not(None), table.c.state == PENDING),
            )
            .order_by(table.c.sent_at.is_(None), table.c.partition_date)
            .limit(1)
        )
        with self.engine.connect() as connection:
            row = connection.execute(query).first()
        return None if row is None else self._alert(row)

    def rows(
        self,
        partition_date: date | None = None,
        kind: str | None = None,
        states: Sequence[str] | None = None,
    ) -> list[Alert]:
        self.ensure_table()
        table = self.table
        query = sa.select(table).order_by(table.c.partition_date, table.c.id)
        if partition_date is not None:
            query = query.where(table.c.partition_date == partition_date)
        if kind is not None:
            query = query.where(table.c.kind == kind)
        if states is not None:
            query = query.where(table.c.state.in_(list(states)))
        with self.engine.connect() as connection:
            return [self._alert(row) for row in connection.execute(query)]

    def due_groups(self, now: datetime | None = None, limit: int = 50) -> list[tuple[date, str]]:
        """(partition_date, kind) groups with pending rows whose retry time has come."""
        self.ensure_table()
        table = self.table
        now = now or utc_now()
        query = (
            sa.select(table.c.partition_date, table.c.kind)
            .where(
                table.c.state == PENDING,
                sa.or_(table.c.next_attempt_at.is_(None), table.c.next_attempt_at <= now),
            )
            .group_by(table.c.partition_date, table.c.kind)
            .order_by(table.c.partition_date, table.c.kind)
            .limit(limit)
        )
        with self.engine.connect() as connection:
            return [(as_date(day), kind) for day, kind in connection.execute(query)]

    def mark_sent(self, alerts: Sequence[Alert], delivered_to: str, slack_ts: str | None) -> None:
        """Mark the rows that the delivered message carried (unless they changed since).

        `slack_ts` is kept from the FIRST message that carried a row: replies about it
        (recovered) go into that thread.
        """
        table = self.table
        now = utc_now()
        with self.engine.begin() as connection:
            for alert in alerts:
                values: dict[str, Any] = {
                    "state": SENT,
                    "delivered_to": delivered_to,
                    "slack_ts": alert.slack_ts or slack_ts,
                    "updated_at": now,
                    "next_attempt_at": None,
                    "last_error": None,
                }
                if alert.state == PENDING:
                    values.update(sent_at=now, attempts=alert.attempts + 1)
                connection.execute(
                    table.update()
                    .where(
                        table.c.id == alert.id,
                        table.c.fingerprint == alert.fingerprint,
                        table.c.state != RESOLVED,
                    )
                    .values(**values)
                )

    def mark_failed(
        self, alerts: Sequence[Alert], error: str, retry_after_seconds: float | None = None
    ) -> None:
        """Keep pending rows pending, counting the attempt and keeping the error."""
        table = self.table
        now = utc_now()
        next_attempt = now + timedelta(seconds=retry_after_seconds) if retry_after_seconds else None
        with self.engine.begin() as connection:
            for alert in alerts:
                if alert.state != PENDING:
                    continue
                connection.execute(
                    table.update()
                    .where(table.c.id == alert.id, table.c.fingerprint == alert.fingerprint)
                    .values(
                        attempts=table.c.attempts + 1,
                        last_error=shorten(redact_secrets(error), 1000),
                        next_attempt_at=next_attempt,
                        updated_at=now,
                    )
                )
