"""Spend under hostile settings and replies: a budget is never silently switched off.

The judge is the real `openai` client against the fake judge server; the day is judged
by `event_judgments` as the daily job runs it.
"""

from __future__ import annotations

import math
import re
from datetime import date

import pytest
from dagster import instance_for_test, materialize

from seer_metrics.events import RetrievalEvent
from seer_metrics.judgment_store import JudgmentStore
from seer_metrics.spend.budget import Budget, UnknownCostError
from seer_pipelines.defs.resources.evaluator import EvaluatorResource
from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.demo.synthetic import generate_events
from seer_pipelines.judging.day_plan import BudgetGate
from seer_testing.fake_judge import FakeJudgeServer
from tests.default_location import event_judgments, retrieval_events

DAY = date(2026, 11, 29)


@pytest.fixture
def server():
    with FakeJudgeServer() as running:
        yield running


@pytest.fixture
def warehouse(one_day_warehouse) -> WarehouseResource:
    return one_day_warehouse(DAY, events_per_day=30, seed=5, invalid_share=0.0)


def _judge_day(warehouse: WarehouseResource, evaluator: EvaluatorResource):
    with instance_for_test() as instance:
        return materialize(
            [retrieval_events, event_judgments],
            selection=[event_judgments],
            partition_key=DAY.isoformat(),
            resources={"warehouse": warehouse, "evaluator": evaluator},
            instance=instance,
            raise_on_error=False,
        )


def _failure_message(result) -> str:
    (failure,) = [event for event in result.all_events if event.event_type_value == "STEP_FAILURE"]
    error = failure.step_failure_data.error
    return error.to_string()


def test_a_usd_budget_on_a_paid_judge_without_a_price_is_refused_before_any_call(
    tmp_path,
) -> None:
    store = JudgmentStore(tmp_path / "cache.sqlite")
    for price in (None, (math.nan, 1.0), (0.1, math.inf)):
        with pytest.raises(UnknownCostError, match=r"'my-local-model'.*SEER_LLM_PRICES"):
            BudgetGate(Budget(usd=1.0), store, "my-local-model", "v1", price)
    # A token cap needs no price, and the offline judge costs nothing.
    BudgetGate(Budget(tokens=100), store, "my-local-model", "v1", None)
    free = BudgetGate(Budget(usd=0.0), store, "lexical-v1", "v1", None, paid=False)
    records = generate_events(1, end_day=DAY, events_per_day=3, seed=2, invalid_share=0.0)
    events = [RetrievalEvent.from_record(record) for record in records]
    assert free.split(events)[0] == events


@pytest.mark.parametrize(
    ("options", "named"),
    [
        # The model has no price: its cost would be counted as 0 and every event fit.
        ({"model": "my-local-model"}, r"'my-local-model'.*SEER_LLM_PRICES"),
        # A NaN price: every cost NaN, and NaN > budget is False.
        ({"prices": '{"gpt-4o-mini": [NaN, 1]}'}, r"price of 'gpt-4o-mini'"),
        ({"prices": {"gpt-4o-mini": [math.inf, 1]}}, r"price of 'gpt-4o-mini'"),
    ],
)
def test_a_usd_budget_whose_cost_cannot_be_known_fails_the_day_before_any_call(
    server: FakeJudgeServer, warehouse: WarehouseResource, options: dict, named: str
) -> None:
    evaluator = EvaluatorResource(
        kind="openai",
        api_key="test-key",
        base_url=server.base_url,
        max_retries=0,
        budget_usd=0.0001,
        **options,
    )
    result = _judge_day(warehouse, evaluator)
    assert not result.success
    assert server.count() == 0, "no call may go out under a budget that holds nothing"
    message = _failure_message(result)
    assert any(word in message for word in ("SEER_BUDGET_USD", "prices")), message
    assert re.search(named, message), message
