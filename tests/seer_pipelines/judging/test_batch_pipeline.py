"""Batch mode in the pipelines: the seer_batches ledger, advance_day and the batch sensor."""

from __future__ import annotations

from datetime import date

import pytest
from dagster import (
    AssetKey,
    RunRequest,
    SensorResult,
    SkipReason,
    build_sensor_context,
    instance_for_test,
    materialize,
)

from seer_metrics.evaluators.batch import REQUIREMENTS_PHASE, SUPPORT_PHASE, BatchRecord
from seer_metrics.evaluators.llm import DEFAULT_MODEL
from seer_metrics.evaluators.llm.prompts import PROMPT_VERSION
from seer_metrics.judgment_store import judgment_key
from seer_pipelines.defs.resources.evaluator import EvaluatorResource
from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.defs.sensors.batches import seer_batch_sensor
from seer_pipelines.demo.source_table import write_events
from seer_pipelines.demo.synthetic import generate_events
from seer_pipelines.judging.batch_ledger import BatchLedger, advance_day, day_events, ledger_for
from seer_pipelines.warehouse.schema import EVENT_METRICS_TABLE, JUDGMENTS_TABLE
from tests.default_location import (
    event_judgments,
    event_metrics,
    passage_judgments,
    retrieval_events,
)

DAY = date(2026, 11, 29)


@pytest.fixture
def warehouse(one_day_warehouse) -> WarehouseResource:
    return one_day_warehouse(DAY, events_per_day=12, seed=5)


@pytest.fixture(scope="module")
def instance():
    with instance_for_test() as test_instance:
        yield test_instance


def _tick(instance, warehouse: WarehouseResource, evaluator: EvaluatorResource):
    resources = {"warehouse": warehouse, "evaluator": evaluator}
    with build_sensor_context(instance=instance, resources=resources) as context:
        return seer_batch_sensor(context)


def test_the_ledger_keeps_and_updates_each_batch(tmp_path) -> None:
    resource = WarehouseResource(url=f"sqlite:///{tmp_path / 'w.sqlite'}")
    ledger = ledger_for(resource)
    first = BatchRecord("batch_1", REQUIREMENTS_PHASE, "in_progress", requests=3)
    ledger.save(DAY, [first])
    assert ledger.records(DAY) == [first]
    assert ledger.days_to_follow() == {DAY: [first]}
    done = BatchRecord(
        "batch_1",
        REQUIREMENTS_PHASE,
        "completed",
        requests=3,
        completed=3,
        stored=2,
        collected=True,
        reasons={"invalid_json": 1},
        cost_usd=0.25,
    )
    ledger.save(DAY, [done])
    assert BatchLedger(resource.get_engine()).records(DAY) == [done]
    assert ledger.days_to_follow() == {}
    resource.dispose()


def test_resolved_mode_is_online_by_default_and_for_the_lexical_judge(monkeypatch) -> None:
    monkeypatch.delenv("SEER_LLM_MODE", raising=False)
    assert EvaluatorResource(kind="openai").resolved_mode() == "online"
    monkeypatch.setenv("SEER_LLM_MODE", "batch")
    assert EvaluatorResource(kind="openai").resolved_mode() == "batch"
    assert EvaluatorResource(kind="lexical").resolved_mode() == "online"
    with pytest.raises(ValueError, match="SEER_LLM_MODE"):
        EvaluatorResource(kind="openai", mode="weekly").resolved_mode()


def test_the_sensor_runs_a_day_once_its_batches_are_done(
    batch_server, batch_evaluator, warehouse, instance
) -> None:
    evaluator = batch_evaluator()
    assert isinstance(_tick(instance, warehouse, evaluator), SkipReason)  # nothing submitted yet

    progress = advance_day(warehouse, evaluator, DAY)  # what the day's run does
    assert [r.phase for r in progress.submitted] == [REQUIREMENTS_PHASE]
    assert progress.waiting

    waiting = _tick(instance, warehouse, evaluator)  # first poll: still in progress
    assert isinstance(waiting, SkipReason) and "waiting" in str(waiting.skip_message)
    assert ledger_for(warehouse).records(DAY)[0].status == "in_progress"

    done = _tick(instance, warehouse, evaluator)
    assert isinstance(done, SensorResult)
    (request,) = done.run_requests or []
    assert isinstance(request, RunRequest) and request.partition_key == DAY.isoformat()
    assert (
        request.run_key == _tick(instance, warehouse, evaluator).run_requests[0].run_key
    )  # stable

    progress = advance_day(warehouse, evaluator, DAY)  # the launched run: phase 2 goes out
    assert [r.phase for r in progress.submitted] == [SUPPORT_PHASE]
    for _ in range(2):
        result = _tick(instance, warehouse, evaluator)
    assert isinstance(result, SensorResult)
    assert result.run_requests[0].run_key != request.run_key  # a new set of batches

    progress = advance_day(warehouse, evaluator, DAY)
    assert progress.ready and not progress.submitted
    assert isinstance(_tick(instance, warehouse, evaluator), SkipReason)  # all collected
    records = ledger_for(warehouse).records(DAY)
    assert [(r.phase, r.status, r.collected) for r in records] == [
        (REQUIREMENTS_PHASE, "completed", True),
        (SUPPORT_PHASE, "completed", True),
    ]
    events = day_events(warehouse, DAY)
    keys = {
        judgment_key(e, evaluator.resolved_model() or DEFAULT_MODEL, PROMPT_VERSION) for e in events
    }
    assert records[1].stored == len(keys)
    assert batch_server.batches_created == 2

    again = advance_day(warehouse, evaluator, DAY)  # a repeated run: nothing new
    assert again.ready and not again.submitted and batch_server.batches_created == 2


@pytest.mark.postgres
def test_a_batch_day_runs_end_to_end_through_dagster_on_postgres(
    batch_server, batch_evaluator, postgres_url: str, postgres_schema: str
) -> None:
    url = postgres_url.replace("postgresql+psycopg2://", "postgresql://")
    warehouse = WarehouseResource(url=url, db_schema=postgres_schema, chunk_size=16)
    records = list(generate_events(1, end_day=DAY, events_per_day=20, seed=7))
    write_events(
        warehouse.get_engine(),
        records,
        schema=postgres_schema,
        table_name=warehouse.resolved_events_table(),
    )
    resources = {"warehouse": warehouse, "evaluator": batch_evaluator()}
    assets = [retrieval_events, event_judgments, event_metrics, passage_judgments]
    storage = {"postgres": {"postgres_url": postgres_url}}

    def run():
        result = materialize(
            assets, partition_key=DAY.isoformat(), resources=resources, instance=instance
        )
        assert result.success  # waiting for batches is no failure
        return result

    def judged(result) -> bool:
        return bool(result.asset_materializations_for_node("event_judgments"))

    with instance_for_test(overrides={"storage": storage}) as instance:
        first = run()  # phase 1 submitted: nothing downstream is materialized
        assert not judged(first) and not first.asset_materializations_for_node("event_metrics")
        observed = instance.fetch_observations(AssetKey("event_judgments"), limit=1).records
        assert "waiting for 1 batch(es)" in str(observed[0].asset_observation.metadata)
        warehouse.ensure_output_tables()
        assert warehouse.count_partition(JUDGMENTS_TABLE, DAY) == 0
        runs = 1
        while True:  # the sensor's job: run the day again until it completes
            ticks = 0
            while True:
                ticks += 1
                tick = _tick(instance, warehouse, resources["evaluator"])
                if isinstance(tick, SensorResult):
                    break
                assert ticks < 5, tick
            result = run()
            runs += 1
            if judged(result):
                break
            assert runs < 5
        assert runs == 3  # phase 1, phase 2, then the day from the cache
        metadata = result.asset_materializations_for_node("event_judgments")[0].metadata
        assert metadata["model_calls"].value == 0
        assert metadata["batch_answers_stored"].value > 0
        assert metadata["batch_cost_usd"].value > 0
        assert warehouse.count_partition(EVENT_METRICS_TABLE, DAY) == len(records)
        assert batch_server.judge.count() == batch_server.lines_answered  # no on-demand call at all

        # Re-running the partition completes it from stored results: no batch, no call.
        batches, lines = batch_server.batches_created, batch_server.lines_answered
        again = run()
        assert judged(again) and again.asset_materializations_for_node("event_metrics")
        assert (batch_server.batches_created, batch_server.lines_answered) == (batches, lines)
        assert batch_server.judge.count() == lines
    rows = ledger_for(warehouse).records(DAY)
    assert [(r.phase, r.status, r.collected) for r in rows] == [
        (REQUIREMENTS_PHASE, "completed", True),
        (SUPPORT_PHASE, "completed", True),
    ]
    warehouse.dispose()
