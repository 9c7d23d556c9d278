"""The warehouse package: one engine factory, placing rows on days, clean text on write."""

from __future__ import annotations

import json

import sqlalchemy as sa

from seer_metrics.cache import JudgmentStore
from seer_pipelines.cli import main
from seer_pipelines.warehouse.engine import create_warehouse_engine, location_url

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
