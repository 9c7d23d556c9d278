"""The fake judge server itself: what it answers, its RPM limit, its records."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import openai
import pytest

from seer_metrics.evaluators.llm import prompts
from seer_testing.fake_judge import (
    REQUIREMENTS_SCHEMA_NAME,
    SUPPORT_SCHEMA_NAME,
    FakeJudgeServer,
    GoldOracle,
    GoldRequirement,
)

QUERY = "Who directed Inception?"
ORACLE = GoldOracle({QUERY: [GoldRequirement("The director", "Nolan directed Inception")]})


def _requirements_call(client: openai.OpenAI, query: str = QUERY):
    return client.chat.completions.create(
        model="fake",
        messages=prompts.requirements_messages(query),  # type: ignore[arg-type]
        temperature=0,
        response_format=prompts.response_format(  # type: ignore[arg-type]
            prompts.REQUIREMENTS_SCHEMA_NAME, prompts.REQUIREMENTS_SCHEMA
        ),
    )


def test_answers_both_schemas_from_the_oracle_with_real_quotes() -> None:
    with FakeJudgeServer(ORACLE) as server:
        client = openai.OpenAI(api_key="k", base_url=server.base_url, max_retries=0)
        reply = _requirements_call(client)
        assert json.loads(reply.choices[0].message.content) == {
            "requirements": [{"id": "r1", "text": "The director"}]
        }
        assert reply.usage.prompt_tokens > 0
        support = client.chat.completions.create(
            model="fake",
            messages=prompts.support_messages(  # type: ignore[arg-type]
                QUERY,
                [("r1", "The director")],
                [("a", "Christopher Nolan directed Inception."), ("b", "Unrelated.")],
            ),
            response_format=prompts.response_format(  # type: ignore[arg-type]
                prompts.SUPPORT_SCHEMA_NAME, prompts.SUPPORT_SCHEMA
            ),
        )
        answer = json.loads(support.choices[0].message.content)
        assert answer == {
            "requirements": [
                {
                    "id": "r1",
                    "supported_by": ["a"],
                    "evidence": [{"passage": "a", "quote": "Nolan directed Inception"}],
                }
            ]
        }
        assert server.count(schema=REQUIREMENTS_SCHEMA_NAME) == 1
        assert server.count(schema=SUPPORT_SCHEMA_NAME) == 1


def test_enforces_its_rpm_limit_with_retry_after_and_serves_stats() -> None:
    with FakeJudgeServer(ORACLE, requests_per_minute=120, rate_window_seconds=1.0) as server:
        client = openai.OpenAI(api_key="k", base_url=server.base_url, max_retries=0)
        _requirements_call(client)
        _requirements_call(client)  # 2 a second allowed
        with pytest.raises(openai.RateLimitError) as raised:
            _requirements_call(client)
        assert 0 < float(raised.value.response.headers["retry-after"]) <= 1.0
        time.sleep(float(raised.value.response.headers["retry-after"]) + 0.05)
        _requirements_call(client)
        stats_url = server.base_url.removesuffix("/v1") + "/fake/stats"
        with urllib.request.urlopen(stats_url, timeout=5) as response:
            stats = json.load(response)
    assert stats["requests"] == 4
    assert stats["by_status"] == {"200": 3, "429": 1}


def test_injected_faults_are_consumed_in_order_and_unknown_ones_refused() -> None:
    with FakeJudgeServer(ORACLE) as server:
        server.inject("server_error", times=1)
        server.inject("refusal", schema=REQUIREMENTS_SCHEMA_NAME, times=1)
        client = openai.OpenAI(api_key="k", base_url=server.base_url, max_retries=0)
        with pytest.raises(openai.InternalServerError):
            _requirements_call(client)
        assert _requirements_call(client).choices[0].message.refusal
        assert _requirements_call(client).choices[0].finish_reason == "stop"
        with pytest.raises(ValueError, match="unknown fault"):
            server.inject("explode")
        request = urllib.request.Request(
            server.base_url + "/chat/completions", data=b"not json", method="POST"
        )
        with pytest.raises(urllib.error.HTTPError) as raised:
            urllib.request.urlopen(request, timeout=5)
        assert raised.value.code == 400


@pytest.mark.parametrize(
    ("fault", "headers_at_once"), [("trickle", True), ("trickle_headers", False)]
)
def test_a_trickled_answer_is_whole_and_arrives_a_byte_at_a_time(
    fault: str, headers_at_once: bool
) -> None:
    """The answer is a complete, valid reply; `trickle` sends its headers at once (a client
    sees the status and waits for the body), `trickle_headers` not even those."""
    with FakeJudgeServer(ORACLE, trickle_seconds=0.002) as server:
        server.inject(fault)
        client = openai.OpenAI(api_key="k", base_url=server.base_url, max_retries=0)
        sent = time.monotonic()
        with client.chat.completions.with_streaming_response.create(
            model="fake",
            messages=prompts.requirements_messages(QUERY),  # type: ignore[arg-type]
            response_format=prompts.response_format(  # type: ignore[arg-type]
                prompts.REQUIREMENTS_SCHEMA_NAME, prompts.REQUIREMENTS_SCHEMA
            ),
        ) as response:
            started = time.monotonic()
            headers_after = started - sent
            body = response.read()
            body_after = time.monotonic() - started
    content = json.loads(body)["choices"][0]["message"]["content"]
    assert json.loads(content) == {"requirements": [{"id": "r1", "text": "The director"}]}
    assert body_after > len(body) * 0.002 * 0.8  # the body came a byte at a time
    assert (headers_after < 0.1) is headers_at_once, headers_after
