"""The synthetic events: deterministic, realistic shapes, one regression where it is said."""

from __future__ import annotations

import json
from collections import Counter
from datetime import date

from seer_metrics.evaluators.lexical import LexicalEvaluator
from seer_metrics.events import InvalidEventError, RetrievalEvent
from seer_metrics.scoring import score_event
from seer_pipelines.demo.synthetic import Regression, generate_events

END = date(2026, 11, 29)


def test_deterministic_for_a_seed() -> None:
    first = list(generate_events(2, end_day=END, events_per_day=50, seed=5))
    again = list(generate_events(2, end_day=END, events_per_day=50, seed=5))
    other = list(generate_events(2, end_day=END, events_per_day=50, seed=6))
    assert first == again
    assert first != other


def test_realistic_mix_of_shapes_and_metadata() -> None:
    records = list(generate_events(7, end_day=END, events_per_day=200))
    days = Counter(r["event_ts"].date() for r in records)
    assert len(days) == 7 and min(days) == date(2026, 11, 23) and max(days) == END
    assert len({r["event_id"] for r in records}) == len(records)
    metadata = [json.loads(r["metadata"]) for r in records]
    for key, values in {
        "env": {"prod", "staging", "dev"},
        "feature_flag": {"retrieval-v1", "retrieval-v2"},
    }.items():
        assert {m[key] for m in metadata} == values
    assert len({m["tenant"] for m in metadata}) >= 4
    parsed, invalid, string_contexts, ranked = 0, 0, 0, 0
    for record in records:
        try:
            event = RetrievalEvent.from_record(record)
        except InvalidEventError:
            invalid += 1
            continue
        parsed += 1
        context = json.loads(record["context"])
        string_contexts += isinstance(context[0], str)
        ranked += event.has_ranking
    assert 0 < invalid < 0.03 * len(records)
    assert 0.03 < string_contexts / parsed < 0.2
    assert ranked / parsed > 0.8


def _recall_by(records, env, flag):
    evaluator = LexicalEvaluator()
    values = []
    for record in records:
        try:
            event = RetrievalEvent.from_record(record)
        except InvalidEventError:
            continue
        if event.metadata["env"] == env and event.metadata["feature_flag"] == flag:
            values.append(score_event(event, evaluator.judge(event)).recall)
    return values


def test_the_lexical_judge_finds_every_fact_in_healthy_production() -> None:
    records = list(generate_events(5, end_day=END, events_per_day=150, regression=None))
    for flag in ("retrieval-v1", "retrieval-v2"):
        recalls = _recall_by(records, "prod", flag)
        assert len(recalls) > 50
        assert min(recalls) == 1.0


def test_the_regression_hits_only_v2_in_prod_on_the_last_days() -> None:
    records = list(generate_events(4, end_day=END, events_per_day=150, regression=Regression()))
    last_days = [r for r in records if r["event_ts"].date() >= date(2026, 11, 28)]
    earlier = [r for r in records if r["event_ts"].date() < date(2026, 11, 28)]
    regressed = _recall_by(last_days, "prod", "retrieval-v2")
    assert max(regressed) < 1.0
    assert sum(regressed) / len(regressed) < 0.7
    assert min(_recall_by(earlier, "prod", "retrieval-v2")) == 1.0
    assert min(_recall_by(last_days, "prod", "retrieval-v1")) == 1.0
