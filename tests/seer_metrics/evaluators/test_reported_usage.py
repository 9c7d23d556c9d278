"""Token counts an endpoint reports are checked: an odd one is an estimate with a note,
never a negative cost, a stalled pacer or a crash (real `openai` client, fake servers)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from seer_metrics.evaluators.batch import BatchJudge, advance
from seer_metrics.evaluators.llm import LLMEvaluator, LLMSettings
from seer_metrics.evaluators.llm.reported_usage import (
    MAX_TOKENS_PER_CALL,
    USAGE_ESTIMATED,
    reported_tokens,
)
from seer_metrics.events import RetrievalEvent
from seer_metrics.judgment_store import JudgmentStore
from seer_testing.fake_batches import BatchBehaviour, FakeBatchServer
from seer_testing.fake_judge import FakeJudgeServer, GoldOracle
from tests.judge_examples import CONTEXT, GOLD, OTHER_QUERY, QUERY

ODD_COUNTS: list[Any] = [-27_000_000, 10**19, MAX_TOKENS_PER_CALL + 1, "many", 12.5, None, True]


def _events() -> list[RetrievalEvent]:
    return [
        RetrievalEvent.from_record({"event_id": f"e{index}", "task": task, "context": CONTEXT})
        for index, task in enumerate((QUERY, OTHER_QUERY, QUERY + " Please."))
    ]


def _settings(base_url: str) -> LLMSettings:
    return LLMSettings(
        api_key="test-key",
        base_url=base_url,
        requests_per_minute=None,
        tokens_per_minute=None,
        timeout_seconds=5.0,
        max_retries=0,
    )


@pytest.mark.parametrize("value", ODD_COUNTS)
def test_a_count_that_is_not_a_whole_number_in_range_is_refused(value: Any) -> None:
    problem = reported_tokens({"prompt_tokens": value, "completion_tokens": 5})
    assert isinstance(problem, str) and "prompt_tokens=" in problem
    assert reported_tokens({"prompt_tokens": 7, "completion_tokens": value}) != (7, value)
    assert reported_tokens({"prompt_tokens": 7, "completion_tokens": 5}) == (7, 5)
    assert reported_tokens({"prompt_tokens": 0, "completion_tokens": MAX_TOKENS_PER_CALL}) == (
        0,
        MAX_TOKENS_PER_CALL,
    )


@pytest.fixture
def server() -> Iterator[FakeJudgeServer]:
    with FakeJudgeServer(GoldOracle(GOLD)) as running:
        yield running


@pytest.mark.parametrize(
    "usage",
    [
        {"prompt_tokens": -27_000_000},
        {"completion_tokens": 10**19},
        {"prompt_tokens": "lots"},
        {"completion_tokens": 3.5},
    ],
)
def test_an_odd_usage_block_is_an_estimate_with_a_note_and_the_judgment_stands(
    server: FakeJudgeServer, usage: dict[str, Any]
) -> None:
    server.reported_usage = usage
    evaluator = LLMEvaluator(_settings(server.base_url))
    outcomes = asyncio.run(evaluator.evaluate(_events()))
    assert [outcome.status for outcome in outcomes] == ["ok", "ok", "ok"]
    for outcome in outcomes:
        figures = outcome.usage
        assert 0 < figures.prompt_tokens < 100_000 and 0 < figures.completion_tokens < 100_000
        assert 0 < figures.cost_usd < 0.01
        assert figures.note is not None and figures.note.startswith(USAGE_ESTIMATED)
        assert next(iter(usage)) in figures.note
    # The pacer was not fed the odd count: a later call is not held for ages.
    server.reported_usage = {}
    (later,) = asyncio.run(asyncio.wait_for(evaluator.evaluate([_events()[0]]), timeout=10))
    assert later.status == "ok" and later.usage.note is None


def test_a_batch_whose_lines_report_odd_usage_counts_the_requests_estimates(
    tmp_path: Path,
) -> None:
    with FakeBatchServer(FakeJudgeServer(GoldOracle(GOLD))) as running:
        running.default_behaviour = BatchBehaviour(polls_in_progress=0)
        running.judge.reported_usage = {"prompt_tokens": -5_000_000, "completion_tokens": "x"}
        judge = BatchJudge(_settings(running.base_url), JudgmentStore(tmp_path / "j.sqlite"))
        records: list = []
        for _ in range(6):
            progress = advance(judge, _events(), records, label="2026-11-29")
            records = list(progress.records)
            if progress.ready:
                break
        assert progress.ready and records
    for record in records:
        assert record.collected and record.stored > 0 and not record.reasons
        assert 0 < record.prompt_tokens < 100_000 and 0 < record.completion_tokens < 100_000
        assert record.cost_usd > 0
