"""The statistics of one slice of a day: the columns of a slice row after its label.

A fully judged day gives plain means, shares and quantiles over the defined values, with
sampling errors of 0. On a sampled day each judged event stands for its stratum with the
weight N / n: the means and shares are ratio estimators with their standard errors from
the sampling (`seer_metrics.spend.sampling`), the spread and quantiles are weighted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from seer_metrics.events import NOT_SAMPLED, SKIPPED_BUDGET
from seer_metrics.scoring import METRICS
from seer_metrics.slices.coded_columns import CodedNumbers
from seer_metrics.spend.sampling import estimate_domain_mean

NUMERIC_COLUMNS = (*METRICS, "k", "n", "prompt_tokens", "completion_tokens", "cost_usd")


@dataclass(frozen=True)
class StratumWeights:
    """What undoes a sampled day's sampling: every event's stratum code, and per stratum
    its judged events (status ok) and its population (ok, not sampled or over budget)."""

    strata: np.ndarray
    sample_counts: np.ndarray
    population: np.ndarray

    @classmethod
    def of(
        cls,
        strata: np.ndarray,
        ok: np.ndarray,
        unjudged: np.ndarray,
        counted: CountedEvents | None = None,
    ) -> StratumWeights:
        """`counted`: the events counted in the warehouse but never stored; of them, the
        share the stratum's stored rows found invalid is left out of its population."""
        codes = np.asarray(strata)
        missing = int(codes.max(initial=-1)) + 1  # no stratum: one more code
        # Four bytes a code while they fit (a sampled day keeps one per event), else eight.
        codes = codes.astype(np.int32 if missing < np.iinfo(np.int32).max else np.int64)
        codes[codes < 0] = missing
        length = int(codes.max(initial=-1)) + 1
        judged = np.bincount(codes[ok], minlength=length)
        if counted is None:
            return cls(codes, judged, judged + np.bincount(codes[unjudged], minlength=length))
        stored = ~counted.rows
        skipped = np.bincount(codes[unjudged & stored], minlength=length)
        unstored = np.bincount(codes, weights=counted.multiplicity * counted.rows, minlength=length)
        invalid = np.bincount(codes[counted.invalid & stored], minlength=length)
        read = np.bincount(codes[stored], minlength=length)
        valid_share = 1.0 - np.divide(invalid, read, out=np.zeros(length), where=read > 0)
        return cls(codes, judged, judged + skipped + unstored * valid_share)

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


# Each event's status as one byte: the statuses a slice row counts, and any other (0).
STATUS_CLASSES = ("ok", "invalid", "error", NOT_SAMPLED, SKIPPED_BUDGET)
OTHER_STATUS = 0
STATUS_CLASS = {status: index + 1 for index, status in enumerate(STATUS_CLASSES)}
_OK = STATUS_CLASS["ok"]
_UNJUDGED = (STATUS_CLASS[NOT_SAMPLED], STATUS_CLASS[SKIPPED_BUDGET])


def status_classes(statuses: Iterable[Any]) -> np.ndarray:
    """One byte an event: its status's place in `STATUS_CLASSES` (+1), 0 for any other."""
    classes = STATUS_CLASS
    return np.fromiter(
        (
            classes.get(status, OTHER_STATUS) if isinstance(status, str) else 0
            for status in statuses
        ),
        dtype=np.uint8,
    )


@dataclass(frozen=True)
class CountedEvents:
    """A sampled day's events counted in the warehouse, never read: one row per stratum
    (`rows`), standing for `multiplicity` events (1 for every stored row)."""

    rows: np.ndarray
    multiplicity: np.ndarray
    invalid: np.ndarray  # stored rows with status invalid


@dataclass(frozen=True)
class DayArrays:
    """One day's columns as numpy arrays, made once and indexed per slice.

    `status` is one byte an event (`status_classes`) and `ok` its mask; numbers are
    float64 arrays (NULL as NaN) or `CodedNumbers`, which give float64 when indexed, as in
    `SliceAccumulator`. `weights` is None on a fully judged day (no event left unjudged on
    purpose), which keeps the plain means.
    """

    status: np.ndarray
    ok: np.ndarray
    numbers: Mapping[str, np.ndarray | CodedNumbers]
    weights: StratumWeights | None
    counted: CountedEvents | None = None

    @classmethod
    def of(cls, frame: pd.DataFrame) -> DayArrays:
        """From a day's frame; a sampled day is weighted by its `stratum` column."""
        numbers = {
            name: pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype=float)
            for name in NUMERIC_COLUMNS
            if name in frame
        }

        def strata() -> np.ndarray:
            if "stratum" in frame:
                return pd.factorize(frame["stratum"])[0]
            return np.zeros(len(frame), dtype=np.int64)

        return cls.of_status(status_classes(frame["status"]), numbers, strata)

    @classmethod
    def of_status(
        cls,
        status: np.ndarray,
        numbers: Mapping[str, np.ndarray | CodedNumbers],
        strata: Callable[[], np.ndarray],
        counted: np.ndarray | None = None,
    ) -> DayArrays:
        """`status`: `status_classes` of the day; `strata()`: one integer code per event
        (-1 when unknown), asked for only on a sampled day; `counted`: how many events
        each row stands for, on a day whose unsampled events were only counted."""
        ok = status == _OK
        unjudged = np.isin(status, _UNJUDGED)
        events = None
        if counted is not None:
            events = CountedEvents(
                rows=status == STATUS_CLASS[NOT_SAMPLED],
                multiplicity=counted,
                invalid=status == STATUS_CLASS["invalid"],
            )
        weights = StratumWeights.of(strata(), ok, unjudged, events) if unjudged.any() else None
        return cls(status=status, ok=ok, numbers=numbers, weights=weights, counted=events)


def weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """The smallest value whose weighted cumulative share reaches `q` (inverted CDF)."""
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(weights[order])
    position = int(np.searchsorted(cumulative, q * cumulative[-1], side="left"))
    return float(values[order][min(position, len(values) - 1)])


def weighted_std(values: np.ndarray, weights: np.ndarray, mean: float) -> float:
    """The population spread estimated from weighted values (ddof=1 on the judged count)."""
    count = len(values)
    if count < 2:
        return np.nan
    variance = float((weights * (values - mean) ** 2).sum() / weights.sum())
    return float(np.sqrt(variance * count / (count - 1)))


def _sampled_statistics(
    day: DayArrays, weights: StratumWeights, bloat_line: float, judged: np.ndarray
) -> dict[str, float | int]:
    """The statistics of a sampled day's slice: ratio estimates over its `judged` events."""
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
        row[f"std_{metric}"] = weighted_std(values[defined], weights.weights(judged[defined]), mean)
        row[f"count_{metric}"] = int(defined.sum())
        if metric == "recall":
            below = np.where(defined, (values < 1.0).astype(float), np.nan)
            row["share_recall_below_1"], row["se_share_recall_below_1"] = weights.estimate(
                below, judged
            )
        elif metric == "precision":
            below = np.where(defined, (values < bloat_line).astype(float), np.nan)
            share, error = weights.estimate(below, judged)
            row["share_precision_below_bloat"], row["se_share_precision_below_bloat"] = (
                share,
                error,
            )
        if metric in ("recall", "precision"):
            row[f"p10_{metric}"] = (
                weighted_quantile(values[defined], weights.weights(judged[defined]), 0.1)
                if defined.any()
                else np.nan
            )
    row["mean_k"] = weights.estimate(column("k"), judged)[0]
    sizes = column("n")
    defined = ~np.isnan(sizes)
    row["mean_n"], row["se_n"] = weights.estimate(sizes, judged)
    row["std_n"] = weighted_std(sizes[defined], weights.weights(judged[defined]), row["mean_n"])
    row["count_n"] = int(defined.sum())
    empty = np.where(defined, (sizes == 0).astype(float), np.nan)
    row["share_empty_context"], row["se_share_empty_context"] = weights.estimate(empty, judged)
    return row


def _status_counts(day: DayArrays, rows: np.ndarray | None) -> dict[str, float | int]:
    status = day.status if rows is None else day.status[rows]
    if day.counted is None:
        counts = np.bincount(status, minlength=len(STATUS_CLASSES) + 1)
        events = len(status)
    else:  # each counted row stands for its stratum's unread events
        multiplicity = day.counted.multiplicity
        weights = multiplicity if rows is None else multiplicity[rows]
        counts = np.bincount(status, weights=weights, minlength=len(STATUS_CLASSES) + 1)
        counts, events = counts.astype(np.int64), int(weights.sum())
    evaluated = int(counts[_OK])
    invalid, errors = int(counts[STATUS_CLASS["invalid"]]), int(counts[STATUS_CLASS["error"]])
    attempted = evaluated + invalid + errors
    return {
        "events": events,
        "evaluated": evaluated,
        "invalid": invalid,
        "errors": errors,
        # Of the events Seer read and tried to judge, those that ended without a score.
        "attempted": attempted,
        "share_failed": (invalid + errors) / attempted if attempted else np.nan,
        NOT_SAMPLED: int(counts[STATUS_CLASS[NOT_SAMPLED]]),
        SKIPPED_BUDGET: int(counts[STATUS_CLASS[SKIPPED_BUDGET]]),
    }


def _defined_values(day: DayArrays, name: str, judged: np.ndarray) -> np.ndarray:
    """The defined values of column `name` over the `judged` events (a mask or positions),
    in event order, as a float64 array of their own (empty when the column is absent)."""
    column = day.numbers.get(name)
    if column is None:
        return np.empty(0)
    values = column[judged]
    undefined = np.isnan(values)
    return values[~undefined] if undefined.any() else values


def slice_statistics(
    day: DayArrays, bloat_line: float, rows: np.ndarray | None = None
) -> dict[str, float | int]:
    """The aggregates of the day, or of its `rows` (ascending positions) only.

    Memory stays a few arrays of the slice's size: each metric's defined values are
    gathered, summarised and dropped before the next (every figure is the same numpy
    reduction over the same values in the same order as over a frame of the slice).
    """
    row = _status_counts(day, rows)
    # The judged events: the ok mask for the whole day, else the slice's ok positions.
    judged = day.ok if rows is None else rows[day.ok[rows]]
    if day.weights is not None:
        positions = np.flatnonzero(judged) if rows is None else judged
        row.update(_sampled_statistics(day, day.weights, bloat_line, positions))
        _add_sums(day, row, rows)
        return row

    # Every event judged: plain means, and no sampling error.
    for metric in METRICS:
        values = _defined_values(day, metric, judged)
        count = len(values)
        row[f"mean_{metric}"] = float(values.mean()) if count else np.nan
        row[f"std_{metric}"] = float(values.std(ddof=1)) if count > 1 else np.nan
        row[f"count_{metric}"] = count
        row[f"se_{metric}"] = 0.0 if count else np.nan
        share = {"recall": "share_recall_below_1", "precision": "share_precision_below_bloat"}
        if metric in share:
            line = 1.0 if metric == "recall" else bloat_line
            row[share[metric]] = float((values < line).mean()) if count else np.nan
            row[f"se_{share[metric]}"] = 0.0 if count else np.nan
            # Last use of the values: the quantile may reorder them in place.
            row[f"p10_{metric}"] = (
                float(np.quantile(values, 0.1, overwrite_input=True)) if count else np.nan
            )
        del values
    k = _defined_values(day, "k", judged)
    row["mean_k"] = float(k.mean()) if len(k) else np.nan
    del k
    sizes = _defined_values(day, "n", judged)
    count = len(sizes)
    row["mean_n"] = float(sizes.mean()) if count else np.nan
    row["std_n"] = float(sizes.std(ddof=1)) if count > 1 else np.nan
    row["count_n"] = count
    row["se_n"] = 0.0 if count else np.nan
    row["share_empty_context"] = float((sizes == 0).mean()) if count else np.nan
    row["se_share_empty_context"] = 0.0 if count else np.nan
    del sizes
    _add_sums(day, row, rows)
    return row


def _add_sums(day: DayArrays, row: dict[str, float | int], rows: np.ndarray | None) -> None:
    """What the day's materialization spent on the slice (every event, never weighted):
    the sum with NULL as 0 (`np.nansum`), on one array of the slice's values."""
    everyone = np.ones(len(day.status), dtype=bool) if rows is None else rows
    for name in ("prompt_tokens", "completion_tokens", "cost_usd"):
        column = day.numbers.get(name)
        total = 0.0
        if column is not None:
            values = column[everyone]  # always a copy, so NULL can become 0 in place
            values[np.isnan(values)] = 0.0
            total = float(values.sum())
            del values
        row[name] = total if name == "cost_usd" else int(total)
