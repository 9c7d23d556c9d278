"""Asking a running Dagster webserver over its GraphQL endpoint (the UI's own API)."""

from __future__ import annotations

import json
import urllib.request


def graphql(port: int, query: str, timeout: float = 30) -> dict:
    """The JSON answer of the webserver on 127.0.0.1:`port` to `query`."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())
