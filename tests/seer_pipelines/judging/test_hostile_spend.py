"""Spend under hostile settings and replies: a budget is never silently switched off.

The judge is the real `openai` client against the fake judge server; the day is judged
by `event_judgments` as the daily job runs it.
"""

from __future__ import annotations

import math
import re
from datetime import date

import pytest
import sqlalchemy as sa
from dagster import instance_for_test, materialize

from seer_metrics.events import RetrievalEvent
from seer_metrics.judgment_store import JudgmentStore
from seer_metrics.spend.budget import Budget, UnknownCostError
from seer_pipelines.defs.resources.evaluator import EvaluatorResource
from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.demo.source_table import write_events
from seer_pipelines.demo.synthetic import generate_events
from seer_pipelines.judging.batch_ledger import BatchLedger
from seer_pipelines.judging.day_plan import BudgetGate
from seer_pipelines.warehouse.schema import JUDGMENTS_TABLE
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


@pytest.fixture
def postgres_warehouse(postgres_url: str, postgres_schema: str):
    resource = WarehouseResource(url=postgres_url, db_schema=postgres_schema, chunk_size=16)
    records = list(generate_events(1, end_day=DAY, events_per_day=30, seed=5, invalid_share=0.0))
    write_events(resource.get_engine(), records, table_name=resource.resolved_events_table())
    yield resource
    resource.dispose()


@pytest.mark.postgres
@pytest.mark.parametrize("usage", [{"completion_tokens": 10**19}, {"prompt_tokens": -27_000_000}])
def test_an_endpoint_reporting_odd_token_counts_costs_one_flag_per_event_not_the_day(
    server: FakeJudgeServer, postgres_warehouse: WarehouseResource, monkeypatch, usage
) -> None:
    """10^19 tokens once overflowed the 32-bit token columns after every call was paid
    for, and a negative count made a negative cost: now each such event keeps its judgment,
    its tokens are the request's estimate, and its row says so."""
    monkeypatch.setenv("SEER_LLM_REQUESTS_PER_MINUTE", "none")
    monkeypatch.setenv("SEER_LLM_TOKENS_PER_MINUTE", "none")
    server.reported_usage = usage
    evaluator = EvaluatorResource(
        kind="openai", api_key="test-key", base_url=server.base_url, max_retries=0
    )
    result = _judge_day(postgres_warehouse, evaluator)
    assert result.success
    metadata = {
        key: value.value
        for key, value in result.asset_materializations_for_node("event_judgments")[
            0
        ].metadata.items()
    }
    rows = postgres_warehouse.read_partition_frame(JUDGMENTS_TABLE, DAY)
    assert len(rows) > 10 and set(rows["status"]) == {"ok"}
    assert rows["reason"].str.startswith("usage_estimated: the endpoint reported").all()
    assert (rows["prompt_tokens"] > 0).all() and (rows["prompt_tokens"] < 100_000).all()
    assert (rows["completion_tokens"] > 0).all() and (rows["completion_tokens"] < 100_000).all()
    assert (rows["cost_usd"] > 0).all()
    assert metadata["usage_estimated"] == len(rows)
    assert 0 < metadata["estimated_cost_usd"] < 1


@pytest.mark.postgres
def test_token_columns_of_an_earlier_version_are_widened_to_64_bits(
    postgres_url: str, postgres_schema: str
) -> None:
    """Tables an earlier Seer created with 32-bit token columns are widened in place."""
    resource = WarehouseResource(url=postgres_url, db_schema=postgres_schema)
    engine = resource.get_engine()
    old = sa.MetaData(schema=postgres_schema)
    sa.Table(
        JUDGMENTS_TABLE,
        old,
        *(
            sa.Column(column.name, sa.Integer() if "tokens" in column.name else column.type)
            for column in resource.output_tables()[JUDGMENTS_TABLE].columns
        ),
    )
    old.create_all(engine)
    BatchLedger(engine, postgres_schema)  # creates seer_batches, 64-bit from the start
    resource.ensure_output_tables()
    columns = {
        column["name"]: column["type"]
        for column in sa.inspect(engine).get_columns(JUDGMENTS_TABLE, schema=postgres_schema)
    }
    assert isinstance(columns["prompt_tokens"], sa.BigInteger)
    assert isinstance(columns["completion_tokens"], sa.BigInteger)
    assert not isinstance(columns["model_calls"], sa.BigInteger)
    with engine.begin() as connection:
        connection.execute(
            resource.output_tables()[JUDGMENTS_TABLE]
            .insert()
            .values(event_id="big", prompt_tokens=10**12, completion_tokens=10**12)
        )
    resource.dispose()
