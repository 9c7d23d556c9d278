"""Property: any rows a driver can hand back never fail a day, and none is lost uncounted.

Generated rows (every JSON type, NUL, surrogates, control characters, huge numbers, NULL
in every column) go through the partition code (read the day, judge, score, slice) on
SQLite and PostgreSQL; every day completes, and the rows read on the days plus the
unplaced rows equal the source rows, each day's read = stored + duplicate ids.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seer_metrics.evaluators.lexical import LexicalEvaluator
from seer_pipelines.defs.assets.metrics import build_event_metrics, build_slice_metrics
from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.judging.partition import judge_partition
from seer_pipelines.warehouse.schema import EVENT_METRICS_TABLE, JUDGMENTS_TABLE

DAY = date(2026, 11, 29)
# Valid timestamps are generated within DAY +- 1 (offsets up to +-23 h), so every row
# that is on a day at all is on one of these.
DAYS = [DAY + timedelta(days=offset) for offset in range(-2, 3)]
START = datetime.combine(DAY - timedelta(days=1), datetime.min.time(), tzinfo=UTC)

ODD_CHARACTERS = st.sampled_from(["\x00", "\ud800", "\udfff", "\x1f", "\x7f", "\u2028", "é"])
ANY_TEXT = st.text(st.one_of(st.characters(), ODD_CHARACTERS), max_size=6)
NUMBERS = st.one_of(
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=True, allow_infinity=True),
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, ANY_TEXT)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.one_of(ANY_TEXT, st.sampled_from(["env", "id", "text"])), children)
    ),
    max_leaves=6,
)
PASSAGE = st.fixed_dictionaries(
    {"text": st.one_of(ANY_TEXT, JSON_VALUES)},
    optional={"id": JSON_VALUES, "score": NUMBERS, "rank": SCALARS},
)
CONTEXT = st.one_of(JSON_VALUES, st.lists(st.one_of(ANY_TEXT, PASSAGE), max_size=3))
METADATA = st.one_of(
    JSON_VALUES,
    st.dictionaries(st.sampled_from(["env", "feature_flag", "tenant"]), JSON_VALUES, max_size=3),
)
TIMESTAMPS = st.one_of(
    st.none(),
    st.sampled_from(
        ["", "yesterday", "2026-11-31T10:00:00Z", "2026-13-28T00:00:00Z", "0000-01-01T00:00:00Z"]
    ),
    st.integers(min_value=0, max_value=3 * 86400 - 1).map(
        lambda seconds: (START + timedelta(seconds=seconds)).isoformat()
    ),
    st.tuples(st.integers(0, 3 * 86400 - 1), st.integers(-23, 23)).map(
        lambda pair: (
            (START + timedelta(seconds=pair[0])).astimezone(UTC).replace(tzinfo=None).isoformat()
            + f"{pair[1]:+03d}:00"
        )
    ),
    st.integers(min_value=0, max_value=3 * 86400 - 1).map(
        lambda seconds: int(START.timestamp()) + seconds
    ),
    st.sampled_from([10**20, -(10**20), 1e300, float("nan"), float("inf")]),
    st.dates(min_value=DAY - timedelta(days=1), max_value=DAY + timedelta(days=1)).map(
        lambda day: f"{day.isoformat()} not a time"
    ),
)
ROWS = st.lists(
    st.fixed_dictionaries(
        {
            "event_id": st.one_of(st.none(), st.sampled_from(["dup", "a", "b"]), JSON_VALUES),
            "event_ts": TIMESTAMPS,
            "task": st.one_of(ANY_TEXT, st.just("Who directed Inception?"), JSON_VALUES),
            "context": CONTEXT,
            "metadata": METADATA,
        }
    ),
    max_size=12,
)


def finite(value: Any) -> Any:
    """JSON text refuses NaN and infinities: the generator's value as JSON allows it."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [finite(item) for item in value]
    return value


def storable_text(value: Any, postgres: bool) -> Any:
    """A text column holds text a driver can send: UTF-8 (no surrogates), no NUL on
    PostgreSQL. Such characters reach Seer through JSON escapes instead."""
    if value is None:
        return None
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if number and not postgres and (not isinstance(value, int) or abs(value) < 2**63):
        return value  # SQLite keeps numbers as numbers (epochs)
    text = value if isinstance(value, str) else json.dumps(value)
    text = "".join(c for c in text if not 0xD800 <= ord(c) <= 0xDFFF)
    return text.replace("\x00", "") if postgres else text


def source_row(row: dict[str, Any], postgres: bool) -> dict[str, Any]:
    def as_json(value: Any) -> str | None:
        return None if value is None else json.dumps(finite(value))  # escapes NUL, surrogates

    return {
        "event_id": as_json(row["event_id"]) if postgres else storable_text(row["event_id"], False),
        "event_ts": storable_text(row["event_ts"], postgres),
        "task": storable_text(row["task"], postgres),
        "context": as_json(row["context"]),
        "metadata": as_json(row["metadata"]),
    }


def events_table(warehouse: WarehouseResource, postgres: bool) -> sa.Table:
    json_type = sa.JSON if postgres else sa.Text  # PostgreSQL: json, not jsonb
    table = sa.Table(
        "retrieval_events",
        sa.MetaData(schema=warehouse.resolved_schema()),
        sa.Column("event_id", json_type),
        sa.Column("event_ts", sa.Text),
        sa.Column("task", sa.Text),
        sa.Column("context", json_type),
        sa.Column("metadata", json_type),
    )
    table.metadata.create_all(warehouse.get_engine())
    return table


def check_rows(warehouse: WarehouseResource, postgres: bool, rows: list[dict]) -> None:
    table = events_table(warehouse, postgres)
    engine = warehouse.get_engine()
    with engine.begin() as connection:
        connection.execute(table.delete())
        if rows:  # raw JSON text into json columns, so escapes reach the driver as written
            columns = ", ".join(table.c.keys())
            values = ", ".join(f":{column.name}" for column in table.c)
            connection.execute(
                sa.text(f"insert into {table.fullname} ({columns}) values ({values})"),
                [source_row(row, postgres) for row in rows],
            )
    read = 0
    for day in DAYS:
        summary = judge_partition(warehouse, LexicalEvaluator(), day)
        stored = warehouse.count_partition(JUDGMENTS_TABLE, day)
        assert summary.outside_day == 0
        assert stored + summary.duplicate_event_ids == summary.events == warehouse.count_events(day)
        _totals, scored = build_event_metrics(warehouse, day)
        assert scored == stored == warehouse.count_partition(EVENT_METRICS_TABLE, day)
        build_slice_metrics(warehouse, day, ["env", "feature_flag", "tenant"], 0.35)
        read += summary.events
    assert read + warehouse.count_unplaced_events() == len(rows)


PROPERTY = settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@PROPERTY
@given(rows=ROWS)
def test_any_rows_on_sqlite_complete_the_day_and_are_accounted_for(tmp_path_factory, rows):
    path = tmp_path_factory.mktemp("property") / "w.sqlite"
    warehouse = WarehouseResource(url=f"sqlite:///{path}", chunk_size=4)
    try:
        check_rows(warehouse, postgres=False, rows=rows)
    finally:
        warehouse.dispose()


@pytest.mark.postgres
@settings(PROPERTY, max_examples=10)
@given(rows=ROWS)
def test_any_rows_on_postgres_complete_the_day_and_are_accounted_for(
    postgres_url, postgres_schema, rows
):
    warehouse = WarehouseResource(url=postgres_url, db_schema=postgres_schema, chunk_size=4)
    try:
        check_rows(warehouse, postgres=True, rows=rows)
    finally:
        warehouse.dispose()
