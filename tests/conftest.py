"""Shared fixtures. PostgreSQL tests skip when no server is reachable, except under CI."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

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


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """URL of the test database; fails instead of skipping when CI=true."""
    reason = _postgres_unreachable_reason()
    if reason:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{reason} (CI=true: Postgres tests must run)")
        pytest.skip(reason)
    return POSTGRES_URL


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
