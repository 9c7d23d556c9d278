"""The fake Slack Web API answers the real slack_sdk client like Slack does."""

from __future__ import annotations

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from seer_testing.fake_slack import FakeSlack


def client(slack: FakeSlack, token: str = "xoxb-test") -> WebClient:
    return WebClient(token=token, base_url=slack.base_url, timeout=5)


def test_post_message_and_auth_test_are_recorded() -> None:
    with FakeSlack() as slack:
        assert slack.base_url.startswith("http://127.0.0.1:")
        assert slack.base_url.endswith("/")
        web = client(slack)
        assert web.auth_test()["team"] == "Seer Test"
        blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "*hi*"}}]
        response = web.chat_postMessage(channel="#alerts", text="hi", blocks=blocks)
        assert response["ok"] is True
        assert response["ts"]
        assert slack.messages == [{"channel": "#alerts", "text": "hi", "blocks": blocks}]
        assert [r.method for r in slack.requests] == ["auth.test", "chat.postMessage"]
        assert slack.requests[1].token == "xoxb-test"


def test_ratelimited_answers_429_with_retry_after_then_recovers() -> None:
    with FakeSlack(retry_after_seconds=7) as slack:
        slack.fail_next("ratelimited")
        web = client(slack)
        with pytest.raises(SlackApiError) as caught:
            web.chat_postMessage(channel="#alerts", text="hi")
        assert caught.value.response.status_code == 429
        assert caught.value.response.headers["Retry-After"] == "7"
        assert caught.value.response["error"] == "ratelimited"
        assert slack.messages == []
        web.chat_postMessage(channel="#alerts", text="hi")
        assert len(slack.messages) == 1


def test_server_error_and_outage() -> None:
    with FakeSlack() as slack:
        slack.start_outage("server_error")
        web = client(slack)
        for _ in range(2):
            with pytest.raises(SlackApiError) as caught:
                web.chat_postMessage(channel="#alerts", text="hi")
            assert caught.value.response.status_code == 500
        slack.end_outage()
        web.chat_postMessage(channel="#alerts", text="hi")
        assert len(slack.messages) == 1
        assert [r.answered for r in slack.requests] == [500, 500, 200]


def test_invalid_auth_for_unknown_token_or_on_demand() -> None:
    with FakeSlack(valid_tokens=("xoxb-good",)) as slack:
        with pytest.raises(SlackApiError, match="invalid_auth"):
            client(slack, "xoxb-bad").chat_postMessage(channel="#alerts", text="hi")
        slack.fail_next("invalid_auth")
        with pytest.raises(SlackApiError, match="invalid_auth"):
            client(slack, "xoxb-good").auth_test()
        assert client(slack, "xoxb-good").auth_test()["ok"]


def test_missing_channel_is_rejected() -> None:
    with FakeSlack() as slack, pytest.raises(SlackApiError, match="channel_not_found"):
        client(slack).chat_postMessage(channel="", text="hi")


def test_unknown_failure_kind_is_an_error() -> None:
    with pytest.raises(ValueError, match="failure must be one of"):
        FakeSlack().fail_next("teapot")  # type: ignore[arg-type]


def test_replies_go_into_the_thread_of_a_posted_message() -> None:
    with FakeSlack() as slack:
        web = client(slack)
        root = web.chat_postMessage(channel="#alerts", text="f1 dropped")
        other = web.chat_postMessage(channel="#alerts", text="another day")
        assert root["ts"] != other["ts"]
        reply = web.chat_postMessage(channel="#alerts", text="recovered", thread_ts=root["ts"])
        assert reply["message"]["thread_ts"] == root["ts"]
        assert [m["text"] for m in slack.replies(root["ts"])] == ["recovered"]
        assert slack.requests[-1].ts == reply["ts"]
        assert slack.replies(other["ts"]) == []
        assert [m["text"] for m in slack.top_level_messages] == ["f1 dropped", "another day"]
        thread = web.conversations_replies(channel="#alerts", ts=root["ts"])
        assert [m["text"] for m in thread["messages"]] == ["f1 dropped", "recovered"]


def test_a_thread_that_was_never_posted_is_refused() -> None:
    with FakeSlack() as slack:
        web = client(slack)
        root = web.chat_postMessage(channel="#alerts", text="f1 dropped")
        for channel, ts in (("#alerts", "1.000001"), ("#elsewhere", root["ts"])):
            with pytest.raises(SlackApiError) as error:
                web.chat_postMessage(channel=channel, text="recovered", thread_ts=ts)
            assert error.value.response["error"] == "thread_not_found"
        assert len(slack.messages) == 1


def section(text: str) -> dict:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


@pytest.mark.parametrize(
    ("text", "blocks", "error", "pointer"),
    [
        ("x" * 40_001, None, "msg_too_long", None),
        ("hi", [section("x" * 3_001)], "invalid_blocks", "/blocks/0/text/text"),
        ("hi", [section("")], "invalid_blocks", "/blocks/0/text/text"),
        (
            "hi",
            [{"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}],
            "invalid_blocks",
            "/blocks/0/text/text",
        ),
        (
            "hi",
            [
                {"type": "divider"},
                {"type": "context", "elements": [{"type": "mrkdwn", "text": "c" * 3_001}]},
            ],
            "invalid_blocks",
            "/blocks/1/elements/0/text",
        ),
        ("hi", [section("ok")] * 51, "invalid_blocks", "/blocks]"),
    ],
    ids=["text", "section", "empty-section", "header", "context", "51-blocks"],
)
def test_messages_over_slacks_limits_are_refused_as_slack_does(
    text: str, blocks: list | None, error: str, pointer: str | None
) -> None:
    with FakeSlack() as slack:
        with pytest.raises(SlackApiError) as caught:
            client(slack).chat_postMessage(channel="#alerts", text=text, blocks=blocks)
        assert caught.value.response["error"] == error
        if pointer is not None:
            assert any(pointer in item for item in caught.value.response["errors"])
        assert slack.messages == []


def test_messages_at_slacks_limits_are_taken() -> None:
    header = {"type": "header", "text": {"type": "plain_text", "text": "h" * 150}}
    blocks = [header, *[section("x" * 3_000)] * 49]
    with FakeSlack() as slack:
        client(slack).chat_postMessage(channel="#alerts", text="t" * 40_000, blocks=blocks)
        assert len(slack.messages) == 1
