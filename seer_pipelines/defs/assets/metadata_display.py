"""Floats rounded for display in Dagster metadata (the UI, its plots, the run log).

A mean shown as 0.6777677917582051 says no more than 0.6778, and the digits hide the
figure. Every asset, check and observation passes its metadata through
`display_metadata`; the tables keep full precision.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from dagster import FloatMetadataValue, JsonMetadataValue, MetadataValue

SIGNIFICANT_DIGITS = 4
DECIMALS = 4


def rounded(value: float) -> float:
    """4 decimals, or 4 significant digits below 0.01 in magnitude (a cost of $0.000123
    stays visible); NaN and infinities unchanged."""
    number = float(value)
    if not math.isfinite(number) or number == 0.0:
        return number
    if abs(number) < 0.01:
        return float(f"{number:.{SIGNIFICANT_DIGITS}g}")
    return round(number, DECIMALS)


def rounded_json(data: Any) -> Any:
    """`data` with every float inside (dicts, lists) rounded for display."""
    if isinstance(data, bool) or data is None or isinstance(data, int | str):
        return data
    if isinstance(data, float):
        return rounded(data)
    if isinstance(data, Mapping):
        return {key: rounded_json(value) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [rounded_json(value) for value in data]
    if hasattr(data, "item"):  # numpy scalar
        return rounded_json(data.item())
    return data


def display_value(value: Any) -> Any:
    """One metadata value, rounded when it carries floats."""
    if isinstance(value, FloatMetadataValue):
        return MetadataValue.float(rounded(value.value)) if value.value is not None else value
    if isinstance(value, JsonMetadataValue):
        return MetadataValue.json(rounded_json(value.data))
    if isinstance(value, bool):
        return value
    if isinstance(value, float) or (hasattr(value, "dtype") and getattr(value, "ndim", 1) == 0):
        return rounded_json(value)
    return value


def display_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """Metadata with every float rounded for display; other values unchanged."""
    return {key: display_value(value) for key, value in metadata.items()}


def markdown_cell(text: object) -> str:
    """Text for a cell of a markdown table in the UI: `|` escaped, no HTML tags."""
    return str(text).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
