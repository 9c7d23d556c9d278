"""Text that is safe to print, log, store or post: secrets hidden, long text cut."""

from __future__ import annotations

import re

from sqlalchemy.engine import make_url

# Credentials as they appear in error messages: passwords inside URLs, API keys, tokens.
_URL_PASSWORD = re.compile(
    r"(?P<head>[a-z][a-z0-9+.-]*://[^:/@\s]*:)(?P<secret>[^@\s]+)(?=@)", re.I
)
_SECRET_WORDS = re.compile(
    r"(?P<head>\b(?:password|passwd|pwd|api[_-]?key|token|secret)\b\s*[=:]\s*)"
    r"(?P<secret>['\"]?[^\s'\",;&]+)",
    re.I,
)
_BEARER = re.compile(r"(?P<head>\bBearer\s+)(?P<secret>[A-Za-z0-9._~+/=-]+)", re.I)
_KEY_SHAPES = re.compile(r"\b(?:sk-[A-Za-z0-9_-]{8,}|xox[abposr]-[A-Za-z0-9-]{8,})")
REDACTED = "***"


def redact_url(url: str) -> str:
    """A database URL with its password hidden; anything that is not a URL is hidden whole."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<unparseable url>"


def redact_secrets(text: str) -> str:
    """`text` with URL passwords, `password=…`/`token: …` values, bearer tokens and
    OpenAI/Slack-shaped keys replaced by `***` (error messages quote connection strings)."""
    text = _URL_PASSWORD.sub(lambda m: m.group("head") + REDACTED, text)
    text = _SECRET_WORDS.sub(lambda m: m.group("head") + REDACTED, text)
    text = _BEARER.sub(lambda m: m.group("head") + REDACTED, text)
    return _KEY_SHAPES.sub(REDACTED, text)


def shorten(text: str, limit: int = 200, one_line: bool = True) -> str:
    """`text` cut to `limit` characters with an ellipsis; `one_line` folds whitespace first."""
    if one_line:
        text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
