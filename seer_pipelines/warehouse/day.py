"""Which source rows make up one day, chosen in SQL, and reading them in chunks.

A row is on the UTC day of its parsed `event_ts` (naive values are UTC, offsets are
applied). The SQL picks the day exactly where the column type allows, else a superset
that `belongs_to_day` narrows in Python.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import sqlalchemy as sa

from seer_metrics.events import InvalidEventError, parse_timestamp


def day_bounds(day: date) -> tuple[datetime, datetime]:
    """[day, day + 1) in UTC, as aware datetimes."""
    start = datetime.combine(day, time.min, tzinfo=UTC)
    return start, start + timedelta(days=1)


_DATE_PREFIX = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}")


def date_prefix(text: str) -> date | None:
    """The real date `text` starts with (`2026-11-29 junk` -> 2026-11-29), else None:
    `2026-11-31`, `2026-13-28` and `0000-01-01` are shaped like dates but are none."""
    if not _DATE_PREFIX.match(text):
        return None
    try:
        return date.fromisoformat(text[:10])
    except ValueError:
        return None


def day_of(raw_event_ts: Any) -> date | None:
    """The UTC day a source row with this `event_ts` is on, or None: the row is unplaced.

    A timestamp is on the UTC day it falls on once parsed (`parse_timestamp`: naive
    values are UTC, offsets are applied). A value that does not parse is on the real date
    its text starts with (`2026-11-29 junk` -> 2026-11-29), where it is stored as
    invalid. Anything else is on no day: NULL, empty text, `yesterday`, `2026-11-31T...`,
    an epoch beyond year 9999. Every source row is on exactly one day or on none.
    """
    try:
        parsed = parse_timestamp(raw_event_ts)
    except InvalidEventError:
        return date_prefix(str(raw_event_ts).strip())
    return None if parsed is None else parsed.date()


def belongs_to_day(raw_event_ts: Any, day: date) -> bool:
    """Whether a source row with this `event_ts` is part of `day`'s partition."""
    return day_of(raw_event_ts) == day


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
    """Whether a source row with this `event_ts` is on no day (NULL included)."""
    return day_of(epoch_text_value(raw_event_ts)) is None


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


def canonical_event_id(raw: Any) -> str | None:
    """An id as text: a JSON (or other) value that is not a string becomes its canonical
    JSON text (`1.5` -> `1.5`, `{"a": 1}` -> `{"a":1}`, `true` -> `true`), so distinct
    ids stay distinct; NULL stays None (the row's id is then derived from its content)."""
    if raw is None or isinstance(raw, str):
        return raw
    if isinstance(raw, bytes | bytearray | memoryview):
        return bytes(raw).decode("utf-8", errors="replace")
    if isinstance(raw, bool | int | float | dict | list | tuple):
        return json.dumps(
            raw, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
        )
    return str(raw)  # Decimal, UUID, datetime: their own text


def read_day(
    engine: sa.Engine,
    table: sa.Table,
    columns: dict[str, str],
    day: date,
    fields: Sequence[str],
    chunk_size: int,
) -> Iterator[list[dict[str, Any]]]:
    """`fields` of `day`'s source rows, streamed in chunks of at most `chunk_size`.

    `columns` maps each logical field (`event_id`, `event_ts`, `task`, `context`,
    `metadata`) to its column; a field whose column the table lacks is left out. The
    rows come from a server-side cursor, so memory is bounded by the chunk size.
    """
    plan = day_query(table, columns["event_ts"], day, engine.dialect)
    selected = [
        (plan.event_ts if field == "event_ts" else table.c[columns[field]]).label(field)
        for field in fields
        if columns[field] in table.c
    ]
    order = list(plan.order)
    if columns["event_id"] in table.c:
        event_id = table.c[columns["event_id"]]
        # PostgreSQL's json type has no ordering: such ids are ordered by their text.
        as_text = isinstance(event_id.type, sa.JSON) and engine.dialect.name != "sqlite"
        order.append(sa.cast(event_id, sa.Text) if as_text else event_id)
    query = sa.select(*selected).where(plan.where).order_by(*order)
    with engine.connect() as connection:
        result = connection.execution_options(stream_results=True, yield_per=chunk_size).execute(
            query
        )
        for rows in result.partitions():
            chunk = []
            for row in rows:
                record = dict(row._mapping)
                if "event_id" in record:
                    record["event_id"] = canonical_event_id(record["event_id"])
                record["event_ts"] = epoch_text_value(record["event_ts"])
                if not belongs_to_day(record["event_ts"], day):
                    continue
                if plan.convert is not None:
                    record["event_ts"] = plan.convert(record["event_ts"])
                chunk.append(record)
            if chunk:
                yield chunk


# Epoch seconds `parse_timestamp` can place: years 1 to 9999.
_FIRST_EPOCH = datetime(1, 1, 1, tzinfo=UTC).timestamp()
_END_EPOCH = _FIRST_EPOCH + (date(9999, 12, 31).toordinal()) * 86400.0


def count_unplaced(engine: sa.Engine, table: sa.Table, column: str, chunk_size: int) -> int:
    """Source rows on no day (see `day_of`), over the whole table.

    Only the rows no day's read can place are looked at: NULL; outside SQLite, timestamp
    and date values out of Python's range (`infinity`) and epochs outside years 1-9999;
    text not starting with a date or starting with a false one (`2026-11-31`), counted
    per distinct 10-character prefix; on SQLite also blobs and out-of-range numbers.
    """
    ts = table.c[column]
    sqlite = engine.dialect.name == "sqlite"
    counts: list[sa.Select[Any]] = [sa.select(sa.func.count()).where(ts.is_(None))]
    scans: list[tuple[sa.ColumnElement[Any], sa.ColumnElement[bool]]] = []
    prefixes: sa.Select[Any] | None = None
    if not sqlite and isinstance(ts.type, sa.DateTime | sa.Date):
        first, last = (
            (datetime(1, 1, 1, tzinfo=UTC), datetime.max.replace(tzinfo=UTC))
            if isinstance(ts.type, sa.DateTime)
            else (date.min, date.max)
        )
        counts.append(sa.select(sa.func.count()).where(sa.not_(ts.between(first, last))))
    elif not sqlite and isinstance(ts.type, sa.Float | sa.Numeric | sa.Integer):
        scans.append((ts, sa.not_(sa.and_(ts >= _FIRST_EPOCH, ts < _END_EPOCH))))
    else:
        raw = sa.type_coerce(ts, sa.String())
        scans.append((raw, not_date_prefixed(ts, engine.dialect)))
        prefix = sa.func.substr(raw, 1, 10)
        shaped = sa.not_(not_date_prefixed(ts, engine.dialect))
        if sqlite:
            shaped = sa.and_(sa.func.typeof(ts) == "text", shaped)
            counts.append(sa.select(sa.func.count()).where(sa.func.typeof(ts) == "blob"))
            number = sa.type_coerce(ts, sa.Float())
            out_of_range = sa.not_(sa.and_(number >= _FIRST_EPOCH, number < _END_EPOCH))
            scans.append((raw, sa.and_(sa.func.typeof(ts).in_(["integer", "real"]), out_of_range)))
        prefixes = sa.select(prefix, sa.func.count()).where(ts.is_not(None), shaped)
        prefixes = prefixes.group_by(prefix)
    with engine.connect() as connection:
        unplaced = sum(int(connection.execute(q.select_from(table)).scalar_one()) for q in counts)
        if prefixes is not None:
            for text, count in connection.execute(prefixes):
                unplaced += int(count) if date_prefix(str(text)) is None else 0
        for selected, where in scans:
            query = sa.select(selected).where(ts.is_not(None), where)
            result = connection.execution_options(
                stream_results=True, yield_per=chunk_size
            ).execute(query)
            unplaced += sum(is_unplaced(value) for value in result.scalars())
    return unplaced
