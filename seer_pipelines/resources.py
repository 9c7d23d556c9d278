"""Dagster resources: the warehouse (SQLAlchemy) and the evaluator.

Every setting can come from Dagster config or, when left unset, from the environment
(`SEER_WAREHOUSE_URL`, `SEER_EVENTS_TABLE`, `SEER_EVALUATOR`, ...), so the same code
location runs on a laptop (SQLite file) and in production (PostgreSQL) without edits.
Identifiers taken from config are validated; values are always bound parameters.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import sqlalchemy as sa
from dagster import ConfigurableResource, InitResourceContext
from pydantic import Field, PrivateAttr

from seer_metrics.cache import JudgmentStore
from seer_metrics.evaluators.base import Evaluator
from seer_metrics.events import InvalidEventError, finite_json, parse_timestamp
from seer_metrics.redaction import redact_url
from seer_pipelines.assets.tables import (
    STAGING_RUN_COLUMN,
    STAGING_SEQUENCE_COLUMN,
    STAGING_TIME_COLUMN,
    TABLE_KEYS,
    OutputTables,
    output_tables,
)

DEFAULT_EVENTS_TABLE = "retrieval_events"
DEFAULT_WAREHOUSE_PATH = Path(".seer") / "warehouse.sqlite"

# Plain SQL identifiers only: no quotes, dots or spaces can reach a statement.
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


class WarehouseConfigError(ValueError):
    """A warehouse setting (URL, table or column name) that cannot be used."""


def validate_identifier(value: str, setting: str) -> str:
    """Return `value` if it is a plain SQL identifier, else raise naming the setting."""
    if not isinstance(value, str) or not _IDENTIFIER.match(value):
        raise WarehouseConfigError(
            f"{setting}={value!r} is not a valid identifier "
            "(letters, digits and underscores, not starting with a digit, at most 63 chars)"
        )
    return value


def default_warehouse_url(base: Path | None = None) -> str:
    """The local SQLite warehouse: `.seer/warehouse.sqlite` under `base` (default: cwd)."""
    path = ((base or Path.cwd()) / DEFAULT_WAREHOUSE_PATH).resolve()
    return f"sqlite:///{path}"


def normalise_url(url: str) -> str:
    """Make `postgresql://` use psycopg2: SQLAlchemy 2.1 maps it to psycopg 3, not installed."""
    url = url.strip()
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg2://" + url[len(prefix) :]
    return url


def create_warehouse_engine(url: str, schema: str | None = None) -> sa.Engine:
    """An engine for `url`; SQLite gets WAL so a streaming read and writes can overlap.

    On PostgreSQL the session runs in UTC and, with `schema`, searches that schema first,
    so tables created by other components on this engine (the judgment cache) land there.
    """
    url = normalise_url(url)
    try:
        parsed = sa.engine.make_url(url)
    except Exception as error:
        raise WarehouseConfigError(
            f"SEER_WAREHOUSE_URL / url is not a SQLAlchemy URL: {redact_url(url)} ({error})"
        ) from None
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database
        if database and database != ":memory:" and not database.startswith("file:"):
            Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(parsed, connect_args={"timeout": 60})

        @sa.event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA busy_timeout=60000")
            cursor.close()

        return engine
    connect_args: dict[str, Any] = {}
    if parsed.get_backend_name() == "postgresql":
        # Day boundaries are UTC whatever the server's TimeZone setting.
        options = "-c timezone=UTC"
        if schema:
            options += f" -c search_path={validate_identifier(schema, 'db_schema')},public"
        connect_args["options"] = options
    return sa.create_engine(parsed, connect_args=connect_args, pool_pre_ping=True)


def day_bounds(day: date) -> tuple[datetime, datetime]:
    """[day, day + 1) in UTC, as aware datetimes."""
    start = datetime.combine(day, time.min, tzinfo=UTC)
    return start, start + timedelta(days=1)


def belongs_to_day(raw_event_ts: Any, day: date) -> bool:
    """Whether a source row with this `event_ts` is part of `day`'s partition.

    A timestamp belongs to the UTC day it falls on once parsed (`parse_timestamp`: naive
    values are UTC, offsets are applied). A value that does not parse belongs to the day
    its text starts with (`2026-11-29 junk` -> 2026-11-29), where it is stored as invalid.
    """
    try:
        parsed = parse_timestamp(raw_event_ts)
    except InvalidEventError:
        return str(raw_event_ts).strip()[:10] == day.isoformat()
    if parsed is None:
        return False
    start, end = day_bounds(day)
    return start <= parsed < end


# Text timestamps that start with a date; any other text (compact ISO, leading spaces,
# epoch seconds as text) is read by every day and placed once parsed.
_DATE_PREFIX_GLOB = "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]*"
_DATE_PREFIX_REGEX = "^[0-9]{4}-[0-9]{2}-[0-9]{2}"
_EPOCH_TEXT = re.compile(r"^\s*[+-]?[0-9]+(\.[0-9]*)?\s*$")


def epoch_text_value(raw: Any) -> Any:
    """Epoch seconds written as text (`'1795953600'`, `' 1795910399.5 '`) as a number,
    so they parse as epochs; any other value unchanged."""
    if isinstance(raw, str) and _EPOCH_TEXT.match(raw):
        text = raw.strip()
        return float(text) if "." in text else int(text)
    return raw


def not_date_prefixed(ts: sa.ColumnElement[Any], dialect: sa.Dialect) -> sa.ColumnElement[bool]:
    """Text values of `ts` that do not start with `YYYY-MM-DD` (SQLite: only values
    stored as text; numbers stored as numbers are matched as epochs)."""
    raw = sa.type_coerce(ts, sa.String())
    if dialect.name == "sqlite":
        shaped = raw.op("GLOB", is_comparison=True)(_DATE_PREFIX_GLOB)
        return sa.and_(sa.func.typeof(ts) == "text", sa.not_(shaped))
    return sa.not_(raw.regexp_match(_DATE_PREFIX_REGEX))


def is_unplaced(raw_event_ts: Any) -> bool:
    """Whether an event_ts is on no day at all: it does not parse and its text does not
    start with a date (NULL is not counted: it is no timestamp)."""
    if raw_event_ts is None:
        return False
    try:
        parse_timestamp(epoch_text_value(raw_event_ts))
    except InvalidEventError:
        return re.match(r"^\d{4}-\d{2}-\d{2}", str(raw_event_ts).strip()) is None
    return False


@dataclass(frozen=True)
class DayQuery:
    """How one day's rows are picked from the events table.

    `where` selects the day in SQL, exactly or as a superset that `belongs_to_day` then
    narrows in Python; `event_ts` is the selected expression and `convert` turns its raw
    value into what the column's type would have given (None: nothing to convert).
    """

    where: sa.ColumnElement[bool]
    order: tuple[sa.ColumnElement[Any], ...]
    event_ts: sa.ColumnElement[Any]
    convert: Callable[[Any], Any] | None


def day_query(table: sa.Table, column: str, day: date, dialect: sa.Dialect) -> DayQuery:
    """The SQL that picks `day`'s rows by the `column` timestamp.

    * A timestamp (or date) column outside SQLite is compared with the UTC bounds in SQL;
      that is exact (PostgreSQL sessions run in UTC, `timestamp` columns hold UTC).
    * A numeric column (integer, numeric, real, double precision) outside SQLite holds
      epoch seconds: compared with the bounds' epochs.
    * Anything else (text columns, and every SQLite column, since SQLite compares stored
      timestamps as text) reads a superset: the day's text, plus the days before and after
      when the time carries an offset that can move it into the day ('-' before, '+'
      after), plus epoch numbers on SQLite. `belongs_to_day` keeps the rows that are on
      the day once parsed; they are ordered by time (SQLite: `julianday`, which applies
      offsets), then text.
    """
    ts = table.c[column]
    start, end = day_bounds(day)
    sqlite = dialect.name == "sqlite"
    if not sqlite and isinstance(ts.type, sa.DateTime | sa.Date):
        return DayQuery(sa.and_(ts >= start, ts < end), (ts,), ts, None)
    # Float is not a Numeric in SQLAlchemy 2.1 (double precision and real are Floats).
    if not sqlite and isinstance(ts.type, sa.Float | sa.Numeric | sa.Integer):
        where = sa.and_(ts >= start.timestamp(), ts < end.timestamp())
        return DayQuery(where, (ts,), ts, None)
    raw = sa.type_coerce(ts, sa.String())
    before, today, after, later = (
        (day + timedelta(days=offset)).isoformat() for offset in (-1, 0, 1, 2)
    )
    time_part = sa.func.substr(raw, 12)
    other_shape = not_date_prefixed(ts, dialect)
    where = sa.or_(
        sa.and_(raw >= today, raw < after),
        sa.and_(raw >= before, raw < today, time_part.like("%-%")),
        sa.and_(raw >= after, raw < later, time_part.like("%+%")),
        other_shape,
    )
    if not sqlite:
        return DayQuery(where, (raw,), raw, None)
    seconds = sa.type_coerce(ts, sa.Float())
    epoch = sa.and_(
        sa.func.typeof(ts).in_(["integer", "real"]),
        seconds >= start.timestamp(),
        seconds < end.timestamp(),
    )
    return DayQuery(
        sa.or_(where, epoch),
        (sa.func.julianday(raw), raw),
        raw,
        _typed_value(ts.type.result_processor(dialect, None)),
    )


def _typed_value(processor: Callable[[Any], Any] | None) -> Callable[[Any], Any] | None:
    """The column type's own conversion of a raw value, keeping the raw value when it
    fails (a junk timestamp must become an invalid row, not stop the read)."""
    if processor is None:
        return None

    def convert(value: Any) -> Any:
        if value is None:
            return None
        try:
            return processor(value)
        except (TypeError, ValueError, OverflowError):
            return value

    return convert


_PLAIN_TYPES = (str, int, bool, dict, list, date, datetime)


def plain_value(value: Any) -> Any:
    """`value` as the database should get it: pandas' missing-value markers (NaN, NaT,
    pd.NA) become None (NULL), pandas and numpy scalars become plain Python values, and
    NaN or infinities inside dicts and lists (JSON columns) become None at any depth.

    Pandas turns None into NaN in text columns and into NaT in timestamp columns; written
    as is, NaN becomes the text 'NaN' (PostgreSQL) and NaT breaks the insert; PostgreSQL
    refuses NaN inside JSON.
    """
    if value is None:
        return None
    kind = type(value)
    if kind is float:
        return None if value != value else value
    if kind is dict or kind is list:
        return finite_json(value)
    if value is pd.NaT:
        return None
    if isinstance(value, pd.Timestamp):
        return value.to_pydatetime()
    if kind in _PLAIN_TYPES:
        return value
    if isinstance(value, np.generic):
        item = value.item()  # numpy's NaT gives None
        return None if isinstance(item, float) and item != item else item
    if value is pd.NA:
        return None
    return value


def utc_now() -> datetime:
    return datetime.now(tz=UTC)


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
        self.committed = False
        self.remove_stale_staging(utc_now() - STALE_STAGING_AFTER)

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
        columns = [c.name for c in self._table.columns]
        now = utc_now()
        staged = []
        for row in rows:
            record = {column: plain_value(row.get(column)) for column in columns}
            record["partition_date"] = self._day
            record[STAGING_RUN_COLUMN] = self._run
            record[STAGING_SEQUENCE_COLUMN] = self._sequence
            record[STAGING_TIME_COLUMN] = now
            self._sequence += 1
            staged.append(record)
        with self._engine.begin() as connection:
            connection.execute(self._staging.insert(), staged)
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
        self.committed = True
        return int(count)

    def abort(self) -> None:
        """Discard this writer's staged rows (and only those)."""
        with self._engine.begin() as connection:
            connection.execute(
                self._staging.delete().where(self._staging.c[STAGING_RUN_COLUMN] == self._run)
            )


def add_missing_staging_columns(engine: sa.Engine, tables: OutputTables) -> None:
    """Give staging tables created by an earlier Seer version the columns added since
    (they only ever hold rows of runs in flight, so adding a nullable column is safe)."""
    inspector = sa.inspect(engine)
    for staging in tables.staging.values():
        present = {c["name"] for c in inspector.get_columns(staging.name, schema=staging.schema)}
        for column in staging.columns:
            if column.name in present:
                continue
            table_name = engine.dialect.identifier_preparer.format_table(staging)
            column_type = column.type.compile(dialect=engine.dialect)
            try:
                with engine.begin() as connection:
                    connection.execute(
                        sa.text(f"ALTER TABLE {table_name} ADD COLUMN {column.name} {column_type}")
                    )
            except sa.exc.DBAPIError:
                # Another run added it first; anything else shows up on the next insert.
                inspector = sa.inspect(engine)
                names = inspector.get_columns(staging.name, schema=staging.schema)
                if column.name not in {c["name"] for c in names}:
                    raise


class WarehouseResource(ConfigurableResource):
    """The warehouse holding the source events table and Seer's output tables."""

    url: str | None = Field(
        default=None,
        description="SQLAlchemy URL; default $SEER_WAREHOUSE_URL, else a SQLite file "
        ".seer/warehouse.sqlite under the working directory. postgresql:// uses psycopg2.",
    )
    db_schema: str | None = Field(
        default=None,
        description="Database schema of the events and output tables; default "
        "$SEER_WAREHOUSE_SCHEMA, else the connection's default schema.",
    )
    events_table: str | None = Field(
        default=None, description="Source table; default $SEER_EVENTS_TABLE or retrieval_events."
    )
    event_id_column: str = Field(
        default="event_id",
        description="Column with the event id; when the table lacks it, a stable hash "
        "of the row is used.",
    )
    event_ts_column: str = Field(default="event_ts", description="UTC timestamp column.")
    task_column: str = Field(default="task", description="Column with the user query.")
    context_column: str = Field(default="context", description="Column with the passages (JSON).")
    metadata_column: str = Field(
        default="metadata", description="Column with the metadata object (JSON)."
    )
    chunk_size: int = Field(
        default=500, gt=0, description="Events read, judged and written per chunk."
    )

    _engine: sa.Engine | None = PrivateAttr(default=None)
    _staging_checked: bool = PrivateAttr(default=False)

    # -- settings ---------------------------------------------------------------------

    def resolved_url(self) -> str:
        url = self.url or os.environ.get("SEER_WAREHOUSE_URL") or default_warehouse_url()
        return normalise_url(url)

    def resolved_schema(self) -> str | None:
        schema = self.db_schema or os.environ.get("SEER_WAREHOUSE_SCHEMA") or None
        return validate_identifier(schema, "db_schema / SEER_WAREHOUSE_SCHEMA") if schema else None

    def resolved_events_table(self) -> str:
        name = self.events_table or os.environ.get("SEER_EVENTS_TABLE") or DEFAULT_EVENTS_TABLE
        return validate_identifier(name, "events_table / SEER_EVENTS_TABLE")

    def source_columns(self) -> dict[str, str]:
        """Logical field -> validated column name in the events table."""
        columns = {
            "event_id": self.event_id_column,
            "event_ts": self.event_ts_column,
            "task": self.task_column,
            "context": self.context_column,
            "metadata": self.metadata_column,
        }
        return {
            field: validate_identifier(column, f"{field}_column")
            for field, column in columns.items()
        }

    def describe(self) -> str:
        """Where this warehouse is, with the password hidden."""
        return redact_url(self.resolved_url())

    # -- engine -----------------------------------------------------------------------

    def get_engine(self) -> sa.Engine:
        if self._engine is None:
            self._engine = create_warehouse_engine(self.resolved_url(), self.resolved_schema())
        return self._engine

    def setup_for_execution(self, context: InitResourceContext) -> None:
        self._engine = None
        self._staging_checked = False

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        self.dispose()

    def dispose(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    # -- output tables ----------------------------------------------------------------

    def output_tables(self) -> OutputTables:
        return output_tables(self.resolved_schema())

    def ensure_output_tables(self) -> OutputTables:
        """Create the output tables (and staging twins) if they do not exist."""
        tables = self.output_tables()
        engine = self.get_engine()
        tables.metadata.create_all(engine, checkfirst=True)
        if not self._staging_checked:
            add_missing_staging_columns(engine, tables)
            self._staging_checked = True
        return tables

    @contextmanager
    def partition_writer(self, table: str, day: date) -> Iterator[PartitionWriter]:
        """Stage rows of `table` for `day`; on success swap them in, on error discard them."""
        tables = self.ensure_output_tables()
        writer = PartitionWriter(self.get_engine(), tables, table, day)
        try:
            yield writer
        except BaseException:
            writer.abort()
            raise
        if not writer.committed:  # left without commit(): its rows are garbage
            writer.abort()

    def _partition_query(
        self, table: str, day: date, columns: Sequence[str] | None
    ) -> sa.Select[Any]:
        sql_table = self.output_tables()[table]
        selected = [sql_table.c[c] for c in columns] if columns else list(sql_table.columns)
        return (
            sa.select(*selected)
            .where(sql_table.c.partition_date == day)
            .order_by(*(sql_table.c[k] for k in TABLE_KEYS[table]))
        )

    def read_partition(
        self, table: str, day: date, columns: Sequence[str] | None = None
    ) -> Iterator[pd.DataFrame]:
        """One day's rows of an output table, `chunk_size` rows at a time, in key order."""
        with self.get_engine().connect() as connection:
            result = connection.execution_options(yield_per=self.chunk_size).execute(
                self._partition_query(table, day, columns)
            )
            names = list(result.keys())
            for rows in result.partitions():
                yield pd.DataFrame([tuple(r) for r in rows], columns=names)

    def read_partition_records(
        self, table: str, day: date, columns: Sequence[str] | None = None
    ) -> Iterator[list[dict[str, Any]]]:
        """Like `read_partition`, but plain dicts straight from the database: NULL stays
        None (a DataFrame would turn it into NaN or NaT)."""
        with self.get_engine().connect() as connection:
            result = connection.execution_options(yield_per=self.chunk_size).execute(
                self._partition_query(table, day, columns)
            )
            for rows in result.partitions():
                yield [dict(row._mapping) for row in rows]

    def read_partition_frame(
        self, table: str, day: date, columns: Sequence[str] | None = None
    ) -> pd.DataFrame:
        frames = list(self.read_partition(table, day, columns))
        if frames:
            return pd.concat(frames, ignore_index=True)
        sql_table = self.output_tables()[table]
        return pd.DataFrame(columns=list(columns) if columns else [c.name for c in sql_table.c])

    def read_table_range(
        self, table: str, start: date, end: date, columns: Sequence[str] | None = None
    ) -> pd.DataFrame:
        """Rows of an output table with start <= partition_date <= end (e.g. a baseline)."""
        tables = self.ensure_output_tables()
        sql_table = tables[table]
        selected = [sql_table.c[c] for c in columns] if columns else list(sql_table.columns)
        query = sa.select(*selected).where(
            sql_table.c.partition_date >= start, sql_table.c.partition_date <= end
        )
        with self.get_engine().connect() as connection:
            result = connection.execute(query)
            return pd.DataFrame([tuple(r) for r in result], columns=list(result.keys()))

    def count_partition(self, table: str, day: date) -> int:
        sql_table = self.output_tables()[table]
        query = (
            sa.select(sa.func.count())
            .select_from(sql_table)
            .where(sql_table.c.partition_date == day)
        )
        with self.get_engine().connect() as connection:
            return int(connection.execute(query).scalar_one())

    # -- source events ----------------------------------------------------------------

    def events_table_object(self) -> sa.Table:
        """The source table, reflected; raises a clear error when it or a column is missing."""
        name = self.resolved_events_table()
        schema = self.resolved_schema()
        try:
            table = sa.Table(name, sa.MetaData(schema=schema), autoload_with=self.get_engine())
        except sa.exc.NoSuchTableError:
            where = f"{schema}.{name}" if schema else name
            raise WarehouseConfigError(
                f"events table {where!r} not found in {self.describe()} "
                "(set events_table / SEER_EVENTS_TABLE, or run `seer seed`)"
            ) from None
        columns = self.source_columns()
        for field, column in columns.items():
            if field != "event_id" and column not in table.c:
                raise WarehouseConfigError(
                    f"events table {name!r} has no column {column!r} ({field}_column); "
                    f"it has {sorted(table.c.keys())}"
                )
        return table

    def _day_rows(self, day: date, fields: Sequence[str]) -> Iterator[list[dict[str, Any]]]:
        """`fields` of the day's source rows, streamed in chunks (see `day_query`)."""
        table = self.events_table_object()
        columns = self.source_columns()
        engine = self.get_engine()
        plan = day_query(table, columns["event_ts"], day, engine.dialect)
        selected = [
            (plan.event_ts if field == "event_ts" else table.c[columns[field]]).label(field)
            for field in fields
            if columns[field] in table.c
        ]
        order = list(plan.order)
        if columns["event_id"] in table.c:
            order.append(table.c[columns["event_id"]])
        query = sa.select(*selected).where(plan.where).order_by(*order)
        with engine.connect() as connection:
            result = connection.execution_options(
                stream_results=True, yield_per=self.chunk_size
            ).execute(query)
            for rows in result.partitions():
                chunk = []
                for row in rows:
                    record = dict(row._mapping)
                    record["event_ts"] = epoch_text_value(record["event_ts"])
                    if not belongs_to_day(record["event_ts"], day):
                        continue
                    if plan.convert is not None:
                        record["event_ts"] = plan.convert(record["event_ts"])
                    chunk.append(record)
                if chunk:
                    yield chunk

    def count_unplaced_events(self) -> int:
        """Source rows on no day: their event_ts text neither parses nor starts with a
        date (`yesterday`). Only rows not starting with a date are read, the rows every
        day's read scans anyway; 0 for timestamp and numeric columns outside SQLite."""
        table = self.events_table_object()
        ts = table.c[self.source_columns()["event_ts"]]
        engine = self.get_engine()
        if engine.dialect.name != "sqlite" and isinstance(
            ts.type, sa.DateTime | sa.Date | sa.Float | sa.Numeric | sa.Integer
        ):
            return 0
        raw = sa.type_coerce(ts, sa.String())
        query = sa.select(raw).where(not_date_prefixed(ts, engine.dialect))
        with engine.connect() as connection:
            result = connection.execution_options(
                stream_results=True, yield_per=self.chunk_size
            ).execute(query)
            return sum(is_unplaced(value) for value in result.scalars())

    def iter_event_chunks(self, day: date) -> Iterator[list[dict[str, Any]]]:
        """The day's source rows in chunks of at most `chunk_size`.

        A row is on the day when its event_ts, parsed (offsets applied, naive = UTC), is
        in [day, day + 1) UTC; an event_ts that does not parse counts on the day its text
        starts with (the row is then stored as invalid). Each row is a dict with
        `event_id` (omitted when the table has no id column, so a stable hash is
        derived), `event_ts`, `task`, `context` and `metadata`. The rows are streamed
        (server-side cursor), so memory is bounded by the chunk size.
        """
        yield from self._day_rows(day, ("event_id", "event_ts", "task", "context", "metadata"))

    def count_events(self, day: date) -> int:
        """Rows `iter_event_chunks(day)` yields (reads only the timestamps)."""
        return sum(len(chunk) for chunk in self._day_rows(day, ("event_ts",)))


class EvaluatorResource(ConfigurableResource):
    """Builds the evaluator (offline lexical heuristic or an OpenAI-compatible judge)."""

    kind: str | None = Field(
        default=None, description="lexical or openai; default $SEER_EVALUATOR, else lexical."
    )
    model: str | None = Field(
        default=None, description="Judge model; default $SEER_EVALUATOR_MODEL."
    )
    api_key: str | None = Field(
        default=None,
        description="API key for the openai evaluator; pass EnvVar('OPENAI_API_KEY'). "
        "Never logged.",
    )
    base_url: str | None = Field(
        default=None,
        description="OpenAI-compatible endpoint (Azure, vLLM, Ollama); default $OPENAI_BASE_URL.",
    )
    max_concurrency: int | None = Field(
        default=None, description="Concurrent requests to the judge."
    )
    requests_per_minute: int | None = Field(
        default=None, description="Client-side request budget per minute."
    )
    tokens_per_minute: int | None = Field(
        default=None, description="Client-side token budget per minute."
    )
    timeout_seconds: float | None = Field(default=None, description="Per-request timeout.")
    max_retries: int | None = Field(
        default=None, description="Retries on transport errors and 429s."
    )
    # Any: Dagster config has no union of text and mapping; `resolved_prices` validates.
    prices: Any = Field(
        default=None,
        description="Judge prices in USD per 1M tokens, model -> [input, output], as JSON "
        "text ('{\"my-deployment\": [0.15, 0.6]}') or a mapping; extends the built-in list. "
        "Default $SEER_LLM_PRICES.",
    )

    def resolved_kind(self) -> str:
        kind = (self.kind or os.environ.get("SEER_EVALUATOR") or "lexical").strip().lower()
        if kind not in ("lexical", "openai"):
            raise ValueError(f"SEER_EVALUATOR / kind must be 'lexical' or 'openai', got {kind!r}")
        return kind

    def resolved_model(self) -> str | None:
        return self.model or os.environ.get("SEER_EVALUATOR_MODEL") or None

    def resolved_prices(self) -> dict[str, tuple[float, float]] | None:
        """The configured price table on top of the built-in one; None when unset, so
        the judge falls back to $SEER_LLM_PRICES."""
        from seer_metrics.evaluators.llm import DEFAULT_PRICES, parse_prices

        if self.prices is None:
            return None
        if isinstance(self.prices, str):
            text = self.prices
        elif isinstance(self.prices, Mapping):
            text = json.dumps(
                {
                    str(model): list(price) if isinstance(price, list | tuple) else price
                    for model, price in self.prices.items()
                }
            )
        else:
            raise ValueError(
                "evaluator setting prices must be JSON text or a mapping of model -> "
                f"[input, output] USD per 1M tokens, got {type(self.prices).__name__}"
            )
        return {**DEFAULT_PRICES, **parse_prices(text, "evaluator setting prices")}

    def build(self, store: JudgmentStore | None = None) -> Evaluator:
        """A fresh evaluator; settings left unset fall back to the evaluator's defaults.

        `store` lets the LLM judge re-use cached requirement lists (phase 1) across runs.
        """
        from seer_metrics.evaluators import build_evaluator

        kind = self.resolved_kind()
        prices = self.resolved_prices()  # refused early even for the offline judge
        if kind == "lexical":
            return build_evaluator(kind, model=self.resolved_model(), store=store)
        options: dict[str, Any] = {
            "api_key": self.api_key,
            "base_url": self.base_url or os.environ.get("OPENAI_BASE_URL") or None,
            "max_concurrency": self.max_concurrency,
            "requests_per_minute": self.requests_per_minute,
            "tokens_per_minute": self.tokens_per_minute,
            "timeout_seconds": self.timeout_seconds,
            "max_retries": self.max_retries,
            "prices": prices,
        }
        return build_evaluator(
            kind,
            model=self.resolved_model(),
            store=store,
            **{key: value for key, value in options.items() if value is not None},
        )
