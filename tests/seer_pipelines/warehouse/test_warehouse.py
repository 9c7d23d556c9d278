"""The warehouse package: one engine factory, placing rows on days, clean text on write."""

from __future__ import annotations

import json
from datetime import date, timedelta

import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.dialects.postgresql import psycopg2

from seer_metrics.judgment_store import JudgmentStore
from seer_pipelines.cli import main
from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.warehouse.day import canonical_event_id, day_of
from seer_pipelines.warehouse.engine import create_warehouse_engine, location_url
from seer_pipelines.warehouse.schema import (
    EVENT_METRICS_TABLE,
    JUDGMENTS_TABLE,
    PASSAGE_JUDGMENTS_TABLE,
    SLICE_METRICS_TABLE,
    output_tables,
)
from seer_pipelines.warehouse.writer import column_encoder, plain_value, value_encoder
from tests.json_values import joined_texts, json_like_of, texts

DAY = date(2026, 11, 29)
# Days the rows below can be on; every other day's read must find none of them.
NEAR_DAYS = [DAY + timedelta(days=offset) for offset in range(-3, 4)]

EVENT = {
    "event_id": "cached-1",
    "event_ts": "2026-11-29T10:00:00Z",
    "task": "Who directed Inception?",
    "context": [{"id": "p1", "text": "Christopher Nolan directed Inception."}],
}


def test_a_file_path_is_a_sqlite_file_and_postgresql_means_psycopg2(tmp_path) -> None:
    assert location_url(tmp_path / "j.sqlite") == f"sqlite:///{tmp_path / 'j.sqlite'}"
    assert location_url("postgresql://u@h/db") == "postgresql+psycopg2://u@h/db"
    engine = create_warehouse_engine(tmp_path / "deep" / "j.sqlite")
    with engine.connect() as connection:
        assert connection.execute(sa.text("PRAGMA journal_mode")).scalar_one() == "wal"
    engine.dispose()
    assert (tmp_path / "deep" / "j.sqlite").is_file()


def test_seer_evaluate_keeps_its_cache_in_postgresql(
    postgres_url, postgres_schema, tmp_path, capsys
) -> None:
    """A plain postgresql:// URL, as users write it (psycopg 3 is not installed)."""
    events = tmp_path / "events.jsonl"
    events.write_text(json.dumps(EVENT) + "\n", encoding="utf-8")
    plain = postgres_url.replace("postgresql+psycopg2://", "postgresql://")
    url = f"{plain}?options=-csearch_path%3D{postgres_schema}"
    assert main(["evaluate", str(events), "--cache", url]) == 0
    assert "cache hits: 0" in capsys.readouterr().out
    assert main(["evaluate", str(events), "--cache", url]) == 0
    assert "cache hits: 1" in capsys.readouterr().out
    engine = create_warehouse_engine(postgres_url)
    with engine.connect() as connection:
        stored = connection.execute(
            sa.text(f'select count(*) from "{postgres_schema}".seer_judgment_cache')
        ).scalar_one()
    engine.dispose()
    assert stored == 1


def test_the_judgment_store_takes_the_warehouse_engine(postgres_url, postgres_schema) -> None:
    engine = create_warehouse_engine(postgres_url, schema=postgres_schema)
    store = JudgmentStore(engine)
    inspector = sa.inspect(store.engine)
    assert "seer_judgment_cache" in inspector.get_table_names(schema=postgres_schema)
    engine.dispose()


# event_ts values shaped like dates that are not dates, or no timestamp at all.
NOT_A_DAY = [None, "", "2026-11-31T10:00:00Z", "2026-13-28T10:00:00Z", "0000-01-01T00:00:00Z"]
ON_A_DAY = ["2026-11-29T10:00:00Z", "2026-11-29 junk", "2026-11-28T23:30:00-01:00", "1795953600"]


@pytest.mark.parametrize("raw", [*NOT_A_DAY, "yesterday", 1e300, float("nan"), True])
def test_values_on_no_day(raw) -> None:
    assert day_of(raw) is None


def test_values_on_a_day() -> None:
    assert day_of("2026-11-29 junk") == DAY  # stored on that day as invalid
    assert day_of("2026-11-28T23:30:00-01:00") == DAY
    assert day_of(date(2026, 11, 29)) == DAY


def events_table(engine: sa.Engine, schema: str | None, ts_type, id_type=sa.Text) -> sa.Table:
    table = sa.Table(
        "retrieval_events",
        sa.MetaData(schema=schema),
        sa.Column("event_id", id_type),
        sa.Column("event_ts", ts_type),
        sa.Column("task", sa.Text),
        sa.Column("context", sa.Text),
        sa.Column("metadata", sa.Text),
    )
    table.metadata.create_all(engine)
    return table


def insert_timestamps(warehouse: WarehouseResource, ts_type, values: list) -> None:
    engine = warehouse.get_engine()
    table = events_table(engine, warehouse.resolved_schema(), ts_type)
    rows = [
        {"event_id": f"e{i}", "event_ts": value, "task": "q", "context": '["a"]', "metadata": "{}"}
        for i, value in enumerate(values)
    ]
    with engine.begin() as connection:
        connection.execute(
            sa.text(
                f"insert into {table.fullname} (event_id, event_ts, task, context, metadata) "
                "values (:event_id, :event_ts, :task, :context, :metadata)"
            ),
            rows,
        )


def assert_each_row_once(warehouse: WarehouseResource, total: int, unplaced: int) -> None:
    """Every source row is in exactly one day's rows or counted as unplaced."""
    placed = [
        row["event_id"]
        for day in NEAR_DAYS
        for chunk in warehouse.iter_event_chunks(day)
        for row in chunk
    ]
    assert len(placed) == len(set(placed))
    assert sum(warehouse.count_events(day) for day in NEAR_DAYS) == len(placed)
    assert warehouse.count_unplaced_events() == unplaced
    assert len(placed) + unplaced == total


@pytest.fixture
def sqlite_warehouse(tmp_path):
    resource = WarehouseResource(url=f"sqlite:///{tmp_path / 'w.sqlite'}", chunk_size=3)
    yield resource
    resource.dispose()


@pytest.mark.parametrize("ts_type", [sa.Text(), sa.DateTime(timezone=True)])
def test_sqlite_rows_on_no_day_are_counted(sqlite_warehouse, ts_type) -> None:
    values = [*NOT_A_DAY, "yesterday", 1e300, b"2026-11-29", *ON_A_DAY, 1795953600]
    insert_timestamps(sqlite_warehouse, ts_type, values)
    assert_each_row_once(sqlite_warehouse, len(values), unplaced=len(NOT_A_DAY) + 3)


@pytest.fixture
def postgres_warehouse(postgres_url, postgres_schema):
    resource = WarehouseResource(url=postgres_url, db_schema=postgres_schema, chunk_size=3)
    yield resource
    resource.dispose()


@pytest.mark.postgres
def test_postgres_text_rows_on_no_day_are_counted(postgres_warehouse) -> None:
    values = [*NOT_A_DAY, "yesterday", *ON_A_DAY]
    insert_timestamps(postgres_warehouse, sa.Text(), values)
    assert_each_row_once(postgres_warehouse, len(values), unplaced=len(NOT_A_DAY) + 1)


@pytest.mark.postgres
def test_postgres_null_and_infinite_timestamps_are_counted(postgres_warehouse) -> None:
    values = [None, "infinity", "-infinity", "2026-11-29T10:00:00Z", "2026-11-30T00:00:00Z"]
    insert_timestamps(postgres_warehouse, sa.DateTime(timezone=True), values)
    engine = postgres_warehouse.get_engine()
    with engine.begin() as connection:  # insert_timestamps binds text; make them real
        connection.execute(sa.text("update retrieval_events set event_ts = event_ts"))
    assert_each_row_once(postgres_warehouse, len(values), unplaced=3)


@pytest.mark.postgres
def test_postgres_null_and_huge_epochs_are_counted(postgres_warehouse) -> None:
    values = [None, float("nan"), 1e300, -1e20, 1795953600, 1795953600.5]
    insert_timestamps(postgres_warehouse, sa.Float(), values)
    assert_each_row_once(postgres_warehouse, len(values), unplaced=4)


@pytest.mark.parametrize(
    ("raw", "text"),
    [(1.5, "1.5"), ({"b": 1, "a": [True]}, '{"a":[true],"b":1}'), (True, "true"), (7, "7")],
)
def test_non_string_ids_become_their_canonical_json_text(raw, text) -> None:
    assert canonical_event_id(raw) == text
    assert canonical_event_id(None) is None


@pytest.mark.postgres
def test_jsonb_ids_stay_distinct(postgres_warehouse) -> None:
    from sqlalchemy.dialects.postgresql import JSONB

    engine = postgres_warehouse.get_engine()
    table = events_table(engine, postgres_warehouse.resolved_schema(), sa.Text(), JSONB)
    ids = [1.5, {"a": 1}, True, None, "x", 2]
    row = {"event_ts": "2026-11-29T10:00:00Z", "task": "q", "context": '["a"]', "metadata": "{}"}
    with engine.begin() as connection:
        connection.execute(table.insert(), [row | {"event_id": event_id} for event_id in ids])
    read = [r["event_id"] for chunk in postgres_warehouse.iter_event_chunks(DAY) for r in chunk]
    assert sorted(read, key=str) == sorted(["1.5", '{"a":1}', "true", None, "x", "2"], key=str)


POISON = "p\x00\ud800q"  # NUL and a lone surrogate
CLEAN = "p\ufffd\ufffdq"
POISON_ROWS = {
    JUDGMENTS_TABLE: {
        "event_id": POISON,
        "status": "invalid",
        "reason": POISON,
        "metadata": {POISON: POISON, "list": [POISON]},
    },
    EVENT_METRICS_TABLE: {
        "event_id": POISON,
        "status": "invalid",
        "reason": POISON,
        "missing_requirements": [POISON],
        "metadata": {"env": POISON},
    },
    PASSAGE_JUDGMENTS_TABLE: {"event_id": POISON, "position": 1, "passage_id": POISON},
    SLICE_METRICS_TABLE: {"slice": POISON, "slice_key": "env", "slice_value": POISON},
}


def check_poison_is_stored_clean(warehouse: WarehouseResource) -> None:
    for table, row in POISON_ROWS.items():
        with warehouse.partition_writer(table, DAY) as writer:
            writer.write([row])
            assert writer.commit() == 1
        (stored,) = next(warehouse.read_partition_records(table, DAY))
        text_column = "passage_id" if table == PASSAGE_JUDGMENTS_TABLE else "event_id"
        if table == SLICE_METRICS_TABLE:
            text_column = "slice_value"
        assert stored[text_column] == CLEAN
        if table == JUDGMENTS_TABLE:
            assert stored["metadata"] == {CLEAN: CLEAN, "list": [CLEAN]}


def test_sqlite_stores_nul_and_surrogates_clean(sqlite_warehouse) -> None:
    check_poison_is_stored_clean(sqlite_warehouse)


@pytest.mark.postgres
def test_postgres_stores_nul_and_surrogates_clean(postgres_warehouse) -> None:
    check_poison_is_stored_clean(postgres_warehouse)


@settings(max_examples=300, deadline=None)
@given(value=json_like_of(texts | joined_texts))
def test_staged_values_are_what_the_column_types_would_store(value) -> None:
    """The writer's fast encoders give the driver exactly what `plain_value` followed by
    SQLAlchemy's own type processing gives, on both dialects."""
    columns = output_tables(None).staging[JUDGMENTS_TABLE].c
    for dialect in (sqlite_dialect.dialect(), psycopg2.dialect()):
        for column in (columns.metadata, columns.reason, columns.n, columns.event_ts):
            processor = column.type.dialect_impl(dialect).bind_processor(dialect)
            try:
                expected = plain_value(value)
                expected = processor(expected) if processor else expected
            except (TypeError, ValueError) as error:
                with pytest.raises(type(error)):
                    value_encoder(column, dialect)(value)
                continue
            assert value_encoder(column, dialect)(value) == expected


_COLUMN_VALUES = st.lists(
    st.none()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | texts
    | joined_texts
    | st.just(float("nan"))
    | st.booleans(),
    max_size=8,
)


@settings(max_examples=300, deadline=None)
@given(values=_COLUMN_VALUES, uniform=st.sampled_from([None, int, float, str]))
def test_a_column_of_values_is_encoded_as_each_value_would_be(values, uniform) -> None:
    """Whole columns taken at once (integers, floats, clean text) give the driver what
    encoding each value alone gives."""
    if uniform is not None:  # the usual chunk: one type (and NULLs) in the column
        values = [v for v in values if v is None or type(v) is uniform]
    columns = output_tables(None).staging[JUDGMENTS_TABLE].c
    for dialect in (sqlite_dialect.dialect(), psycopg2.dialect()):
        for column in (
            columns.n,
            columns.cost_usd,
            columns.reason,
            columns.has_ranking,
            columns.metadata,
        ):
            encode = value_encoder(column, dialect)
            try:
                expected = [encode(value) for value in values]
            except (TypeError, ValueError) as error:
                with pytest.raises(type(error)):
                    column_encoder(column, dialect)(values)
                continue
            # repr: NaN equals NaN, and 1, 1.0 and True stay apart
            assert repr(column_encoder(column, dialect)(values)) == repr(expected)
