"""Hand-made rows of the slice table, for tests of rules and checks."""

from __future__ import annotations

from datetime import date
from typing import Any

from seer_metrics.slices import SLICE_COLUMNS
from seer_metrics.slices.identity import SliceIdentity


def healthy_slice_row(day: str | date, label: str, n: int = 100, **values: Any) -> dict[str, Any]:
    """A slice row with healthy, steady metrics; keyword arguments override single columns."""
    identity = SliceIdentity.decode(label)
    row: dict[str, Any] = dict.fromkeys(SLICE_COLUMNS, 0)
    row.update(
        partition_date=day,
        slice=label,
        slice_key=identity.key_column,
        slice_value=identity.value_column,
        events=n,
        evaluated=n,
        mean_recall=0.95,
        mean_precision=0.7,
        mean_f1=0.8,
        mean_ndcg=0.9,
        std_recall=0.1,
        std_precision=0.15,
        std_f1=0.1,
        std_ndcg=0.1,
        count_recall=n,
        count_precision=n,
        count_f1=n,
        count_ndcg=n,
        share_recall_below_1=0.0,
        share_precision_below_bloat=0.05,
        p10_recall=0.8,
        p10_precision=0.5,
        mean_k=2.0,
    )
    row.update(values)
    return row
