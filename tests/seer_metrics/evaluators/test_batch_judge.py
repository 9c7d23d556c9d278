"""Batch mode of the LLM judge, through the real `openai` client against the fake Batch API."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from seer_metrics.evaluators.base import EvaluationOutcome
from seer_metrics.evaluators.batch import (
    REQUIREMENTS_PHASE,
    SUPPORT_PHASE,
    BatchJudge,
    BatchNotFinishedError,
    BatchRecord,
    advance,
)
from seer_metrics.evaluators.caching import CachingEvaluator
from seer_metrics.evaluators.llm import LLMEvaluator, LLMSettings
from seer_metrics.events import RetrievalEvent
from seer_metrics.judgment_store import JudgmentStore
from seer_metrics.spend.cost_estimate import BATCH_PRICE_FACTOR
from seer_testing.fake_batches import BatchBehaviour, FakeBatchServer
from seer_testing.fake_judge import (
    REQUIREMENTS_SCHEMA_NAME,
    SUPPORT_SCHEMA_NAME,
    FakeJudgeServer,
    GoldOracle,
)
from tests.judge_examples import CONTEXT, GOLD, OTHER_QUERY, QUERY


def _event(event_id: str, task: str, context: list[dict]) -> RetrievalEvent:
    return RetrievalEvent.from_record({"event_id": event_id, "task": task, "context": context})


# Two queries; five events, of which e3 repeats e1's content (one request for both).
EVENTS = [
    _event("e1", QUERY, CONTEXT),
    _event("e2", QUERY, CONTEXT[:2]),
    _event("e3", QUERY, CONTEXT),
    _event("e4", OTHER_QUERY, CONTEXT),
    _event("e5", OTHER_QUERY, CONTEXT[2:]),
]
DISTINCT_QUERIES = 2
DISTINCT_EVENTS = 4


@pytest.fixture
def server() -> Iterator[FakeBatchServer]:
    with FakeBatchServer(FakeJudgeServer(GoldOracle(GOLD))) as running:
        yield running


def _settings(server: FakeBatchServer) -> LLMSettings:
    return LLMSettings(
        api_key="test-key",
        base_url=server.base_url,
        requests_per_minute=None,
        tokens_per_minute=None,
        timeout_seconds=5.0,
        max_retries=0,
    )


def _store(tmp_path: Path) -> JudgmentStore:
    return JudgmentStore(tmp_path / "judgments.sqlite")


def _judge(server: FakeBatchServer, store: JudgmentStore, **options) -> BatchJudge:
    return BatchJudge(_settings(server), store, **options)


def _online(server: FakeBatchServer, store: JudgmentStore) -> list[EvaluationOutcome]:
    evaluator = LLMEvaluator(_settings(server), requirement_store=store)
    return asyncio.run(CachingEvaluator(evaluator, store).evaluate(EVENTS))


def _until_ready(
    judge: BatchJudge, records: Sequence[BatchRecord] = (), polls: int = 10
) -> list[BatchRecord]:
    """Advance the day as a sensor would, one tick at a time, until it is ready."""
    current = list(records)
    for _ in range(polls):
        progress = advance(judge, EVENTS, current, label="2026-11-29")
        current = list(progress.records)
        if progress.ready:
            return current
    raise AssertionError(f"not ready after {polls} ticks: {current}")


def test_a_day_in_two_batches_then_on_demand_makes_no_call(server, tmp_path) -> None:
    store = _store(tmp_path)
    judge = _judge(server, store)
    server.default_behaviour = BatchBehaviour(polls_in_progress=1)

    first = advance(judge, EVENTS, [], label="2026-11-29")
    assert [r.phase for r in first.submitted] == [REQUIREMENTS_PHASE]
    assert first.submitted[0].requests == DISTINCT_QUERIES
    assert first.waiting and not first.ready
    second = advance(judge, EVENTS, first.records)  # still in progress: nothing new
    assert second.waiting and not second.submitted and server.batches_created == 1
    assert second.summary() == "waiting for 1 batch(es): 1 requirements in_progress"
    third = advance(judge, EVENTS, second.records)  # phase 1 done: phase 2 goes out
    assert [r.phase for r in third.collected] == [REQUIREMENTS_PHASE]
    assert [r.phase for r in third.submitted] == [SUPPORT_PHASE]
    assert third.submitted[0].requests == DISTINCT_EVENTS
    records = _until_ready(judge, third.records)

    assert server.batches_created == 2
    assert server.lines_answered == DISTINCT_QUERIES + DISTINCT_EVENTS
    assert all(r.collected and r.status == "completed" and not r.reasons for r in records)
    assert [r.stored for r in records] == [DISTINCT_QUERIES, DISTINCT_EVENTS]
    # Half the on-demand price of the same tokens.
    settings = _settings(server)
    for record in records:
        full = settings.usage(record.prompt_tokens, record.completion_tokens).cost_usd
        assert record.prompt_tokens > 0
        assert record.cost_usd == pytest.approx(full * BATCH_PRICE_FACTOR)

    calls_before = server.judge.count()
    outcomes = _online(server, store)
    assert server.judge.count() == calls_before  # every answer came from the batches
    assert [o.status for o in outcomes] == ["ok"] * len(EVENTS)
    assert all(o.model_calls == 0 for o in outcomes)

    # The same judgments as the on-demand judge gives.
    with FakeBatchServer(FakeJudgeServer(GoldOracle(GOLD))) as other:
        fresh = _online(other, _store(tmp_path / "online"))
    assert [o.judgment for o in outcomes] == [o.judgment for o in fresh]
    first_judgment = outcomes[0].judgment
    assert first_judgment is not None
    assert [r.supported_by for r in first_judgment.requirements] == [("p1",), ("p2",)]


def test_failed_lines_are_recorded_and_retried_on_demand(server, tmp_path) -> None:
    store = _store(tmp_path)
    judge = _judge(server, store)
    records = [r for r in advance(judge, EVENTS, []).records]
    # Phase 2: one line in the error file, one HTTP 500, one reply that is not JSON.
    server.behave(BatchBehaviour(error_lines=1, status_lines=1, status_code=500))
    server.judge.inject("invalid_json", schema=SUPPORT_SCHEMA_NAME, times=1)
    records = _until_ready(judge, records)
    support = next(r for r in records if r.phase == SUPPORT_PHASE)
    assert support.status == "completed"
    assert support.stored == DISTINCT_EVENTS - 3
    assert dict(support.reasons) == {"api_error": 2, "invalid_json": 1}
    assert (support.completed, support.failed) == (DISTINCT_EVENTS - 2, 2)

    server.judge.reset_records()
    outcomes = _online(server, store)
    assert [o.status for o in outcomes] == ["ok"] * len(EVENTS)
    # Only the three failed lines were asked again, and no requirement list.
    assert server.judge.count(schema=SUPPORT_SCHEMA_NAME) == 3
    assert server.judge.count(schema=REQUIREMENTS_SCHEMA_NAME) == 0


def test_collect_reports_each_failed_line_with_its_reason(server, tmp_path) -> None:
    store = _store(tmp_path)
    judge = _judge(server, store)
    server.judge.inject("refusal", schema=REQUIREMENTS_SCHEMA_NAME, times=1)
    server.behave(BatchBehaviour(polls_in_progress=1))
    (record,) = judge.submit(REQUIREMENTS_PHASE, EVENTS)
    with pytest.raises(BatchNotFinishedError):
        judge.collect(record, EVENTS)  # in progress: not finished yet
    collection = judge.collect(record, EVENTS)
    assert collection.record.stored == 1
    (reason,) = collection.failures.values()
    assert reason.startswith("refused: ")
    # Collecting again stores nothing twice and finds the same failure.
    again = judge.collect(collection.record, EVENTS)
    assert again.failures == collection.failures
    assert store.count()["seer_requirement_cache"] == 1


def test_an_empty_requirement_list_in_a_batch_is_a_failed_line_never_stored(
    server, tmp_path
) -> None:
    store = _store(tmp_path)
    judge = _judge(server, store)
    server.judge.inject("empty_requirements", schema=REQUIREMENTS_SCHEMA_NAME, times=1)
    (record,) = judge.submit(REQUIREMENTS_PHASE, EVENTS)
    collection = judge.collect(record, EVENTS)
    (reason,) = collection.failures.values()
    assert reason.startswith("no_requirements: ")
    assert store.count()["seer_requirement_cache"] == 1  # the other query's list only


def test_an_expired_phase_is_resubmitted_once_for_what_is_unanswered(server, tmp_path) -> None:
    store = _store(tmp_path)
    judge = _judge(server, store)
    server.behave(BatchBehaviour(expire=True, lines_done=1))
    records = _until_ready(judge)
    phase1 = [r for r in records if r.phase == REQUIREMENTS_PHASE]
    assert [(r.status, r.round, r.requests, r.stored) for r in phase1] == [
        ("expired", 0, 2, 1),
        ("completed", 1, 1, 1),
    ]
    assert dict(phase1[0].reasons) == {"batch_expired": 1}
    assert server.batches_created == 3  # phase 1, its resubmission, phase 2
    assert server.lines_answered == DISTINCT_QUERIES + DISTINCT_EVENTS  # nothing paid twice

    server.judge.reset_records()
    assert all(o.status == "ok" for o in _online(server, store))
    assert server.judge.count() == 0


def test_a_phase_that_expires_again_is_left_to_the_on_demand_judge(server, tmp_path) -> None:
    store = _store(tmp_path)
    judge = _judge(server, store)
    # Phase 2 expires twice with nothing done; the day is still ready after that.
    records = [r for r in advance(judge, EVENTS, []).records]
    server.behave(BatchBehaviour(expire=True, lines_done=0), times=2)
    records = _until_ready(judge, records)
    support = [r for r in records if r.phase == SUPPORT_PHASE]
    assert [(r.status, r.round, r.stored) for r in support] == [
        ("expired", 0, 0),
        ("expired", 1, 0),
    ]
    assert dict(support[1].reasons) == {"batch_expired": DISTINCT_EVENTS}

    server.judge.reset_records()
    outcomes = _online(server, store)
    assert [o.status for o in outcomes] == ["ok"] * len(EVENTS)
    assert server.judge.count(schema=SUPPORT_SCHEMA_NAME) == DISTINCT_EVENTS
    assert server.judge.count(schema=REQUIREMENTS_SCHEMA_NAME) == 0


@pytest.mark.parametrize("who", ["client", "operator"])
def test_a_cancelled_batch_keeps_its_partial_output(server, tmp_path, who: str) -> None:
    store = _store(tmp_path)
    judge = _judge(server, store)
    records = list(advance(judge, EVENTS, []).records)
    server.behave(BatchBehaviour(polls_in_progress=100, lines_done=1))
    progress = advance(judge, EVENTS, records)  # collects phase 1, submits phase 2
    (running,) = progress.submitted
    if who == "client":
        cancelling = judge.cancel(running)
        assert cancelling.status == "cancelling" and not cancelling.finished
    else:
        server.cancel(running.batch_id)
    records = _until_ready(judge, progress.records)
    support = [r for r in records if r.phase == SUPPORT_PHASE]
    assert [(r.status, r.stored) for r in support] == [("cancelled", 1)]  # not resubmitted
    assert dict(support[0].reasons) == {"batch_cancelled": DISTINCT_EVENTS - 1}
    assert server.batches_created == 2

    server.judge.reset_records()
    assert all(o.status == "ok" for o in _online(server, store))
    assert server.judge.count(schema=SUPPORT_SCHEMA_NAME) == DISTINCT_EVENTS - 1


def test_a_new_judge_given_the_stored_batch_ids_collects_the_same_batches(server, tmp_path) -> None:
    server.default_behaviour = BatchBehaviour(polls_in_progress=1)
    first = advance(_judge(server, _store(tmp_path)), EVENTS, [], label="2026-11-29")
    stored_ids = list(first.records)  # what the warehouse kept before the run was killed

    # A new process: new client, new store object over the same cache.
    judge = _judge(server, _store(tmp_path))
    records = _until_ready(judge, stored_ids)
    assert records[0].batch_id == stored_ids[0].batch_id
    assert server.batches_created == 2  # phase 1 once, phase 2 once
    assert server.lines_answered == DISTINCT_QUERIES + DISTINCT_EVENTS


def test_a_batch_created_but_never_recorded_is_found_again(server, tmp_path) -> None:
    server.default_behaviour = BatchBehaviour(polls_in_progress=1)
    lost = _judge(server, _store(tmp_path)).submit(REQUIREMENTS_PHASE, EVENTS)  # killed here
    judge = _judge(server, _store(tmp_path))
    progress = advance(judge, EVENTS, [])
    assert [r.batch_id for r in progress.submitted] == [lost[0].batch_id]
    assert server.batches_created == 1


def test_requests_are_split_at_the_batch_limits(server, tmp_path) -> None:
    judge = _judge(server, _store(tmp_path), max_requests_per_batch=1)
    records = judge.submit(REQUIREMENTS_PHASE, EVENTS)
    assert [r.requests for r in records] == [1, 1]
    assert server.batches_created == 2
    assert _judge(server, _store(tmp_path)).submit(SUPPORT_PHASE, EVENTS) == []  # no lists yet


def test_nothing_is_submitted_when_every_answer_is_cached(server, tmp_path) -> None:
    store = _store(tmp_path)
    _online(server, store)
    progress = advance(_judge(server, store), EVENTS, [])
    assert progress.ready and progress.records == ()
    assert server.batches_created == 0
