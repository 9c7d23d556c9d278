"""Per-(day, slice) aggregates (SPEC section 4).

A slice is `all`, or one value of one metadata key. Means, shares and quantiles are taken
over defined values only (NULL metrics are left out), and the counts and standard
deviations behind each mean are kept so that rules can judge drops against noise.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
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


def _aggregate(
    frame: pd.DataFrame, bloat_line: float, rows: np.ndarray | None = None
) -> dict[str, float | int]:
    """The aggregates of `frame`, or of its `rows` (positions) only.

    Columns are taken one at a time: a copy of the whole group, or of its ok rows, would
    double the memory of a large day.
    """

    def column(name: str) -> pd.Series:
        return frame[name] if rows is None else frame[name].take(rows)

    status = column("status")
    row: dict[str, float | int] = {
        "events": len(status),
        "evaluated": int((status == "ok").sum()),
        "invalid": int((status == "invalid").sum()),
        "errors": int((status == "error").sum()),
    }
    ok = (status == "ok").to_numpy()

    def defined(name: str) -> pd.Series:
        return column(name)[ok].dropna().astype(float)

    for metric in METRICS:
        values = defined(metric)
        row[f"mean_{metric}"] = float(values.mean()) if len(values) else np.nan
        row[f"std_{metric}"] = float(values.std(ddof=1)) if len(values) > 1 else np.nan
        row[f"count_{metric}"] = len(values)
    recall = defined("recall")
    precision = defined("precision")
    row["share_recall_below_1"] = float((recall < 1.0).mean()) if len(recall) else np.nan
    row["share_precision_below_bloat"] = (
        float((precision < bloat_line).mean()) if len(precision) else np.nan
    )
    row["p10_recall"] = float(recall.quantile(0.1)) if len(recall) else np.nan
    row["p10_precision"] = float(precision.quantile(0.1)) if len(precision) else np.nan
    k = defined("k")
    row["mean_k"] = float(k.mean()) if len(k) else np.nan
    for name in ("prompt_tokens", "completion_tokens"):
        row[name] = int(column(name).fillna(0).sum()) if name in frame else 0
    row["cost_usd"] = float(column("cost_usd").fillna(0).sum()) if "cost_usd" in frame else 0.0
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
        for value, positions in _groups(values):
            rows.append(
                {
                    "partition_date": day,
                    "slice": slice_label(key, value),
                    "slice_key": key,
                    "slice_value": value,
                    **_aggregate(frame, bloat_line, positions),
                }
            )
    return rows


def _groups(values: pd.Series) -> Iterator[tuple[Any, np.ndarray]]:
    """(value, row positions) per distinct value, missing values left out: the groups of
    `groupby(values, sort=True)` in the same order, without copying the frame."""
    codes, uniques = pd.factorize(values, sort=True)
    order = np.argsort(codes, kind="stable")  # positions stay ascending within a value
    bounds = np.searchsorted(codes[order], np.arange(len(uniques) + 1))
    for index, value in enumerate(uniques):
        yield value, order[bounds[index] : bounds[index + 1]]


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
        """The column as a categorical aligned to `index`; its categories are sorted, so
        the slices come out in the order of their text, as `slice_metrics` gives them."""
        if len(self._chunks) != 1:
            joined = np.concatenate(self._chunks) if self._chunks else np.empty(0, np.int32)
            self._chunks = [joined]
        codes = self._chunks[0]
        ordered = sorted(self._code_of)
        renumber = np.empty(len(ordered) + 1, dtype=np.int32)
        renumber[[self._code_of[value] for value in ordered]] = np.arange(len(ordered))
        renumber[-1] = -1  # code -1 (missing) stays missing
        categories = pd.Index(ordered, dtype=object)
        return pd.Series(
            pd.Categorical.from_codes(renumber[codes], categories=categories), index=index
        )


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
        numbers = pd.concat(self._numbers, ignore_index=True)
        self._numbers = [numbers]  # the chunks are freed before aggregating
        frame = numbers.assign(status=self._status.values(numbers.index))
        values = [(key, codes.values(frame.index)) for key, codes in self._values.items()]
        return pd.DataFrame(
            _day_rows(day, frame, values, self.bloat_line), columns=list(SLICE_COLUMNS)
        )
