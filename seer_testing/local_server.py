"""A JSON-over-HTTP server on a free port of 127.0.0.1, run in a background thread.

What the fake judge, the fake Batches API and the fake Slack have in common: each is a
real HTTP server (so the real client libraries talk to it) that tests start and stop.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class LocalHTTPServer(ThreadingHTTPServer):
    # A deep accept backlog: dozens of clients connecting at once must not be reset.
    request_queue_size = 256
    daemon_threads = True


class JSONHandler(BaseHTTPRequestHandler):
    """A request handler that answers JSON and logs nothing (tests read the records)."""

    def send_json(self, status: int, headers: Mapping[str, str], payload: Any) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_body(status, "application/json; charset=utf-8", headers, data)

    def send_body(
        self, status: int, content_type: str, headers: Mapping[str, str], data: bytes
    ) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            # The client gave up (timeout); nothing left to answer.
            self.close_connection = True

    def read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests and benchmarks read the records instead."""


class BackgroundServer:
    """Serves one handler class on a free port of 127.0.0.1 until `stop()`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._httpd: LocalHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self, handler: type[BaseHTTPRequestHandler]) -> None:
        httpd = LocalHTTPServer(("127.0.0.1", 0), handler)
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name=self.name, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def url(self, path: str) -> str:
        """`http://127.0.0.1:<port><path>`; the server must be running."""
        if self._httpd is None:
            raise RuntimeError(f"the {self.name} is not running")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}{path}"


class LocalFake:
    """A fake API served on 127.0.0.1: started and stopped, or used as a context manager."""

    url_path = "/v1"

    def __init__(self, name: str) -> None:
        self._server = BackgroundServer(name)

    def handler(self) -> type[BaseHTTPRequestHandler]:
        """The handler class that answers this fake's requests."""
        raise NotImplementedError

    def start(self) -> Self:
        self._server.start(self.handler())
        return self

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        return self._server.url(self.url_path)
