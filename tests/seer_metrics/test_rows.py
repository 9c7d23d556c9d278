"""Event-metric and passage rows built from stored judgments' parts (`judgment_parts`)
against the object path they replace (`Judgment.from_dict`, `score_events`), on edge
cases: NaN and NULL usage, int and unicode ids, repeated and unknown citations,
malformed judgments (same errors), and the running totals over the rows."""

from __future__ import annotations

import math
import random
import struct
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd
import pytest

from seer_metrics.judgment import InvalidJudgmentError, Judgment, Requirement, judgment_parts
from seer_metrics.rows import USAGE_COLUMNS, event_metric_rows, passage_rows
from seer_metrics.scoring import METRICS, score_events
from seer_metrics.totals import ScoreTotals

ODD_IDS = ["p1", "é", "\u0000nul", "\ud800lone", "𝔘", "", " p1 ", "1"]


def _reference_metric_rows(judgments: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The object path: a `Judgment` per ok row, metrics from a DataFrame."""
    inputs, ok_index, rows = [], [], []
    for index, record in enumerate(judgments):
        n = _reference_defined(record.get("n"))
        row = {
            "event_id": record["event_id"],
            "event_ts": record.get("event_ts"),
            "status": record["status"],
            "reason": record.get("reason") if record["status"] != "ok" else None,
            "n": None if n is None else int(n),
            "metadata": record.get("metadata") or {},
            "stratum": record.get("stratum"),
            **{column: _reference_defined(record.get(column)) for column in USAGE_COLUMNS},
            **dict.fromkeys(METRICS),
        }
        if record["status"] == "ok" and record.get("judgment") is not None:
            judgment = Judgment.from_dict(record["judgment"])
            ranked_ids = [str(pair[0]) for pair in record["ranked_context"]]
            cited = judgment.cited_ids
            inputs.append(
                {
                    "k": judgment.k,
                    "n": len(ranked_ids),
                    "supported_requirements": sum(1 for r in judgment.requirements if r.supported),
                    "cited_positions": [
                        i for i, pid in enumerate(ranked_ids, start=1) if pid in cited
                    ],
                    "has_ranking": bool(record.get("has_ranking")),
                }
            )
            ok_index.append(index)
            row.update(
                k=judgment.k,
                n=len(ranked_ids),
                cited_ids=[pid for pid in ranked_ids if pid in cited],
                missing_requirements=[r.text for r in judgment.requirements if not r.supported],
                hallucinated_citations=judgment.hallucinated_citations,
                unverified_citations=judgment.unverified_citations,
            )
        rows.append(row)
    if inputs:
        scores = score_events(pd.DataFrame(inputs))
        for metric in METRICS:
            values = scores[metric].to_numpy(dtype=float)
            for position, index in enumerate(ok_index):
                value = values[position]
                rows[index][metric] = float(value) if np.isfinite(value) else None
    return rows


def _reference_passage_rows(judgments: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for record in judgments:
        if record["status"] != "ok" or record.get("judgment") is None:
            continue
        judgment = Judgment.from_dict(record["judgment"])
        for position, (passage_id, logged_position) in enumerate(record["ranked_context"], start=1):
            supporting = [r.id for r in judgment.requirements if str(passage_id) in r.supported_by]
            rows.append(
                {
                    "event_id": record["event_id"],
                    "position": position,
                    "logged_position": int(logged_position),
                    "passage_id": str(passage_id),
                    "cited": bool(supporting),
                    "supported_requirements": supporting,
                }
            )
    return rows


def _reference_defined(value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value


def _assert_identical(actual: Any, expected: Any, path: str = "") -> None:
    """Equal, of the same types, floats bit for bit, dict keys in the same order."""
    assert type(actual) is type(expected), (path, actual, expected)
    if isinstance(expected, float):
        assert struct.pack("d", actual) == struct.pack("d", expected), (path, actual, expected)
    elif isinstance(expected, dict):
        assert list(actual) == list(expected), path
        for key in expected:
            _assert_identical(actual[key], expected[key], f"{path}.{key}")
    elif isinstance(expected, list | tuple):
        assert len(actual) == len(expected), path
        for index, (left, right) in enumerate(zip(actual, expected, strict=True)):
            _assert_identical(left, right, f"{path}[{index}]")
    else:
        assert actual == expected, (path, actual, expected)


def _random_record(rng: random.Random, index: int) -> dict[str, Any]:
    status = rng.choice(["ok"] * 6 + ["error", "invalid", "not_sampled", "skipped_budget"])
    n = rng.randint(0, 9)
    ids = rng.sample([*ODD_IDS, *(f"q{i}" for i in range(12))], n)
    ranked = [
        [passage_id, rng.choice([position, position + 1, 0])]
        for position, passage_id in enumerate(ids)
    ]
    requirements = []
    for number in range(rng.randint(0, 4)):
        pool = [*ids, "ghost", "p1"]
        support = [rng.choice(pool) for _ in range(rng.randint(0, 3))]  # may repeat
        requirement: dict[str, Any] = {
            "text": rng.choice(["fact", "", "ü\u0000x"]),
            "supported_by": support,
        }
        if rng.random() < 0.9:
            requirement["id"] = rng.choice([f"r{number + 1}", f"req-{number}"])
        requirements.append(requirement)
    judgment: dict[str, Any] = {"requirements": requirements}
    if rng.random() < 0.7:
        judgment["hallucinated_citations"] = rng.choice([0, 2, 1.0, "3", None, True])
        judgment["unverified_citations"] = rng.choice([0, 1, None])
    return {
        "event_id": f"e{index}",
        "event_ts": rng.choice([None, datetime(2026, 3, 4, 1, 2, 3, tzinfo=UTC)]),
        "status": status,
        "reason": None if status == "ok" else f"{status}: why",
        "judgment": rng.choice([judgment] * 5 + [None]) if status == "ok" else None,
        "ranked_context": ranked,
        "has_ranking": rng.choice([True, False, None]),
        "n": rng.choice([n, float(n), math.nan, None]),
        "metadata": rng.choice([None, {}, {"env": "prod", "nested": {"a": [1, None]}}]),
        "stratum": rng.choice([None, "env=prod"]),
        "cache_hit": rng.choice([True, False, None, math.nan]),
        "model_calls": rng.choice([0, 1, None, math.nan, 2.0]),
        "prompt_tokens": rng.choice([0, 120, None, np.float64("nan")]),
        "completion_tokens": rng.choice([0, 30, None]),
        "cost_usd": rng.choice([0.0, 0.00123, None, math.nan, -0.0, rng.random() / 100]),
    }


def _random_records(seed: int, count: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [_random_record(rng, index) for index in range(count)]


@pytest.mark.parametrize("seed", range(6))
def test_rows_match_the_object_path_on_random_edge_cases(seed):
    records = _random_records(seed, 400)
    # Requirement ids repeated by chance make `from_dict` raise: those go in the error test.
    records = [record for record in records if _parses(record)]
    _assert_identical(event_metric_rows(records), _reference_metric_rows(records))
    _assert_identical(passage_rows(records), _reference_passage_rows(records))


def _parses(record: dict[str, Any]) -> bool:
    if record["judgment"] is None:
        return True
    try:
        Judgment.from_dict(record["judgment"])
    except InvalidJudgmentError:
        return False
    return True


def test_int_passage_ids_and_logged_positions_are_read_as_the_object_path_reads_them():
    record = {
        "event_id": "e",
        "status": "ok",
        "judgment": {
            "requirements": [
                {"id": 7, "text": "a", "supported_by": [3, "3", "x"]},
                {"text": "b", "supported_by": [4]},
            ],
            "hallucinated_citations": 1.9,
        },
        "ranked_context": [[3, 1.0], ["4", "2"], [5, 3]],
        "has_ranking": 1,
        "n": 3,
    }
    _assert_identical(event_metric_rows([record]), _reference_metric_rows([record]))
    _assert_identical(passage_rows([record]), _reference_passage_rows([record]))
    assert passage_rows([record])[0]["supported_requirements"] == ["7"]


@pytest.mark.parametrize(
    "judgment",
    [
        [],
        {"requirements": None},
        {"requirements": ["r1"]},
        {"requirements": [{"id": "r1", "text": 3}]},
        {"requirements": [{"id": "r1", "text": "t", "supported_by": "p1"}]},
        {"requirements": [{"id": "r1", "text": "t", "supported_by": [True]}]},
        {"requirements": [{"id": "r1", "text": "t", "supported_by": [["p1"]]}]},
        {"requirements": [{"id": "r1", "text": "a"}, {"id": "r1", "text": "b"}]},
        {"requirements": [{"text": "a"}, {"id": "r1", "text": "b"}]},
    ],
)
def test_malformed_judgments_raise_what_from_dict_raises(judgment):
    with pytest.raises(InvalidJudgmentError) as expected:
        Judgment.from_dict(judgment)
    record = {"event_id": "e", "status": "ok", "judgment": judgment, "ranked_context": []}
    for build in (judgment_parts, lambda data: event_metric_rows([record]), passage_rows):
        with pytest.raises(InvalidJudgmentError) as raised:
            build(judgment if build is judgment_parts else [record])
        assert str(raised.value) == str(expected.value)


def test_judgment_parts_hold_what_from_dict_holds():
    judgments = [
        {"requirements": []},
        {"requirements": [{"id": "r1", "text": "t", "supported_by": ["p1", "p1", "\ud800"]}]},
        {"requirements": [{"id": "", "text": "t"}], "hallucinated_citations": "2"},
        {"requirements": [{"id": "r1", "text": "t", "supported_by": []}], "extra": {"x": 1}},
        {"requirements": [{"id": None, "text": "t", "supported_by": [1]}]},
        {"requirements": [{"id": "r1", "text": "t", "supported_by": ["a"]}]}
        | {"hallucinated_citations": None, "unverified_citations": 2.5},
    ]
    for data in judgments:
        judgment = Judgment.from_dict(data)
        ids, texts, supports, hallucinated, unverified = judgment_parts(data)
        assert ids == [r.id for r in judgment.requirements]
        assert texts == [r.text for r in judgment.requirements]
        # Repeats may stay on the direct path: the same ids, in the same order.
        assert [list(dict.fromkeys(s)) for s in supports] == [
            list(r.supported_by) for r in judgment.requirements
        ]
        assert (hallucinated, unverified) == (
            judgment.hallucinated_citations,
            judgment.unverified_citations,
        )
        assert type(hallucinated) is int and type(unverified) is int


def test_restricted_to_keeps_a_judgment_whose_citations_are_all_known():
    judgment = Judgment((Requirement("r1", "t", ("p1", "p2")), Requirement("r2", "u")), 1, 2)
    assert judgment.restricted_to(["p2", "p1", "p3"]) is judgment
    dropped = judgment.restricted_to(iter(["p1"]))
    assert dropped == Judgment((Requirement("r1", "t", ("p1",)), Requirement("r2", "u")), 2, 2)
    listed = Judgment((Requirement("r1", "t", ["p1"]),))  # type: ignore[arg-type]
    assert listed.restricted_to(["p1"]).requirements[0].supported_by == ("p1",)


def test_score_events_dcg_is_pandas_groupby_sum_bit_for_bit():
    """The ndcg sums equal the DataFrame groupby sums they replace, to the last bit."""
    rng = np.random.default_rng(5)
    cited = [
        sorted(rng.choice(60, size=int(rng.integers(0, 40)), replace=False) + 1) for _ in range(500)
    ]
    frame = pd.DataFrame(
        {
            "k": rng.integers(0, 5, 500),
            "n": [max(c, default=0) + 1 for c in cited],
            "supported_requirements": rng.integers(0, 5, 500),
            "cited_positions": [[int(p) for p in c] for c in cited],
            "has_ranking": rng.random(500) < 0.8,
        }
    )
    positions = frame["cited_positions"].explode().dropna()
    per_row = (1.0 / np.log2(positions.astype(float) + 1.0)).groupby(level=0).sum()
    dcg = np.zeros(len(frame))
    dcg[per_row.index.to_numpy()] = per_row.to_numpy()
    counts = frame["cited_positions"].map(len).to_numpy()
    ideal = np.concatenate([[0.0], np.cumsum(1.0 / np.log2(np.arange(2, counts.max() + 2)))])
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = np.where(ideal[counts] > 0, dcg / ideal[counts], np.nan)
    expected = np.where(frame["has_ranking"], expected, np.nan)
    np.testing.assert_array_equal(score_events(frame)["ndcg"].to_numpy(), expected)


def _reference_totals(rows: list[dict[str, Any]]) -> ScoreTotals:
    totals = ScoreTotals()
    for row in rows:
        totals.add(row)
    return totals


def test_add_all_matches_add_row_by_row_bit_for_bit():
    rows = event_metric_rows([r for r in _random_records(9, 2000) if _parses(r)])
    for start in range(0, len(rows), 333):
        expected = _reference_totals(rows[: start + 333])
        totals = ScoreTotals()
        for chunk_start in range(0, start + 333, 333):
            totals.add_all(rows[chunk_start : min(chunk_start + 333, start + 333)])
        _assert_identical(vars(totals), vars(expected))


@pytest.mark.parametrize(
    "odd",
    [
        {"status": "ok", "recall": "0.5"},
        {"status": "ok", "model_calls": "3", "cost_usd": math.inf},
        {"status": "error", "prompt_tokens": 2.0**60, "recall": "not read"},
        {"status": "ok"},  # columns left out read as None
        {"status": "ok", "completion_tokens": np.int64(5), "precision": np.float64("nan")},
    ],
)
def test_add_all_reads_odd_values_as_add_does(odd):
    rows = event_metric_rows([r for r in _random_records(3, 50) if _parses(r)])
    mixed = [*rows[:20], {**dict.fromkeys(METRICS), **odd}, *rows[20:]]
    totals = ScoreTotals()
    totals.add_all(mixed)
    _assert_identical(vars(totals), vars(_reference_totals(mixed)))


def test_add_all_fails_where_add_fails_with_the_same_rows_counted():
    rows = [{"status": "ok", "recall": 1.0}, {"recall": 0.5}, {"status": "ok", "recall": 0.0}]
    totals, expected = ScoreTotals(), ScoreTotals()
    with pytest.raises(KeyError):
        totals.add_all(rows)
    with pytest.raises(KeyError):
        for row in rows:
            expected.add(row)
    assert vars(totals) == vars(expected)
    assert (totals.events, totals.sums["recall"], totals.counts["recall"]) == (2, 1.0, 1)
