"""One engine factory for every database Seer talks to, and identifier validation.

The resources, the judgment store and the command line all build their engine here, so a
`postgresql://` URL means psycopg2 everywhere (SQLAlchemy 2.1 maps it to psycopg 3, which
is not installed), PostgreSQL sessions run in UTC and SQLite files get WAL.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from seer_metrics.text.redaction import redact_url, register_url_secrets

DEFAULT_WAREHOUSE_PATH = Path(".seer") / "warehouse.sqlite"

# Plain SQL identifiers only: no quotes, dots or spaces can reach a statement.
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


class WarehouseConfigError(ValueError):
    """A warehouse setting (URL, table or column name) that cannot be used."""


def validate_identifier(value: str, setting: str) -> str:
    """Return `value` if it is a plain SQL identifier, else raise naming the setting."""
    if not isinstance(value, str) or not _IDENTIFIER.match(value):
        raise WarehouseConfigError(
            f"{setting}={value!r} is not a valid identifier "
            "(letters, digits and underscores, not starting with a digit, at most 63 chars)"
        )
    return value


def default_warehouse_url(base: Path | None = None) -> str:
    """The local SQLite warehouse: `.seer/warehouse.sqlite` under `base` (default: cwd)."""
    path = ((base or Path.cwd()) / DEFAULT_WAREHOUSE_PATH).resolve()
    return f"sqlite:///{path}"


def normalise_url(url: str) -> str:
    """Make `postgresql://` use psycopg2: SQLAlchemy 2.1 maps it to psycopg 3, not installed."""
    url = url.strip()
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg2://" + url[len(prefix) :]
    return url


def location_url(location: str | Path) -> str:
    """A SQLAlchemy URL for `location`: a URL as is, a file path as a SQLite file."""
    text = str(location)
    if "://" in text:
        return normalise_url(text)
    return f"sqlite:///{Path(text).expanduser()}"


def create_warehouse_engine(
    url: str | Path, schema: str | None = None, setting: str = "SEER_WAREHOUSE_URL / url"
) -> sa.Engine:
    """An engine for `url` (a SQLAlchemy URL, or a path to a SQLite file).

    SQLite gets WAL so a streaming read and writes can overlap (with synchronous=NORMAL,
    WAL's safe setting that does not sync every commit), and its file's directory is
    created. On PostgreSQL the session runs in UTC and, with `schema`, searches that
    schema first, so tables created by other components on this engine (the judgment
    cache) land there. `setting` names the option in errors.
    """
    url = location_url(url)
    register_url_secrets(url)  # its password is hidden in every error text from now on
    try:
        parsed = sa.engine.make_url(url)
    except Exception as error:
        raise WarehouseConfigError(
            f"{setting} is not a SQLAlchemy URL: {redact_url(url)} ({error})"
        ) from None
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database
        if database and database != ":memory:" and not database.startswith("file:"):
            Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(parsed, connect_args={"timeout": 60})

        @sa.event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            # In WAL mode NORMAL never corrupts the file and syncs at checkpoints, not at
            # every commit (a power cut may lose the last commits, which a re-run redoes):
            # a day stages thousands of chunks, each its own commit.
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA busy_timeout=60000")
            cursor.close()

        return engine
    connect_args: dict[str, Any] = {}
    if parsed.get_backend_name() == "postgresql":
        # Day boundaries are UTC whatever the server's TimeZone setting. Options given in
        # the URL (`?options=-csearch_path%3Dx`) are kept: connect_args would replace them.
        given = parsed.query.get("options")
        given = " ".join(given) if isinstance(given, tuple) else given
        options = " ".join(part for part in (given, "-c timezone=UTC") if part)
        if schema:
            options += f" -c search_path={validate_identifier(schema, 'db_schema')},public"
        connect_args["options"] = options
        parsed = parsed.difference_update_query(["options"])
    return sa.create_engine(parsed, connect_args=connect_args, pool_pre_ping=True)
