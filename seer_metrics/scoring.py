"""Per-event metrics (defined in docs/metrics.md): recall, precision proxy, F1 and nDCG.

`score_event` is the readable scalar definition; `score_events` computes the same numbers
vectorised over a DataFrame of many events, and the tests hold the two to each other.
Undefined values are `None` / NaN (stored as NULL), never 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from seer_metrics.events import RetrievalEvent
from seer_metrics.judgment import Judgment

# The per-event metrics, in the order of every table and report.
METRICS = ("recall", "precision", "f1", "ndcg")


@dataclass(frozen=True)
class EventScore:
    recall: float | None
    precision: float | None
    f1: float | None
    ndcg: float | None
    k: int
    n: int
    cited_ids: tuple[str, ...]
    missing_requirements: tuple[str, ...]
    hallucinated_citations: int = 0


def f1_score(precision: float | None, recall: float | None) -> float | None:
    if precision is None or recall is None:
        return None
    if precision + recall == 0:
        return 0.0
    return 2 * precision * recall / (precision + recall)


def ndcg_binary(relevant_flags: Sequence[bool]) -> float | None:
    """nDCG of a ranked list with 0/1 relevance; None when nothing is relevant."""
    dcg = sum(1.0 / math.log2(i + 1) for i, rel in enumerate(relevant_flags, start=1) if rel)
    relevant = sum(1 for rel in relevant_flags if rel)
    if relevant == 0:
        return None
    ideal = sum(1.0 / math.log2(i + 1) for i in range(1, relevant + 1))
    return dcg / ideal


def score_event(event: RetrievalEvent, judgment: Judgment) -> EventScore:
    """Score one event; citations of ids outside its context are dropped and counted."""
    checked = judgment.restricted_to(event.context_ids)
    k = checked.k
    n = event.n
    supported = sum(1 for req in checked.requirements if req.supported)
    cited = checked.cited_ids
    recall = supported / k if k else None
    precision = len(cited) / n if n else None
    ndcg = ndcg_binary([item.id in cited for item in event.context]) if event.has_ranking else None
    return EventScore(
        recall=recall,
        precision=precision,
        f1=f1_score(precision, recall),
        ndcg=ndcg,
        k=k,
        n=n,
        cited_ids=tuple(item.id for item in event.context if item.id in cited),
        missing_requirements=tuple(req.text for req in checked.requirements if not req.supported),
        hallucinated_citations=checked.hallucinated_citations,
    )


SCORE_INPUT_COLUMNS = ("k", "n", "supported_requirements", "cited_positions", "has_ranking")


def score_inputs(event: RetrievalEvent, judgment: Judgment) -> dict[str, object]:
    """The row `score_events` needs for one event: counts and the ranks of cited items."""
    checked = judgment.restricted_to(event.context_ids)
    cited = checked.cited_ids
    return {
        "k": checked.k,
        "n": event.n,
        "supported_requirements": sum(1 for req in checked.requirements if req.supported),
        "cited_positions": [i for i, item in enumerate(event.context, start=1) if item.id in cited],
        "has_ranking": event.has_ranking,
    }


def _ideal_dcg_table(max_relevant: int) -> np.ndarray:
    """IDCG for 0..max_relevant relevant items: the cumulative sum of 1/log2(i+1)."""
    gains = 1.0 / np.log2(np.arange(2, max_relevant + 2, dtype=float))
    return np.concatenate([[0.0], np.cumsum(gains)])


def score_events(frame: pd.DataFrame) -> pd.DataFrame:
    """Vectorised metrics for many events.

    `frame` has one row per event with `k`, `n`, `supported_requirements`,
    `cited_positions` (1-based ranked positions of cited items) and `has_ranking`.
    Returns recall, precision, f1, ndcg and cited_count aligned on `frame.index`,
    with NaN where a metric is undefined.
    """
    missing = [c for c in SCORE_INPUT_COLUMNS if c not in frame.columns]
    if missing:
        raise KeyError(f"score_events needs columns {missing}")
    cited_count = frame["cited_positions"].map(len).to_numpy(dtype=int)
    # Group by row position, not by index label: labels need not be unique.
    positions = frame["cited_positions"].reset_index(drop=True).explode().dropna()
    scores = score_arrays(
        k=frame["k"].to_numpy(dtype=float),
        n=frame["n"].to_numpy(dtype=float),
        supported=frame["supported_requirements"].to_numpy(dtype=float),
        cited_count=cited_count,
        positions=positions.to_numpy(dtype=float),
        position_rows=positions.index.to_numpy(dtype=np.intp),
        has_ranking=frame["has_ranking"].to_numpy(dtype=bool),
    )
    return pd.DataFrame({**scores, "cited_count": cited_count}, index=frame.index)


def score_arrays(
    *,
    k: np.ndarray,
    n: np.ndarray,
    supported: np.ndarray,
    cited_count: np.ndarray,
    positions: np.ndarray,
    position_rows: np.ndarray,
    has_ranking: np.ndarray,
) -> dict[str, np.ndarray]:
    """recall, precision, f1 and ndcg (NaN where undefined) from plain arrays, one entry
    per event, so callers holding lists skip building a DataFrame.

    `positions` are the 1-based ranks of all cited items, event after event, and
    `position_rows` the event (row number) of each, in ascending order.
    """
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    supported = np.asarray(supported, dtype=float)
    cited = np.asarray(cited_count).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        recall = np.where(k > 0, supported / k, np.nan)
        precision = np.where(n > 0, cited / n, np.nan)
        total = precision + recall
        f1 = np.where(total > 0, 2 * precision * recall / total, 0.0)
    f1 = np.where(np.isnan(precision) | np.isnan(recall), np.nan, f1)
    dcg = _dcg(len(k), np.asarray(positions, dtype=float), np.asarray(position_rows))
    ideal_table = _ideal_dcg_table(int(cited.max()) if len(cited) else 0)
    ideal = ideal_table[cited.astype(int)]
    with np.errstate(divide="ignore", invalid="ignore"):
        ndcg = np.where(ideal > 0, dcg / ideal, np.nan)
    ndcg = np.where(np.asarray(has_ranking, dtype=bool), ndcg, np.nan)
    return {"recall": recall, "precision": precision, "f1": f1, "ndcg": ndcg}


def _dcg(events: int, positions: np.ndarray, position_rows: np.ndarray) -> np.ndarray:
    """Each event's DCG: the sum of 1/log2(position + 1) over its cited positions.

    Summed per run of equal rows with `np.add.reduceat`, the very sums pandas' sorted
    groupby made (bit for bit); NaN gains, which only non-ranks give, keep pandas'.
    """
    dcg = np.zeros(events)
    if not len(positions):
        return dcg
    gains = 1.0 / np.log2(positions + 1.0)
    if np.isnan(gains).any():
        per_row = pd.Series(gains, index=position_rows).groupby(level=0).sum()
        dcg[per_row.index.to_numpy()] = per_row.to_numpy()
        return dcg
    starts = np.flatnonzero(np.r_[True, position_rows[1:] != position_rows[:-1]])
    dcg[position_rows[starts]] = np.add.reduceat(gains, starts)
    return dcg
