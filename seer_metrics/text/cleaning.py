"""The one rule for text no database accepts, and the JSON reading the event parser needs.

A lone surrogate (`"\\ud800"`, which JSON and PostgreSQL `json` columns can hold) and a NUL
character become U+FFFD, the replacement character (`clean_text`); inside JSON values, keys
too, and NaN and infinities become null (`clean_json`). Nearly every value needs no change,
so each function first checks cheaply that it needs none.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

_UNENCODABLE = re.compile("[\x00\ud800-\udfff]")
_UNENCODABLE_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")


_scan_json = json.JSONDecoder().scan_once


def load_json(text: str) -> Any:
    """`json.loads(text)` without its per-call overhead when `text` is one JSON value with
    no space around it; anything else, errors too, is left to `json.loads`."""
    try:
        value, end = _scan_json(text, 0)
    except (StopIteration, json.JSONDecodeError):
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


def json_text_is_clean(text: str) -> bool:
    """Whether JSON `text` decodes to strings `clean_text` leaves as they are: it holds no
    such character, nor the escape of one (a false alarm only costs the cleaning)."""
    if "\x00" in text if text.isascii() else _UNENCODABLE.search(text):
        return False
    return "\\u" not in text or _UNENCODABLE_ESCAPE.search(text) is None


def clean_text(text: str) -> str:
    """`text` with lone surrogates and NUL replaced by U+FFFD: UTF-8 cannot encode the
    first, PostgreSQL text cannot hold the second, so either would fail a whole write."""
    if type(text) is str and text.isascii() and "\x00" not in text:
        return text  # nearly all text: this costs a third of the regex's search
    return _UNENCODABLE.sub("\ufffd", text)


def clean_json(value: Any) -> Any:
    """A JSON value any database accepts, at any depth: NaN and infinities (which Python's
    json reads and writes, but JSON and PostgreSQL do not) become None, and strings (keys
    too) go through `clean_text`. Always a new dict or list, never the one given."""
    kind = type(value)
    if kind is str:
        return clean_text(value)
    if kind is dict or kind is list:
        # Nearly every value needs no change: copy it, then check all its text at once.
        strings: list[str] = []
        copy = _plain_copy(value, strings)
        if copy is not None and _UNENCODABLE.search("".join(strings)) is None:
            return copy
    return _rebuild_json(value)


PLAIN_SCALARS = frozenset({str, int, bool, type(None)})


_NOT_PLAIN = object()


def _plain_copy(value: dict[Any, Any] | list[Any], strings: list[str]) -> Any:
    """A copy of a tree of dicts with str keys, lists, str, int, bool, None and finite
    floats, its strings added to `strings`; None when it holds anything else."""
    if type(value) is dict:
        copied: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                return None
            strings.append(key)
            item = _plain_item(item, strings)
            if item is _NOT_PLAIN:
                return None
            copied[key] = item
        return copied
    listed = []
    for item in value:
        item = _plain_item(item, strings)
        if item is _NOT_PLAIN:
            return None
        listed.append(item)
    return listed


def _plain_item(item: Any, strings: list[str]) -> Any:
    """`item` (copied when a container) if plain, else `_NOT_PLAIN`."""
    kind = type(item)
    if kind is str:
        strings.append(item)
        return item
    if kind is dict or kind is list:
        copied = _plain_copy(item, strings)
        return _NOT_PLAIN if copied is None else copied
    if kind is float:
        return item if math.isfinite(item) else _NOT_PLAIN
    return item if kind in PLAIN_SCALARS else _NOT_PLAIN


def _rebuild_json(value: Any) -> Any:
    """`clean_json` the long way, for values that need a change or hold other types."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, Mapping):
        return {
            clean_text(key) if isinstance(key, str) else key: _rebuild_json(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_rebuild_json(item) for item in value]
    return value
