"""Secrets are hidden by value as well as by shape, in text and in errors."""

from __future__ import annotations

import secrets
from urllib.parse import quote

import pytest

from seer_metrics.text.redaction import (
    MIN_SECRET_LENGTH,
    RedactedError,
    error_text,
    errors_redacted,
    redact_secrets,
    register_secret,
    traceback_text,
)


def test_a_registered_value_is_hidden_as_written_url_encoded_and_json_escaped() -> None:
    value = secrets.token_hex(8) + '/+=&"x'
    register_secret(f"  {value} ")
    for form in (value, quote(value, safe=""), value.replace('"', '\\"')):
        assert redact_secrets(f"the server said {form}!") == "the server said ***!"


def test_short_and_empty_values_are_not_registered() -> None:
    register_secret("abc")
    register_secret("")
    register_secret(None)
    assert redact_secrets("abc is a word") == "abc is a word"
    assert MIN_SECRET_LENGTH >= 6


def test_an_error_holding_a_secret_is_raised_again_without_it_and_its_chain() -> None:
    key = secrets.token_hex(16)
    register_secret(key)
    with pytest.raises(RedactedError) as raised, errors_redacted():
        try:
            raise ConnectionError(f"refused for {key}")
        except ConnectionError as cause:
            raise ValueError("the day failed") from cause
    assert key not in str(raised.value) and "ConnectionError: refused for ***" in str(raised.value)
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
    # An error without a secret keeps its own class.
    with pytest.raises(KeyError), errors_redacted():
        raise KeyError("nothing secret")
    try:
        raise OSError(f"key {key}")
    except OSError as error:
        assert key not in traceback_text(error) and key not in error_text(error)
