"""Per-(day, slice) aggregates (SPEC section 4).

A slice is `all`, or one value of one metadata key. Means, shares and quantiles are taken
over defined values only (NULL metrics are left out), and the counts and standard
deviations behind each mean are kept so that rules can judge drops against noise.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
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


def slice_metrics(
    scores: pd.DataFrame,
    slice_keys: Sequence[str] = DEFAULT_SLICE_KEYS,
    bloat_line: float = DEFAULT_BLOAT_LINE,
) -> pd.DataFrame:
    """Aggregate event-level scores into one row per (partition_date, slice).

    `scores` needs `partition_date`, `status`, the four metrics, `k` and `metadata`
    (a dict or its JSON text); token and cost columns are summed when present.
    """
    required = {"partition_date", "status", "k", "metadata", *METRICS}
    missing = sorted(required - set(scores.columns))
    if missing:
        raise KeyError(f"slice_metrics needs columns {missing}")
    rows: list[dict[str, Any]] = []
    for day, day_frame in scores.groupby("partition_date", sort=True):
        rows.append(
            {
                "partition_date": day,
                "slice": ALL_SLICE,
                "slice_key": ALL_SLICE,
                "slice_value": ALL_SLICE,
                **_aggregate(day_frame, bloat_line),
            }
        )
        for key in slice_keys:
            values = day_frame["metadata"].map(lambda meta, key=key: metadata_value(meta, key))
            for value, group in day_frame.groupby(values, sort=True):
                rows.append(
                    {
                        "partition_date": day,
                        "slice": slice_label(key, value),
                        "slice_key": key,
                        "slice_value": value,
                        **_aggregate(group, bloat_line),
                    }
                )
    return pd.DataFrame(rows, columns=list(SLICE_COLUMNS))
