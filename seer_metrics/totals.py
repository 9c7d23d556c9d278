"""Running totals over scored events, so a day or a file is summarised in bounded memory."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from seer_metrics.slices import METRICS


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
        for row in rows:
            self.add(row)

    def mean(self, metric: str) -> float | None:
        count = self.counts[metric]
        return self.sums[metric] / count if count else None

    def means(self) -> dict[str, float | None]:
        return {metric: self.mean(metric) for metric in METRICS}

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens
