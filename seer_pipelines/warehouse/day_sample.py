"""The day's accounting and its sample, computed in the warehouse (SQLAlchemy Core).

Why: a sampled day should cost what its sample costs. The warehouse counts the day per
stratum (one grouped query: population, duplicate ids) and chooses the sample (one
windowed query: within each stratum the events with the smallest keyed hash of
`event_id`, the rule of `seer_metrics.spend.sampling`), so only the chosen rows leave it.

The dialects (`sample_dialects`) give the day's rows picked exactly, the
id as text, a metadata value as text, and SHA-256 of bytes. PostgreSQL has them built in;
SQLite gets Seer's own Python functions registered on the connection. Any other dialect
gets `WarehouseSamplingError` naming what is missing (docs/pipelines.md says how to add
one).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

import sqlalchemy as sa

from seer_metrics.spend.sampling import (
    STRATUM_SEPARATOR,
    stratum_label,
)
from seer_pipelines.warehouse.sample_dialects import (
    DialectSql,
    WarehouseSamplingError,
    dialect_sql,
)

SAMPLE_FIELDS = ("event_id", "event_ts", "task", "context", "metadata")
_MISSING = "-"  # a missing slice value in a stratum label, as `stratum_label` writes it


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


def event_id_is_unique(table: sa.Table, column: str) -> bool:
    """Whether the table's key or a unique index is the id alone: no id can repeat, so
    the day needs no window to drop repeats."""
    if [c.name for c in table.primary_key.columns] == [column]:
        return True
    return any(
        index.unique and [c.name for c in index.columns] == [column] for index in table.indexes
    )


def _day_rows(
    sql: DialectSql, day: date, key: str, slice_keys: Sequence[str], hashed: bool
) -> sa.Subquery:
    """The day's rows, narrow: id, stratum, slice values, copy number (1: kept), order,
    where to find the row again and, when `hashed`, the keyed hash."""
    where, order, _ = sql.on_day(day)
    picked = sql.picked_rows(
        where,
        [
            sql.event_id().label("event_id"),
            *([sql.row_locator().label("locator")] if hashed else []),
            *(expression.label(f"order_{index}") for index, expression in enumerate(order)),
        ],
        slice_keys,
    )
    values = [picked.c[f"value_{index}"] for index in range(len(slice_keys))]
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
        *orders,
        *values,
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
    """One grouped query: per stratum, the day's distinct events and repeated ids.

    Grouped by the slice keys' values (the label is written here, from them): cheaper in
    the warehouse than building each row's label, and the same strata.
    """
    sql = dialect_sql(table, columns, connection.dialect)
    sql.prepare(connection, key, slice_keys)
    rows = _day_rows(sql, day, key, slice_keys, hashed=False)
    values = [rows.c[f"value_{index}"] for index in range(len(slice_keys))]
    unique = event_id_is_unique(sql.table, sql.columns["event_id"])
    firsts = sa.func.count() if unique else sa.func.sum(sa.case((rows.c.copy == 1, 1), else_=0))
    query = sa.select(
        *values, firsts, sa.func.count(), sa.func.count() - sa.func.count(rows.c.event_id)
    ).group_by(*values)
    strata: dict[str, StratumCount] = {}
    missing_ids = 0
    for *found, first_rows, total, no_ids in _run(connection, query, day):
        missing_ids += int(no_ids or 0)
        pairs = list(zip(slice_keys, found, strict=True))
        label = stratum_label(pairs)
        earlier = strata.get(label)  # a value spelled `-` and a missing one: one stratum
        population = int(first_rows or 0) + (earlier.population if earlier else 0)
        duplicates = int(total) - int(first_rows or 0) + (earlier.duplicates if earlier else 0)
        strata[label] = StratumCount(
            stratum=label,
            values=earlier.values if earlier else dict(pairs),
            population=population,
            duplicates=duplicates,
        )
    if missing_ids:
        raise WarehouseSamplingError(
            f"{missing_ids} source rows on {day} have no {columns['event_id']!r}: the "
            "warehouse sample is keyed on the event id; give them one, or leave sampling off"
        )
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
    populations: dict[str, int] | None = None,
) -> Iterator[list[dict[str, Any]]]:
    """The chosen rows of `day` (`sizes[stratum]` smallest keyed hashes of each stratum),
    in `event_ts` order, in chunks; each record has `stratum` besides `SAMPLE_FIELDS`.

    The sample is ranked on narrow rows, fetched in order (`_narrow_chunks`); each chunk's
    rows are then read whole by their locator, in the same snapshot (repeatable read), so the wide
    columns of the day are read for the chosen rows only. With the strata's
    `populations`, only the rows whose hash is below a bound that holds the stratum's
    sample with a margin of 8 standard deviations are ranked (the window then sorts
    about the sample, not the day); a stratum that still comes up short (a chance below
    1e-14) raises `WarehouseSamplingError` before anything is written.
    """
    wanted_rows = [
        (stratum, int(size), hash_bound(size, (populations or {}).get(stratum)))
        for stratum, size in sorted(sizes.items())
        if size > 0
    ]
    if not wanted_rows:
        return
    sql = dialect_sql(table, columns, engine.dialect)
    with engine.connect().execution_options(isolation_level=sql.snapshot_isolation) as connection:
        sql.prepare(connection, key, slice_keys)
        chosen = _chosen_rows(sql, day, key, slice_keys, wanted_rows)
        _, _, event_ts = sql.on_day(day)
        whole = sa.select(
            sql.row_locator().label("locator"),
            event_ts.label("event_ts"),
            *(
                sql.table.c[sql.columns[name]].label(name)
                for name in ("task", "context", "metadata")
            ),
        )
        read: Counter[str] = Counter()
        for chunk in _narrow_chunks(connection, chosen, day, chunk_size, wanted_rows):
            locators = [row.locator for row in chunk]
            rows = {
                row.locator: row
                for row in _run(connection, whole.where(sql.row_locator().in_(locators)), day)
            }
            records = []
            for narrow in chunk:
                row = rows[narrow.locator]
                records.append(
                    {
                        "event_id": narrow.event_id,
                        "event_ts": sql.convert_event_ts(row.event_ts, day),
                        "task": row.task,
                        "context": row.context,
                        "metadata": row.metadata,
                        "stratum": narrow.stratum,
                    }
                )
                read[narrow.stratum] += 1
            yield records
    short = [stratum for stratum, size, _ in wanted_rows if read[stratum] < size]
    if short:
        raise WarehouseSamplingError(
            f"{day}: the hash bound left strata {short[:3]} short of their sample; nothing "
            "was written: re-run the day (and report it: the bound's margin is 8 sigma)"
        )


# Up to this many chosen rows are fetched in one go: a server-side cursor (streaming)
# keeps PostgreSQL from running the query in parallel workers (3.6 s against 6.1 s for
# a 1,000,000-event day), and the narrow rows of a 200,000-event sample take about 30 MB.
_BUFFERED_SAMPLE_ROWS = 200_000


def _narrow_chunks(
    connection: sa.Connection,
    chosen: sa.Select[Any],
    day: date,
    chunk_size: int,
    wanted_rows: list[tuple[str, int, bytes]],
) -> Iterator[Sequence[sa.Row[Any]]]:
    """The chosen narrow rows in chunks: fetched whole when the sample is small enough
    to hold, else streamed (bounded memory, no parallel scan)."""
    if sum(size for _, size, _ in wanted_rows) <= _BUFFERED_SAMPLE_ROWS:
        rows = _run(connection, chosen, day).all()
        for start in range(0, len(rows), chunk_size):
            yield rows[start : start + chunk_size]
        return
    streamed = connection.execution_options(stream_results=True, yield_per=chunk_size)
    yield from _run(streamed, chosen, day).partitions()


def _chosen_rows(
    sql: DialectSql,
    day: date,
    key: str,
    slice_keys: Sequence[str],
    wanted_rows: list[tuple[str, int, bytes]],
) -> sa.Select[Any]:
    """The chosen rows, narrow (locator, id, stratum), in `event_ts` order: one windowed
    query over the rows below each stratum's hash bound."""
    rows = _day_rows(sql, day, key, slice_keys, hashed=True)
    wanted = (
        sa.values(
            sa.column("stratum", sa.Text),
            sa.column("size", sa.Integer),
            sa.column("bound", sa.LargeBinary),
            name="wanted",
        )
        .data(wanted_rows)
        .cte("wanted")
    )
    orders = [column for column in rows.c if column.name.startswith("order_")]
    ranked = (
        sa.select(
            rows.c.locator,
            rows.c.event_id,
            rows.c.stratum,
            *orders,
            wanted.c.size,
            sa.func.row_number()
            .over(partition_by=rows.c.stratum, order_by=(rows.c.sample_hash, rows.c.event_id))
            .label("sample_rank"),
        )
        .join_from(rows, wanted, rows.c.stratum == wanted.c.stratum)
        .where(rows.c.copy == 1, rows.c.sample_hash <= wanted.c.bound)
        .subquery("ranked")
    )
    ranked_orders = [ranked.c[column.name] for column in orders]
    return (
        sa.select(ranked.c.locator, ranked.c.event_id, ranked.c.stratum)
        .where(ranked.c.sample_rank <= ranked.c.size)
        .order_by(*ranked_orders, ranked.c.event_id)
    )


_ALL_HASHES = b"\xff" * 8


def hash_bound(size: int, population: int | None) -> bytes:
    """An 8-byte hash below which a stratum of `population` events has `size` events with
    overwhelming probability: the binomial mean plus 8 standard deviations of the share."""
    if not population or size >= population:
        return _ALL_HASHES
    share = (size + 8.0 * math.sqrt(size) + 8.0) / population
    if share >= 1.0:
        return _ALL_HASHES
    return int(share * 2**64).to_bytes(8, "big")
