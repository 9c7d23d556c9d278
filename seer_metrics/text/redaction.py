"""Text that is safe to print, log, store or post: secrets hidden, long text cut.

Known shapes (URL passwords, `password=…`, bearer tokens, `sk-…`/`xox…-…` keys) are not
enough: an Azure key is 32 hex digits, and an endpoint may echo it in a 401 body. So the
secret values themselves are registered (`register_secret`: the API key when the judge's
settings are made, the Slack token when its client is, the warehouse password when its
engine is, every secret variable when the settings load) and `redact_secrets` replaces
them wherever they appear, in this process.
"""

from __future__ import annotations

import json
import re
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote, quote_plus

from sqlalchemy.engine import make_url

# Credentials as they appear in error messages: passwords inside URLs, API keys, tokens.
_URL_PASSWORD = re.compile(
    r"(?P<head>[a-z][a-z0-9+.-]*://[^:/@\s]*:)(?P<secret>[^@\s]+)(?=@)", re.I
)
_SECRET_WORDS = re.compile(
    r"(?P<head>(?:\b\w*(?:password|passwd|pwd|api[_-]?key|token|secret)|[?&;](?:key|pass))"
    r"\b\s*[=:]\s*)(?P<secret>['\"]?[^\s'\",;&]+)",
    re.I,
)
_BEARER = re.compile(r"(?P<head>\bBearer\s+)(?P<secret>[A-Za-z0-9._~+/=-]+)", re.I)
_KEY_SHAPES = re.compile(r"\b(?:sk-[A-Za-z0-9_-]{8,}|xox[abposr]-[A-Za-z0-9-]{8,})")
# URL query parameters whose value is a secret (`?password=…`, `sslpassword`, `api_key`).
_SECRET_PARAMETER = re.compile(r"pass|pwd|token|secret|key|credential|auth", re.I)
REDACTED = "***"

# Shorter values are not registered: hiding every "admin" or "test" in a message would
# hide more than it protects (a URL password is hidden by its shape whatever its length).
MIN_SECRET_LENGTH = 6
_secrets: tuple[str, ...] = ()  # longest first, so a value inside another goes with it
_secrets_lock = threading.Lock()


def register_secret(value: Any) -> None:
    """Hide `value` (as written, URL-encoded and JSON-escaped) wherever `redact_secrets`
    runs in this process from now on. None, blanks and values shorter than
    `MIN_SECRET_LENGTH` characters are ignored."""
    global _secrets
    if not isinstance(value, str) or len(value.strip()) < MIN_SECRET_LENGTH:
        return
    value = value.strip()
    forms = {value, quote(value, safe=""), quote_plus(value), json.dumps(value)[1:-1]}
    with _secrets_lock:
        known = set(_secrets) | {form for form in forms if len(form) >= MIN_SECRET_LENGTH}
        _secrets = tuple(sorted(known, key=len, reverse=True))


def register_url_secrets(url: Any) -> None:
    """Register the password of a database URL and its secret-looking query values."""
    try:
        parsed = make_url(str(url))
    except Exception:
        return
    register_secret(parsed.password)
    for name, values in parsed.query.items():
        if _SECRET_PARAMETER.search(name):
            for value in (values,) if isinstance(values, str) else values:
                register_secret(value)


def redact_url(url: str) -> str:
    """A database URL with its password and secret-looking query values (`password`,
    `sslpassword`, `token`, `api_key`, …) hidden; anything that is not a URL is hidden
    whole."""
    try:
        parsed = make_url(url)
        query = {
            name: REDACTED if _SECRET_PARAMETER.search(name) else values
            for name, values in parsed.query.items()
        }
        text = parsed.set(query=query).render_as_string(hide_password=True)
    except Exception:
        return "<unparseable url>"
    return redact_secrets(text.replace(quote_plus(REDACTED), REDACTED))


def redact_secrets(text: str) -> str:
    """`text` with the registered secret values, URL passwords, `password=…`/`token: …`
    values, bearer tokens and OpenAI/Slack-shaped keys replaced by `***` (error messages
    quote connection strings, and endpoints echo keys)."""
    for secret in _secrets:
        text = text.replace(secret, REDACTED)
    text = _URL_PASSWORD.sub(lambda m: m.group("head") + REDACTED, text)
    text = _SECRET_WORDS.sub(lambda m: m.group("head") + REDACTED, text)
    text = _BEARER.sub(lambda m: m.group("head") + REDACTED, text)
    return _KEY_SHAPES.sub(REDACTED, text)


class RedactedError(RuntimeError):
    """An error whose text held a secret, raised again with it hidden (the original, and
    its chain, are dropped so no traceback or event log carries it)."""


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or (
            None if current.__suppress_context__ else current.__context__
        )


def error_text(error: BaseException) -> str:
    """`Class: message` of an error and of every error in its chain, secrets hidden."""
    return redact_secrets(" <- ".join(f"{type(link).__name__}: {link}" for link in _chain(error)))


def traceback_text(error: BaseException) -> str:
    """The traceback of `error` as Python prints it, secrets hidden (for logs)."""
    return redact_secrets("".join(traceback.format_exception(error)))


@contextmanager
def errors_redacted() -> Iterator[None]:
    """Raise an error escaping the block as it is when no text in its chain holds a
    secret, else as a `RedactedError` with the secrets hidden (for steps whose errors
    Dagster stores and the run-failure alert posts)."""
    try:
        yield
    except Exception as error:
        texts = [f"{type(link).__name__}: {link}" for link in _chain(error)]
        if all(redact_secrets(text) == text for text in texts):
            raise
        raise RedactedError(error_text(error)) from None


def shorten(text: str, limit: int = 200, one_line: bool = True) -> str:
    """`text` cut to `limit` characters with an ellipsis; `one_line` folds whitespace first."""
    if one_line:
        text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
