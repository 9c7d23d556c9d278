"""Dagster resources: the warehouse (thin, over `seer_pipelines.warehouse`) and the evaluator.

Every setting can come from Dagster config or, when left unset, from the environment
(`SEER_WAREHOUSE_URL`, `SEER_EVENTS_TABLE`, `SEER_EVALUATOR`, ...), so the same code
location runs on a laptop (SQLite file) and in production (PostgreSQL) without edits.
Identifiers taken from config are validated; values are always bound parameters.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import date
from typing import Any

import pandas as pd
import sqlalchemy as sa
from dagster import ConfigurableResource, InitResourceContext
from pydantic import Field, PrivateAttr

from seer_metrics.cache import JudgmentStore
from seer_metrics.evaluators.base import Evaluator
from seer_metrics.redaction import redact_url
from seer_metrics.sampling import DEFAULT_MINIMUM_PER_STRATUM, SamplingSettings
from seer_pipelines.settings import environment, setting
from seer_pipelines.warehouse.day import count_unplaced, read_day
from seer_pipelines.warehouse.engine import (
    WarehouseConfigError,
    create_warehouse_engine,
    default_warehouse_url,
    normalise_url,
    validate_identifier,
)
from seer_pipelines.warehouse.schema import TABLE_KEYS, OutputTables, output_tables
from seer_pipelines.warehouse.writer import PartitionWriter, add_missing_staging_columns, utc_now

# WarehouseConfigError and utc_now are re-exported for callers not yet moved to warehouse/.
__all__ = ["EvaluatorResource", "WarehouseConfigError", "WarehouseResource", "utc_now"]

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
    mode: str | None = Field(
        default=None,
        description="online (each call as the day is judged) or batch (the Batch API: half "
        "the price, the day completes when its batches are done); default $SEER_LLM_MODE, "
        "else online. The lexical evaluator makes no call and always runs online.",
    )
    # Any: Dagster config has no union of text and mapping; `resolved_prices` validates.
    prices: Any = Field(
        default=None,
        description="Judge prices in USD per 1M tokens, model -> [input, output], as JSON "
        "text ('{\"my-deployment\": [0.15, 0.6]}') or a mapping; extends the built-in list. "
        "Default $SEER_LLM_PRICES.",
    )

    sample_size: int | None = Field(
        default=None,
        description="Events to judge per day, a sample stratified by slice; unset: every "
        "event. Default $SEER_SAMPLE_SIZE.",
    )
    sample_minimum_per_slice: int | None = Field(
        default=None,
        description="Judged events at least per slice combination (or all of its events); "
        "default $SEER_SAMPLE_MIN_PER_SLICE, else 30.",
    )
    sample_slice_keys: list[str] | None = Field(
        default=None,
        description="Metadata keys whose value combinations stratify the sample; default "
        "the slice keys ($SEER_SLICE_KEYS, else env,feature_flag).",
    )
    budget_usd: float | None = Field(
        default=None,
        description="Cap on one partition's judging cost in USD; unset: no cap. Default "
        "$SEER_BUDGET_USD.",
    )
    budget_tokens: int | None = Field(
        default=None,
        description="Cap on one partition's judging tokens; unset: no cap. Default "
        "$SEER_BUDGET_TOKENS.",
    )

    def sampling_settings(self) -> SamplingSettings:
        """How many events of a day the judge sees (raises `SamplingConfigError`)."""
        minimum = self.sample_minimum_per_slice
        return SamplingSettings(
            target=self.sample_size,
            minimum_per_stratum=DEFAULT_MINIMUM_PER_STRATUM if minimum is None else minimum,
        )

    def resolved_kind(self) -> str:
        kind = (self.kind or setting("SEER_EVALUATOR") or "lexical").strip().lower()
        if kind not in ("lexical", "openai"):
            raise ValueError(f"SEER_EVALUATOR / kind must be 'lexical' or 'openai', got {kind!r}")
        return kind

    def resolved_mode(self) -> str:
        """`online` or `batch`; always `online` for the lexical evaluator."""
        mode = (self.mode or setting("SEER_LLM_MODE") or "online").strip().lower()
        if mode not in ("online", "batch"):
            raise ValueError(f"SEER_LLM_MODE / mode must be 'online' or 'batch', got {mode!r}")
        return mode if self.resolved_kind() == "openai" else "online"

    def resolved_model(self) -> str | None:
        return self.model or setting("SEER_EVALUATOR_MODEL")

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
            "base_url": self.base_url or setting("OPENAI_BASE_URL"),
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
            environ=environment(),
            **{key: value for key, value in options.items() if value is not None},
        )
