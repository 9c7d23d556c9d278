"""The warehouse resource: thin, over `seer_pipelines.warehouse` (the evaluator's resource is
`seer_pipelines.defs.resources.evaluator`).

Every setting can come from Dagster config or, when left unset, from the environment
(`SEER_WAREHOUSE_URL`, `SEER_EVENTS_TABLE`, `SEER_EVALUATOR`, ...), so the same code
location runs on a laptop (SQLite file) and in production (PostgreSQL) without edits.
Identifiers taken from config are validated; values are always bound parameters.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import date
from typing import Any

import pandas as pd
import sqlalchemy as sa
from dagster import ConfigurableResource, InitResourceContext
from pydantic import Field, PrivateAttr

from seer_metrics.text.redaction import redact_url
from seer_pipelines.settings import setting
from seer_pipelines.warehouse.day import count_unplaced, read_day
from seer_pipelines.warehouse.day_sample import (
    DayStrata,
    count_day_rows,
    count_day_strata,
    read_day_sample,
)
from seer_pipelines.warehouse.engine import (
    WarehouseConfigError,
    create_warehouse_engine,
    default_warehouse_url,
    normalise_url,
    validate_identifier,
)
from seer_pipelines.warehouse.schema import TABLE_KEYS, OutputTables, output_tables
from seer_pipelines.warehouse.writer import PartitionWriter, add_missing_staging_columns

DEFAULT_EVENTS_TABLE = "retrieval_events"


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
        url = self.url or setting("SEER_WAREHOUSE_URL") or default_warehouse_url()
        return normalise_url(url)

    def resolved_schema(self) -> str | None:
        schema = self.db_schema or setting("SEER_WAREHOUSE_SCHEMA")
        return validate_identifier(schema, "db_schema / SEER_WAREHOUSE_SCHEMA") if schema else None

    def resolved_events_table(self) -> str:
        name = self.events_table or setting("SEER_EVENTS_TABLE") or DEFAULT_EVENTS_TABLE
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
            names = list(result.keys())
            for rows in result.partitions():
                yield [dict(zip(names, row, strict=True)) for row in rows]

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
        """`fields` of the day's source rows, streamed in chunks (see `day.read_day`)."""
        yield from read_day(
            self.get_engine(),
            self.events_table_object(),
            self.source_columns(),
            day,
            fields,
            self.chunk_size,
        )

    def count_unplaced_events(self) -> int:
        """Source rows on no day (see `day.count_unplaced`)."""
        table = self.events_table_object()
        column = self.source_columns()["event_ts"]
        return count_unplaced(self.get_engine(), table, column, self.chunk_size)

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

    # -- the day counted and sampled in the warehouse (see warehouse.day_sample) -------

    def count_day_strata(self, day: date, slice_keys: Sequence[str], key: str) -> DayStrata:
        """The day's strata (population, duplicate ids), one grouped query."""
        table, columns = self.events_table_object(), self.source_columns()
        with self.get_engine().connect() as connection:
            return count_day_strata(connection, table, columns, day, slice_keys, key)

    def count_day_rows(self, day: date) -> int:
        """The source rows on the day, one count in the warehouse (a sampled day's recount)."""
        table, columns = self.events_table_object(), self.source_columns()
        with self.get_engine().connect() as connection:
            return count_day_rows(connection, table, columns, day)

    def iter_sample_chunks(
        self,
        day: date,
        slice_keys: Sequence[str],
        key: str,
        sizes: dict[str, int],
        populations: dict[str, int] | None = None,
    ) -> Iterator[list[dict[str, Any]]]:
        """The day's chosen rows (`sizes` per stratum), in chunks, in event_ts order."""
        yield from read_day_sample(
            self.get_engine(),
            self.events_table_object(),
            self.source_columns(),
            day,
            slice_keys,
            key,
            sizes,
            self.chunk_size,
            populations,
        )
