"""The LLM judge on the servers teams run themselves, through the real `openai` SDK against
the fake judge speaking each server's dialect (`seer_testing.judge_dialects`): what it
accepts, how it refuses, what it reads as the completion cap, how fast it generates."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from seer_metrics import RetrievalEvent
from seer_metrics.evaluators.caching import CachingEvaluator
from seer_metrics.evaluators.llm import LLMEvaluator, LLMSettings, prompts
from seer_metrics.evaluators.llm.structured_output import (
    FORMAT_REJECTED,
    REQUEST_REJECTED,
    rejection_kind,
)
from seer_metrics.judgment_store import JudgmentStore, requirements_key
from seer_testing.fake_judge import (
    REQUIREMENTS_SCHEMA_NAME,
    SUPPORT_SCHEMA_NAME,
    FakeJudgeServer,
    GoldOracle,
)
from seer_testing.judge_dialects import (
    LLAMA_CPP_PYTHON,
    OPENAI,
    STRICT_400,
    STRICT_422,
    ServerDialect,
)
from tests.judge_examples import CONTEXT, GOLD, OTHER_QUERY, QUERY

EXPECTED_SUPPORT = [("p1",), ("p2",)]  # QUERY's two requirements, as the gold says


def _event(event_id: str, task: str = QUERY) -> RetrievalEvent:
    return RetrievalEvent.from_record({"event_id": event_id, "task": task, "context": CONTEXT})


def _evaluator(server: FakeJudgeServer, store=None, **overrides) -> LLMEvaluator:
    values = {
        "model": "local-model",
        "api_key": "unused",
        "base_url": server.base_url,
        "requests_per_minute": None,
        "tokens_per_minute": None,
        "timeout_seconds": 5.0,
        "max_retries": 2,
        "backoff_initial_seconds": 0.01,
        "backoff_max_seconds": 0.05,
        "prices": {},
        **overrides,
    }
    return LLMEvaluator(LLMSettings(**values), requirement_store=store)


def _run(evaluator, events):
    return asyncio.run(evaluator.evaluate(events))


def _forty_events() -> list[RetrievalEvent]:
    """40 events over 12 distinct queries (the fake's gold labels two of them)."""
    events = []
    for index in range(40):
        task = QUERY if index % 4 == 0 else OTHER_QUERY if index % 4 == 1 else f"Q{index // 2}?"
        events.append(_event(f"e{index}", task))
    return events


def _bodies(server: FakeJudgeServer, **match) -> list[dict]:
    return [r.body for r in server.requests if all(getattr(r, k) == v for k, v in match.items())]


def test_llama_cpp_python_json_schema_500_is_learned_once_then_json_object(tmp_path) -> None:
    """The issue's measurement: llama-cpp-python answers `json_schema` with a 500
    validation error. Now one request learns that, the rest ask in `json_object` with the
    schema (in the field and in the instructions), every reply is validated, and the scores
    are the ones the OpenAI-shaped server gives: at most about two calls an event."""
    events = _forty_events()
    with FakeJudgeServer(GoldOracle(GOLD), dialect=LLAMA_CPP_PYTHON) as server:
        outcomes = _run(_evaluator(server, JudgmentStore(tmp_path / "c.sqlite")), events)
        rejected = [r for r in server.requests if r.status == 500]
        assert len(rejected) == 1 and rejected[0].response_format == "json_schema"
        accepted = [r for r in server.requests if r.status == 200]
        assert {r.response_format for r in accepted} == {"json_object"}
        for record in accepted:
            schema = (
                prompts.REQUIREMENTS_SCHEMA
                if record.schema == REQUIREMENTS_SCHEMA_NAME
                else prompts.SUPPORT_SCHEMA
            )
            assert record.body["response_format"] == {"type": "json_object", "schema": schema}
            assert json.dumps(schema) in record.body["messages"][0]["content"]
            # The cap under the name this server reads (it ignores max_completion_tokens).
            assert record.cap == 1500 and "max_completion_tokens" not in record.body
        total_calls = len(server.requests)
    with FakeJudgeServer(GoldOracle(GOLD), dialect=OPENAI) as reference_server:
        reference = _run(_evaluator(reference_server), events)
    assert [o.status for o in outcomes] == ["ok"] * len(events)
    assert all(o.judgment.output_mode == "json_object" for o in outcomes)
    assert all(o.judgment.output_mode == "json_schema" for o in reference)
    assert [o.judgment.requirements for o in outcomes] == [
        o.judgment.requirements for o in reference
    ]
    assert sum(o.model_calls for o in outcomes) == total_calls
    # A call per distinct query and per event, and the one rejected probe.
    assert total_calls == len({e.task for e in events}) + len(events) + 1 == 53


def test_the_learned_mode_is_remembered_in_the_store_for_the_next_run(tmp_path) -> None:
    store = JudgmentStore(tmp_path / "c.sqlite")
    with FakeJudgeServer(GoldOracle(GOLD), dialect=LLAMA_CPP_PYTHON) as server:
        _run(_evaluator(server, store), [_event("e1")])
        assert server.count(status=500) == 1
        endpoint = _evaluator(server).endpoint
        assert store.get_endpoint_profile(endpoint, "local-model") == (
            "json_object",
            "max_tokens",
        )
        server.reset_records()
        fresh = _evaluator(server, JudgmentStore(tmp_path / "c.sqlite"))
        (outcome,) = _run(fresh, [_event("e2", OTHER_QUERY)])
        assert outcome.status == "ok" and outcome.model_calls == 2
        assert server.count(status=500) == 0
        assert {r.response_format for r in server.requests} == {"json_object"}


def test_a_server_without_response_format_gets_plain_json_instructions() -> None:
    """400 for json_schema, 400 again for json_object: the schema goes into the
    instructions alone; a reply in a markdown fence still parses and is validated."""
    with FakeJudgeServer(GoldOracle(GOLD), dialect=STRICT_400) as server:
        server.inject("fenced", schema=SUPPORT_SCHEMA_NAME, times=1)
        outcomes = _run(_evaluator(server), [_event("e1"), _event("e2", OTHER_QUERY)])
        assert [r.status for r in server.requests[:3]] == [400, 400, 200]
        assert [r.response_format for r in server.requests[:3]] == [
            "json_schema",
            "json_object",
            "text",
        ]
        assert server.count(status=400) == 2  # learned once for the whole run
        plain = server.requests[2].body
        assert "response_format" not in plain and plain["max_tokens"] == 1500
        assert json.dumps(prompts.REQUIREMENTS_SCHEMA) in plain["messages"][0]["content"]
    assert [o.status for o in outcomes] == ["ok", "ok"]
    assert [r.supported_by for r in outcomes[0].judgment.requirements] == EXPECTED_SUPPORT
    assert {o.judgment.output_mode for o in outcomes} == {"instructions"}


def test_a_strict_server_refusing_a_field_gets_the_other_cap_name_never_the_same_request():
    """422 names max_completion_tokens (extra fields forbidden), then response_format: each
    change is sent once, and no rejected request is ever sent again unchanged."""
    with FakeJudgeServer(GoldOracle(GOLD), dialect=STRICT_422) as server:
        (outcome,) = _run(_evaluator(server), [_event("e1")])
        refused = [r.body for r in server.requests if r.status == 422]
        assert len(refused) == 2
        assert "max_completion_tokens" in refused[0] and "max_tokens" in refused[1]
        sent = [json.dumps(r.body, sort_keys=True) for r in server.requests]
        assert len(sent) == len(set(sent))
        assert outcome.status == "ok" and outcome.model_calls == 4
        assert outcome.judgment.output_mode == "json_object"


def test_a_server_that_ignores_max_completion_tokens_is_then_sent_max_tokens() -> None:
    """A server that takes json_schema but reads only max_tokens: a reply running past
    the cap shows it, and the next requests carry max_tokens."""
    reads_max_tokens = ServerDialect(
        "json-schema-max-tokens", OPENAI.response_formats, ("max_tokens",), context_tokens=4000
    )
    with FakeJudgeServer(GoldOracle(GOLD), dialect=reads_max_tokens) as server:
        server.inject("loop", schema=SUPPORT_SCHEMA_NAME, times=1)
        (outcome,) = _run(_evaluator(server, max_concurrency=1), [_event("e1")])
        support = _bodies(server, schema=SUPPORT_SCHEMA_NAME)
        assert "max_completion_tokens" in support[0] and "max_tokens" not in support[0]
        # The loop ran to 4000 tokens; the retry at twice the cap is capped for real.
        assert support[1] == {**support[1], "max_tokens": 3000}
        assert "max_completion_tokens" not in support[1]
    assert outcome.status == "ok"


@pytest.mark.parametrize(
    ("fault", "status"),
    [
        ("bad_request", 400),
        ("unauthorized", 401),
        ("forbidden", 403),
        ("not_found", 404),
        ("unprocessable", 422),
        ("validation_500", 500),
    ],
)
def test_a_rejected_request_is_not_retried(fault: str, status: int) -> None:
    with FakeJudgeServer(GoldOracle(GOLD)) as server:
        # Phase 1 is accepted first, so the shape is settled: the rejection is about the
        # request, and only a changed request could be sent (there is none to send).
        server.inject(fault, schema=SUPPORT_SCHEMA_NAME, times=None)
        (outcome,) = _run(_evaluator(server), [_event("e1")])
        assert server.count(schema=SUPPORT_SCHEMA_NAME) == 1
        assert server.count(status=status) == 1
    assert outcome.status == "error"
    assert outcome.reason.startswith(f"request_rejected: HTTP {status}")
    assert outcome.model_calls == 2


def test_outages_are_still_retried_with_back_off() -> None:
    with FakeJudgeServer(GoldOracle(GOLD)) as server:
        server.inject("server_error", schema=SUPPORT_SCHEMA_NAME, times=1)
        server.inject("rate_limit", schema=SUPPORT_SCHEMA_NAME, times=1)
        (outcome,) = _run(_evaluator(server), [_event("e1")])
    assert outcome.status == "ok" and outcome.model_calls == 4


def test_rejection_kinds_from_status_and_body() -> None:
    llama = "1 validation error:\n  {'loc': ('body', 'response_format', 'type')}"
    assert rejection_kind(500, llama, "max_completion_tokens", True) == FORMAT_REJECTED
    assert rejection_kind(500, "The server had an error", "max_tokens", False) is None
    assert rejection_kind(503, "overloaded", "max_tokens", True) is None
    # A generic 400 steps down while probing, but once a shape has been accepted it is
    # about one request (a filter, a long prompt) and changes nothing for the others.
    assert rejection_kind(400, "Invalid request.", "max_tokens", False) == FORMAT_REJECTED
    assert rejection_kind(400, "Invalid request.", "max_tokens", True) == REQUEST_REJECTED
    long_prompt = "This model's maximum context length is 8192 tokens"
    assert rejection_kind(400, long_prompt, "max_tokens", False) == REQUEST_REJECTED
    assert rejection_kind(401, "Incorrect API key", "max_tokens", False) == REQUEST_REJECTED


def test_a_truncated_reply_is_retried_larger_only_when_that_fits_the_timeout() -> None:
    """A server at 1,000 tokens a second: a reply cut at 1,000 tokens took a second, so
    2,000 tokens need about two, which a 1.5 s timeout cannot wait for."""
    settings = {"max_completion_tokens": 1000, "max_concurrency": 1}
    with FakeJudgeServer(GoldOracle(GOLD), tokens_per_second=1000) as server:
        server.inject("loop", schema=SUPPORT_SCHEMA_NAME, times=1)
        (cut,) = _run(_evaluator(server, timeout_seconds=1.5, **settings), [_event("e1")])
        assert server.count(schema=SUPPORT_SCHEMA_NAME) == 1
        server.reset_records()
        server.inject("loop", schema=SUPPORT_SCHEMA_NAME, times=1)
        (retried,) = _run(_evaluator(server, timeout_seconds=4.0, **settings), [_event("e2")])
        assert [r.cap for r in server.requests if r.schema == SUPPORT_SCHEMA_NAME] == [1000, 2000]
    assert cut.status == "error" and cut.reason.startswith("truncated:")
    assert "not asked again" in cut.reason and cut.model_calls == 2
    assert retried.status == "ok" and retried.model_calls == 3


def test_a_timeout_the_endpoint_speed_explains_is_not_sent_again() -> None:
    """At the 100 tokens a second the endpoint has shown, a reply of up to 1,500 tokens
    needs 15 s: a 1 s timeout says the request is too long for it, not that it is down."""
    with FakeJudgeServer(GoldOracle(GOLD), hang_seconds=3.0) as server:
        server.inject("hang", schema=SUPPORT_SCHEMA_NAME, times=None)
        slow = _evaluator(server, timeout_seconds=1.0)
        slow.speed.record(1000, 10.0)  # what earlier replies of the run showed
        (outcome,) = _run(slow, [_event("e1")])
        # Speed unknown (or fast enough): a timeout is retried, as an outage is.
        (unknown,) = _run(_evaluator(server, timeout_seconds=1.0), [_event("e2")])
    assert outcome.reason.startswith("timeout:") and "not sent again" in outcome.reason
    assert outcome.model_calls == 2  # phase 1, and the support request once
    assert unknown.reason.startswith("timeout:") and "(after 3 attempts)" in unknown.reason
    assert unknown.model_calls == 4


def test_a_reply_that_trickles_in_is_cut_at_the_timeout() -> None:
    """One byte every 0.2 s never trips a per-read timeout; the call's timeout bounds it."""
    with FakeJudgeServer(GoldOracle(GOLD), trickle_seconds=0.2) as server:
        server.inject("trickle", schema=SUPPORT_SCHEMA_NAME, times=1)
        started = time.monotonic()
        (outcome,) = _run(_evaluator(server, timeout_seconds=1.0), [_event("e1")])
        elapsed = time.monotonic() - started
    assert outcome.status == "ok" and outcome.model_calls == 3  # cut, then asked again
    assert elapsed < 10


@pytest.mark.parametrize("fault", ["trickle", "trickle_headers"])
@pytest.mark.parametrize(("max_retries", "attempts"), [(0, 1), (2, 3)])
def test_a_reply_that_trickles_in_on_every_attempt_is_a_timeout_within_the_timeout(
    fault: str, max_retries: int, attempts: int
) -> None:
    """One byte every 0.5 s (of the body, or from the status line on) would take minutes to
    send a reply and never trips a per-read timeout. Each attempt ends at the 1 s timeout,
    as a timeout, retried as timeouts are: a correctness bound (under 3x the attempts'
    timeouts), not a speed benchmark."""
    with FakeJudgeServer(GoldOracle(GOLD), trickle_seconds=0.5) as server:
        server.inject(fault, times=None)
        judge = _evaluator(server, timeout_seconds=1.0, max_retries=max_retries)
        started = time.monotonic()
        (outcome,) = _run(judge, [_event("e1")])
        elapsed = time.monotonic() - started
        assert server.count() == attempts
    plural = "s" if attempts > 1 else ""
    assert outcome.status == "error"
    assert outcome.reason == f"timeout: no reply within 1 s (after {attempts} attempt{plural})"
    assert outcome.model_calls == attempts
    assert elapsed < 3 * attempts * 1.0, elapsed


def test_no_requirements_is_a_failed_judgment_never_an_ok_row(tmp_path) -> None:
    store = JudgmentStore(tmp_path / "c.sqlite")
    with FakeJudgeServer(GoldOracle(GOLD)) as server:
        server.inject("empty_requirements", schema=REQUIREMENTS_SCHEMA_NAME, times=1)
        judge = CachingEvaluator(_evaluator(server, store, max_concurrency=1), store)
        outcomes = _run(judge, [_event("e1"), _event("e2"), _event("e3", OTHER_QUERY)])
        assert server.count(schema=SUPPORT_SCHEMA_NAME) == 1  # only e3 reached phase 2
        assert server.count(schema=REQUIREMENTS_SCHEMA_NAME) == 2  # once per query
    assert [o.status for o in outcomes] == ["error", "error", "ok"]
    assert outcomes[0].reason.startswith("no_requirements:")
    assert outcomes[0].judgment is None and outcomes[0].model_calls == 1
    assert outcomes[1].model_calls == 0
    # Neither the list nor a judgment is stored: the next run asks again.
    key = requirements_key(QUERY, "local-model", prompts.PROMPT_VERSION)
    assert store.get_requirements([key]) == {}


def test_more_requirements_than_the_bound_is_a_failed_judgment() -> None:
    with FakeJudgeServer(GoldOracle(GOLD)) as server:
        server.inject("many_requirements", schema=REQUIREMENTS_SCHEMA_NAME, times=None)
        (bounded,) = _run(_evaluator(server), [_event("e1")])
        (wider,) = _run(_evaluator(server, max_requirements=40), [_event("e2")])
    assert bounded.status == "error" and bounded.reason.startswith("too_many_requirements:")
    assert "30 requirements, more than the bound of 20" in bounded.reason
    assert wider.status == "ok" and wider.judgment.k == 30


def test_slice_metrics_and_the_error_share_count_an_empty_list_as_a_failed_judgment() -> None:
    """Before, `{"requirements": []}` was an ok row with k = 0 and precision 0.0 that
    dragged the slice's precision down; now it is an error the slice counts as one."""
    import pandas as pd

    from seer_metrics.rows import event_metric_rows, judged_row
    from seer_metrics.slices import slice_metrics
    from seer_pipelines.judging.partition import JudgingSummary

    events = [_event("e1"), _event("e2", OTHER_QUERY)]
    with FakeJudgeServer(GoldOracle(GOLD)) as server:
        server.inject("empty_requirements", schema=REQUIREMENTS_SCHEMA_NAME, times=1)
        judge = _evaluator(server, max_concurrency=1)
        outcomes = _run(judge, events)
    rows = [judged_row(e, o, judge) for e, o in zip(events, outcomes, strict=True)]
    assert [row["status"] for row in rows] == ["error", "ok"]
    metric_rows = event_metric_rows(rows)
    assert metric_rows[0]["precision"] is None and metric_rows[0].get("k") is None
    scores = pd.DataFrame(metric_rows).assign(partition_date="2026-01-01")
    (overall,) = slice_metrics(scores, slice_keys=[]).to_dict("records")
    assert (overall["events"], overall["evaluated"], overall["errors"]) == (2, 1, 1)
    # The mean is the ok event's alone: no 0.0 from the failed judgment in it.
    assert overall["mean_precision"] == pytest.approx(metric_rows[1]["precision"])
    summary = JudgingSummary(judged=1, error_reasons={"no_requirements": 1})
    assert summary.error_share == 0.5  # what the judging step's guard compares


def test_seer_evaluate_against_llama_cpp_python_scores_what_openai_scores(
    tmp_path, monkeypatch, capsys
) -> None:
    """The issue's "done when": against a server answering json_schema with
    llama-cpp-python's 500 and honouring json_object, `seer evaluate` scores every event as
    the OpenAI-shaped server does, with about two calls an event (before: 40 of 40 errors
    after 5 calls each)."""
    import argparse

    from seer_pipelines.cli import evaluate as evaluate_command

    events = _forty_events()
    path = tmp_path / "events.jsonl"
    path.write_text(
        "".join(
            json.dumps({"event_id": e.event_id, "task": e.task, "context": CONTEXT}) + "\n"
            for e in events
        )
    )

    def scores(dialect: ServerDialect, name: str) -> tuple[list[dict], int]:
        with FakeJudgeServer(GoldOracle(GOLD), dialect=dialect) as server:
            monkeypatch.setenv("OPENAI_API_KEY", "unused")
            monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
            out = tmp_path / f"{name}.jsonl"
            parser = argparse.ArgumentParser()
            evaluate_command.add_arguments(parser)
            argv = [str(path), "--evaluator", "openai", "--model", "local", "--out", str(out)]
            argv += ["--cache", str(tmp_path / f"{name}.sqlite"), "--rpm", "none", "--tpm", "none"]
            assert evaluate_command.run(parser.parse_args(argv)) == 0
            return [json.loads(line) for line in out.read_text().splitlines()], len(server.requests)

    llama_rows, llama_calls = scores(LLAMA_CPP_PYTHON, "llama")
    openai_rows, _ = scores(OPENAI, "openai")
    assert [row["status"] for row in llama_rows] == ["ok"] * len(events)
    metrics = ("recall", "precision", "f1", "ndcg", "k", "cited_ids")
    assert [[row[m] for m in metrics] for row in llama_rows] == [
        [row[m] for m in metrics] for row in openai_rows
    ]
    assert llama_calls <= 2 * len(events) + 1
    assert f"model calls: {llama_calls}" in capsys.readouterr().out


def test_a_request_rejected_in_every_shape_teaches_no_shape() -> None:
    """The run's first request is refused whatever its shape (its content is at fault):
    the next events are still asked in strict json_schema, not in plain instructions."""
    with FakeJudgeServer(GoldOracle(GOLD)) as server:
        server.inject("bad_request", query=QUERY, times=None)
        first, second = _run(
            _evaluator(server, max_concurrency=1), [_event("e1"), _event("e2", OTHER_QUERY)]
        )
        assert [r.response_format for r in server.requests if r.status == 400] == [
            "json_schema",
            "json_object",
            "text",
        ]
    assert first.reason.startswith("request_rejected: HTTP 400") and first.model_calls == 3
    assert second.status == "ok" and second.judgment.output_mode == "json_schema"
