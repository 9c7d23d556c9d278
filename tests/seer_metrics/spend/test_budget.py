"""Budgets and prices: a cost that cannot be known never lets a capped day through."""

from __future__ import annotations

import math

import pytest

from seer_metrics.evaluators.llm import LLMSettings, parse_prices
from seer_metrics.events import RetrievalEvent
from seer_metrics.spend.budget import Budget, BudgetConfigError, BudgetTracker, UnknownCostError
from seer_metrics.spend.cost_estimate import estimate_cost
from tests.judge_examples import CONTEXT, QUERY


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "-1"])
@pytest.mark.parametrize("position", [0, 1])
def test_a_price_that_is_not_a_finite_number_is_refused_naming_the_variable_and_model(
    value: str, position: int
) -> None:
    price = ["0.15", "0.6"]
    price[position] = value
    text = '{"gpt-4o-mini": [' + ", ".join(price) + "]}"
    with pytest.raises(ValueError, match=r"SEER_LLM_PRICES: price of 'gpt-4o-mini' must be"):
        parse_prices(text, "SEER_LLM_PRICES")
    with pytest.raises(ValueError, match="SEER_LLM_PRICES"):
        LLMSettings.from_env({"SEER_LLM_PRICES": text})


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, -0.5])
def test_a_price_given_in_code_must_be_finite_too(bad: float) -> None:
    with pytest.raises(ValueError, match=r"price of 'my-model'.*SEER_LLM_PRICES"):
        LLMSettings(prices={"my-model": (bad, 1.0)})
    with pytest.raises(ValueError, match=r"price of 'my-model'"):
        LLMSettings(prices={"my-model": (0.1, bad)})


@pytest.mark.parametrize("usd", [math.nan, math.inf, -1.0])
def test_a_budget_that_is_not_a_finite_number_names_its_setting(usd: float) -> None:
    with pytest.raises(BudgetConfigError, match="SEER_BUDGET_USD"):
        Budget(usd=usd)
    with pytest.raises(BudgetConfigError, match="SEER_BUDGET_TOKENS"):
        Budget(tokens=-1)


def test_a_projected_cost_that_is_not_a_number_stops_a_usd_budget_loudly() -> None:
    """Compared with NaN every event fits: the tracker refuses instead of admitting."""
    tracker = BudgetTracker(Budget(usd=0.0001))
    with pytest.raises(UnknownCostError, match="SEER_BUDGET_USD"):
        tracker.admit(math.nan, 1000)
    with pytest.raises(UnknownCostError, match="SEER_BUDGET_USD"):
        tracker.settle(math.inf, 1000)
    # Without a USD cap the cost is not compared: a token cap still holds.
    tokens_only = BudgetTracker(Budget(tokens=10))
    assert not tokens_only.admit(math.nan, 1000) and tokens_only.stopped_by == "tokens"


def test_an_estimate_without_a_finite_price_is_unknown_never_nan() -> None:
    events = [
        RetrievalEvent.from_record({"event_id": f"e{index}", "task": QUERY, "context": CONTEXT})
        for index in range(5)
    ]
    for price in (None, (math.nan, 0.6), (0.15, math.inf)):
        estimate = estimate_cost(events, "gpt-4o-mini", price)
        assert estimate.online.cost_usd is None and estimate.batch.cost_usd is None
