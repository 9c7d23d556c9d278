"""Reading JSON Lines files (plain or gzipped) where one bad line never stops the file."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO


def open_binary(path: str | Path) -> BinaryIO:
    """Open a `.jsonl` or `.jsonl.gz` file as bytes; decoding is done line by line."""
    path = Path(path)
    if path.suffix == ".gz":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return path.open("rb")


def numbered_lines(path: str | Path) -> Iterator[tuple[int, str | None, str | None]]:
    """(line number, text, None) per non-blank line, or (number, None, reason) when the
    line is not UTF-8, so one bad byte is reported with its line instead of ending the run.
    """
    with open_binary(path) as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                yield number, None, f"not valid UTF-8 (byte {error.start + 1} of the line)"
                continue
            if text.strip():
                yield number, text, None


def parse_json_line(text: str) -> tuple[Any, str | None]:
    """(value, None) for one line of JSON Lines, or (None, reason) naming the column at fault.

    The line ending is not part of the value: left in, a line cut short would be reported
    at column 1 of a line after it.
    """
    line = text.rstrip("\r\n")
    try:
        return json.loads(line), None
    except json.JSONDecodeError as error:
        # JSON's own messages end in " at" where they mean "at <position>".
        message = error.msg.removesuffix(" at")
        reason = f"not valid JSON: {message} at column {error.pos + 1}"
        if error.pos >= len(line.rstrip()) or message.startswith("Unterminated string"):
            reason += " (the line ends before the JSON value does: truncated?)"
        return None, reason


def numbered_json_lines(path: str | Path) -> Iterator[tuple[int, Any, str | None]]:
    """(line number, parsed value, None) per non-blank line, or (number, None, reason)."""
    for number, text, error in numbered_lines(path):
        if error is not None:
            yield number, None, error
            continue
        value, reason = parse_json_line(text)
        yield number, value, reason
