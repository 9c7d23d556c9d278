"""A fake Slack Web API on 127.0.0.1 for tests and the demo (never used by product code).

Serves `chat.postMessage`, `conversations.replies` and `auth.test` the way the real API
answers them, records every request, and can be told to fail: `ratelimited` (HTTP 429 with
`Retry-After`), a 500, or `invalid_auth`. Every posted message gets a `ts`; a message posted
with `thread_ts` is a reply in that thread, and a `thread_ts` that names no message posted
to the channel is refused (`thread_not_found`), so a lost thread id cannot go unnoticed.
Slack's size limits are enforced as Slack does (`SLACK_LIMITS`): a `text` over 40,000
characters is refused with `msg_too_long`; more than 50 blocks, a section or context text
over 3,000 characters, a header over 150, or an empty text object with `invalid_blocks`
(with Slack's `errors` list, each naming the JSON pointer of the bad field).
Point the real `slack_sdk.WebClient` at it with `base_url=fake.base_url`.

    with FakeSlack() as slack:
        client = WebClient(token="xoxb-test", base_url=slack.base_url)
        root = client.chat_postMessage(channel="#alerts", text="down")
        client.chat_postMessage(channel="#alerts", text="up", thread_ts=root["ts"])
        assert [m["text"] for m in slack.replies(root["ts"])] == ["up"]
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qs, urlparse

from seer_testing.local_server import JSONHandler, LocalFake

Failure = Literal["ratelimited", "server_error", "invalid_auth"]
FAILURES: tuple[str, ...] = ("ratelimited", "server_error", "invalid_auth")

# Slack's documented limits (chat.postMessage and Block Kit), in characters or items.
SLACK_LIMITS = {
    "text": 40_000,
    "blocks": 50,
    "section_text": 3_000,
    "section_fields": 10,
    "field_text": 2_000,
    "header_text": 150,
    "context_elements": 10,
    "context_text": 3_000,
}


def _text_errors(text: Any, limit: int, pointer: str) -> list[str]:
    """Slack's errors for one text object: missing, empty or too long."""
    content = text.get("text") if isinstance(text, dict) else None
    if not isinstance(content, str) or not content:
        return [f"must be more than 0 characters [json-pointer:{pointer}/text]"]
    if len(content) > limit:
        return [f"must be less than {limit + 1} characters [json-pointer:{pointer}/text]"]
    return []


def block_errors(blocks: Any) -> list[str]:
    """What Slack's `invalid_blocks` answer lists for `blocks` (empty: Slack takes them)."""
    if not isinstance(blocks, list):
        return ["must be an array [json-pointer:/blocks]"]
    errors = []
    if len(blocks) > SLACK_LIMITS["blocks"]:
        errors.append(f"no more than {SLACK_LIMITS['blocks']} items allowed [json-pointer:/blocks]")
    for index, block in enumerate(blocks):
        where = f"/blocks/{index}"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "section":
            fields = block.get("fields") or []
            if "text" in block or not fields:
                errors += _text_errors(
                    block.get("text"), SLACK_LIMITS["section_text"], where + "/text"
                )
            if len(fields) > SLACK_LIMITS["section_fields"]:
                errors.append(f"no more than 10 items allowed [json-pointer:{where}/fields]")
            for number, item in enumerate(fields):
                errors += _text_errors(item, SLACK_LIMITS["field_text"], f"{where}/fields/{number}")
        elif kind == "header":
            errors += _text_errors(block.get("text"), SLACK_LIMITS["header_text"], where + "/text")
        elif kind == "context":
            elements = block.get("elements") or []
            if not elements or len(elements) > SLACK_LIMITS["context_elements"]:
                errors.append(f"must have 1 to 10 items [json-pointer:{where}/elements]")
            for number, item in enumerate(elements):
                errors += _text_errors(
                    item, SLACK_LIMITS["context_text"], f"{where}/elements/{number}"
                )
        elif kind != "divider":
            errors.append(f"unsupported block type [json-pointer:{where}/type]")
    return errors


@dataclass
class RecordedRequest:
    """One request as the fake saw it (the token is kept so tests can assert on it)."""

    method: str
    token: str | None
    body: dict[str, Any]
    answered: int
    accepted: bool
    headers: dict[str, str] = field(default_factory=dict)
    ts: str | None = None  # the timestamp an accepted chat.postMessage was given


class FakeSlack(LocalFake):
    """Context manager running the fake API in a background thread; see the module doc."""

    url_path = "/api/"

    def __init__(
        self,
        valid_tokens: tuple[str, ...] | None = None,
        retry_after_seconds: int = 1,
        team: str = "Seer Test",
    ) -> None:
        self.valid_tokens = valid_tokens
        self.retry_after_seconds = retry_after_seconds
        self.team = team
        self.requests: list[RecordedRequest] = []
        self._queued_failures: deque[Failure] = deque()
        self._outage: Failure | None = None
        self._lock = threading.Lock()
        super().__init__("fake Slack API")
        self._next_ts = 0
        self._posted: dict[str, tuple[str, dict[str, Any]]] = {}  # ts -> (channel, body)

    # -- control ----------------------------------------------------------------------

    def fail_next(self, failure: Failure, times: int = 1) -> None:
        """Answer the next `times` API calls with `failure`, then recover."""
        if failure not in FAILURES:
            raise ValueError(f"failure must be one of {FAILURES}, got {failure!r}")
        with self._lock:
            self._queued_failures.extend([failure] * times)

    def start_outage(self, failure: Failure) -> None:
        """Answer every call with `failure` until `end_outage()`."""
        if failure not in FAILURES:
            raise ValueError(f"failure must be one of {FAILURES}, got {failure!r}")
        with self._lock:
            self._outage = failure

    def end_outage(self) -> None:
        with self._lock:
            self._outage = None
            self._queued_failures.clear()

    @property
    def messages(self) -> list[dict[str, Any]]:
        """Bodies of the `chat.postMessage` calls that were accepted, in order."""
        with self._lock:
            return [r.body for r in self.requests if r.method == "chat.postMessage" and r.accepted]

    @property
    def top_level_messages(self) -> list[dict[str, Any]]:
        """Accepted messages that are not replies in a thread."""
        return [m for m in self.messages if not m.get("thread_ts")]

    def replies(self, ts: str) -> list[dict[str, Any]]:
        """Accepted replies in the thread of the message `ts`, in order."""
        return [m for m in self.messages if m.get("thread_ts") == ts]

    def handler(self) -> type[JSONHandler]:
        return _handler_for(self)

    # -- request handling (called from the server thread) -----------------------------

    def _take_failure(self) -> Failure | None:
        with self._lock:
            if self._outage is not None:
                return self._outage
            return self._queued_failures.popleft() if self._queued_failures else None

    def _answer(
        self, method: str, token: str | None, body: dict[str, Any]
    ) -> tuple[int, dict, dict]:
        """(HTTP status, extra headers, JSON body) for one call."""
        failure = self._take_failure()
        if failure == "ratelimited":
            return (
                429,
                {"Retry-After": str(self.retry_after_seconds)},
                {
                    "ok": False,
                    "error": "ratelimited",
                },
            )
        if failure == "server_error":
            return 500, {}, {"ok": False, "error": "internal_error"}
        if failure == "invalid_auth" or not token:
            return 200, {}, {"ok": False, "error": "invalid_auth" if token else "not_authed"}
        if self.valid_tokens is not None and token not in self.valid_tokens:
            return 200, {}, {"ok": False, "error": "invalid_auth"}
        if method == "auth.test":
            return (
                200,
                {},
                {
                    "ok": True,
                    "url": "https://seer-test.slack.com/",
                    "team": self.team,
                    "user": "seer",
                    "team_id": "T0SEER",
                    "user_id": "U0SEER",
                    "bot_id": "B0SEER",
                },
            )
        if method == "chat.postMessage":
            channel = body.get("channel")
            if not channel:
                return 200, {}, {"ok": False, "error": "channel_not_found"}
            if not body.get("text") and not body.get("blocks"):
                return 200, {}, {"ok": False, "error": "no_text"}
            if len(str(body.get("text") or "")) > SLACK_LIMITS["text"]:
                return 200, {}, {"ok": False, "error": "msg_too_long"}
            errors = block_errors(body["blocks"]) if body.get("blocks") is not None else []
            if errors:
                answer = {
                    "ok": False,
                    "error": "invalid_blocks",
                    "errors": errors,
                    "response_metadata": {"messages": [f"[ERROR] {e}" for e in errors]},
                }
                return 200, {}, answer
            thread_ts = body.get("thread_ts")
            with self._lock:
                root = self._posted.get(thread_ts) if thread_ts else None
                if thread_ts and (root is None or root[0] != channel):
                    return 200, {}, {"ok": False, "error": "thread_not_found"}
                self._next_ts += 1
                ts = f"{int(time.time())}.{self._next_ts:06d}"
                self._posted[ts] = (channel, body)
            message = {"text": body.get("text"), "blocks": body.get("blocks"), "ts": ts}
            if thread_ts:
                message["thread_ts"] = thread_ts
            return 200, {}, {"ok": True, "channel": channel, "ts": ts, "message": message}
        if method == "conversations.replies":
            ts = body.get("ts")
            with self._lock:
                root = self._posted.get(ts) if ts else None
                if root is None or root[0] != body.get("channel"):
                    return 200, {}, {"ok": False, "error": "thread_not_found"}
                thread = [
                    {"ts": reply_ts, "thread_ts": ts, "text": posted.get("text")}
                    for reply_ts, (_, posted) in self._posted.items()
                    if posted.get("thread_ts") == ts
                ]
            first = {"ts": ts, "text": root[1].get("text")}
            return 200, {}, {"ok": True, "messages": [first, *thread], "has_more": False}
        return 404, {}, {"ok": False, "error": "unknown_method"}


def _parse_body(content_type: str, raw: bytes, query: str) -> dict[str, Any]:
    body: dict[str, Any] = {k: v[-1] for k, v in parse_qs(query).items()}
    if not raw:
        return body
    if content_type.startswith("application/json"):
        parsed = json.loads(raw.decode("utf-8"))
        if isinstance(parsed, dict):
            body.update(parsed)
    elif content_type.startswith("application/x-www-form-urlencoded"):
        body.update({k: v[-1] for k, v in parse_qs(raw.decode("utf-8")).items()})
    if isinstance(body.get("blocks"), str):
        with contextlib.suppress(json.JSONDecodeError):
            body["blocks"] = json.loads(body["blocks"])
    return body


def _handler_for(fake: FakeSlack) -> type[JSONHandler]:
    class Handler(JSONHandler):
        def do_POST(self) -> None:
            self._handle()

        def do_GET(self) -> None:
            self._handle()

        def _handle(self) -> None:
            url = urlparse(self.path)
            method = url.path.rsplit("/", 1)[-1]
            raw = self.read_body()
            try:
                body = _parse_body(self.headers.get("Content-Type", ""), raw, url.query)
            except (json.JSONDecodeError, UnicodeDecodeError):
                body = {}
            authorization = self.headers.get("Authorization", "")
            token = authorization.removeprefix("Bearer ").strip() or body.get("token")
            status, headers, answer = fake._answer(method, token, body)
            with fake._lock:
                fake.requests.append(
                    RecordedRequest(
                        method=method,
                        token=token,
                        body=body,
                        answered=status,
                        accepted=answer.get("ok") is True,
                        headers={k: v for k, v in self.headers.items()},
                        ts=answer.get("ts"),
                    )
                )
            self.send_json(status, headers, answer)

    return Handler
