"""The cleaning rule's fast paths give exactly what the long way gives, on every input."""

from __future__ import annotations

import enum
import json
import math
import re
from collections import OrderedDict
from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seer_metrics.events import (
    InvalidEventError,
    RetrievalEvent,
    _parse_item,
    _parse_item_checked,
    _parse_metadata,
    _rename_duplicates,
    parse_context,
    rank_items,
)
from seer_metrics.text.cleaning import clean_json, clean_text, json_text_is_clean, load_json
from tests.json_values import json_like, scalars, texts

_UNENCODABLE = re.compile("[\x00\ud800-\udfff]")


def reference_clean_text(text: str) -> str:
    """`clean_text` as it was before its fast path."""
    return _UNENCODABLE.sub("\ufffd", text)


def reference_clean_json(value: Any) -> Any:
    """`clean_json` as it was before its fast path: one rebuild of the whole value."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, str):
        return reference_clean_text(value)
    if isinstance(value, Mapping):
        return {
            reference_clean_text(key) if isinstance(key, str) else key: reference_clean_json(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [reference_clean_json(item) for item in value]
    return value


def same(left: Any, right: Any) -> bool:
    """Equal, with the same types all the way down (so 1 is not True, nor 1.0)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return list(left) == list(right) and all(
            same(a, b) and same(left[a], right[b]) for a, b in zip(left, right, strict=True)
        )
    if isinstance(left, list):
        return len(left) == len(right) and all(map(same, left, right))
    if isinstance(left, float) and math.isnan(left):
        return math.isnan(right)
    return left == right


@settings(max_examples=500, deadline=None)
@given(json_like)
def test_clean_json_equals_the_rebuild_on_any_value(value) -> None:
    assert same(clean_json(value), reference_clean_json(value))


@settings(max_examples=300, deadline=None)
@given(texts)
def test_clean_text_equals_the_regex_on_any_text(text) -> None:
    assert same(clean_text(text), reference_clean_text(text))


class Label(enum.StrEnum):
    PROD = "prod"


class Level(enum.IntEnum):
    HIGH = 3


class Tagged(dict):
    pass


class Word(str):
    pass


@pytest.mark.parametrize(
    "value",
    [
        {"env": "prod", "tenant": "umbrella"},
        {"env": "prod\x00", "k\ud800": "v"},
        [["p1", 1], ["p2", 2]],
        {"requirements": [{"id": "r1", "supported_by": ["p1"]}], "hallucinated_citations": 0},
        {"deep": [{"a": [1, 2.5, {"b": float("nan")}]}]},
        {"inf": float("inf"), "neg": float("-inf"), "ok": -0.0, "big": 10**40},
        (1, "a\x00", (2,)),
        {1: "one", None: "none", False: "no", 2.5: "float"},
        {"label": Label.PROD, "level": Level.HIGH, "word": Word("w")},
        Tagged(a=1, b=[Word("x")]),
        OrderedDict(a="b\x00"),
        {"when": datetime(2026, 3, 4, tzinfo=UTC), "amount": Decimal("1.5"), "set": {1}},
        {Word("key"): 1, "plain": float("nan")},
        [],
        {},
        "text\x00",
        float("nan"),
        7,
        None,
    ],
)
def test_clean_json_equals_the_rebuild_on_edge_cases(value) -> None:
    cleaned = clean_json(value)
    assert same(cleaned, reference_clean_json(value))
    if isinstance(value, dict | list):
        assert cleaned is not value  # a new container, as the rebuild gives


def test_clean_json_copies_every_container() -> None:
    inner = {"b": ["c"]}
    value = {"a": inner}
    cleaned = clean_json(value)
    cleaned["a"]["b"].append("d")
    assert inner == {"b": ["c"]}


@pytest.mark.parametrize(
    "text",
    [
        '[{"text": "a"}]',
        ' [{"text": "a"}] ',
        '[{"text": "a"}] x',
        "\ufeff[1]",
        '[{"text": "a"',
        '{"a": NaN, "b": Infinity, "c": 1e999}',
        "[1, 2",
        "",
        "   ",
        '"just text"',
    ],
)
def test_load_json_equals_json_loads_results_and_errors(text) -> None:
    try:
        expected = json.loads(text)
    except json.JSONDecodeError as error:
        with pytest.raises(json.JSONDecodeError) as raised:
            load_json(text)
        assert (raised.value.msg, raised.value.pos) == (error.msg, error.pos)
    else:
        assert same(load_json(text), expected)


def strings_in(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [*value, *(text for item in value.values() for text in strings_in(item))]
    if isinstance(value, list):
        return [text for item in value for text in strings_in(item)]
    return []


@settings(max_examples=300, deadline=None)
@given(json_like)
def test_json_text_said_clean_decodes_to_text_that_needs_no_cleaning(value) -> None:
    for text in (json.dumps(value), json.dumps(value, ensure_ascii=False)):
        if json_text_is_clean(text):
            assert not any(_UNENCODABLE.search(string) for string in strings_in(json.loads(text)))


def test_json_text_with_such_a_character_or_its_escape_is_not_clean() -> None:
    for text in ['["a\x00"]', '["\ud800"]', r'["\u0000"]', r'["\uD83D\uDE00"]', '["é\x00"]']:
        assert not json_text_is_clean(text)
    assert json_text_is_clean(r'["plain", "\u00e9", "é 😀"]')


items = st.one_of(
    texts,
    scalars,
    st.dictionaries(
        st.sampled_from(["id", "text", "rank", "score", "note"]),
        scalars | st.integers(min_value=-3, max_value=5) | st.just(10**400),
        max_size=5,
    ),
)


def outcome(parse, *args):
    try:
        return parse(*args)
    except InvalidEventError as error:
        return error.reason


@settings(max_examples=800, deadline=None)
@given(items, st.integers(min_value=1, max_value=5))
def test_the_fast_item_parse_equals_the_checked_one(entry, position) -> None:
    expected = outcome(_parse_item_checked, entry, position)
    assert outcome(_parse_item, entry, position) == expected
    if isinstance(expected, str):
        return
    assert type(expected.rank) is type(outcome(_parse_item, entry, position).rank)


def reference_parse_context(entries: list[Any]) -> Any:
    """The context as parsed before the fast paths: checked items, renamed, then ranked."""
    parsed = [_parse_item_checked(entry, position) for position, entry in enumerate(entries, 1)]
    renamed, duplicates = _rename_duplicates(parsed)
    return tuple(rank_items(renamed)), duplicates


@settings(max_examples=500, deadline=None)
@given(st.lists(items, max_size=5))
def test_a_context_parses_the_same_from_json_text_or_a_list(entries) -> None:
    expected = outcome(reference_parse_context, entries)
    assert outcome(parse_context, entries) == expected
    try:
        text = json.dumps(entries)
    except ValueError:
        return
    assert outcome(parse_context, text) == expected
    assert outcome(parse_context, json.dumps(entries, ensure_ascii=False)) == expected


def test_escaped_nul_and_surrogates_in_json_text_are_cleaned() -> None:
    text = r'[{"id": "p\u0000", "text": "a\ud800b", "rank": 2}, {"text": "c\uDFFF", "rank": 1}]'
    (first, second), duplicates = parse_context(text)
    assert (first.id, first.text) == ("2", "c\ufffd")
    assert (second.id, second.text) == ("p\ufffd", "a\ufffdb")
    assert duplicates == 0
    emoji = r'["\ud83d\ude00 pair", "plain"]'
    assert [item.text for item in parse_context(emoji)[0]] == ["😀 pair", "plain"]


@pytest.mark.parametrize(
    "text",
    [
        '{"env": "prod", "n": 1, "ok": true, "none": null}',
        r'{"env": "pr\u0000d", "k\ud800": "v"}',
        '{"score": NaN, "big": 1e999, "nested": {"x": [Infinity, "a"]}}',
        '{"env": "é", "emoji": "\\ud83d\\ude00"}',
        "{}",
    ],
)
def test_metadata_parses_the_same_from_json_text_or_a_dict(text) -> None:
    assert same(_parse_metadata(text), reference_clean_json(json.loads(text)))
    assert same(_parse_metadata(json.loads(text)), reference_clean_json(json.loads(text)))


def test_a_parsed_event_is_a_plain_frozen_dataclass() -> None:
    record = {"event_id": " e1 ", "task": " q ", "context": '[{"text": "a", "rank": 1}]'}
    event = RetrievalEvent.from_record(record)
    rebuilt = RetrievalEvent(
        event.event_id, event.task, event.context, event.metadata, event.event_ts, 0
    )
    assert event == rebuilt and repr(event) == repr(rebuilt)
    assert event.context[0] == type(event.context[0])("1", "a", 1, 1.0, None, {})
    with pytest.raises(AttributeError):
        event.task = "other"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        event.context[0].text = "other"  # type: ignore[misc]
