"""Real servers' HTTP exchanges, recorded once and replayed in tests.

The fakes in `judge_dialects` answer as a server was *measured* to; these answer with what
a real server *sent*. `RecordingProxy` sits between Seer and a real OpenAI-compatible
server (llama.cpp's `llama-server`, llama-cpp-python's server) and keeps every exchange:
the request body, the status, the headers that matter and the reply body. `ReplayServer`
answers a test's requests from those exchanges, so the suite exercises the real servers'
request validation, reply shapes, usage fields and finish reasons without building them
on every run.

A request is matched on its method, path and body, the system message aside (its wording
may change without changing what a server does with the request; the JSON schemas, the
response format, the cap and every user and assistant message are matched). Each recorded
exchange answers once, in the order recorded, so a request sent more often than it was
recorded is unmatched too. An unmatched request gets HTTP 418 and fails the test on
`stop()`, with a diff against the nearest recorded request.

Record with a client timeout longer than any reply: a request the client gave up on is
still recorded with the reply that came later, and its replay would then differ.
"""

from __future__ import annotations

import difflib
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from seer_testing.local_server import JSONHandler, LocalFake

# Reply headers kept in a recording: what a client reads (the type of the body, when to
# come back) and which server answered.
RECORDED_HEADERS = ("content-type", "retry-after", "retry-after-ms", "server")
# The status of a request no recorded exchange matches: no client retries it.
UNMATCHED_STATUS = 418
# Straight to the upstream server, whatever proxy the environment names.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(frozen=True)
class Exchange:
    """One HTTP request to a real server and its reply, as recorded."""

    method: str
    path: str
    request: Any  # the JSON body (None without one)
    status: int
    headers: dict[str, str]
    response: Any  # the JSON body, or its text when it is not JSON
    seconds: float = 0.0  # from the request to the whole reply, on the recording machine

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Exchange:
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def match_key(method: str, path: str, body: Any) -> str:
    """What a replayed request must equal: method, path and the body without the text
    of its system message (a `messages` item of role `system` keeps its role only)."""
    if isinstance(body, dict) and isinstance(body.get("messages"), list):
        body = {
            **body,
            "messages": [
                {"role": "system"} if isinstance(m, dict) and m.get("role") == "system" else m
                for m in body["messages"]
            ],
        }
    return json.dumps([method, path, body], sort_keys=True, indent=1, ensure_ascii=False)


def _json_or_text(data: bytes) -> Any:
    text = data.decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _kept_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    return {name.lower(): value for name, value in headers if name.lower() in RECORDED_HEADERS}


class RecordingProxy(LocalFake):
    """Forwards every request to `upstream` (e.g. `http://127.0.0.1:8080`) unchanged and
    records the exchange (`exchanges`, in the order the replies came)."""

    def __init__(self, upstream: str, timeout_seconds: float = 1800.0) -> None:
        super().__init__("recording proxy")
        self.upstream = upstream.rstrip("/")
        self.timeout_seconds = timeout_seconds
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()

    def take(self) -> list[Exchange]:
        """The exchanges recorded since the last `take`."""
        with self._lock:
            taken, self.exchanges = self.exchanges, []
        return taken

    def handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(JSONHandler):
            def do_GET(self) -> None:
                self._forward(None)

            def do_POST(self) -> None:
                self._forward(self.read_body())

            def _forward(self, data: bytes | None) -> None:
                request = urllib.request.Request(
                    proxy.upstream + self.path,
                    data=data,
                    method=self.command,
                    headers={"Content-Type": "application/json"} if data is not None else {},
                )
                started = time.monotonic()
                try:
                    with _DIRECT.open(request, timeout=proxy.timeout_seconds) as reply:
                        status, headers, body = reply.status, reply.getheaders(), reply.read()
                except urllib.error.HTTPError as error:
                    status, headers, body = error.code, error.headers.items(), error.read()
                exchange = Exchange(
                    self.command,
                    self.path,
                    _json_or_text(data) if data else None,
                    status,
                    _kept_headers(headers),
                    _json_or_text(body),
                    round(time.monotonic() - started, 3),
                )
                with proxy._lock:
                    proxy.exchanges.append(exchange)
                send_recorded(self, exchange)

        return Handler


def send_recorded(handler: JSONHandler, exchange: Exchange) -> None:
    """Answer with a recorded status, headers and body."""
    if isinstance(exchange.response, str):
        data = exchange.response.encode("utf-8")
    else:
        data = json.dumps(exchange.response, ensure_ascii=False).encode("utf-8")
    headers = dict(exchange.headers)
    content_type = headers.pop("content-type", "application/json")
    handler.send_body(exchange.status, content_type, headers, data)


class ReplayServer(LocalFake):
    """Answers requests from recorded exchanges: `answered` lists the exchanges used, in
    order; `unmatched` describes each request no recording answered (with a diff)."""

    def __init__(self, exchanges: Sequence[Exchange]) -> None:
        super().__init__("replay server")
        self.exchanges = list(exchanges)
        self.answered: list[Exchange] = []
        self.unmatched: list[str] = []
        self._lock = threading.Lock()
        self._waiting: dict[str, list[Exchange]] = {}
        for exchange in self.exchanges:
            key = match_key(exchange.method, exchange.path, exchange.request)
            self._waiting.setdefault(key, []).append(exchange)

    def stop(self) -> None:
        super().stop()
        if self.unmatched:
            raise AssertionError(
                f"{len(self.unmatched)} request(s) match no recorded exchange (re-record the "
                "fixture if the request changed on purpose):\n" + "\n".join(self.unmatched)
            )

    def unused(self) -> list[Exchange]:
        """Recorded exchanges no request has asked for (yet)."""
        with self._lock:
            return [exchange for waiting in self._waiting.values() for exchange in waiting]

    def _answer(self, method: str, path: str, body: Any) -> Exchange | None:
        key = match_key(method, path, body)
        with self._lock:
            waiting = self._waiting.get(key)
            if waiting:
                exchange = waiting.pop(0)
                self.answered.append(exchange)
                return exchange
            self.unmatched.append(self._diff(key))
        return None

    def _diff(self, key: str) -> str:
        recorded = [match_key(e.method, e.path, e.request) for e in self.exchanges]
        if key in recorded:
            return f"sent more often than recorded ({recorded.count(key)} time(s)):\n{key}"
        nearest = max(
            recorded,
            key=lambda other: difflib.SequenceMatcher(None, other, key, autojunk=False).ratio(),
            default="",
        )
        lines = difflib.unified_diff(
            nearest.splitlines(), key.splitlines(), "recorded", "sent", lineterm="", n=2
        )
        return "\n".join(lines)

    def handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(JSONHandler):
            def do_GET(self) -> None:
                self._replay(None)

            def do_POST(self) -> None:
                self._replay(_json_or_text(self.read_body()))

            def _replay(self, body: Any) -> None:
                exchange = server._answer(self.command, self.path, body)
                if exchange is None:
                    message = "no recorded exchange matches this request (see the test's failure)"
                    self.send_json(UNMATCHED_STATUS, {}, {"error": {"message": message}})
                else:
                    send_recorded(self, exchange)

        return Handler


@dataclass(frozen=True)
class Recording:
    """A fixture file: which server and model answered, and the runs recorded against it
    (each run: what was run, what it printed and wrote, and its exchanges)."""

    server: dict[str, Any]
    runs: dict[str, dict[str, Any]]

    @classmethod
    def load(cls, path: Path) -> Recording:
        data = json.loads(path.read_text(encoding="utf-8"))
        return cls(data["server"], data["runs"])

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"server": self.server, "runs": self.runs}, indent=1, ensure_ascii=False)
        path.write_text(text + "\n", encoding="utf-8")

    def exchanges(self, run: str) -> list[Exchange]:
        return [Exchange.from_dict(item) for item in self.runs[run]["exchanges"]]
