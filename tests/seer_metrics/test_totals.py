"""Running totals over event rows."""

from __future__ import annotations

import math

import pytest

from seer_metrics.totals import ScoreTotals


def test_totals_count_statuses_usage_and_means_over_defined_values():
    totals = ScoreTotals()
    totals.add_all(
        [
            {"status": "ok", "recall": 1.0, "precision": 0.5, "f1": 2 / 3, "ndcg": None},
            {
                "status": "ok",
                "recall": 0.5,
                "precision": math.nan,
                "f1": None,
                "ndcg": 1.0,
                "cache_hit": True,
                "model_calls": 2,
                "prompt_tokens": 100,
                "completion_tokens": 20,
                "cost_usd": 0.01,
            },
            {"status": "invalid", "recall": None, "precision": None, "f1": None, "ndcg": None},
            {"status": "error", "recall": 0.0, "model_calls": 3, "cost_usd": math.nan},
        ]
    )
    assert (totals.events, totals.evaluated, totals.invalid, totals.errors) == (4, 2, 1, 1)
    assert (totals.cache_hits, totals.model_calls, totals.tokens) == (1, 5, 120)
    assert totals.cost_usd == pytest.approx(0.01)
    assert totals.means() == {
        "recall": pytest.approx(0.75),
        "precision": 0.5,
        "f1": pytest.approx(2 / 3),
        "ndcg": 1.0,
    }
    assert ScoreTotals().mean("recall") is None
