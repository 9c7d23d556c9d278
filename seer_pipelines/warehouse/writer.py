"""The partition writer: stage a day's rows chunk by chunk, then swap them in at once."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd
import sqlalchemy as sa
from psycopg2.extras import execute_values

from seer_metrics.text.cleaning import clean_json, clean_text, json_text_is_clean
from seer_pipelines.warehouse.schema import (
    STAGING_RUN_COLUMN,
    STAGING_SEQUENCE_COLUMN,
    STAGING_TIME_COLUMN,
    TABLE_KEYS,
    OutputTables,
)

_PLAIN_TYPES = (int, bool, date, datetime)


def plain_value(value: Any) -> Any:
    """`value` as the database should get it: pandas' missing-value markers (NaN, NaT,
    pd.NA) become None (NULL), pandas and numpy scalars become plain Python values, and
    NaN or infinities inside dicts and lists (JSON columns) become None at any depth.
    Text, in a text column or anywhere inside a JSON value, keys too, goes through
    `clean_text`: NUL and surrogate code points become U+FFFD, so no value a driver hands
    back can fail a partition (PostgreSQL refuses NUL, UTF-8 cannot encode a lone
    surrogate).

    Pandas turns None into NaN in text columns and into NaT in timestamp columns; written
    as is, NaN becomes the text 'NaN' (PostgreSQL) and NaT breaks the insert; PostgreSQL
    refuses NaN inside JSON.
    """
    if value is None:
        return None
    kind = type(value)
    if kind is str:
        return clean_text(value)
    if kind is float:
        return None if value != value else value
    if kind is dict or kind is list or kind is tuple:
        return clean_json(value)
    if value is pd.NaT:
        return None
    if isinstance(value, pd.Timestamp):
        return value.to_pydatetime()
    if kind in _PLAIN_TYPES:
        return value
    if isinstance(value, np.generic):
        item = value.item()  # numpy's NaT gives None
        if isinstance(item, str):
            return clean_text(item)
        return None if isinstance(item, float) and item != item else item
    if value is pd.NA:
        return None
    if isinstance(value, str):  # str subclasses
        return clean_text(str(value))
    if isinstance(value, dict | list | tuple):
        return clean_json(value)
    return value


ValueEncoder = Callable[[Any], Any]
_JSON_AS_TEXT_DRIVERS = frozenset({"pysqlite", "psycopg2"})


def _json_encoder(column: sa.Column[Any], dialect: sa.Dialect) -> ValueEncoder:
    """The JSON text the column type would store for a value after `plain_value`, without
    rebuilding values that need no cleaning (most do not): serialised once, checked in the
    text, rebuilt only when the text shows NUL, a surrogate or NaN."""
    processor = column.type.dialect_impl(dialect).bind_processor(dialect)
    assert processor is not None, f"JSON column {column.name} has no bind processor"
    # Drivers whose JSON parameter is the serialised text itself (psycopg 3 wraps it) and
    # the default serializer: anything else takes the type's own path for every value.
    plain_text = dialect.driver in _JSON_AS_TEXT_DRIVERS
    if not plain_text or getattr(dialect, "_json_serializer", None) is not None:
        return lambda value: processor(plain_value(value))

    def encode(value: Any) -> Any:
        if value is None:
            return processor(None)
        try:
            # json.dumps with its defaults is what SQLAlchemy's JSON type calls.
            text = json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            return processor(plain_value(value))
        if not json_text_is_clean(text):  # a false alarm only costs the long way
            return processor(plain_value(value))
        return text

    return encode


def _text_value(value: Any) -> Any:
    return clean_text(value) if type(value) is str else plain_value(value)


def value_encoder(column: sa.Column[Any], dialect: sa.Dialect) -> ValueEncoder:
    """What the driver gets for a value of `column`: `plain_value`, then the column type's
    own conversion for `dialect` (SQLite's dates as text, JSON serialised), in one step."""
    if isinstance(column.type, sa.JSON):
        return _json_encoder(column, dialect)
    convert = _text_value if isinstance(column.type, sa.String) else plain_value
    processor = column.type.dialect_impl(dialect).bind_processor(dialect)
    if processor is None:
        return convert
    return lambda value: processor(convert(value))


ColumnEncoder = Callable[[list[Any]], list[Any]]
_NULL = type(None)
_INTEGERS = frozenset({int, _NULL})
_NUMBERS = frozenset({float, int, _NULL})
_TEXTS = frozenset({str, _NULL})


def column_encoder(column: sa.Column[Any], dialect: sa.Dialect) -> ColumnEncoder:
    """`value_encoder` over one column of a chunk. A column of plain values (integers,
    floats, clean text, NULL: the usual case) is taken whole, with one type scan and no
    call per value; anything else goes value by value."""
    encode = value_encoder(column, dialect)
    is_json = isinstance(column.type, sa.JSON)
    processor = None if is_json else column.type.dialect_impl(dialect).bind_processor(dialect)

    def encode_column(values: list[Any]) -> list[Any]:
        if not is_json and processor is None:
            kinds = set(map(type, values))
            if kinds <= _INTEGERS:
                return values
            if kinds <= _NUMBERS:
                return [None if value != value else value for value in values]  # NaN
            if kinds <= _TEXTS:
                text = "".join(filter(None, values))
                if clean_text(text) == text:
                    return values
        return [encode(value) for value in values]

    return encode_column


def utc_now() -> datetime:
    return datetime.now(tz=UTC)


# Columns whose values the writer sets on every staged row, in this order at the end.
_SET_BY_WRITER = (
    "partition_date",
    STAGING_RUN_COLUMN,
    STAGING_SEQUENCE_COLUMN,
    STAGING_TIME_COLUMN,
)

# A writer stages a chunk every few minutes at most; rows of a run that has staged
# nothing for this long belong to a run that died without cleaning up.
STALE_STAGING_AFTER = timedelta(hours=24)


class StagingLostError(RuntimeError):
    """The rows a writer staged are not all there any more; nothing was committed."""


class PartitionWriter:
    """Stages one partition's rows chunk by chunk, then swaps them in with one transaction.

    Memory stays bounded (rows go to the `__staging` table as they come) and readers
    never see half a partition: `commit()` deletes the partition's rows and inserts the
    staged ones (first row per natural key) in a single transaction. Each writer's rows
    carry its own id, so two runs of the same day never delete or commit each other's
    rows; `commit()` refuses to swap when any of its staged rows are missing. Swaps of
    the same partition are serialised (PostgreSQL: a transaction-scoped advisory lock;
    SQLite: its single writer), so the last to commit owns the partition.
    """

    def __init__(self, engine: sa.Engine, tables: OutputTables, name: str, day: date) -> None:
        self._engine = engine
        self._name = name
        self._table = tables[name]
        self._staging = tables.staging[name]
        self._key = TABLE_KEYS[name]
        self._day = day
        self._run = uuid.uuid4().hex
        self._sequence = 0
        self.staged_rows = 0
        self.duplicates = 0  # staged rows dropped by commit() because their key repeated
        self.committed = False
        self._prepare_insert()
        self.remove_stale_staging(utc_now() - STALE_STAGING_AFTER)

    def _prepare_insert(self) -> None:
        """The staging insert, its parameters in order and each value's encoder.

        Values reach the driver already converted (`column_encoder`), so SQLAlchemy's
        per-row type processing is skipped: the tuples go as they are to sqlite3's
        `executemany`, or to psycopg2's `execute_values` (a statement per 1,000 rows);
        with another driver a typeless copy of the staging table takes them through
        SQLAlchemy's batched insert.
        """
        dialect = self._engine.dialect
        names = [c.name for c in self._staging.columns]
        self._encoders = [
            (name, column_encoder(self._staging.c[name], dialect))
            for name in names
            if name not in _SET_BY_WRITER
        ]
        self._encode_fixed = {
            name: value_encoder(self._staging.c[name], dialect)
            for name in _SET_BY_WRITER
            if name != STAGING_SEQUENCE_COLUMN
        }
        self._order = [name for name, _ in self._encoders] + list(_SET_BY_WRITER)
        quote = dialect.identifier_preparer
        columns = ", ".join(quote.format_column(self._staging.c[n]) for n in self._order)
        insert = f"INSERT INTO {quote.format_table(self._staging)} ({columns}) VALUES "
        self._driver_insert: str | None = None
        self._values_insert: str | None = None
        if dialect.driver == "pysqlite":
            self._driver_insert = insert + f"({', '.join('?' * len(self._order))})"
        elif dialect.driver == "psycopg2":
            self._values_insert = insert + "%s"  # psycopg2.extras.execute_values
        else:
            typeless = sa.Table(
                self._staging.name,
                sa.MetaData(schema=self._staging.schema),
                *(sa.Column(name, sa.types.NullType()) for name in self._order),
            )
            self._typeless_insert = typeless.insert()

    def remove_stale_staging(self, cutoff: datetime) -> int:
        """Delete the staged rows of other runs that staged nothing since `cutoff` (runs
        that crashed without cleaning up); rows of live runs are never touched."""
        staging = self._staging
        staged_at = staging.c[STAGING_TIME_COLUMN]
        stale_runs = (
            sa.select(staging.c[STAGING_RUN_COLUMN])
            .group_by(staging.c[STAGING_RUN_COLUMN])
            # No time at all: staged by a Seer version without the column.
            .having(sa.or_(sa.func.max(staged_at) < cutoff, sa.func.max(staged_at).is_(None)))
        )
        with self._engine.begin() as connection:
            result = connection.execute(
                staging.delete().where(
                    staging.c[STAGING_RUN_COLUMN].in_(stale_runs),
                    staging.c[STAGING_RUN_COLUMN] != self._run,
                )
            )
        return max(int(result.rowcount or 0), 0)

    def write(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Stage rows (dicts keyed by column name; partition_date is set here).

        Every value goes through `plain_value`, so no pandas NaN or NaT reaches a table.
        """
        if not rows:
            return
        day = self._encode_fixed["partition_date"](self._day)
        run = self._encode_fixed[STAGING_RUN_COLUMN](self._run)
        now = self._encode_fixed[STAGING_TIME_COLUMN](utc_now())
        first = self._sequence
        count = len(rows)
        columns = [encode([row.get(name) for row in rows]) for name, encode in self._encoders]
        columns += [[day] * count, [run] * count, range(first, first + count), [now] * count]
        staged = list(zip(*columns, strict=True))
        with self._engine.begin() as connection:
            if self._driver_insert is not None:
                connection.exec_driver_sql(self._driver_insert, staged)
            elif self._values_insert is not None:
                with connection.connection.driver_connection.cursor() as cursor:
                    execute_values(cursor, self._values_insert, staged, page_size=1000)
            else:
                order = self._order
                named = [dict(zip(order, values, strict=True)) for values in staged]
                connection.execute(self._typeless_insert, named)
        self._sequence = first + len(staged)
        self.staged_rows += len(staged)

    def commit(self) -> int:
        """Replace the partition with the staged rows; returns the number of rows kept.

        Raises `StagingLostError` (and changes nothing) when the staging table no longer
        holds every row this writer staged, and `RuntimeError` when the partition does not
        end up with exactly one row per staged key.
        """
        staging = self._staging
        columns = [c.name for c in self._table.columns]
        mine = staging.c[STAGING_RUN_COLUMN] == self._run
        first_per_key = (
            sa.select(sa.func.min(staging.c[STAGING_SEQUENCE_COLUMN]))
            .where(mine)
            .group_by(*(staging.c[k] for k in self._key))
        )
        kept = sa.select(*(staging.c[c] for c in columns)).where(
            mine, staging.c[STAGING_SEQUENCE_COLUMN].in_(first_per_key)
        )
        where = f"{self._name} partition {self._day}"
        with self._engine.begin() as connection:
            if connection.dialect.name == "postgresql":
                # Under READ COMMITTED two swaps of the same day do not see each other's
                # uncommitted rows, so both could commit; this lock (released at commit)
                # makes the second wait, then replace the first's rows.
                connection.execute(
                    sa.text("SELECT pg_advisory_xact_lock(hashtext(:key))"),
                    {"key": f"seer:{self._table.fullname}:{self._day.isoformat()}"},
                )
            found = connection.execute(
                sa.select(sa.func.count()).select_from(staging).where(mine)
            ).scalar_one()
            if found != self.staged_rows:
                raise StagingLostError(
                    f"{where}: this run staged {self.staged_rows} rows but {found} are left "
                    f"in {staging.name}; nothing was committed, re-run the partition"
                )
            keys = connection.execute(
                sa.select(sa.func.count()).select_from(first_per_key.subquery())
            ).scalar_one()
            connection.execute(
                self._table.delete().where(self._table.c.partition_date == self._day)
            )
            connection.execute(self._table.insert().from_select(columns, kept))
            connection.execute(staging.delete().where(mine))
            count = connection.execute(
                sa.select(sa.func.count())
                .select_from(self._table)
                .where(self._table.c.partition_date == self._day)
            ).scalar_one()
            if count != keys:
                raise RuntimeError(
                    f"{where}: {keys} staged rows to commit but the partition would hold "
                    f"{count}; nothing was committed, re-run the partition"
                )
        self.duplicates = int(self.staged_rows - keys)
        self.committed = True
        return int(count)

    def abort(self) -> None:
        """Discard this writer's staged rows (and only those)."""
        with self._engine.begin() as connection:
            connection.execute(
                self._staging.delete().where(self._staging.c[STAGING_RUN_COLUMN] == self._run)
            )


def add_missing_staging_columns(engine: sa.Engine, tables: OutputTables) -> None:
    """Give output and staging tables created by an earlier Seer version the columns
    added since (nullable: the rows written before hold NULL there; staging tables only
    ever hold rows of runs in flight)."""
    for table in (*tables.tables.values(), *tables.staging.values()):
        add_missing_columns(engine, table)


def add_missing_columns(engine: sa.Engine, table: sa.Table) -> None:
    """Add to `table` in the database the nullable columns an earlier Seer version did not
    create (its existing rows get NULL there), and widen to 64 bits the 32-bit integer
    columns it now declares as big integers (token counts)."""
    inspector = sa.inspect(engine)
    found = {c["name"]: c for c in inspector.get_columns(table.name, schema=table.schema)}
    present = set(found)
    widen_big_integer_columns(engine, table, found)
    for column in table.columns:
        if column.name in present:
            continue
        table_name = engine.dialect.identifier_preparer.format_table(table)
        column_type = column.type.compile(dialect=engine.dialect)
        try:
            with engine.begin() as connection:
                connection.execute(
                    sa.text(f"ALTER TABLE {table_name} ADD COLUMN {column.name} {column_type}")
                )
        except sa.exc.DBAPIError:
            # Another run added it first; anything else shows up on the next insert.
            names = sa.inspect(engine).get_columns(table.name, schema=table.schema)
            if column.name not in {c["name"] for c in names}:
                raise


def widen_big_integer_columns(
    engine: sa.Engine, table: sa.Table, found: dict[str, Any] | None = None
) -> None:
    """`ALTER ... TYPE BIGINT` for the columns `table` declares `BigInteger` that the
    database holds as a 32-bit INTEGER (tables created by an earlier Seer version).

    SQLite's integers are 64-bit already; other databases are widened the same way.
    """
    if engine.dialect.name == "sqlite":
        return
    if found is None:
        columns = sa.inspect(engine).get_columns(table.name, schema=table.schema)
        found = {c["name"]: c for c in columns}
    table_name = engine.dialect.identifier_preparer.format_table(table)
    for column in table.columns:
        existing = found.get(column.name)
        if (
            existing is None
            or not isinstance(column.type, sa.BigInteger)
            or isinstance(existing["type"], sa.BigInteger)
            or not isinstance(existing["type"], sa.Integer)
        ):
            continue
        name = engine.dialect.identifier_preparer.quote(column.name)
        with engine.begin() as connection:
            connection.execute(sa.text(f"ALTER TABLE {table_name} ALTER COLUMN {name} TYPE BIGINT"))
