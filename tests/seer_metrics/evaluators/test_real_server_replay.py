"""The LLM judge against real servers' recorded HTTP exchanges (issue 19, item 5).

`tests/fixtures/real_servers/*.json` hold what a real llama.cpp `llama-server` and a real
llama-cpp-python server answered to `seer evaluate` and `seer calibrate` runs
(`seer_testing.real_judge_runs`), with small GGUF models from PyPI packages. Each test
runs the command again, through the real `openai` client, against a local server that
answers only the recorded requests (`seer_testing.recorded_servers.ReplayServer`), and
asserts what those servers did: how they took or refused each request shape, what they
read as the cap, the usage and finish reasons they sent, and what Seer made of replies
that small models get wrong. Every expected value below is read from the recorded bytes.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from seer_metrics import RetrievalEvent
from seer_metrics.evaluators.llm import LLMEvaluator, LLMSettings, prompts
from seer_metrics.evaluators.llm.replies import reason_code
from seer_testing.judge_dialects import LLAMA_CPP_PYTHON, refusal
from seer_testing.real_judge_runs import RUNS, TIMEOUT_SECONDS, command_line, portable, replay
from seer_testing.recorded_servers import Exchange, Recording, ReplayServer

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "real_servers"
RECORDINGS = {path.stem: Recording.load(path) for path in sorted(FIXTURES.glob("*.json"))}
EVALUATE_RUNS = [name for name, spec in RUNS.items() if spec.command == "evaluate"]
# What a reply a small model got wrong may end as: a failed judgment, never a score.
JUDGMENT_ERRORS = {"invalid_json", "schema_mismatch", "no_requirements",
                   "too_many_requirements", "truncated"}  # fmt: skip


def _server(name: str) -> str:
    return RECORDINGS[name].server["name"]


def _cases(server: str | None = None, runs: list[str] | None = None) -> list[tuple[str, str]]:
    return [
        (recording, run)
        for recording in RECORDINGS
        if server is None or _server(recording) == server
        for run in (runs or list(RUNS))
    ]


def _ids(cases: list[tuple[str, str]]) -> list[str]:
    return [f"{recording}-{run}" for recording, run in cases]


def _chat(exchanges: list[Exchange]) -> list[Exchange]:
    return [e for e in exchanges if e.path.endswith("/chat/completions")]


def _format(body: dict[str, Any]) -> str:
    return (body.get("response_format") or {"type": "text"})["type"]


def _cap(body: dict[str, Any]) -> tuple[str, int]:
    (field,) = [name for name in ("max_completion_tokens", "max_tokens") if name in body]
    return field, body[field]


def test_there_are_recordings_of_both_servers() -> None:
    assert {recording.server["name"] for recording in RECORDINGS.values()} >= {
        "llama-server",
        "llama-cpp-python",
    }


@pytest.mark.parametrize(("recording", "run"), _cases(), ids=_ids(_cases()))
def test_a_replayed_run_sends_exactly_the_recorded_requests_and_ends_as_recorded(
    recording: str, run: str, tmp_path: Path
) -> None:
    recorded = RECORDINGS[recording].runs[run]
    result, server = replay(RECORDINGS[recording], run, tmp_path)
    assert server.unused() == []  # every recorded request was sent again, nothing else
    assert result.exit_code == recorded["exit_code"]
    assert portable(result.stdout, tmp_path) == recorded["stdout"]
    assert result.scores == recorded["scores"]
    if result.scores is not None:
        # Every request that reached the server is counted, and charged to an event.
        assert sum(row["model_calls"] for row in result.scores) == len(recorded["exchanges"])


def _judge(recording: str, run: str, tmp_path: Path):
    """The LLM judge itself (not the CLI) on a recorded evaluate run's events, against the
    replay: the same requests, so the outcomes (output mode included) are the recorded
    replies' own. Returns (events, outcomes, the replay server)."""
    spec = RUNS[run]
    events = [
        RetrievalEvent.from_record(json.loads(line))
        for line in _events_file(spec, tmp_path).read_text(encoding="utf-8").splitlines()
    ]
    cap = int(spec.options[spec.options.index("--max-tokens") + 1])
    with ReplayServer(RECORDINGS[recording].exchanges(run)) as server:
        settings = LLMSettings(
            model=RECORDINGS[recording].server["model"],
            api_key="unused",
            base_url=server.base_url,
            requests_per_minute=None,
            tokens_per_minute=None,
            max_concurrency=1,
            timeout_seconds=float(TIMEOUT_SECONDS),
            max_completion_tokens=cap,
            prices={},
        )
        outcomes = asyncio.run(LLMEvaluator(settings).evaluate(events))
    assert server.unused() == []
    return events, outcomes, server


def _events_file(spec, directory: Path) -> Path:
    command_line(spec, "unused", directory)
    return directory / "events.jsonl"


@pytest.mark.parametrize(
    ("recording", "run"), _cases("llama-cpp-python"), ids=_ids(_cases("llama-cpp-python"))
)
def test_llama_cpp_python_refuses_json_schema_with_a_500_once_then_takes_json_object(
    recording: str, run: str
) -> None:
    """Its RouteErrorHandler turns the request validation error into HTTP 500; Seer reads
    the body, steps down to json_object (the schema in `response_format.schema` and in the
    system message) with `max_tokens`, and never sends the refused request again."""
    exchanges = _chat(RECORDINGS[recording].exchanges(run))
    probe, *accepted = exchanges
    assert probe.status == 500 and _format(probe.request) == "json_schema"
    assert _cap(probe.request)[0] == "max_completion_tokens"
    message = probe.response["error"]["message"]
    assert "('body', 'response_format', 'type')" in message
    assert "Input should be 'text' or 'json_object'" in message
    assert [e.status for e in accepted] == [200] * len(accepted)
    schemas = {prompts.REQUIREMENTS_SCHEMA_NAME: prompts.REQUIREMENTS_SCHEMA,
               prompts.SUPPORT_SCHEMA_NAME: prompts.SUPPORT_SCHEMA}  # fmt: skip
    for exchange in accepted:
        body = exchange.request
        assert _format(body) == "json_object" and _cap(body)[0] == "max_tokens"
        assert body["response_format"]["schema"] in schemas.values()
        assert json.dumps(body["response_format"]["schema"]) in body["messages"][0]["content"]
        # No OpenAI `refusal` field in its replies, and usage in OpenAI's three fields.
        assert "refusal" not in exchange.response["choices"][0]["message"]
        assert set(exchange.response["usage"]) == {"prompt_tokens", "completion_tokens",
                                                   "total_tokens"}  # fmt: skip
    sent = [json.dumps(e.request, sort_keys=True) for e in exchanges]
    assert len(sent) == len(set(sent))  # no request sent twice as it was


@pytest.mark.parametrize(
    ("recording", "run"), _cases("llama-server"), ids=_ids(_cases("llama-server"))
)
def test_llama_server_takes_strict_json_schema_and_max_completion_tokens(
    recording: str, run: str
) -> None:
    for exchange in _chat(RECORDINGS[recording].exchanges(run)):
        assert exchange.status == 200
        body = exchange.request
        assert _format(body) == "json_schema" and body["response_format"]["json_schema"]["strict"]
        assert _cap(body)[0] == "max_completion_tokens" and "max_tokens" not in body
        assert exchange.headers["server"].startswith("llama.cpp")
        # Its usage adds prompt_tokens_details.cached_tokens (its prompt cache) to OpenAI's.
        usage = exchange.response["usage"]
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


@pytest.mark.parametrize(("recording", "run"), _cases(), ids=_ids(_cases()))
def test_each_server_stops_at_the_cap_it_reads_and_a_cut_reply_is_asked_once_at_twice_it(
    recording: str, run: str
) -> None:
    """finish_reason "length" comes with exactly the cap's completion tokens, "stop" with
    fewer. A reply cut at the run's cap is asked again once, the same conversation at
    twice the cap; cut again, the event is `truncated` (its score row says so)."""
    recorded = RECORDINGS[recording].runs[run]
    cap = int(recorded["argv"][recorded["argv"].index("--max-tokens") + 1])
    exchanges = [e for e in _chat(RECORDINGS[recording].exchanges(run)) if e.status == 200]
    cut_twice = 0
    for index, exchange in enumerate(exchanges):
        choice, usage = exchange.response["choices"][0], exchange.response["usage"]
        _, sent_cap = _cap(exchange.request)
        assert sent_cap in (cap, 2 * cap)
        if choice["finish_reason"] == "length":
            assert usage["completion_tokens"] == sent_cap
        else:
            assert choice["finish_reason"] == "stop"
            assert usage["completion_tokens"] <= sent_cap
        if sent_cap == 2 * cap:
            # Asked again only after the same conversation was cut at the cap.
            earlier = exchanges[:index]
            same = [e for e in earlier if e.request["messages"] == exchange.request["messages"]]
            assert [_cap(e.request)[1] for e in same] == [cap]
            assert same[0].response["choices"][0]["finish_reason"] == "length"
            cut_twice += choice["finish_reason"] == "length"
    truncated = Counter(
        reason_code(row["reason"]) for row in recorded["scores"] or [] if row["status"] != "ok"
    )["truncated"]
    if recorded["scores"] is not None:
        # A query cut twice fails each of its events (here one event a query).
        assert truncated == cut_twice
    if run == "truncated":
        assert cut_twice == len(recorded["scores"]) > 0


@pytest.mark.parametrize(
    ("recording", "run"), _cases(runs=EVALUATE_RUNS), ids=_ids(_cases(runs=EVALUATE_RUNS))
)
def test_the_judge_records_the_mode_usage_and_calls_the_server_reported(
    recording: str, run: str, tmp_path: Path
) -> None:
    events, outcomes, server = _judge(recording, run, tmp_path)
    answered = _chat(server.answered)
    replies = [e.response for e in answered if e.status == 200]
    assert sum(o.usage.prompt_tokens for o in outcomes) == sum(
        r["usage"]["prompt_tokens"] for r in replies
    )
    assert sum(o.usage.completion_tokens for o in outcomes) == sum(
        r["usage"]["completion_tokens"] for r in replies
    )
    assert sum(o.model_calls for o in outcomes) == len(answered)
    expected_mode = "json_object" if _server(recording) == "llama-cpp-python" else "json_schema"
    for event, outcome in zip(events, outcomes, strict=True):
        if outcome.status == "ok":
            assert outcome.judgment.output_mode == expected_mode
            assert set(outcome.judgment.cited_ids) <= {item.id for item in event.context}
        else:
            # A small model's bad answer is a failed judgment, never a refused request.
            assert reason_code(outcome.reason) in JUDGMENT_ERRORS


@pytest.mark.parametrize(("recording", "run"), _cases(), ids=_ids(_cases()))
def test_a_reply_that_is_no_valid_answer_gets_one_repair_turn_holding_it(
    recording: str, run: str
) -> None:
    """A repair request carries the bad reply the server sent, as the assistant's turn."""
    exchanges = [e for e in _chat(RECORDINGS[recording].exchanges(run)) if e.status == 200]
    for exchange in exchanges:
        messages = exchange.request["messages"]
        assert len(messages) in (2, 4)
        if len(messages) == 4:
            (original,) = [e for e in exchanges if e.request["messages"] == messages[:2]
                           and e.response["choices"][0]["finish_reason"] == "stop"]  # fmt: skip
            bad = original.response["choices"][0]["message"]["content"]
            assert messages[2] == {"role": "assistant", "content": bad}
            assert messages[3]["content"].startswith("Your previous reply could not be used: ")


def test_the_fake_llama_cpp_python_dialect_refuses_json_schema_as_the_real_server_did() -> None:
    """The fake judge's LLAMA_CPP_PYTHON dialect, which the 40-event "done when" test of
    issue 19 runs against (test_llm_servers.py: every event scored as the OpenAI-shaped
    server scores it, about two calls an event), answers the recorded probe with the real
    status and body, up to the traceback the real server appends to its message."""
    probes = [
        _chat(recording.exchanges(run))[0]
        for recording in RECORDINGS.values()
        if recording.server["name"] == "llama-cpp-python"
        for run in RUNS
    ]
    assert probes
    for probe in probes:
        status, body = refusal(LLAMA_CPP_PYTHON, probe.request)
        real = probe.response["error"]
        assert status == probe.status == 500
        assert {**body["error"], "message": ""} == {**real, "message": ""}
        assert real["message"].startswith(body["error"]["message"] + "\n\n  File ")
