"""The SQL each warehouse dialect needs to count and sample a day (see `day_sample`).

A dialect gives the day's rows picked exactly, the id as text, the slice keys' values as
text (the metadata parsed once a row), SHA-256 of bytes, and a row locator so the chosen
rows are read whole once. PostgreSQL has them built in; SQLite gets Seer's own Python
functions registered on the connection, so its answers are the Python reader's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import date
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB

from seer_metrics.slices import metadata_value
from seer_metrics.spend.sampling import sampling_digest, sampling_prefix
from seer_pipelines.warehouse.day import canonical_event_id, day_of, day_query, epoch_text_value


class WarehouseSamplingError(RuntimeError):
    """The warehouse cannot count or sample the day in SQL; the message says what is missing."""


class DialectSql:
    """The SQL one dialect needs; subclasses fill it in."""

    # The isolation level under which two statements see one snapshot (the sample is
    # ranked in one and its rows read whole by locator in the next).
    snapshot_isolation = "SERIALIZABLE"

    def __init__(self, table: sa.Table, columns: dict[str, str], dialect: sa.Dialect) -> None:
        self.table, self.columns, self.dialect = table, columns, dialect
        if columns["event_id"] not in table.c:
            raise WarehouseSamplingError(
                f"the events table {table.name!r} has no {columns['event_id']!r} column "
                "(event_id_column): the warehouse sample is keyed on the event id"
            )

    def prepare(self, connection: sa.Connection, key: str, slice_keys: Sequence[str]) -> None:
        """Make the functions the expressions call available on `connection`."""

    def event_id(self) -> sa.ColumnElement[Any]:
        raise NotImplementedError

    def row_locator(self) -> sa.ColumnElement[Any]:
        """What finds a source row again (the sample is chosen on narrow rows, then its
        rows are read whole): PostgreSQL `ctid`, SQLite `rowid`."""
        raise NotImplementedError

    def metadata(self) -> sa.ColumnElement[Any]:
        """The metadata as the dialect reads keys from it."""
        return self.table.c[self.columns["metadata"]]

    def picked_rows(
        self, where: sa.ColumnElement[bool], columns: Sequence[Any], slice_keys: Sequence[str]
    ) -> sa.Subquery:
        """The day's rows: `columns` and each slice key's value as text (`value_<i>`),
        the metadata parsed once a row.

        The default picks the rows first, fenced by OFFSET 0 so the planner does not
        inline the parse into every key's use, then reads the keys from the parsed value.
        """
        picked = (
            sa.select(*columns, self.metadata().label("meta"))
            .where(where)
            .offset(0)
            .subquery("picked")
        )
        values = [
            self.slice_value(picked.c.meta, key).label(f"value_{index}")
            for index, key in enumerate(slice_keys)
        ]
        kept = [column for column in picked.c if column.name != "meta"]
        return sa.select(*kept, *values).subquery("picked_values")

    def slice_value(self, metadata: sa.ColumnElement[Any], key: str) -> sa.ColumnElement[Any]:
        raise NotImplementedError

    def sample_hash(self, event_id: sa.ColumnElement[Any], key: str) -> sa.ColumnElement[Any]:
        raise NotImplementedError

    def on_day(self, day: date) -> tuple[sa.ColumnElement[bool], tuple[Any, ...], Any]:
        """(where, order of copies, selected event_ts) for the day's rows, exactly."""
        raise NotImplementedError

    def convert_event_ts(self, value: Any, day: date) -> Any:
        return value


class _PostgresSql(DialectSql):
    """PostgreSQL: `sha256`, `convert_to`, `jsonb`; the day from a timestamp, date or
    epoch-number `event_ts` (a text column cannot be parsed exactly in SQL)."""

    snapshot_isolation = "REPEATABLE READ"

    def prepare(self, connection: sa.Connection, key: str, slice_keys: Sequence[str]) -> None:
        # JIT compiling these expression-heavy scans cost more than it saved (1.3 s of a
        # 1,000,000-event day's 8 s sample query); LOCAL: only this transaction.
        connection.exec_driver_sql("SET LOCAL jit = off")

    def row_locator(self) -> sa.ColumnElement[Any]:
        return sa.literal_column(f"{self.table.name}.ctid")

    def event_id(self) -> sa.ColumnElement[Any]:
        column = self.table.c[self.columns["event_id"]]
        if isinstance(column.type, sa.String):
            return column
        if isinstance(column.type, sa.Integer | sa.Uuid):
            return sa.cast(column, sa.Text)
        raise WarehouseSamplingError(
            f"event_id column {column.name!r} is {column.type}: the warehouse sample needs a "
            "text, integer or uuid id (its text must be the id Seer stores)"
        )

    def metadata(self) -> sa.ColumnElement[Any]:
        column = self.table.c[self.columns["metadata"]]
        if isinstance(column.type, sa.JSON):
            return sa.cast(column, JSONB)
        text = sa.func.nullif(sa.func.btrim(sa.cast(column, sa.Text)), "")
        return sa.cast(text, JSONB)

    def picked_rows(
        self, where: sa.ColumnElement[bool], columns: Sequence[Any], slice_keys: Sequence[str]
    ) -> sa.Subquery:
        """One `jsonb_to_record` a row (a lateral function scan) parses the metadata once
        and hands every key's JSON value over; without an OFFSET fence the planner can
        scan, parse and count the day in parallel workers."""
        if not slice_keys or not all(_record_column_safe(key) for key in slice_keys):
            return super().picked_rows(where, columns, slice_keys)
        record = (
            sa.func.jsonb_to_record(self.metadata())
            .table_valued(*(sa.column(key, JSONB) for key in slice_keys))
            .render_derived(name="slice_record", with_types=True)
        )
        values = [
            _scalar_text(record.c[key]).label(f"value_{index}")
            for index, key in enumerate(slice_keys)
        ]
        return (
            sa.select(*columns, *values)
            .select_from(self.table)
            .join(record, sa.true())
            .where(where)
            .subquery("picked_values")
        )

    def slice_value(self, metadata: sa.ColumnElement[Any], key: str) -> sa.ColumnElement[Any]:
        return _scalar_text(metadata.op("->")(sa.literal(key, sa.Text)))

    def sample_hash(self, event_id: sa.ColumnElement[Any], key: str) -> sa.ColumnElement[Any]:
        prefix = sa.literal(sampling_prefix(key), sa.LargeBinary)
        digest = sa.func.sha256(prefix.op("||")(sa.func.convert_to(event_id, "UTF8")))
        return sa.func.substring(digest, 1, 8)

    def on_day(self, day: date) -> tuple[sa.ColumnElement[bool], tuple[Any, ...], Any]:
        ts = self.table.c[self.columns["event_ts"]]
        if not isinstance(ts.type, sa.DateTime | sa.Date | sa.Float | sa.Numeric | sa.Integer):
            raise WarehouseSamplingError(
                f"event_ts column {ts.name!r} is {ts.type}: PostgreSQL picks a day exactly only "
                "from a timestamp, date or epoch-number column (text needs Seer's parser); "
                "store event_ts as timestamptz, or leave sampling off"
            )
        plan = day_query(self.table, ts.name, day, self.dialect)
        return plan.where, plan.order, plan.event_ts


class _SqliteSql(DialectSql):
    """SQLite: Seer's own functions registered on the connection (`seer_day_of`,
    `seer_event_id`, `seer_slice_value`, `seer_sample_hash`), so the day, the ids and the
    strata are exactly what the Python reader would give."""

    def prepare(self, connection: sa.Connection, key: str, slice_keys: Sequence[str]) -> None:
        raw = connection.connection.driver_connection
        last: list[Any] = [object(), None]  # metadata text parsed last (one row, k keys)

        def slice_value(metadata: Any, name: str) -> str | None:
            if isinstance(metadata, str):
                if metadata is not last[0]:
                    last[0], last[1] = metadata, _parsed(metadata)
                return metadata_value(last[1], name)
            return metadata_value(metadata, name)

        functions = {
            "seer_day_of": (1, _day_of_text),
            "seer_event_id": (1, canonical_event_id),
            "seer_slice_value": (2, slice_value),
            "seer_sample_hash": (1, lambda event_id: sampling_digest(event_id, key)),
        }
        for name, (arguments, function) in functions.items():
            raw.create_function(name, arguments, _never_raising(function), deterministic=True)

    def row_locator(self) -> sa.ColumnElement[Any]:
        return sa.literal_column(f"{self.table.name}.rowid")

    def event_id(self) -> sa.ColumnElement[Any]:
        return sa.func.seer_event_id(self.table.c[self.columns["event_id"]], type_=sa.Text)

    def slice_value(self, metadata: sa.ColumnElement[Any], key: str) -> sa.ColumnElement[Any]:
        return sa.func.seer_slice_value(metadata, key, type_=sa.Text)

    def sample_hash(self, event_id: sa.ColumnElement[Any], key: str) -> sa.ColumnElement[Any]:
        return sa.func.seer_sample_hash(event_id, type_=sa.LargeBinary)

    def on_day(self, day: date) -> tuple[sa.ColumnElement[bool], tuple[Any, ...], Any]:
        plan = day_query(self.table, self.columns["event_ts"], day, self.dialect)
        self._convert = plan.convert
        exact = sa.func.seer_day_of(plan.event_ts) == day.isoformat()
        return sa.and_(plan.where, exact), plan.order, plan.event_ts

    def convert_event_ts(self, value: Any, day: date) -> Any:
        value = epoch_text_value(value)
        return self._convert(value) if self._convert is not None else value


def _scalar_text(value: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
    """A JSON value as `metadata_value` reads it: strings, numbers and booleans as text;
    null, objects and arrays none."""
    kind = sa.func.jsonb_typeof(value)
    as_text = value.op("#>>")(sa.literal("{}", sa.Text))
    return sa.case((kind.in_(["string", "number", "boolean"]), as_text), else_=None)


def _record_column_safe(key: str) -> bool:
    """Whether `key` can name a column of `jsonb_to_record`'s record exactly: PostgreSQL
    cuts identifiers at 63 bytes (such a key is read with `->` instead)."""
    return 0 < len(key.encode("utf-8")) <= 63 and "\x00" not in key


_DIALECTS: dict[str, type[DialectSql]] = {"postgresql": _PostgresSql, "sqlite": _SqliteSql}


def _parsed(metadata: str) -> Any:
    try:
        return json.loads(metadata) if metadata else {}
    except json.JSONDecodeError:
        return None


def _day_of_text(raw: Any) -> str | None:
    """The ISO day a raw SQLite `event_ts` is on (`read_day`'s rule), else None."""
    placed = day_of(epoch_text_value(raw))
    return None if placed is None else placed.isoformat()


def _never_raising(function: Any) -> Any:
    """A registered function that returns NULL instead of failing the whole statement."""

    def call(*arguments: Any) -> Any:
        try:
            return function(*arguments)
        except Exception:
            return None

    return call


def dialect_sql(table: sa.Table, columns: dict[str, str], dialect: sa.Dialect) -> DialectSql:
    """The SQL of `dialect`, or `WarehouseSamplingError` naming what it lacks."""
    kind = _DIALECTS.get(dialect.name)
    if kind is None:
        raise WarehouseSamplingError(
            f"the warehouse dialect {dialect.name!r} has no Seer sampling SQL: it needs the "
            "day's rows picked exactly, the event id and a metadata value as text, SHA-256 "
            "of bytes and row_number() over a window (see docs/pipelines.md, 'Adding a "
            "warehouse'); supported: " + ", ".join(sorted(_DIALECTS))
        )
    return kind(table, columns, dialect)
