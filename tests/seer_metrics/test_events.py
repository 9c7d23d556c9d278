"""Parsing of retrieval events: shapes, ids, ordering, and every bad input."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seer_metrics import InvalidEventError, RetrievalEvent
from seer_metrics.events import derive_event_id


def _record(**overrides):
    record = {
        "event_id": "e1",
        "event_ts": "2026-11-29T10:00:00Z",
        "task": "Who directed Inception?",
        "context": [{"id": "p1", "text": "Christopher Nolan directed Inception."}],
        "metadata": {"env": "prod"},
    }
    record.update(overrides)
    return record


def test_string_list_context_gets_positional_ids():
    event = RetrievalEvent.from_record(_record(context=["alpha", "beta", "gamma"]))
    assert event.context_ids == ("1", "2", "3")
    assert [item.text for item in event.context] == ["alpha", "beta", "gamma"]
    assert not event.has_ranking


def test_context_as_json_text_is_parsed():
    context = json.dumps([{"id": "a", "text": "x", "rank": 2}, {"id": "b", "text": "y", "rank": 1}])
    event = RetrievalEvent.from_record(_record(context=context))
    assert event.context_ids == ("b", "a")
    assert event.has_ranking


def test_objects_without_id_get_their_position_and_extra_keys_are_kept():
    event = RetrievalEvent.from_record(
        _record(context=[{"text": "x", "source": "wiki"}, {"id": "q", "text": "y"}])
    )
    assert event.context_ids == ("1", "q")
    assert event.context[0].extra == {"source": "wiki"}


def test_duplicate_ids_are_made_unique_and_counted():
    event = RetrievalEvent.from_record(
        _record(
            context=[
                {"id": "p1", "text": "a"},
                {"id": "p1", "text": "b"},
                {"id": "p1", "text": "c"},
                {"id": "p1#2", "text": "d"},
            ]
        )
    )
    assert len(set(event.context_ids)) == 4
    assert event.context_ids == ("p1", "p1#3", "p1#4", "p1#2")
    assert event.duplicate_ids == 2


def test_rank_orders_before_score_and_unranked_items_go_last():
    event = RetrievalEvent.from_record(
        _record(
            context=[
                {"id": "a", "text": "a", "score": 0.9},
                {"id": "b", "text": "b", "rank": 2, "score": 0.1},
                {"id": "c", "text": "c", "rank": 1},
            ]
        )
    )
    assert event.context_ids == ("c", "b", "a")


def test_score_orders_higher_first_and_ties_keep_list_order():
    event = RetrievalEvent.from_record(
        _record(
            context=[
                {"id": "a", "text": "a", "score": 0.5},
                {"id": "b", "text": "b", "score": 0.9},
                {"id": "c", "text": "c", "score": 0.5},
                {"id": "d", "text": "d"},
            ]
        )
    )
    assert event.context_ids == ("b", "a", "c", "d")


def test_missing_event_id_is_derived_stably_from_the_row():
    record = _record()
    del record["event_id"]
    first = RetrievalEvent.from_record(record)
    second = RetrievalEvent.from_record(dict(record))
    assert first.event_id == second.event_id == derive_event_id(record)
    other = RetrievalEvent.from_record({**record, "task": "Something else?"})
    assert other.event_id != first.event_id


def test_timestamps_are_utc():
    naive = RetrievalEvent.from_record(_record(event_ts="2026-11-29T10:00:00"))
    offset = RetrievalEvent.from_record(_record(event_ts="2026-11-29T12:00:00+02:00"))
    assert naive.event_ts == offset.event_ts == datetime(2026, 11, 29, 10, tzinfo=UTC)


def test_epoch_seconds_from_numeric_columns_are_accepted():
    from decimal import Decimal

    expected = datetime(2026, 11, 29, 10, tzinfo=UTC)
    for raw in (1795946400, 1795946400.0, Decimal("1795946400.000")):
        assert RetrievalEvent.from_record(_record(event_ts=raw)).event_ts == expected


def test_non_finite_numbers_in_metadata_and_extras_become_null():
    event = RetrievalEvent.from_record(
        _record(
            metadata='{"env": "prod", "latency_ms": NaN, "nested": {"x": [Infinity, 1]}}',
            context=[{"text": "a", "debug": {"sim": math.nan}}],
        )
    )
    assert event.metadata == {"env": "prod", "latency_ms": None, "nested": {"x": [None, 1]}}
    assert event.context[0].extra == {"debug": {"sim": None}}


def test_metadata_as_json_text_and_empty_context_are_valid():
    event = RetrievalEvent.from_record(_record(metadata='{"tenant": "acme"}', context=[]))
    assert event.metadata == {"tenant": "acme"}
    assert event.n == 0


BAD_INPUTS = [
    ("record_not_object", ["not", "a", "record"]),
    ("task_missing", {"context": ["x"]}),
    ("task_not_string", _record(task=42)),
    ("task_empty", _record(task="")),
    ("task_empty", _record(task="   \n")),
    ("context_missing", {"task": "q?"}),
    ("context_missing", _record(context=None)),
    ("context_not_json", _record(context="[{'text': 'single quotes'}]")),
    ("context_not_list", _record(context="not json at all")),
    ("context_not_list", _record(context={"text": "an object"})),
    ("context_not_list", _record(context="42")),
    ("context_not_list", _record(context='"a json string"')),
    ("context_not_list", _record(context=7)),
    ("item_not_text_or_object", _record(context=[3.5])),
    ("item_not_text_or_object", _record(context=[None])),
    ("item_not_text_or_object", _record(context=[["nested"]])),
    ("item_text_missing", _record(context=[{"id": "p1"}])),
    ("item_text_missing", _record(context=[{"id": "p1", "text": None}])),
    ("item_text_not_string", _record(context=[{"text": 12}])),
    ("item_text_empty", _record(context=[{"text": "  "}])),
    ("item_text_empty", _record(context=["ok", ""])),
    ("item_id_invalid", _record(context=[{"id": ["p"], "text": "x"}])),
    ("item_id_invalid", _record(context=[{"id": True, "text": "x"}])),
    ("rank_not_number", _record(context=[{"text": "x", "rank": "first"}])),
    ("rank_not_number", _record(context=[{"text": "x", "rank": True}])),
    ("rank_invalid", _record(context=[{"text": "x", "rank": 0}])),
    ("rank_not_finite", _record(context=[{"text": "x", "rank": math.inf}])),
    ("score_not_finite", _record(context=[{"text": "x", "score": math.nan}])),
    ("score_not_number", _record(context=[{"text": "x", "score": "0.9"}])),
    ("metadata_not_object", _record(metadata=["env", "prod"])),
    ("metadata_not_object", _record(metadata="[1, 2]")),
    ("metadata_not_json", _record(metadata="{env: prod}")),
    ("event_ts_invalid", _record(event_ts="yesterday")),
    ("event_ts_invalid", _record(event_ts=[2026])),
    ("event_ts_invalid", _record(event_ts=1764460800000)),  # milliseconds
    ("event_ts_invalid", _record(event_ts="0001-01-01T00:00:00+05:00")),
    ("rank_not_finite", _record(context=[{"text": "x", "rank": 10**400}])),
    ("score_not_finite", _record(context=[{"text": "x", "score": -(10**400)}])),
    ("event_id_invalid", _record(event_id={"id": 1})),
]


@pytest.mark.parametrize(("code", "record"), BAD_INPUTS)
def test_bad_inputs_raise_a_reason_code_and_a_message(code, record):
    with pytest.raises(InvalidEventError) as caught:
        RetrievalEvent.from_record(record)
    assert caught.value.code == code
    assert caught.value.message
    assert "\n" not in caught.value.reason
    assert caught.value.reason.startswith(code)


def test_bad_item_message_names_its_position():
    with pytest.raises(InvalidEventError, match="context item 2"):
        RetrievalEvent.from_record(_record(context=["fine", {"id": "p2"}]))


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(["id", "text", "rank", "score", "x"]), children, max_size=4
        )
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    st.fixed_dictionaries(
        {},
        optional={
            "event_id": json_values,
            "event_ts": json_values,
            "task": json_values,
            "context": json_values | st.lists(st.text(max_size=10) | json_values, max_size=4),
            "metadata": json_values,
        },
    )
)
def test_any_json_record_either_parses_or_raises_invalid_event_error(record):
    try:
        event = RetrievalEvent.from_record(record)
    except InvalidEventError as error:
        assert error.code and "\n" not in error.reason
    else:
        assert event.task.strip()
        assert len(set(event.context_ids)) == event.n


def test_text_no_database_accepts_is_cleaned_by_one_rule() -> None:
    from seer_metrics.events import RetrievalEvent
    from seer_metrics.text.cleaning import clean_json, clean_text

    assert clean_text("a\u0000b\ud800c\udfff") == "a\ufffdb\ufffdc\ufffd"
    assert clean_text("plain é 😀") == "plain é 😀"
    assert clean_json({"k\u0000": ["v\ud800", float("nan"), 1]}) == {
        "k\ufffd": ["v\ufffd", None, 1]
    }
    event = RetrievalEvent.from_record(
        {
            "event_id": "e\u0000",
            "task": "q\ud800",
            "context": [{"id": "p\u0000", "text": "t\udfff", "note": "x\u0000"}],
            "metadata": {"env": "prod\u0000"},
        }
    )
    assert (event.event_id, event.task) == ("e\ufffd", "q\ufffd")
    (item,) = event.context
    assert (item.id, item.text, dict(item.extra)) == ("p\ufffd", "t\ufffd", {"note": "x\ufffd"})
    assert event.metadata == {"env": "prod\ufffd"}
