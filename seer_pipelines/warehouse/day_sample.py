"""The day's accounting and its sample, computed in the warehouse (SQLAlchemy Core).

Why: a sampled day should cost what its sample costs. The warehouse counts the day per
stratum (one grouped query: population, duplicate ids) and chooses the sample (one
windowed query: within each stratum the events with the smallest keyed hash of
`event_id`, the rule of `seer_metrics.spend.sampling`), so only the chosen rows leave it.

A dialect needs four things, each an expression here: the day's rows picked exactly, the
id as text, a metadata value as text, and SHA-256 of bytes. PostgreSQL has them built in;
SQLite gets Seer's own Python functions registered on the connection. Any other dialect
gets `WarehouseSamplingError` naming what is missing (docs/pipelines.md says how to add
one).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

import sqlalchemy as sa

from seer_metrics.slices import metadata_value
from seer_metrics.spend.sampling import (
    STRATUM_SEPARATOR,
    sampling_digest,
    sampling_prefix,
    stratum_label,
)
from seer_pipelines.warehouse.day import canonical_event_id, day_of, day_query, epoch_text_value

SAMPLE_FIELDS = ("event_id", "event_ts", "task", "context", "metadata")
_MISSING = "-"  # a missing slice value in a stratum label, as `stratum_label` writes it


class WarehouseSamplingError(RuntimeError):
    """The warehouse cannot count or sample the day in SQL; the message says what is missing."""


@dataclass(frozen=True)
class StratumCount:
    """One stratum of a day: its distinct events (`population`) and the rows dropped
    because their `event_id` repeated (`duplicates`, the first by `event_ts` is kept)."""

    stratum: str
    values: dict[str, str | None]
    population: int
    duplicates: int


@dataclass(frozen=True)
class DayStrata:
    """The day's strata as the warehouse counted them."""

    strata: tuple[StratumCount, ...]

    @property
    def population(self) -> int:
        return sum(stratum.population for stratum in self.strata)

    @property
    def duplicates(self) -> int:
        return sum(stratum.duplicates for stratum in self.strata)

    @property
    def rows(self) -> int:
        """Source rows on the day: every distinct event and every repeat of an id."""
        return self.population + self.duplicates


class _DialectSql:
    """The SQL one dialect needs; subclasses fill it in."""

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
        """The metadata as the dialect reads keys from it, computed once a row."""
        return self.table.c[self.columns["metadata"]]

    def slice_value(self, metadata: sa.ColumnElement[Any], key: str) -> sa.ColumnElement[Any]:
        raise NotImplementedError

    def sample_hash(self, event_id: sa.ColumnElement[Any], key: str) -> sa.ColumnElement[Any]:
        raise NotImplementedError

    def on_day(self, day: date) -> tuple[sa.ColumnElement[bool], tuple[Any, ...], Any]:
        """(where, order of copies, selected event_ts) for the day's rows, exactly."""
        raise NotImplementedError

    def convert_event_ts(self, value: Any, day: date) -> Any:
        return value


class _PostgresSql(_DialectSql):
    """PostgreSQL: `sha256`, `convert_to`, `jsonb`; the day from a timestamp, date or
    epoch-number `event_ts` (a text column cannot be parsed exactly in SQL)."""

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
            return sa.cast(column, sa.dialects.postgresql.JSONB)
        text = sa.func.nullif(sa.func.btrim(sa.cast(column, sa.Text)), "")
        return sa.cast(text, sa.dialects.postgresql.JSONB)

    def slice_value(self, metadata: sa.ColumnElement[Any], key: str) -> sa.ColumnElement[Any]:
        value = metadata.op("->")(sa.literal(key, sa.Text))
        as_text = metadata.op("->>")(sa.literal(key, sa.Text))
        kind = sa.func.jsonb_typeof(value)
        # `metadata_value`: strings, numbers and booleans as text; null, objects, arrays none.
        return sa.case((kind.in_(["string", "number", "boolean"]), as_text), else_=None)

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


class _SqliteSql(_DialectSql):
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


_DIALECTS: dict[str, type[_DialectSql]] = {"postgresql": _PostgresSql, "sqlite": _SqliteSql}


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


def dialect_sql(table: sa.Table, columns: dict[str, str], dialect: sa.Dialect) -> _DialectSql:
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


def event_id_is_unique(table: sa.Table, column: str) -> bool:
    """Whether the table's key or a unique index is the id alone: no id can repeat, so
    the day needs no window to drop repeats."""
    if [c.name for c in table.primary_key.columns] == [column]:
        return True
    return any(
        index.unique and [c.name for c in index.columns] == [column] for index in table.indexes
    )


def _day_rows(
    sql: _DialectSql, day: date, key: str, slice_keys: Sequence[str], hashed: bool
) -> sa.Subquery:
    """The day's rows, narrow: id, stratum, slice values, copy number (1: kept), order,
    where to find the row again and, when `hashed`, the keyed hash.

    The rows are picked first (the metadata parsed once, fenced by OFFSET 0 so the
    planner does not inline the parse into every use), then keyed.
    """
    where, order, _ = sql.on_day(day)
    picked = (
        sa.select(
            sql.event_id().label("event_id"),
            sql.metadata().label("meta"),
            *([sql.row_locator().label("locator")] if hashed else []),
            *(expression.label(f"order_{index}") for index, expression in enumerate(order)),
        )
        .where(where)
        .offset(0)
        .subquery("picked")
    )
    values = [sql.slice_value(picked.c.meta, slice_key) for slice_key in slice_keys]
    stratum: Any = sa.literal("", sa.Text)
    for index, (slice_key, value) in enumerate(zip(slice_keys, values, strict=True)):
        separator = STRATUM_SEPARATOR if index else ""
        # `||`, which both dialects have (SQLite has no concat())
        stratum = stratum.concat(sa.literal(f"{separator}{slice_key}=", sa.Text))
        stratum = stratum.concat(sa.func.coalesce(value, _MISSING))
    orders = [column for column in picked.c if column.name.startswith("order_")]
    copy: Any = sa.literal(1, sa.Integer)
    if not event_id_is_unique(sql.table, sql.columns["event_id"]):
        copy = sa.func.row_number().over(partition_by=picked.c.event_id, order_by=orders)
    fields = [
        picked.c.event_id,
        stratum.label("stratum"),
        *([sql.sample_hash(picked.c.event_id, key).label("sample_hash")] if hashed else []),
        *([picked.c.locator] if hashed else []),
        copy.label("copy"),
        *(value.label(f"value_{index}") for index, value in enumerate(values)),
    ]
    return sa.select(*fields).subquery("day_rows")


def count_day_rows(
    connection: sa.Connection, table: sa.Table, columns: dict[str, str], day: date
) -> int:
    """The source rows on the day, counted in the warehouse (the accounting's recount)."""
    sql = dialect_sql(table, columns, connection.dialect)
    sql.prepare(connection, "", ())
    where, _, _ = sql.on_day(day)
    query = sa.select(sa.func.count()).select_from(table).where(where)
    return int(_run(connection, query, day).scalar_one())


def count_day_strata(
    connection: sa.Connection,
    table: sa.Table,
    columns: dict[str, str],
    day: date,
    slice_keys: Sequence[str],
    key: str,
) -> DayStrata:
    """One grouped query: per stratum, the day's distinct events and repeated ids."""
    sql = dialect_sql(table, columns, connection.dialect)
    sql.prepare(connection, key, slice_keys)
    rows = _day_rows(sql, day, key, slice_keys, hashed=False)
    first = sa.case((rows.c.copy == 1, 1), else_=0)
    no_id = sa.case((rows.c.event_id.is_(None), 1), else_=0)
    query = sa.select(
        rows.c.stratum,
        sa.func.sum(first),
        sa.func.count(),
        sa.func.sum(no_id),
        *(sa.func.min(rows.c[f"value_{index}"]) for index in range(len(slice_keys))),
    ).group_by(rows.c.stratum)
    strata: dict[str, StratumCount] = {}
    missing_ids = 0
    for stratum, firsts, total, no_ids, *values in _run(connection, query, day):
        missing_ids += int(no_ids or 0)
        counted = StratumCount(
            stratum=str(stratum),
            values=dict(zip(slice_keys, values, strict=True)),
            population=int(firsts or 0),
            duplicates=int(total) - int(firsts or 0),
        )
        strata[counted.stratum] = counted
    if missing_ids:
        raise WarehouseSamplingError(
            f"{missing_ids} source rows on {day} have no {columns['event_id']!r}: the "
            "warehouse sample is keyed on the event id; give them one, or leave sampling off"
        )
    if slice_keys:
        labels = {stratum_label(list(s.values.items())) for s in strata.values()}
        assert labels == set(strata), "the SQL stratum label differs from stratum_label"
    return DayStrata(tuple(sorted(strata.values(), key=lambda s: s.stratum)))


def _run(connection: sa.Connection, query: sa.Select[Any], day: date) -> sa.CursorResult[Any]:
    try:
        return connection.execute(query)
    except sa.exc.DataError as error:
        raise WarehouseSamplingError(
            f"the warehouse could not count or sample {day}: {str(error.orig).splitlines()[0]} "
            "(a metadata value that is not JSON cannot be read in SQL: store metadata as "
            "json/jsonb or fix the row; nothing was written)"
        ) from None


def read_day_sample(
    engine: sa.Engine,
    table: sa.Table,
    columns: dict[str, str],
    day: date,
    slice_keys: Sequence[str],
    key: str,
    sizes: dict[str, int],
    chunk_size: int,
) -> Iterator[list[dict[str, Any]]]:
    """The chosen rows of `day` (`sizes[stratum]` smallest keyed hashes of each stratum),
    in `event_ts` order, in chunks; each record has `stratum` besides `SAMPLE_FIELDS`."""
    wanted_rows = [(stratum, int(size)) for stratum, size in sorted(sizes.items()) if size > 0]
    if not wanted_rows:
        return
    with engine.connect() as connection:
        sql = dialect_sql(table, columns, connection.dialect)
        sql.prepare(connection, key, slice_keys)
        rows = _day_rows(sql, day, key, slice_keys, hashed=True)
        ranked = (
            sa.select(
                rows,
                sa.func.row_number()
                .over(partition_by=rows.c.stratum, order_by=(rows.c.sample_hash, rows.c.event_id))
                .label("sample_rank"),
            )
            .where(rows.c.copy == 1)
            .subquery("ranked")
        )
        wanted = (
            sa.values(sa.column("stratum", sa.Text), sa.column("size", sa.Integer), name="wanted")
            .data(wanted_rows)
            .cte("wanted")
        )
        chosen = (
            sa.select(ranked.c.locator, ranked.c.event_id, ranked.c.stratum)
            .join_from(ranked, wanted, ranked.c.stratum == wanted.c.stratum)
            .where(ranked.c.sample_rank <= wanted.c.size)
            .subquery("chosen")
        )
        _, order, event_ts = sql.on_day(day)
        table, columns = sql.table, sql.columns
        query = (
            sa.select(
                chosen.c.event_id,
                event_ts.label("event_ts"),
                *(table.c[columns[name]].label(name) for name in ("task", "context", "metadata")),
                chosen.c.stratum,
            )
            .join_from(table, chosen, sql.row_locator() == chosen.c.locator)
            .order_by(*order, chosen.c.event_id)
        )
        result = connection.execution_options(stream_results=True, yield_per=chunk_size)
        for chunk in _run(result, query, day).partitions():
            records = []
            for row in chunk:
                record = dict(row._mapping)
                record["event_ts"] = sql.convert_event_ts(record["event_ts"], day)
                records.append(record)
            yield records
