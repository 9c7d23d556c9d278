"""Retrieval events: parsing warehouse rows into a validated, ranked context.

Bad rows are never dropped silently: parsing raises `InvalidEventError` with a stable
reason code (stored in the `reason` column) and a message that names the field at fault.

Text that no database or UTF-8 encoder accepts is cleaned by one rule (`cleaning.clean_text`):
a lone surrogate (`"\\ud800"`, which JSON and PostgreSQL `json` columns can hold) and a
NUL character become U+FFFD, the replacement character, in the event id, the task,
passage ids and texts, and metadata keys and values.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, TypeVar

from seer_metrics.text.cleaning import (
    PLAIN_SCALARS,
    clean_json,
    clean_text,
    json_text_is_clean,
    load_json,
)

# Statuses of events left unjudged on purpose: outside the day's sample, or past its budget.
NOT_SAMPLED = "not_sampled"
SKIPPED_BUDGET = "skipped_budget"


class InvalidEventError(ValueError):
    """A row that cannot be scored; `code` is a stable machine-readable reason."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message

    @property
    def reason(self) -> str:
        """One line for the `reason` column."""
        return f"{self.code}: {self.message}"


@dataclass(frozen=True)
class ContextItem:
    """One retrieved passage. `position` is its 1-based place in the list as logged."""

    id: str
    text: str
    position: int
    rank: float | None = None
    score: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RetrievalEvent:
    """A validated retrieval event; `context` is in ranked order (best first)."""

    event_id: str
    task: str
    context: tuple[ContextItem, ...]
    metadata: Mapping[str, Any] = field(default_factory=dict)
    event_ts: datetime | None = None
    duplicate_ids: int = 0

    @property
    def n(self) -> int:
        return len(self.context)

    @property
    def context_ids(self) -> tuple[str, ...]:
        return tuple(item.id for item in self.context)

    @property
    def has_ranking(self) -> bool:
        """nDCG is defined only when the retriever logged a rank or a score."""
        return any(item.rank is not None or item.score is not None for item in self.context)

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> RetrievalEvent:
        """Parse one warehouse row or JSONL object; raises `InvalidEventError` on bad input."""
        if type(record) is not dict and not isinstance(record, Mapping):
            raise InvalidEventError(
                "record_not_object", f"event must be a JSON object, got {_type_name(record)}"
            )
        event_id = _parse_event_id(record)
        task = record.get("task")
        if task is None:
            raise InvalidEventError("task_missing", "field 'task' is missing")
        if not isinstance(task, str):
            raise InvalidEventError(
                "task_not_string", f"'task' must be a string, got {_type_name(task)}"
            )
        if not task.strip():
            raise InvalidEventError("task_empty", "'task' is empty")
        task = clean_text(task)
        context, duplicates = parse_context(record.get("context", _MISSING))
        metadata = _parse_metadata(record.get("metadata"))
        event_ts = parse_timestamp(record.get("event_ts"))
        fields = {
            "event_id": event_id,
            "task": task.strip(),
            "context": context,
            "metadata": metadata,
            "event_ts": event_ts,
            "duplicate_ids": duplicates,
        }
        return _new_frozen(cls, fields) if cls is RetrievalEvent else cls(**fields)


_MISSING = object()
_Frozen = TypeVar("_Frozen")


def derive_event_id(record: Mapping[str, Any]) -> str:
    """Stable id for tables without one: a hash of the row's content."""
    payload = {
        key: record.get(key) for key in ("event_ts", "task", "context", "metadata") if key in record
    }
    canonical = json.dumps(payload, sort_keys=True, default=str, separators=(",", ":"))
    return "h_" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:24]


def _parse_event_id(record: Mapping[str, Any]) -> str:
    raw = record.get("event_id")
    if type(raw) is str and (stripped := raw.strip()):
        return clean_text(stripped)
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return derive_event_id(record)
    if isinstance(raw, bool) or not isinstance(raw, str | int):
        raise InvalidEventError(
            "event_id_invalid", f"'event_id' must be a string or integer, got {_type_name(raw)}"
        )
    return clean_text(str(raw).strip())


def parse_context(raw: Any) -> tuple[tuple[ContextItem, ...], int]:
    """Parse `string[]` or `{text, id?, rank?, score?}[]` (a list or its JSON text).

    Returns the items in ranked order and the number of duplicate ids that were renamed.
    """
    if raw is _MISSING or raw is None:
        raise InvalidEventError("context_missing", "field 'context' is missing")
    if isinstance(raw, bytes | bytearray):
        raw = raw.decode("utf-8", errors="replace")
    if isinstance(raw, str):
        if not raw.lstrip().startswith(("[", "{")):
            # Plain text (a JSON file's string, or a text column without a JSON list in it)
            # is a string where a list belongs, not broken JSON.
            raise InvalidEventError(
                "context_not_list", f"'context' must be a list, got the string {_excerpt(raw)}"
            )
        clean = json_text_is_clean(raw)
        try:
            raw = load_json(raw)
        except json.JSONDecodeError as error:
            message = error.msg.removesuffix(" at")
            raise InvalidEventError(
                "context_not_json",
                f"'context' is JSON text that does not parse ({message} at character "
                f"{error.pos + 1})",
            ) from None
    else:
        clean = False
    if type(raw) is not list and (isinstance(raw, Mapping | str) or not isinstance(raw, Sequence)):
        raise InvalidEventError(
            "context_not_list", f"'context' must be a list, got {_type_name(raw)}"
        )
    items = [_parse_item(entry, position, clean) for position, entry in enumerate(raw, start=1)]
    duplicates = 0
    if len({item.id for item in items}) < len(items):
        items, duplicates = _rename_duplicates(items)
    ranks = [item.rank for item in items]
    if None not in ranks and ranks == sorted(ranks):  # in rank order as logged: nothing moves
        return tuple(items), duplicates
    return tuple(rank_items(items)), duplicates


def _rename_duplicates(parsed: list[ContextItem]) -> tuple[list[ContextItem], int]:
    """`parsed` with each repeated id made unique ("p1#2"), and how many were renamed."""
    # Literal ids are never renamed away from, so a citation of "p1#2" means that item.
    taken = {item.id for item in parsed}
    seen: set[str] = set()
    items: list[ContextItem] = []
    duplicates = 0
    for item in parsed:
        if item.id in seen:
            duplicates += 1
            suffix = 2
            while f"{item.id}#{suffix}" in taken:
                suffix += 1
            unique = f"{item.id}#{suffix}"
            taken.add(unique)
            item = ContextItem(unique, item.text, item.position, item.rank, item.score, item.extra)
        seen.add(item.id)
        items.append(item)
    return items, duplicates


def rank_items(items: Sequence[ContextItem]) -> list[ContextItem]:
    """Order by rank (1 = top) when any item has one, else by score (higher first).

    Items lacking the key go after those that have it; ties keep list order.
    """
    if any(item.rank is not None for item in items):
        return sorted(items, key=lambda i: (i.rank is None, i.rank or 0.0, i.position))
    if any(item.score is not None for item in items):
        return sorted(items, key=lambda i: (i.score is None, -(i.score or 0.0), i.position))
    return list(items)


_ITEM_KEYS = {"text", "id", "rank", "score"}
_NUMBERS = frozenset({int, float})
_MAX_FLOAT = sys.float_info.max


def _parse_item(entry: Any, position: int, clean: bool = False) -> ContextItem:
    """The common well-formed item, parsed with few checks; anything else goes to
    `_parse_item_checked`, which gives the same result or raises the reason. `clean`: its
    text is known to need no `clean_text` (it came from JSON text without such characters)."""
    if type(entry) is dict:
        text, raw_id = entry.get("text"), entry.get("id")
        rank, score = entry.get("rank"), entry.get("score")
        if type(raw_id) is str:
            item_id = raw_id.strip() or str(position)
        elif raw_id is None:
            item_id = str(position)
        else:
            item_id = str(raw_id) if type(raw_id) is int else None
        if (
            item_id is not None
            and type(text) is str
            and text.strip()
            and (rank is None or (type(rank) in _NUMBERS and 1 <= rank <= _MAX_FLOAT))
            and (score is None or (type(score) in _NUMBERS and abs(score) <= _MAX_FLOAT))
        ):
            extra = {} if entry.keys() <= _ITEM_KEYS else _item_extra(entry)
            if not clean:
                item_id, text = clean_text(item_id), clean_text(text)
            rank = None if rank is None else float(rank)
            score = None if score is None else float(score)
            fields = {"id": item_id, "text": text, "position": position, "rank": rank}
            fields["score"], fields["extra"] = score, extra
            return _new_frozen(ContextItem, fields)
    elif type(entry) is str and entry.strip():
        text = entry if clean else clean_text(entry)
        fields = {"id": str(position), "text": text, "position": position, "rank": None}
        fields["score"], fields["extra"] = None, {}
        return _new_frozen(ContextItem, fields)
    return _parse_item_checked(entry, position)


def _new_frozen(cls: type[_Frozen], fields: dict[str, Any]) -> _Frozen:
    """`cls(**fields)` for a frozen dataclass given every field, without its __init__'s one
    guarded attribute set per field: on a day of events they cost more than the parsing."""
    instance = object.__new__(cls)
    object.__setattr__(instance, "__dict__", fields)
    return instance


def _item_extra(entry: Mapping[str, Any]) -> dict[str, Any]:
    """An item's keys besides text, id, rank and score, cleaned."""
    extra = {key: value for key, value in entry.items() if key not in _ITEM_KEYS}
    return clean_json(extra) if extra else extra


def _parse_item_checked(entry: Any, position: int) -> ContextItem:
    where = f"context item {position}"
    if isinstance(entry, str):
        if not entry.strip():
            raise InvalidEventError("item_text_empty", f"{where} has empty text")
        return ContextItem(id=str(position), text=clean_text(entry), position=position)
    if not isinstance(entry, Mapping):
        raise InvalidEventError(
            "item_not_text_or_object",
            f"{where} must be a string or an object, got {_type_name(entry)}",
        )
    if "text" not in entry or entry["text"] is None:
        raise InvalidEventError("item_text_missing", f"{where} has no 'text'")
    text = entry["text"]
    if not isinstance(text, str):
        raise InvalidEventError(
            "item_text_not_string", f"{where}: 'text' must be a string, got {_type_name(text)}"
        )
    if not text.strip():
        raise InvalidEventError("item_text_empty", f"{where} has empty text")
    raw_id = entry.get("id")
    if raw_id is None or (isinstance(raw_id, str) and not raw_id.strip()):
        item_id = str(position)
    elif isinstance(raw_id, bool) or not isinstance(raw_id, str | int):
        raise InvalidEventError(
            "item_id_invalid",
            f"{where}: 'id' must be a string or integer, got {_type_name(raw_id)}",
        )
    else:
        item_id = clean_text(str(raw_id).strip())
    rank = _parse_number(entry.get("rank"), "rank", where)
    if rank is not None and rank < 1:
        raise InvalidEventError("rank_invalid", f"{where}: 'rank' must be >= 1, got {rank:g}")
    score = _parse_number(entry.get("score"), "score", where)
    return ContextItem(item_id, clean_text(text), position, rank, score, _item_extra(entry))


def _parse_number(value: Any, name: str, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidEventError(
            f"{name}_not_number", f"{where}: '{name}' must be a number, got {_type_name(value)}"
        )
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise InvalidEventError(f"{name}_not_finite", f"{where}: '{name}' is {value!r}")
    return number


def _parse_metadata(raw: Any) -> dict[str, Any]:
    if raw is None:
        return {}
    if isinstance(raw, bytes | bytearray):
        raw = raw.decode("utf-8", errors="replace")
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        text = raw
        try:
            raw = load_json(text)
        except json.JSONDecodeError as error:
            raise InvalidEventError(
                "metadata_not_json", f"'metadata' is not valid JSON ({error.msg})"
            ) from None
        flat = type(raw) is dict and set(map(type, raw.values())) <= PLAIN_SCALARS
        if flat and json_text_is_clean(text):  # a new dict of clean text: nothing to change
            return raw
    if not isinstance(raw, Mapping):
        raise InvalidEventError(
            "metadata_not_object", f"'metadata' must be an object, got {_type_name(raw)}"
        )
    return clean_json(raw if type(raw) is dict else dict(raw))


# The warehouse writer passes every JSON value it writes through this name.
finite_json = clean_json


def parse_timestamp(raw: Any) -> datetime | None:
    """Accept datetimes, ISO-8601 strings and epoch seconds; naive values are taken as UTC."""
    if type(raw) is datetime and raw.tzinfo is None:  # what most warehouses give
        return raw.replace(tzinfo=UTC)
    if raw is None or raw == "":
        return None
    if isinstance(raw, datetime):
        value = raw
    elif isinstance(raw, bool):
        raise InvalidEventError("event_ts_invalid", "'event_ts' must be a timestamp, got bool")
    elif isinstance(raw, int | float | Decimal):  # Decimal: epochs from NUMERIC columns
        raw = raw if isinstance(raw, int) else float(raw)
        if not math.isfinite(raw):
            raise InvalidEventError("event_ts_invalid", f"'event_ts' is {raw!r}")
        try:
            value = datetime.fromtimestamp(raw, tz=UTC)
        except (OverflowError, OSError, ValueError):
            raise InvalidEventError(
                "event_ts_invalid",
                f"'event_ts' {raw!r} is out of range for epoch seconds (milliseconds?)",
            ) from None
    elif isinstance(raw, str):
        text = raw.strip().replace("Z", "+00:00") if raw.strip().endswith("Z") else raw.strip()
        try:
            value = datetime.fromisoformat(text)
        except ValueError:
            raise InvalidEventError(
                "event_ts_invalid", f"'event_ts' is not an ISO-8601 timestamp: {raw[:40]!r}"
            ) from None
    else:
        raise InvalidEventError(
            "event_ts_invalid", f"'event_ts' must be a timestamp, got {_type_name(raw)}"
        )
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise InvalidEventError(
            "event_ts_invalid", f"'event_ts' {raw!s:.40} is out of range in UTC"
        ) from None


def _excerpt(text: str, limit: int = 40) -> str:
    """`text` quoted for a reason, cut to `limit` characters."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "list"
    return type(value).__name__
