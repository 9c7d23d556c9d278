"""Running totals over scored events, so a day or a file is summarised in bounded memory."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress
from operator import itemgetter
from typing import Any

import numpy as np

from seer_metrics.scoring import METRICS

_PLAIN_NUMBER_TYPES = {int, float, bool, type(None)}
_USAGE_COLUMNS = ("cache_hit", "model_calls", "prompt_tokens", "completion_tokens", "cost_usd")
# Every column `add` reads, in one look-up per row (rows from `event_metric_rows` have all).
_ROW_COLUMNS = itemgetter("status", *_USAGE_COLUMNS, *METRICS)


def _number(value: Any) -> float | None:
    """A defined number, or None for NULL and NaN (undefined metrics and missing usage)."""
    if value is None:
        return None
    number = float(value)
    return None if math.isnan(number) else number


@dataclass
class ScoreTotals:
    """Status counts, model usage and metric sums over event rows.

    A row is a mapping with `status` (ok, invalid, error), the four metrics (None or NaN
    where undefined), and optionally `cache_hit`, `model_calls`, `prompt_tokens`,
    `completion_tokens` and `cost_usd`.
    """

    events: int = 0
    evaluated: int = 0
    invalid: int = 0
    errors: int = 0
    cache_hits: int = 0
    model_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    sums: dict[str, float] = field(default_factory=lambda: dict.fromkeys(METRICS, 0.0))
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(METRICS, 0))

    def add(self, row: Mapping[str, Any]) -> None:
        self.events += 1
        status = row["status"]
        self.evaluated += status == "ok"
        self.invalid += status == "invalid"
        self.errors += status == "error"
        self.cache_hits += bool(row.get("cache_hit"))
        self.model_calls += int(_number(row.get("model_calls")) or 0)
        self.prompt_tokens += int(_number(row.get("prompt_tokens")) or 0)
        self.completion_tokens += int(_number(row.get("completion_tokens")) or 0)
        self.cost_usd += _number(row.get("cost_usd")) or 0.0
        if status != "ok":
            return
        for metric in METRICS:
            value = _number(row.get(metric))
            if value is not None:
                self.sums[metric] += value
                self.counts[metric] += 1

    def add_all(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """`add` each row, column by column over the rows (the same sums, in row order)."""
        rows = rows if isinstance(rows, list) else list(rows)
        try:
            added = _column_totals(rows, self.cost_usd, self.sums)
        except (AttributeError, KeyError, OverflowError, TypeError, ValueError):
            added = None
        if added is None:  # a value `add` reads its own way, or fails on: row by row
            for row in rows:
                self.add(row)
            return
        statuses, usage, sums, counts = added
        self.events += len(rows)
        self.evaluated += statuses["ok"]
        self.invalid += statuses["invalid"]
        self.errors += statuses["error"]
        self.cache_hits += usage["cache_hits"]
        self.model_calls += usage["model_calls"]
        self.prompt_tokens += usage["prompt_tokens"]
        self.completion_tokens += usage["completion_tokens"]
        self.cost_usd = usage["cost_usd"]
        for metric in METRICS:
            self.sums[metric] = sums[metric]
            self.counts[metric] += counts[metric]

    def mean(self, metric: str) -> float | None:
        count = self.counts[metric]
        return self.sums[metric] / count if count else None

    def means(self) -> dict[str, float | None]:
        return {metric: self.mean(metric) for metric in METRICS}

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def _column_totals(
    rows: list[Mapping[str, Any]], cost_usd: float, sums: Mapping[str, float]
) -> tuple[dict[str, int], dict[str, Any], dict[str, float], dict[str, int]] | None:
    """What `ScoreTotals.add` over `rows` adds, vectorised: status counts, usage totals
    (the cost and metric sums continue `cost_usd` and `sums`, added in row order as
    `add` does), and defined-metric counts. None when a row lacks a column (`add` reads
    it as None) or a value is not a plain number."""
    try:
        table = list(map(_ROW_COLUMNS, rows))
    except KeyError:
        return None
    statuses, cache_hits, model_calls, prompt_tokens, completion_tokens, costs, *metrics = (
        zip(*table, strict=True) if table else [()] * (6 + len(METRICS))
    )
    status_counts = {status: statuses.count(status) for status in ("ok", "invalid", "error")}
    usage: dict[str, Any] = {"cache_hits": sum(map(bool, cache_hits))}
    for column, values in (
        ("model_calls", model_calls),
        ("prompt_tokens", prompt_tokens),
        ("completion_tokens", completion_tokens),
    ):
        numbers = _plain_numbers(values)
        if numbers is None or np.abs(numbers).max(initial=0.0) >= 2.0**53:
            return None
        usage[column] = sum(np.trunc(numbers).astype(np.int64).tolist())
    cost_numbers = _plain_numbers(costs)
    if cost_numbers is None:
        return None
    usage["cost_usd"] = _running_sum(cost_usd, cost_numbers)
    ok = [status == "ok" for status in statuses]
    metric_sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for metric, column in zip(METRICS, metrics, strict=True):
        values = list(compress(column, ok))
        if not set(map(type, values)) <= _PLAIN_NUMBER_TYPES:
            return None
        numbers = np.array(values, dtype=float)
        defined = numbers[~np.isnan(numbers)]
        metric_sums[metric] = _running_sum(sums[metric], defined)
        counts[metric] = len(defined)
    return status_counts, usage, metric_sums, counts


def _plain_numbers(values: Sequence[Any]) -> np.ndarray | None:
    """`_number(value) or 0` of each value as floats (NULL and NaN as 0), or None when
    one is not an int, float or None (`add` converts those itself)."""
    if not set(map(type, values)) <= _PLAIN_NUMBER_TYPES:
        return None
    numbers = np.array(values, dtype=float)
    numbers[np.isnan(numbers) | (numbers == 0.0)] = 0.0  # `or 0`: NaN, -0.0 and 0 add 0.0
    return numbers if np.isfinite(numbers).all() else None


def _running_sum(start: float, values: np.ndarray) -> float:
    """`start` plus each value in order, as a Python loop adds them (not pairwise)."""
    if not len(values):
        return start
    return float(np.cumsum(np.concatenate(([start], values)))[-1])
