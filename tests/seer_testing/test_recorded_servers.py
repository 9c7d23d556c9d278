"""The recording proxy and the replay server (`seer_testing.recorded_servers`), through the
real `openai` client: what is recorded is what the server sent, a replay answers only the
requests that were recorded, and anything else fails the test with a diff."""

from __future__ import annotations

import asyncio
import json

import openai
import pytest

from seer_metrics import RetrievalEvent
from seer_metrics.evaluators.llm import LLMEvaluator, LLMSettings
from seer_testing.fake_judge import FakeJudgeServer, GoldOracle
from seer_testing.judge_dialects import LLAMA_CPP_PYTHON
from seer_testing.recorded_servers import (
    UNMATCHED_STATUS,
    Exchange,
    Recording,
    RecordingProxy,
    ReplayServer,
)
from tests.judge_examples import CONTEXT, GOLD, OTHER_QUERY, QUERY


def _judge(base_url: str, **overrides) -> LLMEvaluator:
    settings = {"model": "local", "api_key": "unused", "base_url": base_url,
                "requests_per_minute": None, "tokens_per_minute": None, "max_concurrency": 1,
                "timeout_seconds": 5.0, "max_retries": 0, "prices": {}, **overrides}  # fmt: skip
    return LLMEvaluator(LLMSettings(**settings))


def _events() -> list[RetrievalEvent]:
    return [
        RetrievalEvent.from_record({"event_id": "e1", "task": QUERY, "context": CONTEXT}),
        RetrievalEvent.from_record({"event_id": "e2", "task": OTHER_QUERY, "context": CONTEXT}),
    ]


def _record() -> list[Exchange]:
    with FakeJudgeServer(GoldOracle(GOLD), dialect=LLAMA_CPP_PYTHON) as fake:
        with RecordingProxy(fake.base_url.removesuffix("/v1")) as proxy:
            asyncio.run(_judge(proxy.base_url).evaluate(_events()))
        assert len(fake.requests) == len(proxy.exchanges)
    return proxy.exchanges


def test_the_proxy_records_what_the_server_sent_and_a_replay_gives_the_same_outcomes(
    tmp_path,
) -> None:
    exchanges = _record()
    # The 500 for json_schema, then json_object: bodies and statuses as the server sent them.
    assert [e.status for e in exchanges] == [500, 200, 200, 200, 200]
    assert exchanges[0].request["response_format"]["type"] == "json_schema"
    assert "Input should be 'text' or 'json_object'" in exchanges[0].response["error"]["message"]
    assert exchanges[0].headers["content-type"].startswith("application/json")
    assert all(e.path == "/v1/chat/completions" and e.method == "POST" for e in exchanges)
    Recording({"name": "fake"}, {"run": {"exchanges": [e.to_dict() for e in exchanges]}}).save(
        tmp_path / "fixture.json"
    )
    loaded = Recording.load(tmp_path / "fixture.json").exchanges("run")
    assert loaded == exchanges

    with ReplayServer(loaded) as replay:
        outcomes = asyncio.run(_judge(replay.base_url).evaluate(_events()))
    assert replay.unused() == [] and replay.answered == exchanges
    assert [o.status for o in outcomes] == ["ok", "ok"]
    assert [o.model_calls for o in outcomes] == [3, 2]  # the rejected probe is e1's
    assert {o.judgment.output_mode for o in outcomes} == {"json_object"}
    recorded_usage = sum(e.response["usage"]["completion_tokens"] for e in exchanges[1:])
    assert sum(o.usage.completion_tokens for o in outcomes) == recorded_usage


def test_a_request_that_was_not_recorded_fails_with_a_diff() -> None:
    exchanges = _record()
    replay = ReplayServer(exchanges).start()
    # Another cap: the probe's body differs from the recorded one in that field alone.
    outcomes = asyncio.run(
        _judge(replay.base_url, max_completion_tokens=700).evaluate(_events()[:1])
    )
    assert outcomes[0].status == "error"
    assert f"HTTP {UNMATCHED_STATUS}" in outcomes[0].reason
    with pytest.raises(AssertionError, match="match no recorded exchange") as failure:
        replay.stop()
    message = str(failure.value)
    assert '-  "max_completion_tokens": 1500,' in message
    assert '+  "max_completion_tokens": 700,' in message


def test_each_recorded_exchange_answers_once() -> None:
    exchanges = _record()
    probe = exchanges[0]
    replay = ReplayServer([probe]).start()
    client = openai.OpenAI(base_url=replay.base_url, api_key="unused", max_retries=0)
    for _ in range(2):
        with pytest.raises(openai.APIStatusError) as answered:
            client.chat.completions.create(**probe.request)
        statuses = answered.value.status_code
    assert statuses == UNMATCHED_STATUS  # the second time
    with pytest.raises(AssertionError, match=r"sent more often than recorded \(1 time"):
        replay.stop()


def test_the_system_message_text_is_not_matched_everything_else_is() -> None:
    exchanges = _record()
    accepted = exchanges[1]
    reworded = json.loads(json.dumps(accepted.request))
    reworded["messages"][0]["content"] = "Other words for the same instructions."
    with ReplayServer([accepted]) as replay:
        client = openai.OpenAI(base_url=replay.base_url, api_key="unused", max_retries=0)
        reply = client.chat.completions.create(**reworded)
    assert reply.choices[0].message.content == accepted.response["choices"][0]["message"]["content"]
    changed_user = json.loads(json.dumps(accepted.request))
    changed_user["messages"][-1]["content"] += " "
    replay = ReplayServer([accepted]).start()
    client = openai.OpenAI(base_url=replay.base_url, api_key="unused", max_retries=0)
    with pytest.raises(openai.APIStatusError):
        client.chat.completions.create(**changed_user)
    with pytest.raises(AssertionError, match="match no recorded exchange"):
        replay.stop()
