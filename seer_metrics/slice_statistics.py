"""The statistics of one slice of a day: the columns of a slice row after its label.

A fully judged day gives plain means, shares and quantiles over the defined values, with
sampling errors of 0. On a sampled day each judged event stands for its stratum with the
weight N / n: the means and shares are ratio estimators with their standard errors from
the sampling (`seer_metrics.sampling`), the spread and quantiles are weighted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from seer_metrics.coded_columns import CodedNumbers, CodedTexts
from seer_metrics.sampling import estimate_domain_mean

METRICS = ("recall", "precision", "f1", "ndcg")
# Statuses of events left unjudged on purpose: outside the day's sample, or past its budget.
NOT_SAMPLED = "not_sampled"
SKIPPED_BUDGET = "skipped_budget"
NUMERIC_COLUMNS = (*METRICS, "k", "prompt_tokens", "completion_tokens", "cost_usd")


@dataclass(frozen=True)
class StratumWeights:
    """What undoes a sampled day's sampling: every event's stratum code, and per stratum
    its judged events (status ok) and its population (ok, not sampled or over budget)."""

    strata: np.ndarray
    sample_counts: np.ndarray
    population: np.ndarray

    @classmethod
    def of(cls, strata: np.ndarray, ok: np.ndarray, unjudged: np.ndarray) -> StratumWeights:
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
class DayArrays:
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
    weights: StratumWeights | None

    @classmethod
    def of(cls, frame: pd.DataFrame, strata: np.ndarray | None = None) -> DayArrays:
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
            weights = StratumWeights.of(strata, ok, not_sampled | skipped_budget)
        return cls(
            ok=ok,
            invalid=(status == "invalid").to_numpy(dtype=bool),
            error=(status == "error").to_numpy(dtype=bool),
            not_sampled=not_sampled,
            skipped_budget=skipped_budget,
            numbers={
                name: pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype=float)
                for name in NUMERIC_COLUMNS
                if name in frame
            },
            weights=weights,
        )

    @classmethod
    def of_codes(
        cls,
        status: CodedTexts,
        numbers: Mapping[str, CodedNumbers],
        strata: np.ndarray,
    ) -> DayArrays:
        """The same arrays from `SliceAccumulator`'s codes, without building a frame: the
        status masks come from the status codes and the numbers stay coded."""
        codes = status.codes()

        def mask(value: str) -> np.ndarray:
            code = status.code_of(value)
            return codes == code if code is not None else np.zeros(len(codes), dtype=bool)

        ok, not_sampled, skipped_budget = mask("ok"), mask(NOT_SAMPLED), mask(SKIPPED_BUDGET)
        weights = None
        if not_sampled.any() or skipped_budget.any():
            weights = StratumWeights.of(strata, ok, not_sampled | skipped_budget)
        return cls(
            ok=ok,
            invalid=mask("invalid"),
            error=mask("error"),
            not_sampled=not_sampled,
            skipped_budget=skipped_budget,
            numbers=dict(numbers),
            weights=weights,
        )


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
    day: DayArrays, weights: StratumWeights, bloat_line: float, rows: np.ndarray
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
        row[f"std_{metric}"] = weighted_std(values[defined], weights.weights(judged[defined]), mean)
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
            weighted_quantile(values[defined], weights.weights(judged[defined]), 0.1)
            if defined.any()
            else np.nan
        )
    row["mean_k"] = weights.estimate(column("k"), judged)[0]
    return row


def slice_statistics(
    day: DayArrays, bloat_line: float, rows: np.ndarray | None = None
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
        row.update(_sampled_statistics(day, day.weights, bloat_line, positions))
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


def _add_sums(day: DayArrays, row: dict[str, float | int], rows: np.ndarray | None) -> None:
    """What the day's materialization spent on the slice (every event, never weighted)."""
    for name in ("prompt_tokens", "completion_tokens", "cost_usd"):
        values = day.numbers.get(name)
        if values is not None and rows is not None:
            values = values[rows]
        total = float(np.nansum(values)) if values is not None else 0.0
        row[name] = total if name == "cost_usd" else int(total)
