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


def numbered_json_lines(path: str | Path) -> Iterator[tuple[int, Any, str | None]]:
    """(line number, parsed value, None) per non-blank line, or (number, None, reason)."""
    for number, text, error in numbered_lines(path):
        if error is not None:
            yield number, None, error
            continue
        try:
            yield number, json.loads(text), None
        except json.JSONDecodeError as decode_error:
            yield (
                number,
                None,
                f"not valid JSON ({decode_error.msg} at column {decode_error.colno})",
            )
