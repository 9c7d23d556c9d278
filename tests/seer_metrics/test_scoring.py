"""Per-event metrics: the SPEC's worked example, NULL rules, the vectorised path, nDCG."""

from __future__ import annotations

import math
import random

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import ndcg_score

from seer_metrics import Judgment, RetrievalEvent, score_event, score_events
from seer_metrics.scoring import ndcg_binary, score_inputs


def _event(context, task="q?"):
    return RetrievalEvent.from_record({"event_id": "e", "task": task, "context": context})


def _judgment(support: dict[str, list[str]]) -> Judgment:
    return Judgment.from_dict(
        {
            "requirements": [
                {"id": rid, "text": f"fact {rid}", "supported_by": ids}
                for rid, ids in support.items()
            ]
        }
    )


def test_spec_worked_example():
    event = RetrievalEvent.from_record(
        {
            "task": "Who directed Inception and what is their nationality?",
            "context": [
                {"id": "p1", "text": "Christopher Nolan directed Inception.", "score": 0.95},
                {"id": "p2", "text": "Nolan is British-American.", "score": 0.89},
                {"id": "p3", "text": "Inception released in 2010.", "score": 0.72},
            ],
            "metadata": {"env": "prod", "feature_flag": "retrieval-v2"},
        }
    )
    judgment = Judgment.from_dict(
        {
            "requirements": [
                {"id": "r1", "text": "The director of Inception", "supported_by": ["p1"]},
                {"id": "r2", "text": "The nationality of that director", "supported_by": ["p2"]},
            ]
        }
    )
    score = score_event(event, judgment)
    assert score.recall == 1.0
    assert score.precision == pytest.approx(2 / 3)
    assert round(score.precision, 3) == 0.667
    assert score.f1 == pytest.approx(0.8)
    assert score.ndcg == pytest.approx(1.0)
    assert (score.k, score.n) == (2, 3)
    assert score.cited_ids == ("p1", "p2")
    assert score.missing_requirements == ()


def test_unknown_citations_are_dropped_and_counted():
    event = _event([{"id": "p1", "text": "a"}, {"id": "p2", "text": "b"}])
    score = score_event(event, _judgment({"r1": ["p9"], "r2": ["p2", "p7"]}))
    assert score.hallucinated_citations == 2
    assert score.recall == 0.5
    assert score.cited_ids == ("p2",)
    assert score.missing_requirements == ("fact r1",)


def test_judgment_from_dict_with_context_ids_restricts():
    judgment = Judgment.from_dict(
        {"requirements": [{"id": "r1", "text": "x", "supported_by": ["p1", "zz"]}]},
        context_ids=["p1"],
    )
    assert judgment.requirements[0].supported_by == ("p1",)
    assert judgment.hallucinated_citations == 1


def test_null_rules():
    ranked = _event([{"id": "p1", "text": "a", "rank": 1}, {"id": "p2", "text": "b", "rank": 2}])
    no_requirements = score_event(ranked, _judgment({}))
    assert no_requirements.recall is None and no_requirements.f1 is None
    assert no_requirements.precision == 0.0
    assert no_requirements.ndcg is None  # nothing cited

    empty_context = score_event(_event([]), _judgment({"r1": []}))
    assert empty_context.precision is None and empty_context.f1 is None
    assert empty_context.recall == 0.0
    assert empty_context.ndcg is None

    unranked = score_event(_event(["a", "b"]), _judgment({"r1": ["2"]}))
    assert unranked.ndcg is None
    assert unranked.recall == 1.0 and unranked.precision == 0.5

    nothing_supported = score_event(ranked, _judgment({"r1": []}))
    assert nothing_supported.f1 == 0.0
    assert nothing_supported.ndcg is None


def test_ndcg_penalises_a_cited_item_ranked_low():
    event = _event([{"id": f"p{i}", "text": "t", "rank": i} for i in range(1, 4)])
    score = score_event(event, _judgment({"r1": ["p3"]}))
    assert score.ndcg == pytest.approx(1 / math.log2(4))


def test_ndcg_matches_sklearn_on_random_lists():
    rng = np.random.default_rng(7)
    for _ in range(1000):
        n = int(rng.integers(1, 25))
        relevance = (rng.random(n) < rng.uniform(0.05, 0.9)).astype(int)
        if relevance.sum() == 0:
            relevance[rng.integers(0, n)] = 1
        if n == 1:
            continue  # sklearn refuses single-document lists
        # The list is in ranked order: give sklearn strictly decreasing scores.
        scores = np.arange(n, 0, -1, dtype=float)
        expected = ndcg_score([relevance], [scores], ignore_ties=True)
        assert ndcg_binary(relevance.astype(bool).tolist()) == pytest.approx(expected)


def _random_case(rng: random.Random):
    n = rng.randint(0, 12)
    ranked = rng.random() < 0.7
    context = []
    for i in range(1, n + 1):
        item = {"id": f"p{i}", "text": f"passage {i}"}
        if ranked:
            item["score"] = rng.choice([0.1, 0.5, 0.5, 0.9, rng.random()])
        context.append(item)
    if not ranked and n and rng.random() < 0.5:
        context = [item["text"] for item in context]
    ids = [f"p{i}" for i in range(1, n + 1)] if context and isinstance(context[0], dict) else []
    if context and isinstance(context[0], str):
        ids = [str(i) for i in range(1, n + 1)]
    k = rng.randint(0, 5)
    support = {
        f"r{j}": rng.sample([*ids, "ghost"], rng.randint(0, min(3, len(ids) + 1))) for j in range(k)
    }
    return _event(context), _judgment(support)


def test_vectorised_scores_agree_with_score_event_on_thousands_of_events():
    rng = random.Random(11)
    cases = [_random_case(rng) for _ in range(3000)]
    frame = pd.DataFrame([score_inputs(event, judgment) for event, judgment in cases])
    vectorised = score_events(frame)
    for index, (event, judgment) in enumerate(cases):
        expected = score_event(event, judgment)
        row = vectorised.iloc[index]
        for metric in ("recall", "precision", "f1", "ndcg"):
            value = getattr(expected, metric)
            if value is None:
                assert math.isnan(row[metric]), (index, metric)
            else:
                assert row[metric] == pytest.approx(value), (index, metric)
        assert row["cited_count"] == len(expected.cited_ids)


def test_score_events_names_missing_columns():
    with pytest.raises(KeyError, match="cited_positions"):
        score_events(pd.DataFrame({"k": [1], "n": [1]}))


def test_score_events_on_empty_frame():
    frame = pd.DataFrame(
        {
            "k": [],
            "n": [],
            "supported_requirements": [],
            "cited_positions": [],
            "has_ranking": [],
        }
    )
    assert score_events(frame).empty


@st.composite
def events_and_judgments(draw):
    n = draw(st.integers(0, 8))
    scores = draw(st.lists(st.floats(0, 1), min_size=n, max_size=n))
    context = [{"id": f"p{i}", "text": f"t{i}", "score": s} for i, s in enumerate(scores)]
    ids = [item["id"] for item in context]
    k = draw(st.integers(0, 5))
    support = {
        f"r{j}": draw(st.lists(st.sampled_from([*ids, "ghost"]), max_size=3, unique=True))
        for j in range(k)
    }
    return context, support


@settings(max_examples=200, deadline=None)
@given(events_and_judgments(), st.randoms(use_true_random=False))
def test_properties_bounds_and_order_independence(case, rng):
    context, support = case
    score = score_event(_event(context), _judgment(support))
    for metric in ("recall", "precision", "f1", "ndcg"):
        value = getattr(score, metric)
        assert value is None or 0.0 <= value <= 1.0 + 1e-12
    shuffled = list(context)
    rng.shuffle(shuffled)
    reordered = score_event(_event(shuffled), _judgment(support))
    assert reordered.recall == score.recall
    assert reordered.precision == score.precision


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 10), st.data())
def test_property_ndcg_is_one_when_cited_items_lead(n, data):
    cited = data.draw(st.integers(1, n))
    context = [{"id": f"p{i}", "text": "t", "rank": i} for i in range(1, n + 1)]
    support = {"r1": [f"p{i}" for i in range(1, cited + 1)]}
    assert score_event(_event(context), _judgment(support)).ndcg == pytest.approx(1.0)


def test_score_events_does_not_need_a_unique_index():
    event = _event([{"id": f"p{i}", "text": "t", "rank": i} for i in range(1, 4)])
    first = score_inputs(event, _judgment({"r1": ["p1"]}))
    second = score_inputs(event, _judgment({"r1": ["p3"], "r2": []}))
    scores = score_events(pd.DataFrame([first, second], index=[0, 0]))
    assert list(scores.index) == [0, 0]
    assert scores["ndcg"].tolist() == pytest.approx([1.0, 0.5])
    assert scores["recall"].tolist() == [1.0, 0.5]


@pytest.mark.parametrize("ordering", ["score", "rank"])
def test_score_event_ndcg_matches_sklearn_on_unordered_contexts(ordering):
    """The event's own ordering (by score or rank, items logged in any order) is used."""
    rng = np.random.default_rng(3)
    for _ in range(500):
        n = int(rng.integers(2, 15))
        keys = rng.permutation(n) + 1  # distinct ranks, or distinct scores below
        relevance = (rng.random(n) < 0.4).astype(int)
        if relevance.sum() == 0:
            relevance[rng.integers(0, n)] = 1
        context = []
        for i in range(n):
            item = {"id": f"p{i}", "text": "t"}
            item[ordering] = int(keys[i]) if ordering == "rank" else float(keys[i]) / n
            context.append(item)
        cited = [f"p{i}" for i in range(n) if relevance[i]]
        score = score_event(_event(context), _judgment({"r1": cited}))
        sklearn_scores = -keys if ordering == "rank" else keys
        expected = ndcg_score([relevance], [sklearn_scores.astype(float)], ignore_ties=True)
        assert score.ndcg == pytest.approx(expected)
