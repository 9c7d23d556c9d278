"""Shared fixtures. PostgreSQL tests skip when no server is reachable, except under CI.

Under pytest-xdist (`make test` runs `pytest -n auto --dist loadgroup`) each worker gets
a PostgreSQL database of its own, so what tests keep in the database's public schema (the
Dagster instance's tables, a cache opened by URL) is never shared between workers.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from datetime import date
from typing import Any

import pytest
import sqlalchemy as sa

from seer_pipelines.defs.resources.evaluator import EvaluatorResource
from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.demo.source_table import write_events
from seer_pipelines.demo.synthetic import generate_events
from seer_testing.fake_batches import BatchBehaviour, FakeBatchServer
from seer_testing.fake_judge import FakeJudgeServer

POSTGRES_URL = os.environ.get(
    "SEER_TEST_POSTGRES_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/test"
)


def _postgres_unreachable_reason() -> str | None:
    engine = sa.create_engine(POSTGRES_URL, connect_args={"connect_timeout": 3})
    try:
        with engine.connect() as connection:
            connection.execute(sa.text("select 1"))
    except Exception as error:
        return f"PostgreSQL not reachable at {POSTGRES_URL}: {str(error).splitlines()[0]}"
    finally:
        engine.dispose()
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The `slow` tests first (stable order otherwise): with --dist loadgroup each worker
    starts on one of them, and the rest of the suite runs beside them."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """URL of the test database; fails instead of skipping when CI=true.

    Under pytest-xdist, a database of the worker's own on the same server, dropped at the
    end of the session.
    """
    reason = _postgres_unreachable_reason()
    if reason:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{reason} (CI=true: Postgres tests must run)")
        pytest.skip(reason)
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        yield POSTGRES_URL
        return
    url = sa.engine.make_url(POSTGRES_URL)
    # Unique per session too: another checkout's suite may run on the same server.
    name = f"{url.database}_{worker}_{uuid.uuid4().hex[:8]}"
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            connection.execute(sa.text(f'create database "{name}"'))
        yield url.set(database=name).render_as_string(hide_password=False)
    finally:
        with engine.connect() as connection:
            connection.execute(sa.text(f'drop database if exists "{name}" with (force)'))
        engine.dispose()


@pytest.fixture
def postgres_schema(postgres_url: str) -> Iterator[str]:
    """A fresh schema in the test database, dropped afterwards, so tests never collide."""
    schema = f"seer_test_{uuid.uuid4().hex[:10]}"
    engine = sa.create_engine(postgres_url)
    with engine.begin() as connection:
        connection.execute(sa.text(f'create schema "{schema}"'))
    try:
        yield schema
    finally:
        with engine.begin() as connection:
            connection.execute(sa.text(f'drop schema "{schema}" cascade'))
        engine.dispose()


@pytest.fixture
def batch_server() -> Iterator[FakeBatchServer]:
    """The fake Batch API over a judge without gold; each batch is in progress for one poll."""
    with FakeBatchServer(FakeJudgeServer()) as running:
        running.default_behaviour = BatchBehaviour(polls_in_progress=1)
        yield running


@pytest.fixture
def batch_evaluator(batch_server: FakeBatchServer) -> Callable[..., EvaluatorResource]:
    """Makes the openai evaluator in batch mode on `batch_server`; options such as
    `budget_usd` go to the resource."""

    def make(**options: Any) -> EvaluatorResource:
        return EvaluatorResource(
            kind="openai",
            mode="batch",
            api_key="test-key",
            base_url=batch_server.base_url,
            max_retries=0,
            **options,
        )

    return make


@pytest.fixture
def one_day_warehouse(tmp_path) -> Iterator[Callable[..., WarehouseResource]]:
    """Makes a SQLite warehouse holding one synthetic day of events (disposed afterwards).

    `make(day, events_per_day=..., chunk_size=..., **options)`: the options go to
    `generate_events`.
    """
    made: list[WarehouseResource] = []

    def make(
        day: date, *, events_per_day: int, chunk_size: int | None = None, **options: Any
    ) -> WarehouseResource:
        url = f"sqlite:///{tmp_path / 'warehouse.sqlite'}"
        resource = (
            WarehouseResource(url=url)
            if chunk_size is None
            else WarehouseResource(url=url, chunk_size=chunk_size)
        )
        records = list(generate_events(1, end_day=day, events_per_day=events_per_day, **options))
        write_events(resource.get_engine(), records, table_name=resource.resolved_events_table())
        made.append(resource)
        return resource

    yield make
    for resource in made:
        resource.dispose()
