"""Content-addressed keys, and the stores behind them, for requirement lists and judgments.

K must depend on the query only: the requirement key covers the normalised query, the
evaluator model and the prompt version, nothing else. A judgment key adds the context
(ids and texts in ranked order), so a repeated event re-uses its stored judgment.
"""

from __future__ import annotations

import hashlib
import json
import logging
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import (
    JSON,
    Column,
    DateTime,
    Engine,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    delete,
    exc,
    func,
    insert,
    select,
)
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from seer_metrics.events import RetrievalEvent
from seer_metrics.judgment import Judgment, Requirement

logger = logging.getLogger(__name__)


def normalise_text(text: str) -> str:
    """Unicode NFKC, case-folded, whitespace collapsed: the form used for keys and quotes."""
    # str.split() splits on exactly the characters `\s` matches, and drops the ends' runs.
    return " ".join(unicodedata.normalize("NFKC", text).split()).casefold()


# What json.dumps(parts, ensure_ascii=False, separators=(",", ":"), sort_keys=True) builds
# on every call: building it once saves a third of a key's cost.
_CANONICAL_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True)


# A string as `_CANONICAL_JSON` writes it (and only a string: anything else is a TypeError).
_quote = json.encoder.encode_basestring


def _digest(parts: object) -> str:
    return _sha256_hex(_CANONICAL_JSON.encode(parts))


def _sha256_hex(canonical: str) -> str:
    # Parsed events hold no lone surrogate (`clean_text`); an event built by hand may, and
    # its key must still be a digest, not an exception.
    return hashlib.sha256(canonical.encode("utf-8", errors="surrogatepass")).hexdigest()


def requirements_key(query: str, model: str, prompt_version: str) -> str:
    return _digest(["requirements", normalise_text(query), model, prompt_version])


_REMEMBERED_KEY = "_judgment_key"


def judgment_key(event: RetrievalEvent, model: str, prompt_version: str) -> str:
    """The key of `event`'s judgment, remembered on the event (whose fields are frozen): a
    run asks for it to look the judgment up, to store it, and again for the event's row."""
    remembered = event.__dict__.get(_REMEMBERED_KEY)
    if remembered is not None and remembered[0] == model and remembered[1] == prompt_version:
        return remembered[2]
    task = normalise_text(event.task)
    try:  # the text _digest would hash, joined here at half its cost: all of it is strings
        context = ",".join([f"[{_quote(item.id)},{_quote(item.text)}]" for item in event.context])
        canonical = (
            f'["judgment",{_quote(task)},[{context}],{_quote(model)},{_quote(prompt_version)}]'
        )
    except TypeError:  # not a string: _digest's own encoder says how it is written
        context = [[item.id, item.text] for item in event.context]
        canonical = _CANONICAL_JSON.encode(["judgment", task, context, model, prompt_version])
    key = _sha256_hex(canonical)
    object.__setattr__(event, _REMEMBERED_KEY, (model, prompt_version, key))
    return key


# --- Stores -------------------------------------------------------------------------------

DEFAULT_CACHE_PATH = Path(".seer") / "judgments.sqlite"

_metadata = MetaData()

requirement_cache_table = Table(
    "seer_requirement_cache",
    _metadata,
    Column("key", String(64), primary_key=True),
    Column("query", Text, nullable=False),
    Column("model", String(200), nullable=False),
    Column("prompt_version", String(100), nullable=False),
    Column("requirements", JSON, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

judgment_cache_table = Table(
    "seer_judgment_cache",
    _metadata,
    Column("key", String(64), primary_key=True),
    Column("event_id", Text, nullable=False),
    Column("model", String(200), nullable=False),
    Column("prompt_version", String(100), nullable=False),
    Column("judgment", JSON, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

# What an endpoint takes for a model (`evaluators.llm.structured_output`): learned by one
# run, the start of the next. Unlike the caches, a later finding replaces an earlier one.
endpoint_profile_table = Table(
    "seer_endpoint_profiles",
    _metadata,
    Column("key", String(64), primary_key=True),
    Column("endpoint", Text, nullable=False),
    Column("model", String(200), nullable=False),
    Column("output_mode", String(40), nullable=False),
    Column("cap_field", String(40), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

# Keys per IN (...) clause: far below every backend's bound-parameter limit.
_KEY_BATCH = 500


@dataclass(frozen=True)
class RequirementsRecord:
    """A phase-1 requirement list, stored once per (normalised query, model, prompt)."""

    key: str
    query: str
    model: str
    prompt_version: str
    requirements: tuple[Requirement, ...]


@dataclass(frozen=True)
class JudgmentRecord:
    """A finished judgment of one event, stored under its content hash."""

    key: str
    event_id: str
    model: str
    prompt_version: str
    judgment: Judgment


class JudgmentStore:
    """SQLAlchemy-backed cache of requirement lists and judgments.

    Takes an engine (in the pipelines and `seer evaluate --cache URL`, the one the
    warehouse engine factory builds, so URLs map to drivers in one place) or the path of
    a local SQLite file (the default is `.seer/judgments.sqlite`). Creates its two tables
    when missing. Every `put_*` call commits before returning, so a crashed run keeps
    everything stored up to then; a key already present is left as it is (first writer
    wins), which keeps concurrent writers from different processes safe.
    """

    def __init__(self, engine_or_path: Engine | str | Path | None = None) -> None:
        self.engine = _as_engine(DEFAULT_CACHE_PATH if engine_or_path is None else engine_or_path)
        try:
            _metadata.create_all(self.engine, checkfirst=True)
        except exc.SQLAlchemyError:
            # Another process may have created the tables between the check and the
            # CREATE; a second pass sees them. A real problem raises again here.
            _metadata.create_all(self.engine, checkfirst=True)

    def get_requirements(
        self, keys: Iterable[str], created_before: datetime | None = None
    ) -> dict[str, tuple[Requirement, ...]]:
        """Stored requirement lists for those keys that have one (stored before
        `created_before`, when given: the cache as it was then)."""
        rows = self._select(requirement_cache_table, "requirements", keys, created_before)
        return {
            key: tuple(Requirement(str(item["id"]), str(item["text"])) for item in value)
            for key, value in rows.items()
        }

    def put_requirements(self, records: Iterable[RequirementsRecord]) -> int:
        """Store requirement lists; returns how many rows were offered."""
        now = datetime.now(UTC)
        rows = [
            {
                "key": record.key,
                "query": record.query,
                "model": record.model,
                "prompt_version": record.prompt_version,
                "requirements": [{"id": r.id, "text": r.text} for r in record.requirements],
                "created_at": now,
            }
            for record in records
        ]
        return self._insert_missing(requirement_cache_table, rows)

    def get_judgments(
        self, keys: Iterable[str], created_before: datetime | None = None
    ) -> dict[str, Judgment]:
        """Stored judgments for those keys that have one (stored before `created_before`,
        when given)."""
        rows = self._select(judgment_cache_table, "judgment", keys, created_before)
        return {key: Judgment.from_dict(value) for key, value in rows.items()}

    def put_judgments(self, records: Iterable[JudgmentRecord]) -> int:
        """Store judgments; returns how many rows were offered."""
        now = datetime.now(UTC)
        rows = [
            {
                "key": record.key,
                "event_id": record.event_id,
                "model": record.model,
                "prompt_version": record.prompt_version,
                "judgment": record.judgment.to_dict(),
                "created_at": now,
            }
            for record in records
        ]
        return self._insert_missing(judgment_cache_table, rows)

    def get_endpoint_profile(self, endpoint: str, model: str) -> tuple[str, str] | None:
        """(output mode, cap field) last learned for `model` at `endpoint`, or None."""
        key = _digest(["endpoint", endpoint, model])
        table = endpoint_profile_table
        with self.engine.connect() as connection:
            row = connection.execute(
                select(table.c.output_mode, table.c.cap_field).where(table.c.key == key)
            ).first()
        return None if row is None else (str(row[0]), str(row[1]))

    def put_endpoint_profile(
        self, endpoint: str, model: str, output_mode: str, cap_field: str
    ) -> None:
        """Remember what `endpoint` takes for `model`, replacing what was known."""
        table = endpoint_profile_table
        row = {
            "key": _digest(["endpoint", endpoint, model]),
            "endpoint": endpoint,
            "model": model,
            "output_mode": output_mode,
            "cap_field": cap_field,
            "updated_at": datetime.now(UTC),
        }
        changed = {name: row[name] for name in ("output_mode", "cap_field", "updated_at")}
        dialect = self.engine.dialect.name
        with self.engine.begin() as connection:
            if dialect in ("sqlite", "postgresql"):
                insert_of = sqlite_insert if dialect == "sqlite" else postgresql_insert
                statement = insert_of(table).on_conflict_do_update(
                    index_elements=["key"], set_=changed
                )
                connection.execute(statement, [row])
            else:
                connection.execute(delete(table).where(table.c.key == row["key"]))
                connection.execute(insert(table), [row])

    def count(self) -> dict[str, int]:
        """Rows per table, for summaries."""
        with self.engine.connect() as connection:
            return {
                table.name: int(
                    connection.execute(select(func.count()).select_from(table)).scalar_one()
                )
                for table in (requirement_cache_table, judgment_cache_table)
            }

    def _select(
        self,
        table: Table,
        column: str,
        keys: Iterable[str],
        created_before: datetime | None = None,
    ) -> dict[str, Any]:
        wanted = list(dict.fromkeys(keys))
        found: dict[str, Any] = {}
        if not wanted:
            return found
        with self.engine.connect() as connection:
            for start in range(0, len(wanted), _KEY_BATCH):
                batch = wanted[start : start + _KEY_BATCH]
                statement = select(table.c.key, table.c[column]).where(table.c.key.in_(batch))
                if created_before is not None:
                    statement = statement.where(table.c.created_at < created_before)
                for key, value in connection.execute(statement):
                    found[key] = json.loads(value) if isinstance(value, str) else value
        return found

    def _insert_missing(self, table: Table, rows: list[dict[str, Any]]) -> int:
        unique = list({row["key"]: row for row in rows}.values())
        if not unique:
            return 0
        dialect = self.engine.dialect.name
        with self.engine.begin() as connection:
            for start in range(0, len(unique), _KEY_BATCH):
                batch = unique[start : start + _KEY_BATCH]
                if dialect == "sqlite":
                    statement = sqlite_insert(table).on_conflict_do_nothing(index_elements=["key"])
                    connection.execute(statement, batch)
                elif dialect == "postgresql":
                    statement = postgresql_insert(table).on_conflict_do_nothing(
                        index_elements=["key"]
                    )
                    connection.execute(statement, batch)
                else:
                    existing = set(
                        connection.execute(
                            select(table.c.key).where(table.c.key.in_([r["key"] for r in batch]))
                        ).scalars()
                    )
                    missing = [row for row in batch if row["key"] not in existing]
                    if missing:
                        connection.execute(insert(table), missing)
        return len(unique)


def _as_engine(engine_or_path: Engine | str | Path) -> Engine:
    if isinstance(engine_or_path, Engine):
        return engine_or_path
    text = str(engine_or_path)
    if "://" in text:
        raise ValueError(
            "JudgmentStore takes an engine or a SQLite file path; build the engine of a "
            "database URL with the warehouse engine factory"
        )
    path = Path(text).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    return create_engine(f"sqlite:///{path}")
