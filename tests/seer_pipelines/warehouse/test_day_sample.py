"""The warehouse's count and sample of a day equal Seer's own rule, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections import Counter
from datetime import date, datetime, timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from seer_metrics.events import InvalidEventError, RetrievalEvent
from seer_metrics.slices import event_stratum
from seer_metrics.spend.sampling import SamplingSettings, allocate, plan_sample
from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.demo.synthetic import generate_events
from seer_pipelines.warehouse.day_sample import (
    WarehouseSamplingError,
    count_day_strata,
    dialect_sql,
    read_day_sample,
)

DAY = date(2026, 11, 29)
KEYS = ("env", "feature_flag")
SETTINGS = SamplingSettings(target=120, minimum_per_stratum=10)


def _records() -> tuple[list[dict], dict]:
    records = list(generate_events(1, end_day=DAY, events_per_day=900, seed=11, invalid_share=0))
    # Repeated ids (the first by event_ts is kept), metadata that is odd but valid JSON.
    later = dict(records[0], event_ts=records[0]["event_ts"] + timedelta(minutes=1))
    records[1]["metadata"] = json.dumps({"env": 3, "feature_flag": True})
    records[2]["metadata"] = json.dumps({"env": None, "feature_flag": {"a": 1}})
    records[3]["metadata"] = ""
    return [*records, dict(later, event_id=records[0]["event_id"] + "-next-day")], later


def _python_sample(records: list[dict], keys: tuple[str, ...] = KEYS) -> tuple[set[str], Counter]:
    """Seer's own rule: valid events, the first per id, the smallest keyed hashes."""
    firsts: dict[str, dict] = {}
    for record in sorted(records, key=lambda r: r["event_ts"]):
        firsts.setdefault(record["event_id"], record)
    events = []
    for record in firsts.values():
        try:
            events.append(RetrievalEvent.from_record(record))
        except InvalidEventError:
            continue
    ids = [event.event_id for event in events]
    strata = [event_stratum(event.metadata, keys) for event in events]
    plan = plan_sample(ids, strata, SETTINGS)
    chosen = plan.selected(ids, strata)
    return {i for i, keep in zip(ids, chosen, strict=True) if keep}, Counter(strata)


def _check_day(
    warehouse: WarehouseResource, records: list[dict], keys: tuple[str, ...] = KEYS
) -> None:
    engine = warehouse.get_engine()
    table, columns = warehouse.events_table_object(), warehouse.source_columns()
    with engine.connect() as connection:
        strata = count_day_strata(connection, table, columns, DAY, keys, SETTINGS.key)
    expected_ids, expected_population = _python_sample(records, keys)
    assert {s.stratum: s.population for s in strata.strata} == dict(expected_population)
    assert strata.rows == len(records)
    assert strata.duplicates == 1
    sizes = allocate({s.stratum: s.population for s in strata.strata}, SETTINGS)
    chunks = list(read_day_sample(engine, table, columns, DAY, keys, SETTINGS.key, sizes, 50))
    chosen = [record for chunk in chunks for record in chunk]
    # Bounded by the populations, the window ranks only rows below a hash bound: the same.
    populations = {s.stratum: s.population for s in strata.strata}
    bounded = read_day_sample(
        engine, table, columns, DAY, keys, SETTINGS.key, sizes, 50, populations
    )
    assert [r for chunk in bounded for r in chunk] == chosen
    assert {record["event_id"] for record in chosen} == expected_ids
    assert len(chosen) == sum(sizes.values()) == SETTINGS.target
    assert all(len(chunk) <= 50 for chunk in chunks)
    times = [RetrievalEvent.from_record(r).event_ts for r in chosen]
    assert times == sorted(times)
    for record in chosen:  # each row carries the stratum Seer would give it
        assert record["stratum"] == event_stratum(record["metadata"], keys)


@pytest.fixture
def sqlite_warehouse(tmp_path):
    resource = WarehouseResource(url=f"sqlite:///{tmp_path / 'warehouse.sqlite'}")
    yield resource
    resource.dispose()


def _fill(warehouse: WarehouseResource, keys: tuple[str, ...] = KEYS) -> list[dict]:
    """The day's rows (no primary key, so an id can repeat) and one of the next day."""
    records, later = _records()
    if keys != KEYS:  # the same values under other key names
        renamed = dict(zip(KEYS, keys, strict=False))
        for record in [*records, later]:
            try:
                metadata = json.loads(record["metadata"])
            except json.JSONDecodeError:
                continue
            if isinstance(metadata, dict):
                metadata = {renamed.get(k, k): v for k, v in metadata.items()}
                record["metadata"] = json.dumps(metadata, ensure_ascii=False)
    records[-1]["event_ts"] = datetime(2026, 11, 30, 0, 0, 1)
    records.append(later)  # records[0]'s id again, a minute later: a duplicate
    engine = warehouse.get_engine()
    schema = warehouse.resolved_schema()
    table = sa.Table(
        "retrieval_events",
        sa.MetaData(schema=schema),
        sa.Column("event_id", sa.Text),
        sa.Column("event_ts", sa.DateTime),
        sa.Column("task", sa.Text),
        sa.Column("context", sa.Text),
        sa.Column("metadata", sa.Text),
    )
    table.create(engine)
    with engine.begin() as connection:
        connection.execute(table.insert(), records)
    return [r for r in records if r["event_ts"].date() == DAY]


def test_the_sqlite_sample_is_seers_sample(sqlite_warehouse) -> None:
    day_records = _fill(sqlite_warehouse)
    _check_day(sqlite_warehouse, day_records)


def test_the_postgres_sample_is_seers_sample(postgres_url, postgres_schema) -> None:
    warehouse = WarehouseResource(url=postgres_url, db_schema=postgres_schema)
    try:
        day_records = _fill(warehouse)
        _check_day(warehouse, day_records)
    finally:
        warehouse.dispose()


# Keys PostgreSQL must quote to name a record column, one it cannot (over 63 bytes: read
# with `->` instead), and the SQL-looking and `=` keys an adversarial user tried.
ODD_KEYS = ("ключ", "drop table x;--", "k=eq", "Env", "tenant_" + "x" * 70)


@pytest.mark.parametrize("keys", [ODD_KEYS[:2], ODD_KEYS[2:4], (ODD_KEYS[4], "ключ")])
def test_odd_slice_keys_sample_as_seer_does(postgres_url, postgres_schema, keys) -> None:
    warehouse = WarehouseResource(url=postgres_url, db_schema=postgres_schema)
    try:
        day_records = _fill(warehouse, keys)
        _check_day(warehouse, day_records, keys)
    finally:
        warehouse.dispose()


def test_odd_slice_keys_sample_as_seer_does_on_sqlite(sqlite_warehouse) -> None:
    day_records = _fill(sqlite_warehouse, ODD_KEYS[:2])
    _check_day(sqlite_warehouse, day_records, ODD_KEYS[:2])


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_large_sample_is_streamed_the_same(
    backend, sqlite_warehouse, request, monkeypatch
) -> None:
    """Past the buffered size the chosen rows are streamed: the same rows, same order."""
    import seer_pipelines.warehouse.day_sample as day_sample

    if backend == "sqlite":
        warehouse = sqlite_warehouse
    else:
        url = request.getfixturevalue("postgres_url")
        warehouse = WarehouseResource(url=url, db_schema=request.getfixturevalue("postgres_schema"))
    try:
        _fill(warehouse)
        engine = warehouse.get_engine()
        table, columns = warehouse.events_table_object(), warehouse.source_columns()
        with engine.connect() as connection:
            strata = count_day_strata(connection, table, columns, DAY, KEYS, SETTINGS.key)
        sizes = allocate({s.stratum: s.population for s in strata.strata}, SETTINGS)

        def sample() -> list[dict]:
            chunks = read_day_sample(engine, table, columns, DAY, KEYS, SETTINGS.key, sizes, 7)
            return [record for chunk in chunks for record in chunk]

        buffered = sample()
        monkeypatch.setattr(day_sample, "_BUFFERED_SAMPLE_ROWS", 0)
        assert sample() == buffered
        assert len(buffered) == SETTINGS.target
    finally:
        if backend != "sqlite":
            warehouse.dispose()


def test_an_unknown_dialect_is_told_what_it_lacks() -> None:
    table = sa.Table("events", sa.MetaData(), sa.Column("event_id", sa.Text))
    dialect = mysql.dialect()
    with pytest.raises(WarehouseSamplingError, match=r"'mysql'.*SHA-256"):
        dialect_sql(table, {"event_id": "event_id"}, dialect)
