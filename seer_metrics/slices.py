"""Per-(day, slice) aggregates.

A slice is `all`, one value of one metadata key (`env=prod`), or one value of each of two
keys (`env=prod,feature_flag=retrieval-v2`), bounded by volume (`seer_metrics.slice_groups`
forms the groups and says why).

Means, shares and quantiles are taken over defined values only (NULL metrics are left
out), and the counts and standard deviations behind each mean are kept so that rules can
judge drops against noise.

A sampled day (events with status `not_sampled` or `skipped_budget`) is estimated from its
judged events: each stands for its stratum (`stratum`: the event's values of the slice keys
the day was sampled by) with the weight N / n, the means and shares are ratio estimators
and `se_*` their standard errors from the sampling (`seer_metrics.sampling`); `count_*`
stays the number of judged events behind each figure. A fully judged day gives exactly
the plain means, with sampling errors of 0.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from seer_metrics.sampling import estimate_domain_mean
from seer_metrics.slice_groups import (
    ALL_SLICE,
    DEFAULT_MAX_PAIR_SLICES,
    DEFAULT_PAIR_MINIMUM_EVENTS,
    PAIR_SEPARATOR,
    KeyGroups,
    PairSliceBounds,
    key_groups,
    pair_groups,
    pair_label,
    positions_by_code,
    slice_label,
)

METRICS = ("recall", "precision", "f1", "ndcg")
DEFAULT_SLICE_KEYS = ("env", "feature_flag")
DEFAULT_BLOAT_LINE = 0.35
# Statuses of events left unjudged on purpose: outside the day's sample, or past its budget.
NOT_SAMPLED = "not_sampled"
SKIPPED_BUDGET = "skipped_budget"
SHARES = ("share_recall_below_1", "share_precision_below_bloat")

SLICE_COLUMNS = (
    "partition_date",
    "slice",
    "slice_key",
    "slice_value",
    "events",
    "evaluated",
    "invalid",
    "errors",
    "not_sampled",
    "skipped_budget",
    *(f"mean_{m}" for m in METRICS),
    *(f"std_{m}" for m in METRICS),
    *(f"count_{m}" for m in METRICS),
    *(f"se_{m}" for m in METRICS),
    *SHARES,
    *(f"se_{share}" for share in SHARES),
    "p10_recall",
    "p10_precision",
    "mean_k",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
)


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


@dataclass(frozen=True)
class _Weights:
    """What undoes a sampled day's sampling: every event's stratum code, and per stratum
    its judged events (status ok) and its population (ok, not sampled or over budget)."""

    strata: np.ndarray
    sample_counts: np.ndarray
    population: np.ndarray

    @classmethod
    def of(cls, strata: np.ndarray, ok: np.ndarray, unjudged: np.ndarray) -> _Weights:
        codes = np.asarray(strata, dtype=np.int64)
        codes = np.where(codes < 0, codes.max(initial=-1) + 1, codes)  # no stratum: one more
        length = int(codes.max(initial=-1)) + 1
        judged = np.bincount(codes[ok], minlength=length)
        return cls(codes, judged, judged + np.bincount(codes[unjudged], minlength=length))

    def estimate(self, values: np.ndarray, rows: np.ndarray) -> tuple[float, float]:
        """Mean and standard error of `values` (NaN: undefined) of the judged `rows`."""
        estimate = estimate_domain_mean(
            values, self.strata[rows], self.sample_counts, self.population
        )
        if estimate.mean is None:
            return np.nan, np.nan
        return estimate.mean, float(estimate.standard_error or 0.0)

    def weights(self, rows: np.ndarray) -> np.ndarray:
        strata = self.strata[rows]
        return self.population[strata] / np.maximum(self.sample_counts[strata], 1)


@dataclass(frozen=True)
class _DayArrays:
    """One day's columns as numpy arrays, made once and indexed per slice.

    Numbers are float64 (NULL as NaN): no copy when the day is already numeric, as in
    `SliceAccumulator`; the status is boolean masks. `weights` is None on a fully judged
    day (no event left unjudged on purpose), which keeps the plain means.
    """

    ok: np.ndarray
    invalid: np.ndarray
    error: np.ndarray
    not_sampled: np.ndarray
    skipped_budget: np.ndarray
    numbers: dict[str, np.ndarray]
    weights: _Weights | None

    @classmethod
    def of(cls, frame: pd.DataFrame, strata: np.ndarray | None = None) -> _DayArrays:
        """`strata`: one integer code per event (-1 when unknown); else the `stratum`
        column of `frame` when it has one."""
        status = frame["status"]
        ok = (status == "ok").to_numpy(dtype=bool)
        not_sampled = (status == NOT_SAMPLED).to_numpy(dtype=bool)
        skipped_budget = (status == SKIPPED_BUDGET).to_numpy(dtype=bool)
        weights = None
        if not_sampled.any() or skipped_budget.any():
            if strata is None:
                strata = (
                    pd.factorize(frame["stratum"])[0]
                    if "stratum" in frame
                    else np.zeros(len(frame), dtype=np.int64)
                )
            weights = _Weights.of(strata, ok, not_sampled | skipped_budget)
        return cls(
            ok=ok,
            invalid=(status == "invalid").to_numpy(dtype=bool),
            error=(status == "error").to_numpy(dtype=bool),
            not_sampled=not_sampled,
            skipped_budget=skipped_budget,
            numbers={
                name: pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype=float)
                for name in _NUMERIC_COLUMNS
                if name in frame
            },
            weights=weights,
        )

    @classmethod
    def of_codes(
        cls,
        status: _Codes,
        numbers: Mapping[str, _CodedNumbers],
        strata: np.ndarray,
    ) -> _DayArrays:
        """The same arrays from `SliceAccumulator`'s codes, without building a frame: the
        status masks come from the status codes and the numbers stay coded."""
        codes = status.codes()

        def mask(value: str) -> np.ndarray:
            code = status.code_of(value)
            return codes == code if code is not None else np.zeros(len(codes), dtype=bool)

        ok, not_sampled, skipped_budget = mask("ok"), mask(NOT_SAMPLED), mask(SKIPPED_BUDGET)
        weights = None
        if not_sampled.any() or skipped_budget.any():
            weights = _Weights.of(strata, ok, not_sampled | skipped_budget)
        return cls(
            ok=ok,
            invalid=mask("invalid"),
            error=mask("error"),
            not_sampled=not_sampled,
            skipped_budget=skipped_budget,
            numbers=dict(numbers),
            weights=weights,
        )


def _weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """The smallest value whose weighted cumulative share reaches `q` (inverted CDF)."""
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(weights[order])
    position = int(np.searchsorted(cumulative, q * cumulative[-1], side="left"))
    return float(values[order][min(position, len(values) - 1)])


def _weighted_std(values: np.ndarray, weights: np.ndarray, mean: float) -> float:
    """The population spread estimated from weighted values (ddof=1 on the judged count)."""
    count = len(values)
    if count < 2:
        return np.nan
    variance = float((weights * (values - mean) ** 2).sum() / weights.sum())
    return float(np.sqrt(variance * count / (count - 1)))


def _estimated(
    day: _DayArrays, weights: _Weights, bloat_line: float, rows: np.ndarray
) -> dict[str, float | int]:
    """The statistics of a sampled day's slice: ratio estimates over its judged events."""
    judged = rows[day.ok[rows]]
    row: dict[str, float | int] = {}

    def column(name: str) -> np.ndarray:
        values = day.numbers.get(name)
        return np.full(len(judged), np.nan) if values is None else values[judged]

    for metric in METRICS:
        values = column(metric)
        mean, error = weights.estimate(values, judged)
        defined = ~np.isnan(values)
        row[f"mean_{metric}"] = mean
        row[f"se_{metric}"] = error
        row[f"std_{metric}"] = _weighted_std(
            values[defined], weights.weights(judged[defined]), mean
        )
        row[f"count_{metric}"] = int(defined.sum())
    for share, metric, line in (
        ("share_recall_below_1", "recall", 1.0),
        ("share_precision_below_bloat", "precision", bloat_line),
    ):
        values = column(metric)
        below = np.where(np.isnan(values), np.nan, (values < line).astype(float))
        row[share], row[f"se_{share}"] = weights.estimate(below, judged)
    for name, metric in (("p10_recall", "recall"), ("p10_precision", "precision")):
        values = column(metric)
        defined = ~np.isnan(values)
        row[name] = (
            _weighted_quantile(values[defined], weights.weights(judged[defined]), 0.1)
            if defined.any()
            else np.nan
        )
    row["mean_k"] = weights.estimate(column("k"), judged)[0]
    return row


def _aggregate(
    day: _DayArrays, bloat_line: float, rows: np.ndarray | None = None
) -> dict[str, float | int]:
    """The aggregates of the day, or of its `rows` (positions) only: only the values a
    statistic needs are gathered, one column at a time."""
    ok = day.ok if rows is None else day.ok[rows]
    row: dict[str, float | int] = {
        "events": len(ok),
        "evaluated": int(ok.sum()),
        "invalid": int((day.invalid if rows is None else day.invalid[rows]).sum()),
        "errors": int((day.error if rows is None else day.error[rows]).sum()),
        "not_sampled": int((day.not_sampled if rows is None else day.not_sampled[rows]).sum()),
        "skipped_budget": int(
            (day.skipped_budget if rows is None else day.skipped_budget[rows]).sum()
        ),
    }
    if day.weights is not None:
        positions = np.arange(len(day.ok)) if rows is None else rows
        row.update(_estimated(day, day.weights, bloat_line, positions))
        _add_sums(day, row, rows)
        return row

    def column(name: str) -> np.ndarray | None:
        values = day.numbers.get(name)
        return values if values is None or rows is None else values[rows]

    def defined(name: str) -> np.ndarray:
        values = column(name)
        if values is None:
            return np.empty(0)
        values = values[ok]
        return values[~np.isnan(values)]

    # Every event judged: plain means, and no sampling error.
    for metric in METRICS:
        values = defined(metric)
        row[f"mean_{metric}"] = float(values.mean()) if len(values) else np.nan
        row[f"std_{metric}"] = float(values.std(ddof=1)) if len(values) > 1 else np.nan
        row[f"count_{metric}"] = len(values)
        row[f"se_{metric}"] = 0.0 if len(values) else np.nan
    recall = defined("recall")
    precision = defined("precision")
    row["share_recall_below_1"] = float((recall < 1.0).mean()) if len(recall) else np.nan
    row["share_precision_below_bloat"] = (
        float((precision < bloat_line).mean()) if len(precision) else np.nan
    )
    row["se_share_recall_below_1"] = 0.0 if len(recall) else np.nan
    row["se_share_precision_below_bloat"] = 0.0 if len(precision) else np.nan
    row["p10_recall"] = float(np.quantile(recall, 0.1)) if len(recall) else np.nan
    row["p10_precision"] = float(np.quantile(precision, 0.1)) if len(precision) else np.nan
    k = defined("k")
    row["mean_k"] = float(k.mean()) if len(k) else np.nan
    _add_sums(day, row, rows)
    return row


def _add_sums(day: _DayArrays, row: dict[str, float | int], rows: np.ndarray | None) -> None:
    """What the day's materialization spent on the slice (every event, never weighted)."""
    for name in ("prompt_tokens", "completion_tokens", "cost_usd"):
        values = day.numbers.get(name)
        if values is not None and rows is not None:
            values = values[rows]
        total = float(np.nansum(values)) if values is not None else 0.0
        row[name] = total if name == "cost_usd" else int(total)


def _day_rows(
    day: Any,
    arrays: _DayArrays,
    groups: Sequence[KeyGroups],
    bloat_line: float,
    pair_bounds: PairSliceBounds,
) -> list[dict[str, Any]]:
    """The `all` row, one row per (key, value), then the kept pair slices of one day."""
    rows: list[dict[str, Any]] = [
        {
            "partition_date": day,
            "slice": ALL_SLICE,
            "slice_key": ALL_SLICE,
            "slice_value": ALL_SLICE,
            **_aggregate(arrays, bloat_line),
        }
    ]
    for group in groups:
        positions = positions_by_code(group.codes, len(group.values))
        for value, rows_of_value in zip(group.values, positions, strict=True):
            rows.append(
                {
                    "partition_date": day,
                    "slice": slice_label(group.key, value),
                    "slice_key": group.key,
                    "slice_value": value,
                    **_aggregate(arrays, bloat_line, rows_of_value),
                }
            )
    for label, key, value, positions in pair_groups(groups, pair_bounds):
        rows.append(
            {
                "partition_date": day,
                "slice": label,
                "slice_key": key,
                "slice_value": value,
                **_aggregate(arrays, bloat_line, positions),
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
    pair_bounds: PairSliceBounds | None = None,
) -> pd.DataFrame:
    """Aggregate event-level scores into one row per (partition_date, slice).

    `scores` needs `partition_date`, `status`, the four metrics, `k` and `metadata`
    (a dict or its JSON text); token and cost columns are summed when present, and
    `stratum` weighs a sampled day's judged events (see the module docstring). Pair
    slices follow `pair_bounds` (default: at least 100 events, the 50 largest). For one
    day read in chunks, `SliceAccumulator` gives the same rows in far less memory.
    """
    _check_columns(scores, {"partition_date", *_REQUIRED_COLUMNS})
    keys = list(dict.fromkeys(slice_keys))
    bounds = pair_bounds or PairSliceBounds()
    rows: list[dict[str, Any]] = []
    for day, day_frame in scores.groupby("partition_date", sort=True):
        groups = [key_groups(key, _slice_values(day_frame["metadata"], key)) for key in keys]
        rows.extend(_day_rows(day, _DayArrays.of(day_frame), groups, bloat_line, bounds))
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

    def codes(self) -> np.ndarray:
        """The raw codes (in order of first appearance; -1 for missing)."""
        if len(self._chunks) != 1:
            joined = np.concatenate(self._chunks) if self._chunks else np.empty(0, np.int32)
            self._chunks = [joined]
        return self._chunks[0]

    def code_of(self, value: Any) -> int | None:
        """The code of `value`, None when no event had it."""
        return self._code_of.get(value)

    def key_groups(self, key: str) -> KeyGroups:
        """What `key_groups` gives for the same values: codes renumbered so the values are
        sorted by their text (the order of the slices), as int32. The raw codes are
        dropped: only the sorted ones are needed from here on."""
        codes = self.codes()
        ordered = sorted(self._code_of)
        renumber = np.empty(len(ordered) + 1, dtype=np.int32)
        renumber[[self._code_of[value] for value in ordered]] = np.arange(len(ordered))
        renumber[-1] = -1  # code -1 (missing) stays missing
        self._chunks = []
        return KeyGroups(key, renumber[codes], [str(value) for value in ordered])


# Distinct values a numeric column may have and still be kept as two-byte codes.
_MAX_CODED_VALUES = int(np.iinfo(np.uint16).max) + 1


class _CodedNumbers:
    """One numeric column kept losslessly in little memory: each event's value as a
    two-byte code into the column's distinct values (scores are ratios of small counts, K
    and tokens small integers), or as float64 once the column has more distinct values
    than two bytes can number. Indexing gives float64 values, as the plain array would.
    """

    def __init__(self) -> None:
        self._code_of: dict[float, int] = {}  # NaN (NULL) is the key None
        self._chunks: list[np.ndarray] = []
        self._table: np.ndarray | None = None  # value of each code, once joined
        self._plain = False  # too many distinct values: the chunks hold float64

    def add(self, values: np.ndarray) -> None:
        if self._plain:
            self._chunks.append(values)
            return
        distinct, inverse = np.unique(values, return_inverse=True)
        code_of = self._code_of
        mapping = np.fromiter(
            (
                code_of.setdefault(None if value != value else value, len(code_of))
                for value in distinct.tolist()
            ),
            dtype=np.int64,
            count=len(distinct),
        )
        if len(code_of) > _MAX_CODED_VALUES:
            table = self._values_by_code()
            self._chunks = [table[chunk] for chunk in self._chunks]
            self._chunks.append(values)
            self._plain = True
            return
        self._chunks.append(mapping[inverse.reshape(-1)].astype(np.uint16))

    def _values_by_code(self) -> np.ndarray:
        table = np.empty(len(self._code_of), dtype=float)
        for value, code in self._code_of.items():
            table[code] = np.nan if value is None else value
        return table

    def join(self) -> _CodedNumbers:
        """Concatenate the chunks (once, before aggregating)."""
        if len(self._chunks) != 1:
            empty = np.empty(0, dtype=float if self._plain else np.uint16)
            self._chunks = [np.concatenate(self._chunks) if self._chunks else empty]
        if not self._plain and self._table is None:
            self._table = self._values_by_code()
        return self

    def __len__(self) -> int:
        return sum(len(chunk) for chunk in self._chunks)

    def __getitem__(self, rows: Any) -> np.ndarray:
        joined = self.join()._chunks[0]
        return joined[rows] if self._table is None else self._table[joined[rows]]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        values = self[slice(None)]
        return values if dtype is None else values.astype(dtype)


class SliceAccumulator:
    """The slice rows of one day, built from its event scores chunk by chunk.

    The p10 quantiles need every value of the day, so the day cannot be reduced chunk by
    chunk without approximating; instead only what the aggregates read is kept per event,
    losslessly and small: the metrics, K, tokens and cost as two-byte codes into each
    column's distinct values (`_CodedNumbers`; float64 for a column with more distinct
    values than that), the status and each slice key's value as int32 codes, so about 30
    bytes an event with two keys (a sampled day's `stratum` is one more code), never the
    rows or their metadata objects. `result` aggregates straight from these codes (no
    frame is built); pair slices are formed from the keys' codes then, with a few
    transient arrays for one key pair at a time. Distinct values are kept once each (the
    code tables). `result` returns exactly what `slice_metrics` returns for the
    concatenated chunks.
    """

    def __init__(
        self,
        slice_keys: Sequence[str] = DEFAULT_SLICE_KEYS,
        bloat_line: float = DEFAULT_BLOAT_LINE,
        pair_bounds: PairSliceBounds | None = None,
    ) -> None:
        self.slice_keys = list(dict.fromkeys(slice_keys))
        self.bloat_line = bloat_line
        self.pair_bounds = pair_bounds or PairSliceBounds()
        self.events = 0
        self._numbers: dict[str, _CodedNumbers] = {}
        self._status = _Codes()
        self._strata = _Codes()
        self._values = {key: _Codes() for key in self.slice_keys}

    def add(self, scores: pd.DataFrame) -> None:
        """One chunk of event scores (the columns `slice_metrics` needs, no partition_date)."""
        _check_columns(scores, set(_REQUIRED_COLUMNS))
        if scores.empty:
            return
        for column in _NUMERIC_COLUMNS:
            if column in scores:
                values = pd.to_numeric(scores[column], errors="coerce").to_numpy(dtype=float)
                self._numbers.setdefault(column, _CodedNumbers()).add(values)
        self._status.add(scores["status"])
        self._strata.add(scores["stratum"] if "stratum" in scores else [None] * len(scores))
        metadata = [_parsed_metadata(meta) for meta in scores["metadata"]]
        for key, codes in self._values.items():
            codes.add(metadata_value(meta, key) for meta in metadata)
        self.events += len(scores)

    def result(self, day: Any) -> pd.DataFrame:
        """One row per slice of `day` (no row at all for a day without events)."""
        if not self.events:
            return pd.DataFrame([], columns=list(SLICE_COLUMNS))
        numbers = {name: column.join() for name, column in self._numbers.items()}
        arrays = _DayArrays.of_codes(self._status, numbers, self._strata.codes())
        groups = [codes.key_groups(key) for key, codes in self._values.items()]
        return pd.DataFrame(
            _day_rows(day, arrays, groups, self.bloat_line, self.pair_bounds),
            columns=list(SLICE_COLUMNS),
        )


def _parsed_metadata(metadata: Any) -> Any:
    """Metadata JSON text parsed once for every slice key (None when it does not parse,
    which `metadata_value` reads as no value)."""
    if isinstance(metadata, str):
        try:
            return json.loads(metadata) if metadata else {}
        except json.JSONDecodeError:
            return None
    return metadata


__all__ = [
    "ALL_SLICE",
    "DEFAULT_BLOAT_LINE",
    "DEFAULT_MAX_PAIR_SLICES",
    "DEFAULT_PAIR_MINIMUM_EVENTS",
    "DEFAULT_SLICE_KEYS",
    "METRICS",
    "PAIR_SEPARATOR",
    "SLICE_COLUMNS",
    "PairSliceBounds",
    "SliceAccumulator",
    "metadata_value",
    "pair_label",
    "slice_label",
    "slice_metrics",
]
