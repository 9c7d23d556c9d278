"""How OpenAI-compatible servers read a chat-completions request, for the fake judge.

Servers differ in what they accept: the `response_format` types they know, the name under
which they read the completion cap, whether an unknown field is an error, and how they say
no. A `ServerDialect` holds those choices; the fake judge (`FakeJudgeServer(dialect=...)`)
answers as that server would:

- `OPENAI`: every `response_format` type, the cap as `max_completion_tokens` (or the older
  `max_tokens`), 400 with an OpenAI error body for a request it refuses.
- `LLAMA_CPP_PYTHON`: llama-cpp-python 0.3's server. `response_format` of type `text` or
  `json_object` (whose `schema` it enforces) only; a `json_schema` request gets HTTP 500
  whose body is FastAPI's request validation error (its error handler turns every
  exception into a 500); reads `max_tokens` and ignores `max_completion_tokens`, so an
  uncapped reply runs on to the end of its context.
- `STRICT_400`: a proxy that knows no `response_format` at all (400, naming it); the judge
  must fall back to plain JSON instructions.
- `STRICT_422`: a FastAPI server with `extra="forbid"` models: `json_object` only, 422 with
  FastAPI's `{"detail": [...]}` for `json_schema` and for any field it does not know (such
  as `max_completion_tokens`; it reads `max_tokens`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The request fields every dialect knows (a strict one refuses any other).
BASE_FIELDS = frozenset(
    {"model", "messages", "temperature", "response_format", "stream", "n", "seed", "stop"}
)


@dataclass(frozen=True)
class ServerDialect:
    name: str
    # `response_format` types accepted ("text" is also a request without one).
    response_formats: frozenset[str]
    # Fields read as the completion cap, the first present wins; the others are ignored.
    cap_fields: tuple[str, ...]
    # How a refused request is answered: "openai" (400 JSON error), "fastapi_500"
    # (llama-cpp-python's 500 with a validation message), "fastapi_422" ({"detail": [...]}).
    rejection: str = "openai"
    # Unknown request fields are refused (a strict server) instead of ignored.
    forbids_unknown_fields: bool = False
    # Completion tokens a reply may run to when no cap is read (its context left).
    context_tokens: int = 8192
    # Whether the reply message has a `refusal` field (OpenAI's) at all.
    refusal_field: bool = True

    def known_fields(self) -> frozenset[str]:
        return BASE_FIELDS | frozenset(self.cap_fields)


OPENAI = ServerDialect(
    "openai",
    frozenset({"text", "json_object", "json_schema"}),
    ("max_completion_tokens", "max_tokens"),
)
LLAMA_CPP_PYTHON = ServerDialect(
    "llama-cpp-python",
    frozenset({"text", "json_object"}),
    ("max_tokens",),
    rejection="fastapi_500",
    refusal_field=False,
)
STRICT_400 = ServerDialect("strict-400", frozenset({"text"}), ("max_tokens",))
STRICT_422 = ServerDialect(
    "strict-422",
    frozenset({"text", "json_object"}),
    ("max_tokens",),
    rejection="fastapi_422",
    forbids_unknown_fields=True,
)
DIALECTS = {dialect.name: dialect for dialect in (OPENAI, LLAMA_CPP_PYTHON, STRICT_400, STRICT_422)}


def refusal(dialect: ServerDialect, body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
    """(status, body) of the dialect's refusal of `body`, or None when it accepts it."""
    for name in body:
        if dialect.forbids_unknown_fields and name not in dialect.known_fields():
            return _refused(dialect, ("body", name), "Extra inputs are not permitted",
                            "extra_forbidden", body[name])  # fmt: skip
    response_format = body.get("response_format")
    kind = response_format.get("type") if isinstance(response_format, dict) else "text"
    if kind not in dialect.response_formats:
        # In the order of the server's Literal, as pydantic words it (recorded from
        # llama-cpp-python 0.3.36: tests/fixtures/real_servers/).
        accepted = " or ".join(f"'{k}'" for k in _FORMAT_ORDER if k in dialect.response_formats)
        return _refused(dialect, ("body", "response_format", "type"),
                        f"Input should be {accepted}", "literal_error", kind,
                        {"expected": accepted})  # fmt: skip
    return None


_FORMAT_ORDER = ("text", "json_object", "json_schema")


def _refused(
    dialect: ServerDialect,
    location: tuple[str, ...],
    message: str,
    kind: str,
    value: Any,
    context: dict[str, Any] | None = None,
) -> tuple[int, dict[str, Any]]:
    item = {"type": kind, "loc": location, "msg": message, "input": value}
    if context is not None:
        item["ctx"] = context
    if dialect.rejection == "fastapi_422":
        return 422, {"detail": [{**item, "loc": list(location)}]}
    if dialect.rejection == "fastapi_500":
        # What llama-cpp-python's RouteErrorHandler makes of a RequestValidationError:
        # str(error) as the message of an internal server error (the real one appends a
        # traceback line after a blank line).
        text = f"1 validation error:\n  {item!r}"
        return 500, {
            "error": {"message": text, "type": "internal_server_error", "param": None,
                      "code": None}
        }  # fmt: skip
    field = ".".join(location[1:])
    return 400, {
        "error": {
            "message": f"Invalid value for '{field}': {message} (got {value!r}).",
            "type": "invalid_request_error",
            "param": field,
            "code": None,
        }
    }
