"""Per-(day, slice) aggregates (SPEC section 4).

A slice is `all`, or one value of one metadata key. Means, shares and quantiles are taken
over defined values only (NULL metrics are left out), and the counts and standard
deviations behind each mean are kept so that rules can judge drops against noise.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

METRICS = ("recall", "precision", "f1", "ndcg")
DEFAULT_SLICE_KEYS = ("env", "feature_flag")
DEFAULT_BLOAT_LINE = 0.35
ALL_SLICE = "all"

SLICE_COLUMNS = (
    "partition_date",
    "slice",
    "slice_key",
    "slice_value",
    "events",
    "evaluated",
    "invalid",
    "errors",
    *(f"mean_{m}" for m in METRICS),
    *(f"std_{m}" for m in METRICS),
    *(f"count_{m}" for m in METRICS),
    "share_recall_below_1",
    "share_precision_below_bloat",
    "p10_recall",
    "p10_precision",
    "mean_k",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
)


def slice_label(key: str, value: str) -> str:
    return ALL_SLICE if key == ALL_SLICE else f"{key}={value}"


def metadata_value(metadata: Any, key: str) -> str | None:
    """The slice value of one event for `key`, as text; None when absent."""
    if isinstance(metadata, str):
        try:
            metadata = json.loads(metadata) if metadata else {}
        except json.JSONDecodeError:
            return None
    if not isinstance(metadata, Mapping):
        return None
    value = metadata.get(key)
    if value is None or isinstance(value, Mapping | list):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_REQUIRED_COLUMNS = ("status", "k", "metadata", *METRICS)
_NUMERIC_COLUMNS = (*METRICS, "k", "prompt_tokens", "completion_tokens", "cost_usd")


def _aggregate(group: pd.DataFrame, bloat_line: float) -> dict[str, float | int]:
    status = group["status"]
    row: dict[str, float | int] = {
        "events": len(group),
        "evaluated": int((status == "ok").sum()),
        "invalid": int((status == "invalid").sum()),
        "errors": int((status == "error").sum()),
    }
    ok = group[status == "ok"]
    for metric in METRICS:
        values = ok[metric].dropna().astype(float)
        row[f"mean_{metric}"] = float(values.mean()) if len(values) else np.nan
        row[f"std_{metric}"] = float(values.std(ddof=1)) if len(values) > 1 else np.nan
        row[f"count_{metric}"] = len(values)
    recall = ok["recall"].dropna().astype(float)
    precision = ok["precision"].dropna().astype(float)
    row["share_recall_below_1"] = float((recall < 1.0).mean()) if len(recall) else np.nan
    row["share_precision_below_bloat"] = (
        float((precision < bloat_line).mean()) if len(precision) else np.nan
    )
    row["p10_recall"] = float(recall.quantile(0.1)) if len(recall) else np.nan
    row["p10_precision"] = float(precision.quantile(0.1)) if len(precision) else np.nan
    k = ok["k"].dropna().astype(float)
    row["mean_k"] = float(k.mean()) if len(k) else np.nan
    for column in ("prompt_tokens", "completion_tokens"):
        row[column] = int(group[column].fillna(0).sum()) if column in group else 0
    row["cost_usd"] = float(group["cost_usd"].fillna(0).sum()) if "cost_usd" in group else 0.0
    return row


def _day_rows(
    day: Any,
    frame: pd.DataFrame,
    values_by_key: Sequence[tuple[str, pd.Series]],
    bloat_line: float,
) -> list[dict[str, Any]]:
    """The `all` row and one row per (key, value) of one day's events."""
    rows: list[dict[str, Any]] = [
        {
            "partition_date": day,
            "slice": ALL_SLICE,
            "slice_key": ALL_SLICE,
            "slice_value": ALL_SLICE,
            **_aggregate(frame, bloat_line),
        }
    ]
    for key, values in values_by_key:
        for value, group in frame.groupby(values, sort=True):
            rows.append(
                {
                    "partition_date": day,
                    "slice": slice_label(key, value),
                    "slice_key": key,
                    "slice_value": value,
                    **_aggregate(group, bloat_line),
                }
            )
    return rows


def _slice_values(metadata: pd.Series, key: str) -> pd.Series:
    return metadata.map(lambda meta: metadata_value(meta, key))


def _check_columns(scores: pd.DataFrame, required: set[str]) -> None:
    missing = sorted(required - set(scores.columns))
    if missing:
        raise KeyError(f"slice_metrics needs columns {missing}")


def slice_metrics(
    scores: pd.DataFrame,
    slice_keys: Sequence[str] = DEFAULT_SLICE_KEYS,
    bloat_line: float = DEFAULT_BLOAT_LINE,
) -> pd.DataFrame:
    """Aggregate event-level scores into one row per (partition_date, slice).

    `scores` needs `partition_date`, `status`, the four metrics, `k` and `metadata`
    (a dict or its JSON text); token and cost columns are summed when present. For one
    day read in chunks, `SliceAccumulator` gives the same rows in far less memory.
    """
    _check_columns(scores, {"partition_date", *_REQUIRED_COLUMNS})
    rows: list[dict[str, Any]] = []
    for day, day_frame in scores.groupby("partition_date", sort=True):
        values = [(key, _slice_values(day_frame["metadata"], key)) for key in slice_keys]
        rows.extend(_day_rows(day, day_frame, values, bloat_line))
    return pd.DataFrame(rows, columns=list(SLICE_COLUMNS))


class _Codes:
    """One text column as int32 codes (None and NaN are -1): four bytes an event, not a string."""

    def __init__(self) -> None:
        self._code_of: dict[Any, int] = {}
        self._chunks: list[np.ndarray] = []

    def add(self, values: Iterable[Any]) -> None:
        code_of = self._code_of
        self._chunks.append(
            np.fromiter(
                (
                    -1
                    if value is None or value != value
                    else code_of.setdefault(value, len(code_of))
                    for value in values
                ),
                dtype=np.int32,
            )
        )

    def values(self, index: pd.Index) -> pd.Series:
        """The decoded column (object dtype, None where missing), aligned to `index`."""
        lookup = np.empty(len(self._code_of) + 1, dtype=object)
        lookup[: len(self._code_of)] = list(self._code_of)
        lookup[-1] = None  # code -1
        codes = np.concatenate(self._chunks) if self._chunks else np.empty(0, dtype=np.int32)
        return pd.Series(lookup[codes], index=index, dtype=object)


class SliceAccumulator:
    """The slice rows of one day, built from its event scores chunk by chunk.

    The p10 quantiles need every value of the day, so the day cannot be reduced chunk by
    chunk without approximating; instead only what the aggregates read is kept per event:
    the metrics, K, tokens and cost as numbers and the status and each slice key's value
    as int32 codes (about 80 bytes an event), never the rows or their metadata objects.
    `result` returns exactly what `slice_metrics` returns for the concatenated chunks.
    """

    def __init__(
        self,
        slice_keys: Sequence[str] = DEFAULT_SLICE_KEYS,
        bloat_line: float = DEFAULT_BLOAT_LINE,
    ) -> None:
        self.slice_keys = list(dict.fromkeys(slice_keys))
        self.bloat_line = bloat_line
        self.events = 0
        self._numbers: list[pd.DataFrame] = []
        self._status = _Codes()
        self._values = {key: _Codes() for key in self.slice_keys}

    def add(self, scores: pd.DataFrame) -> None:
        """One chunk of event scores (the columns `slice_metrics` needs, no partition_date)."""
        _check_columns(scores, set(_REQUIRED_COLUMNS))
        if scores.empty:
            return
        self._numbers.append(
            pd.DataFrame(
                {
                    column: pd.to_numeric(scores[column], errors="coerce").to_numpy()
                    for column in _NUMERIC_COLUMNS
                    if column in scores
                }
            )
        )
        self._status.add(scores["status"])
        for key, codes in self._values.items():
            codes.add(metadata_value(meta, key) for meta in scores["metadata"])
        self.events += len(scores)

    def result(self, day: Any) -> pd.DataFrame:
        """One row per slice of `day` (no row at all for a day without events)."""
        if not self._numbers:
            return pd.DataFrame([], columns=list(SLICE_COLUMNS))
        frame = pd.concat(self._numbers, ignore_index=True)
        frame["status"] = self._status.values(frame.index)
        values = [(key, codes.values(frame.index)) for key, codes in self._values.items()]
        return pd.DataFrame(
            _day_rows(day, frame, values, self.bloat_line), columns=list(SLICE_COLUMNS)
        )
