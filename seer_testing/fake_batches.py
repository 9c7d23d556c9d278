"""The OpenAI Files and Batches API, faked over HTTP next to the fake judge's chat endpoint.

One server on 127.0.0.1 answers `POST /v1/chat/completions` (the fake judge, unchanged),
`POST /v1/files` (multipart, purpose `batch`), `GET /v1/files/{id}`,
`GET /v1/files/{id}/content`, `POST /v1/batches`, `GET /v1/batches` (newest first, with
`after`/`limit`), `GET /v1/batches/{id}` and `POST /v1/batches/{id}/cancel`, so the real
`openai` client works against it with one `base_url`. Every line of a batch is answered by
the fake judge's own request handling (its oracle and its injected faults), so a batch and
an on-demand call give the same answer.

A batch follows the real life cycle, advanced by polling: `validating` (answered by
create), `in_progress` for as long as its `BatchBehaviour` says (polls or seconds), then
`completed`, or `expired` with the lines done so far; `POST .../cancel` makes it
`cancelling`, then `cancelled` at the next poll, also with partial output. The lines that
never ran are in the error file with `batch_expired` / `batch_cancelled`. Injected line
failures go to the error file: an `error` object without response, or a non-200 response.

    judge = FakeJudgeServer(oracle)
    with FakeBatchServer(judge) as server:
        server.behave(BatchBehaviour(polls_in_progress=2, error_lines=1))
        client = openai.OpenAI(base_url=server.base_url, api_key="test")
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from email import policy
from email.parser import BytesParser
from typing import Any
from urllib.parse import parse_qs, urlsplit

from seer_testing.fake_judge import FakeJudgeServer, JudgeHandler, error_body
from seer_testing.local_server import LocalFake

CHAT_COMPLETIONS = "/v1/chat/completions"
COMPLETION_WINDOW = "24h"
WINDOW_SECONDS = 24 * 3600

# Statuses after which a batch never changes again.
TERMINAL_STATUSES = frozenset({"completed", "expired", "cancelled", "failed"})


@dataclass(frozen=True)
class BatchBehaviour:
    """How one batch behaves; the default finishes at its first poll with every line ok.

    `error_lines` of its first lines are answered in the error file with an `error` object
    (`error_code`), the next `status_lines` with a `status_code` response; the rest by the
    fake judge (whose own injected faults apply). `expire` ends the window with only
    `lines_done` lines run (default: half); a cancellation also keeps `lines_done` lines.
    """

    polls_in_progress: int = 0
    seconds_in_progress: float = 0.0
    error_lines: int = 0
    error_code: str = "server_error"
    status_lines: int = 0
    status_code: int = 500
    expire: bool = False
    lines_done: int | None = None


@dataclass
class _File:
    id: str
    filename: str
    purpose: str
    content: bytes
    created_at: int

    def to_object(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.content),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "expires_at": None,
            "status_details": None,
        }


@dataclass
class _Batch:
    id: str
    input_file_id: str
    endpoint: str
    metadata: dict[str, str] | None
    behaviour: BatchBehaviour
    lines: list[dict[str, Any]]
    created_at: int
    started: float
    status: str = "validating"
    polls: int = 0
    timestamps: dict[str, int] = field(default_factory=dict)
    output_file_id: str | None = None
    error_file_id: str | None = None
    completed: int = 0
    failed: int = 0
    errors: list[dict[str, Any]] | None = None

    def to_object(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": self.endpoint,
            "input_file_id": self.input_file_id,
            "completion_window": COMPLETION_WINDOW,
            "status": self.status,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "created_at": self.created_at,
            "expires_at": self.created_at + WINDOW_SECONDS,
            "in_progress_at": self.timestamps.get("in_progress"),
            "finalizing_at": self.timestamps.get("finalizing"),
            "completed_at": self.timestamps.get("completed"),
            "failed_at": self.timestamps.get("failed"),
            "expired_at": self.timestamps.get("expired"),
            "cancelling_at": self.timestamps.get("cancelling"),
            "cancelled_at": self.timestamps.get("cancelled"),
            "request_counts": {
                "total": len(self.lines),
                "completed": self.completed,
                "failed": self.failed,
            },
            "errors": None if self.errors is None else {"object": "list", "data": self.errors},
            "metadata": self.metadata,
        }


class FakeBatchServer(LocalFake):
    """Files + Batches + chat completions on one port; a context manager like the judge's."""

    def __init__(self, judge: FakeJudgeServer | None = None) -> None:
        self.judge = judge or FakeJudgeServer()
        self.default_behaviour = BatchBehaviour()
        self._behaviours: list[BatchBehaviour] = []
        self._files: dict[str, _File] = {}
        self._batches: dict[str, _Batch] = {}
        self._order: list[str] = []
        self.lines_answered = 0
        self.cancel_requests = 0
        self._lock = threading.RLock()
        super().__init__("fake batch server")

    # --- lifecycle ----------------------------------------------------------------------------

    def handler(self) -> type[JudgeHandler]:
        return type("FakeBatchHandler", (_BatchHandler,), {"judge": self.judge, "batches": self})

    def stop(self) -> None:
        self.judge.stop()  # releases a judge that is hanging a request
        super().stop()

    # --- scripting and inspection -------------------------------------------------------------

    def behave(self, behaviour: BatchBehaviour, *, times: int = 1) -> None:
        """The next `times` batches created behave so; later ones use `default_behaviour`."""
        with self._lock:
            self._behaviours.extend([behaviour] * times)

    def cancel(self, batch_id: str) -> None:
        """Cancel a batch from outside the client (an operator in the provider's console)."""
        with self._lock:
            self._start_cancelling(self._batches[batch_id])

    @property
    def batches_created(self) -> int:
        with self._lock:
            return len(self._batches)

    @property
    def files_uploaded(self) -> int:
        with self._lock:
            return sum(1 for f in self._files.values() if f.purpose == "batch")

    def batch(self, batch_id: str) -> dict[str, Any]:
        """The batch as the API shows it, without advancing it."""
        with self._lock:
            return self._batches[batch_id].to_object()

    def file_content(self, file_id: str) -> bytes:
        with self._lock:
            return self._files[file_id].content

    # --- the API (server threads) -------------------------------------------------------------

    def upload(self, filename: str, purpose: str, content: bytes) -> tuple[int, dict[str, Any]]:
        if purpose != "batch":
            return 400, error_body(f"purpose {purpose!r} is not supported here", "invalid_request")
        return 200, self._new_file(filename, purpose, content).to_object()

    def get_file(self, file_id: str) -> _File | None:
        with self._lock:
            return self._files.get(file_id)

    def create_batch(self, body: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        endpoint = body.get("endpoint")
        if body.get("completion_window") != COMPLETION_WINDOW:
            return 400, error_body("completion_window must be '24h'", "invalid_request_error")
        if endpoint != CHAT_COMPLETIONS:
            return 400, error_body(f"endpoint {endpoint!r} is not faked", "invalid_request_error")
        with self._lock:
            source = self._files.get(str(body.get("input_file_id")))
            if source is None or source.purpose != "batch":
                return 404, error_body("no such input file", "invalid_request_error")
            behaviour = self._behaviours.pop(0) if self._behaviours else self.default_behaviour
            lines, errors = _parse_input(source.content, endpoint)
            now = int(time.time())
            batch = _Batch(
                id=f"batch_{uuid.uuid4().hex[:24]}",
                input_file_id=source.id,
                endpoint=endpoint,
                metadata=dict(body["metadata"]) if body.get("metadata") else None,
                behaviour=behaviour,
                lines=lines,
                created_at=now,
                started=time.monotonic(),
            )
            if errors:
                batch.status = "failed"
                batch.errors = errors
                batch.timestamps["failed"] = now
            self._batches[batch.id] = batch
            self._order.append(batch.id)
            return 200, batch.to_object()

    def retrieve_batch(self, batch_id: str) -> tuple[int, dict[str, Any]]:
        with self._lock:
            batch = self._batches.get(batch_id)
            if batch is None:
                return 404, error_body(f"no batch {batch_id}", "invalid_request_error")
            self._advance(batch)
            return 200, batch.to_object()

    def list_batches(self, after: str | None, limit: int) -> dict[str, Any]:
        with self._lock:
            newest_first = list(reversed(self._order))
            if after in newest_first:
                newest_first = newest_first[newest_first.index(after) + 1 :]
            page = [self._batches[batch_id].to_object() for batch_id in newest_first[:limit]]
            return {
                "object": "list",
                "data": page,
                "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None,
                "has_more": len(newest_first) > limit,
            }

    def cancel_batch(self, batch_id: str) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.cancel_requests += 1
            batch = self._batches.get(batch_id)
            if batch is None:
                return 404, error_body(f"no batch {batch_id}", "invalid_request_error")
            if batch.status in TERMINAL_STATUSES:
                return 400, error_body(
                    f"Cannot cancel a batch with status {batch.status}", "invalid_request_error"
                )
            self._start_cancelling(batch)
            return 200, batch.to_object()

    # --- the life cycle -----------------------------------------------------------------------

    def _new_file(self, filename: str, purpose: str, content: bytes) -> _File:
        with self._lock:
            item = _File(
                f"file-{uuid.uuid4().hex[:24]}", filename, purpose, content, int(time.time())
            )
            self._files[item.id] = item
            return item

    def _start_cancelling(self, batch: _Batch) -> None:
        if batch.status not in TERMINAL_STATUSES and batch.status != "cancelling":
            batch.status = "cancelling"
            batch.timestamps["cancelling"] = int(time.time())

    def _advance(self, batch: _Batch) -> None:
        """One poll: the batch moves on as its behaviour says."""
        if batch.status in TERMINAL_STATUSES:
            return
        behaviour = batch.behaviour
        now = int(time.time())
        if batch.status == "cancelling":
            self._finish(batch, "cancelled", _partial(behaviour, len(batch.lines)))
            return
        batch.polls += 1
        if batch.status == "validating":
            batch.status = "in_progress"
            batch.timestamps["in_progress"] = now
        waiting = batch.polls <= behaviour.polls_in_progress or (
            time.monotonic() - batch.started < behaviour.seconds_in_progress
        )
        if waiting:
            return
        if behaviour.expire:
            self._finish(batch, "expired", _partial(behaviour, len(batch.lines)))
        else:
            batch.timestamps["finalizing"] = now
            self._finish(batch, "completed", len(batch.lines))

    def _finish(self, batch: _Batch, status: str, done: int) -> None:
        """Run the first `done` lines, write the output and error files, end the batch."""
        behaviour = batch.behaviour
        outputs: list[dict[str, Any]] = []
        failures: list[dict[str, Any]] = []
        for index, line in enumerate(batch.lines):
            custom_id = line["custom_id"]
            if index >= done:
                code = "batch_expired" if status == "expired" else "batch_cancelled"
                message = (
                    "This request could not be executed before the completion window expired."
                    if status == "expired"
                    else "This request was not executed because the batch was cancelled."
                )
                failures.append(_error_line(custom_id, code, message))
            elif index < behaviour.error_lines:
                failures.append(
                    _error_line(custom_id, behaviour.error_code, "The request failed in the batch.")
                )
            elif index < behaviour.error_lines + behaviour.status_lines:
                body = error_body("The server had an error", "server_error")
                failures.append(_response_line(custom_id, behaviour.status_code, body))
            else:
                code, _, body = self.judge.handle(line["body"])
                self.lines_answered += 1
                target = outputs if code == 200 else failures
                target.append(_response_line(custom_id, code, body))
        batch.completed = len(outputs)
        batch.failed = len(failures)
        if outputs:
            batch.output_file_id = self._new_file(
                f"{batch.id}_output.jsonl", "batch_output", _jsonl(outputs)
            ).id
        if failures:
            batch.error_file_id = self._new_file(
                f"{batch.id}_error.jsonl", "batch_output", _jsonl(failures)
            ).id
        batch.status = status
        batch.timestamps[status] = int(time.time())


def _partial(behaviour: BatchBehaviour, total: int) -> int:
    return total // 2 if behaviour.lines_done is None else min(behaviour.lines_done, total)


def _parse_input(
    content: bytes, endpoint: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The request lines of an input file, and the validation errors that fail the batch."""
    lines: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    seen: set[str] = set()
    models: set[str] = set()
    for number, raw in enumerate(content.decode("utf-8").splitlines(), start=1):
        try:
            line = json.loads(raw)
        except json.JSONDecodeError:
            errors.append(_batch_error("invalid_json_line", "line is not JSON", number))
            continue
        custom_id = line.get("custom_id") if isinstance(line, dict) else None
        if not isinstance(custom_id, str) or not custom_id:
            errors.append(_batch_error("missing_custom_id", "custom_id is required", number))
            continue
        if custom_id in seen:
            errors.append(_batch_error("duplicate_custom_id", f"{custom_id} repeats", number))
        seen.add(custom_id)
        if line.get("method") != "POST" or line.get("url") != endpoint:
            errors.append(
                _batch_error("mismatched_endpoint", f"line must POST to {endpoint}", number)
            )
        body = line.get("body")
        if not isinstance(body, dict) or not body.get("model"):
            errors.append(_batch_error("missing_model", "body.model is required", number))
            continue
        models.add(str(body["model"]))
        lines.append(line)
    if len(models) > 1:
        errors.append(_batch_error("mixed_models", "every line must use the same model", None))
    if not lines and not errors:
        errors.append(_batch_error("empty_file", "the input file has no requests", None))
    return lines, errors


def _batch_error(code: str, message: str, line: int | None) -> dict[str, Any]:
    return {"code": code, "message": message, "param": None, "line": line}


def _response_line(custom_id: str, status_code: int, body: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"batch_req_{uuid.uuid4().hex[:24]}",
        "custom_id": custom_id,
        "response": {
            "status_code": status_code,
            "request_id": f"req_{uuid.uuid4().hex[:24]}",
            "body": body,
        },
        "error": None,
    }


def _error_line(custom_id: str, code: str, message: str) -> dict[str, Any]:
    return {
        "id": f"batch_req_{uuid.uuid4().hex[:24]}",
        "custom_id": custom_id,
        "response": None,
        "error": {"code": code, "message": message},
    }


def _jsonl(lines: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode("utf-8")


def _multipart_fields(content_type: str, raw: bytes) -> dict[str, tuple[str | None, bytes]]:
    """Form fields of a multipart/form-data body: name -> (file name, bytes)."""
    message = BytesParser(policy=policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode("latin-1") + raw
    )
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if isinstance(name, str):
            fields[name] = (part.get_filename(), part.get_payload(decode=True) or b"")
    return fields


class _BatchHandler(JudgeHandler):
    """The fake judge's handler, plus the Files and Batches routes."""

    batches: FakeBatchServer

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        parts = url.path.strip("/").split("/")
        if parts[:2] == ["v1", "files"] and len(parts) in (3, 4):
            item = self.batches.get_file(parts[2])
            if item is None:
                self.send_json(404, {}, error_body(f"no file {parts[2]}", "invalid_request_error"))
            elif len(parts) == 3:
                self.send_json(200, {}, item.to_object())
            elif parts[3] == "content":
                self._send_bytes(item.content)
            else:
                self.send_no_route()
        elif parts[:2] == ["v1", "batches"] and len(parts) == 3:
            self.send_json(*self._split(self.batches.retrieve_batch(parts[2])))
        elif parts == ["v1", "batches"]:
            query = parse_qs(url.query)
            after = query.get("after", [None])[0]
            limit = int(query.get("limit", ["20"])[0])
            self.send_json(200, {}, self.batches.list_batches(after, limit))
        else:
            super().do_GET()

    def do_POST(self) -> None:
        parts = urlsplit(self.path).path.strip("/").split("/")
        if parts[:2] not in (["v1", "files"], ["v1", "batches"]):
            super().do_POST()
            return
        raw = self.read_body()
        if parts == ["v1", "files"]:
            fields = _multipart_fields(self.headers.get("Content-Type", ""), raw)
            if "file" not in fields or "purpose" not in fields:
                self.send_json(400, {}, error_body("file and purpose required", "invalid_request"))
                return
            filename, content = fields["file"]
            purpose = fields["purpose"][1].decode("utf-8")
            self.send_json(
                *self._split(self.batches.upload(filename or "upload", purpose, content))
            )
        elif parts == ["v1", "batches"]:
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                self.send_json(400, {}, error_body("body is not JSON", "invalid_request_error"))
                return
            self.send_json(*self._split(self.batches.create_batch(body)))
        elif len(parts) == 4 and parts[3] == "cancel":
            self.send_json(*self._split(self.batches.cancel_batch(parts[2])))
        else:
            self.send_no_route()

    @staticmethod
    def _split(answer: tuple[int, dict[str, Any]]) -> tuple[int, dict[str, str], dict[str, Any]]:
        status, payload = answer
        return status, {}, payload

    def _send_bytes(self, data: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
