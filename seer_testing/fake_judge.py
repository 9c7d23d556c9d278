"""A fake OpenAI-compatible judge: a real HTTP server on 127.0.0.1 for tests and benchmarks.

It speaks `POST /v1/chat/completions` for both phases of Seer's judge (`seer_requirements`
and `seer_support`), reading the request the way a model would see it (the query, the
requirement list, the `<passage id="...">` blocks) and answering from a scripted oracle.
Failures are injected per request: latency, 429 with `Retry-After`, 500, hangs, invalid
JSON, a wrong shape, truncated output, refusals, unknown passage or requirement ids,
quotes that are not in the passage, an empty or overlong requirement list, a reply that
loops until the cap, one that trickles in (its body, or all of it from the status line on),
JSON in a markdown fence; and it can enforce a
requests-per-minute limit the way a real endpoint does (429 beyond it). It reads requests
as one server dialect does (`judge_dialects`: OpenAI, llama-cpp-python, strict servers that
refuse with 400 or 422), and can generate at a given number of tokens a second, as a slow
CPU server does. Every request is recorded; `GET /fake/stats` serves the counts, for a
server run in another process.

    with FakeJudgeServer(GoldOracle({...}), latency_seconds=0.01) as server:
        evaluator = LLMEvaluator(LLMSettings(base_url=server.base_url, api_key="test"))
"""

from __future__ import annotations

import collections
import html
import json
import re
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Protocol

from seer_metrics.judgment_store import normalise_text
from seer_testing.judge_dialects import OPENAI, ServerDialect, refusal
from seer_testing.local_server import JSONHandler, LocalFake

REQUIREMENTS_SCHEMA_NAME = "seer_requirements"
SUPPORT_SCHEMA_NAME = "seer_support"

# A refusal of the request itself: its status and error body.
STATUS_FAULTS: dict[str, tuple[int, dict[str, Any]]] = {
    "bad_request": (400, {"error": {"message": "Invalid request.", "type": "invalid_request_error",
                                    "param": None, "code": None}}),
    "unauthorized": (401, {"error": {"message": "Incorrect API key provided.",
                                     "type": "invalid_request_error", "param": None,
                                     "code": "invalid_api_key"}}),
    "forbidden": (403, {"error": {"message": "Project does not have access to the model.",
                                  "type": "invalid_request_error", "param": None, "code": None}}),
    "not_found": (404, {"error": {"message": "The model does not exist.",
                                  "type": "invalid_request_error", "param": None,
                                  "code": "model_not_found"}}),
    "unprocessable": (422, {"detail": [{"type": "string_type", "loc": ["body", "messages", 1],
                                        "msg": "Input should be a valid string"}]}),
    # A FastAPI server whose handler turns the validation error into a 500.
    "validation_500": (500, {"error": {"message": "1 validation error:\n  {'type': 'string_type', "
                                       "'loc': ('body', 'messages', 1, 'content'), 'msg': "
                                       "'Input should be a valid string'}",
                                       "type": "internal_server_error", "param": None,
                                       "code": None}}),
}  # fmt: skip

FAULTS = frozenset(
    {
        "rate_limit",  # 429 with Retry-After
        "server_error",  # 500
        "hang",  # no answer for `hang_seconds` (the client times out)
        "invalid_json",  # content that is not JSON
        "schema_mismatch",  # valid JSON of the wrong shape
        "truncated",  # half the content, finish_reason "length"
        "refusal",  # message.refusal set, no content
        "unknown_ids",  # cites a passage id the request does not contain
        "bad_quotes",  # quotes that are not in the cited passage
        "unknown_requirement",  # adds a requirement id that was not asked about
        "missing_requirement",  # leaves the last requirement out
        "empty_requirements",  # phase 1 answers an empty requirement list
        "many_requirements",  # phase 1 answers MANY_REQUIREMENTS requirements
        "loop",  # repeats itself until the cap read (or its context), finish_reason "length"
        "trickle",  # the answer's body is sent one byte every `trickle_seconds`
        "trickle_headers",  # so is all of it: status line and headers too
        "fenced",  # the JSON comes inside a markdown code fence
        "unauthorized_echo",  # 401 whose body quotes the request's API key, whole
    }
) | frozenset(STATUS_FAULTS)

MANY_REQUIREMENTS = 30

_QUERY = re.compile(r"<query>\n(.*?)\n</query>", re.DOTALL)
_REQUIREMENTS = re.compile(r"<requirements>\n(.*?)\n</requirements>", re.DOTALL)
_PASSAGE = re.compile(r'<passage id="([^"]*)">\n(.*?)\n</passage>', re.DOTALL)


class JudgeOracle(Protocol):
    """What the fake model knows: the requirements of a query and which passages hold them."""

    def requirements(self, query: str) -> list[str]:
        """Requirement texts of a query, in order."""
        ...

    def support(
        self,
        query: str,
        requirements: Sequence[tuple[str, str]],
        passages: Sequence[tuple[str, str]],
    ) -> dict[str, list[tuple[str, str]]]:
        """For each requirement id, the (passage id, verbatim quote) pairs that support it."""
        ...


@dataclass(frozen=True)
class GoldRequirement:
    """A requirement and the text that states it: a passage holding `evidence` supports it."""

    text: str
    evidence: str


class GoldOracle:
    """Answers from gold labels: per query, requirements with the evidence text of each.

    A passage supports a requirement when its text contains the evidence (after whitespace
    and case normalisation), and the quote is that evidence as it appears in the passage.
    A query without labels gets one requirement (the query itself) that nothing supports.
    """

    def __init__(self, gold: Mapping[str, Sequence[GoldRequirement]]) -> None:
        self._gold = {normalise_text(query): list(reqs) for query, reqs in gold.items()}

    def requirements(self, query: str) -> list[str]:
        gold = self._gold.get(normalise_text(query))
        if gold is None:
            return [query]
        return [requirement.text for requirement in gold]

    def support(
        self,
        query: str,
        requirements: Sequence[tuple[str, str]],
        passages: Sequence[tuple[str, str]],
    ) -> dict[str, list[tuple[str, str]]]:
        evidence = {
            normalise_text(r.text): r.evidence for r in self._gold.get(normalise_text(query), [])
        }
        answer: dict[str, list[tuple[str, str]]] = {}
        for requirement_id, text in requirements:
            snippet = evidence.get(normalise_text(text))
            answer[requirement_id] = []
            if not snippet:
                continue
            for passage_id, passage_text in passages:
                if normalise_text(snippet) in normalise_text(passage_text):
                    answer[requirement_id].append((passage_id, snippet))
        return answer


@dataclass(frozen=True)
class Trickle:
    """An answer sent one byte every `seconds_per_byte`: its body, or all of it (`headers`:
    from the status line on, so even the headers never arrive within a timeout)."""

    seconds_per_byte: float
    headers: bool = False


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw it, and what it answered."""

    time: float
    schema: str | None
    status: int
    fault: str | None
    repair: bool
    body: dict[str, Any]
    # The `response_format` type asked for ("text" without one) and the completion cap the
    # server read (None: none it reads was sent).
    response_format: str = "text"
    cap: int | None = None


@dataclass
class _Injection:
    fault: str
    schema: str | None
    remaining: int | None
    query: str | None = None  # normalised


@dataclass
class _Parsed:
    schema: str | None
    query: str
    requirements: list[tuple[str, str]] = field(default_factory=list)
    passages: list[tuple[str, str]] = field(default_factory=list)
    repair: bool = False


class FakeJudgeServer(LocalFake):
    """The fake endpoint; a context manager that runs it on a free port of 127.0.0.1."""

    def __init__(
        self,
        oracle: JudgeOracle | None = None,
        *,
        latency_seconds: float = 0.0,
        requests_per_minute: float | None = None,
        rate_window_seconds: float = 60.0,
        retry_after_seconds: float = 0.2,
        hang_seconds: float = 5.0,
        record_bodies: bool = True,
        dialect: ServerDialect = OPENAI,
        tokens_per_second: float | None = None,
        trickle_seconds: float = 1.0,
    ) -> None:
        self.oracle: JudgeOracle = oracle or GoldOracle({})
        self.dialect = dialect
        # Generation speed: a reply of T completion tokens takes T / tokens_per_second.
        self.tokens_per_second = tokens_per_second
        self.trickle_seconds = trickle_seconds
        self.latency_seconds = latency_seconds
        self.requests_per_minute = requests_per_minute
        self.rate_window_seconds = rate_window_seconds
        self.retry_after_seconds = retry_after_seconds
        self.hang_seconds = hang_seconds
        self.record_bodies = record_bodies
        # Fields that replace those of every reply's `usage` block (a hostile or broken
        # endpoint: negative, huge or non-numeric token counts).
        self.reported_usage: dict[str, Any] = {}
        self.requests: list[RecordedRequest] = []
        self._injections: list[_Injection] = []
        self._accepted: collections.deque[float] = collections.deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        super().__init__("fake judge server")

    # --- lifecycle ------------------------------------------------------------------------

    def handler(self) -> type[JudgeHandler]:
        return type("FakeJudgeHandler", (JudgeHandler,), {"judge": self})

    def stop(self) -> None:
        self._stopping.set()  # releases the requests it is hanging
        super().stop()

    # --- scripting and inspection ------------------------------------------------------------

    def inject(
        self,
        fault: str,
        *,
        schema: str | None = None,
        times: int | None = 1,
        query: str | None = None,
    ) -> None:
        """Apply `fault` to the next `times` requests (None: all) of `schema` (None: any)
        about `query` (None: any)."""
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}; known: {', '.join(sorted(FAULTS))}")
        wanted = None if query is None else normalise_text(query)
        with self._lock:
            self._injections.append(_Injection(fault, schema, times, wanted))

    def clear_faults(self) -> None:
        with self._lock:
            self._injections.clear()

    def count(self, *, schema: str | None = None, status: int | None = None) -> int:
        """Requests seen, optionally only of one schema and/or one HTTP status."""
        with self._lock:
            return sum(
                1
                for r in self.requests
                if (schema is None or r.schema == schema) and (status is None or r.status == status)
            )

    def stats(self) -> dict[str, Any]:
        """Counts of requests, by HTTP status and by schema (also served at GET /fake/stats)."""
        with self._lock:
            by_status = collections.Counter(str(r.status) for r in self.requests)
            by_schema = collections.Counter(str(r.schema) for r in self.requests)
            return {
                "requests": len(self.requests),
                "by_status": dict(by_status),
                "by_schema": dict(by_schema),
            }

    def reset_records(self) -> None:
        with self._lock:
            self.requests.clear()

    # --- request handling (server threads) ------------------------------------------------------

    def _take_fault(self, schema: str | None, query: str) -> str | None:
        with self._lock:
            for injection in self._injections:
                if injection.remaining == 0:
                    continue
                if injection.schema is not None and injection.schema != schema:
                    continue
                if injection.query is not None and injection.query != normalise_text(query):
                    continue
                if injection.remaining is not None:
                    injection.remaining -= 1
                return injection.fault
        return None

    def _admit(self) -> float | None:
        """None when the request is within the RPM limit, else the seconds to wait.

        At most `requests_per_minute * rate_window_seconds / 60` requests are accepted in
        any rolling window (a 60 s window by default; tests shrink it to stay fast).
        """
        if self.requests_per_minute is None:
            return None
        allowed = max(1, int(self.requests_per_minute * self.rate_window_seconds / 60))
        now = time.monotonic()
        with self._lock:
            while self._accepted and self._accepted[0] <= now - self.rate_window_seconds:
                self._accepted.popleft()
            if len(self._accepted) >= allowed:
                return self._accepted[0] + self.rate_window_seconds - now
            self._accepted.append(now)
            return None

    def _record(
        self, parsed: _Parsed | None, status: int, fault: str | None, body: dict[str, Any]
    ) -> None:
        response_format = body.get("response_format")
        with self._lock:
            self.requests.append(
                RecordedRequest(
                    time=time.monotonic(),
                    schema=parsed.schema if parsed else None,
                    status=status,
                    fault=fault,
                    repair=parsed.repair if parsed else False,
                    body=body if self.record_bodies else {},
                    response_format=str(response_format.get("type"))
                    if isinstance(response_format, dict)
                    else "text",
                    cap=self._cap(body),
                )
            )

    def _cap(self, body: dict[str, Any]) -> int | None:
        """The completion cap as this dialect reads it."""
        for name in self.dialect.cap_fields:
            if isinstance(body.get(name), int):
                return int(body[name])
        return None

    def handle(self, body: dict[str, Any]) -> tuple[int, dict[str, str], dict[str, Any]]:
        """Answer one chat-completions request: (status, extra headers, JSON body)."""
        status, headers, payload, _ = self.respond(body)
        return status, headers, payload

    def respond(
        self, body: dict[str, Any], api_key: str | None = None
    ) -> tuple[int, dict[str, str], dict[str, Any], Trickle | None]:
        """`handle`, and how the answer trickles in (None: sent at once).

        `api_key` is the request's bearer token (quoted by `unauthorized_echo`)."""
        refused = refusal(self.dialect, body)
        if refused is not None:
            try:
                seen: _Parsed | None = _parse_request(body)
            except (KeyError, TypeError, ValueError, IndexError):
                seen = None
            self._record(seen, refused[0], "refused_by_dialect", body)
            return refused[0], {}, refused[1], None
        try:
            parsed = _parse_request(body)
        except (KeyError, TypeError, ValueError, IndexError) as error:
            self._record(None, 400, None, body)
            return 400, {}, error_body(f"bad request: {error}", "invalid_request_error"), None
        wait = self._admit()
        if wait is not None:
            self._record(parsed, 429, "rpm_limit", body)
            return (
                429,
                {"Retry-After": f"{max(wait, 0.01):.3f}"},
                error_body("Rate limit reached for requests per minute", "requests"),
                None,
            )
        fault = self._take_fault(parsed.schema, parsed.query)
        if fault == "rate_limit":
            self._record(parsed, 429, fault, body)
            return (
                429,
                {"Retry-After": f"{self.retry_after_seconds:g}"},
                error_body("Rate limit reached", "requests"),
                None,
            )
        if fault == "server_error":
            self._record(parsed, 500, fault, body)
            return 500, {}, error_body("The server had an error", "server_error"), None
        if fault in STATUS_FAULTS:
            status, payload = STATUS_FAULTS[fault]
            self._record(parsed, status, fault, body)
            return status, {}, payload, None
        if fault == "unauthorized_echo":  # a server that quotes what it was sent
            self._record(parsed, 401, fault, body)
            message = f"Incorrect API key provided: {api_key}. Check the key of the deployment."
            return 401, {}, error_body(message, "invalid_request_error"), None
        if fault == "hang":
            self._stopping.wait(self.hang_seconds)
        if self.latency_seconds > 0:
            self._stopping.wait(self.latency_seconds)
        answer = self._answer(parsed, fault)
        content: str | None = json.dumps(answer, ensure_ascii=False)
        finish_reason = "stop"
        refused = None
        completion_tokens = None
        if fault == "invalid_json":
            content = '{"requirements": [{"id": "r1", '
        elif fault == "schema_mismatch":
            content = json.dumps({"requirement_list": answer["requirements"]})
        elif fault == "truncated":
            content = (content or "")[: max(1, len(content or "") // 2)]
            finish_reason = "length"
        elif fault == "loop":
            cap = self._cap(body)
            completion_tokens = self.dialect.context_tokens if cap is None else cap
            content = '{"requirements": [{"id": "r1", "text": "' + "and again " * 40
            finish_reason = "length"
        elif fault == "fenced":
            content = f"```json\n{content}\n```"
        elif fault == "refusal":
            content = None
            refused = "I'm sorry, I can't help with that."
        reply = _completion_body(body, content, refused, finish_reason, completion_tokens)
        if not self.dialect.refusal_field:
            reply["choices"][0]["message"].pop("refusal")
        if self.tokens_per_second:
            generated = reply["usage"]["completion_tokens"]
            self._stopping.wait(generated / self.tokens_per_second)
        reply["usage"].update(self.reported_usage)
        self._record(parsed, 200, fault, body)
        trickle = None
        if fault in ("trickle", "trickle_headers"):
            trickle = Trickle(self.trickle_seconds, headers=fault == "trickle_headers")
        return 200, {}, reply, trickle

    def _answer(self, parsed: _Parsed, fault: str | None) -> dict[str, Any]:
        if parsed.schema == REQUIREMENTS_SCHEMA_NAME:
            texts = self.oracle.requirements(parsed.query)
            if fault == "empty_requirements":
                texts = []
            elif fault == "many_requirements":
                texts = [f"Fact {index} of the question" for index in range(MANY_REQUIREMENTS)]
            return {
                "requirements": [
                    {"id": f"r{index}", "text": text} for index, text in enumerate(texts, start=1)
                ]
            }
        support = self.oracle.support(parsed.query, parsed.requirements, parsed.passages)
        items = []
        for requirement_id, _ in parsed.requirements:
            citations = support.get(requirement_id, [])
            evidence = [{"passage": pid, "quote": quote} for pid, quote in citations]
            if fault == "bad_quotes":
                evidence = [
                    {"passage": pid, "quote": "a sentence that no passage contains"}
                    for pid, _ in citations
                ]
            supported_by = list(dict.fromkeys(pid for pid, _ in citations))
            if fault == "unknown_ids":
                supported_by.append("no-such-passage")
                evidence.append({"passage": "no-such-passage", "quote": "made up"})
            items.append({"id": requirement_id, "supported_by": supported_by, "evidence": evidence})
        if fault == "missing_requirement" and items:
            items.pop()
        if fault == "unknown_requirement":
            first_passage = parsed.passages[0][0] if parsed.passages else "1"
            items.append(
                {
                    "id": "r999",
                    "supported_by": [first_passage],
                    "evidence": [{"passage": first_passage, "quote": "anything"}],
                }
            )
        return {"requirements": items}


class JudgeHandler(JSONHandler):
    """The chat-completions route (and GET /fake/stats); the batch fake extends it."""

    protocol_version = "HTTP/1.1"
    # Headers and body go out as separate writes: with Nagle's algorithm on, the body would
    # wait for the client's delayed ACK (about 40 ms a response), which is not the model.
    disable_nagle_algorithm = True
    judge: FakeJudgeServer

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/fake/stats":
            self.send_json(200, {}, self.judge.stats())
        else:
            self.send_no_route()

    def do_POST(self) -> None:
        raw = self.read_body()
        if self.path.rstrip("/") != "/v1/chat/completions":
            self.send_no_route()
            return
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            self.send_json(400, {}, error_body("body is not JSON", "invalid_request_error"))
            return
        authorization = self.headers.get("Authorization") or ""
        status, headers, payload, trickle = self.judge.respond(
            body, authorization.removeprefix("Bearer ")
        )
        if trickle is None:
            self.send_json(status, headers, payload)
        else:
            self.send_trickled(status, payload, trickle)

    def send_trickled(self, status: int, payload: Any, trickle: Trickle) -> None:
        """The answer one byte at a time: no read ever waits long, the whole call does."""
        body = json.dumps(payload).encode("utf-8")
        head = (
            f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
            "Content-Type: application/json; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode("ascii")
        try:
            if not trickle.headers:
                self.wfile.write(head)
                self.wfile.flush()
            data = head + body if trickle.headers else body
            for index in range(len(data)):
                if self.judge._stopping.wait(trickle.seconds_per_byte):
                    break
                self.wfile.write(data[index : index + 1])
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True

    def send_no_route(self) -> None:
        self.send_json(404, {}, error_body(f"no route {self.path}", "invalid_request_error"))


def _schema_of(body: dict[str, Any]) -> str:
    """The phase a request asks for: the `json_schema` name, else the schema the system
    prompt names (a request in `json_object` or plain-instructions mode)."""
    response_format = body.get("response_format")
    if isinstance(response_format, dict) and response_format.get("type") == "json_schema":
        return str(response_format["json_schema"]["name"])
    system = " ".join(
        str(m.get("content") or "") for m in body["messages"] if m.get("role") == "system"
    )
    for name in (REQUIREMENTS_SCHEMA_NAME, SUPPORT_SCHEMA_NAME):
        if name in system:
            return name
    raise ValueError("the request names no seer schema")


def _parse_request(body: dict[str, Any]) -> _Parsed:
    schema = _schema_of(body)
    messages = body["messages"]
    user_messages = [m["content"] for m in messages if m.get("role") == "user"]
    first_user = user_messages[0]
    repair = len(messages) > 2
    if schema == REQUIREMENTS_SCHEMA_NAME:
        return _Parsed(schema, first_user, repair=repair)
    if schema != SUPPORT_SCHEMA_NAME:
        raise ValueError(f"unknown response_format schema {schema!r}")
    query_match = _QUERY.search(first_user)
    requirements_match = _REQUIREMENTS.search(first_user)
    if query_match is None or requirements_match is None:
        raise ValueError("support request without <query> or <requirements>")
    requirements = [
        (str(item["id"]), str(item["text"]))
        for item in json.loads(html.unescape(requirements_match.group(1)))
    ]
    passages = [
        (html.unescape(pid), html.unescape(text)) for pid, text in _PASSAGE.findall(first_user)
    ]
    return _Parsed(schema, html.unescape(query_match.group(1)), requirements, passages, repair)


def parse_support_passages(user_content: str) -> list[tuple[str, str]]:
    """The (id, text) passages a model would read in a phase-2 user message."""
    return [
        (html.unescape(pid), html.unescape(text)) for pid, text in _PASSAGE.findall(user_content)
    ]


def _completion_body(
    request: dict[str, Any],
    content: str | None,
    refusal: str | None,
    finish_reason: str,
    completion_tokens: int | None = None,
) -> dict[str, Any]:
    prompt_characters = sum(len(str(m.get("content") or "")) for m in request.get("messages", []))
    prompt_tokens = max(1, prompt_characters // 4)
    if completion_tokens is None:
        completion_tokens = max(1, len(content or refusal or "") // 4)
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "fake-judge"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": refusal},
                "finish_reason": finish_reason,
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def error_body(message: str, kind: str) -> dict[str, Any]:
    """An error as the OpenAI API answers it."""
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}
