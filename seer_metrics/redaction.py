"""Hiding secrets before anything is printed, logged or stored."""

from __future__ import annotations

from sqlalchemy.engine import make_url


def redact_url(url: str) -> str:
    """A database URL with its password hidden; anything that is not a URL is hidden whole."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<unparseable url>"
