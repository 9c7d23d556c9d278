"""The rows of Seer's event-level tables, built once for the pipelines and `seer evaluate`.

A source record becomes one `seer_judgments` row: `invalid_row` when it cannot be parsed
(its id, time and metadata are salvaged so it still counts in its day and slices), else
`judged_row` from the evaluator's outcome. Judgment rows become `seer_event_metrics` rows
(`event_metric_rows`, scored vectorised) and `seer_passage_judgments` rows
(`passage_rows`). `seer evaluate` writes `score_line_row`, a flat view of a metric row.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from seer_metrics.cache import judgment_key
from seer_metrics.evaluators.base import EvaluationOutcome, Evaluator
from seer_metrics.events import (
    InvalidEventError,
    RetrievalEvent,
    clean_json,
    clean_text,
    derive_event_id,
    parse_timestamp,
)
from seer_metrics.judgment import Judgment
from seer_metrics.scoring import score_events
from seer_metrics.slices import METRICS

USAGE_COLUMNS = ("cache_hit", "model_calls", "prompt_tokens", "completion_tokens", "cost_usd")

# Columns of `seer_judgments` that `event_metric_rows` and `passage_rows` read.
JUDGMENT_READ_COLUMNS = (
    "event_id",
    "event_ts",
    "status",
    "reason",
    "judgment",
    "ranked_context",
    "has_ranking",
    "n",
    "metadata",
    "stratum",
    *USAGE_COLUMNS,
)

_NO_USAGE = {
    "cache_hit": False,
    "model_calls": 0,
    "prompt_tokens": 0,
    "completion_tokens": 0,
    "cost_usd": 0.0,
}


# -- seer_judgments ---------------------------------------------------------------------


def salvaged_event_id(record: Any) -> str | None:
    """The id of a record that did not parse: its own when usable, else a derived one.

    A non-string id (a number, object or boolean from a JSON column) becomes its canonical
    JSON text, so distinct ids stay distinct; a record that is not an object has none.
    """
    if not isinstance(record, Mapping):
        return None
    raw = record.get("event_id")
    if isinstance(raw, str):
        return clean_text(raw.strip()) if raw.strip() else derive_event_id(record)
    if isinstance(raw, int) and not isinstance(raw, bool):
        return str(raw)
    if raw is None:
        return derive_event_id(record)
    text = json.dumps(clean_json(raw), sort_keys=True, separators=(",", ":"), default=str)
    return clean_text(text)


def _salvaged_metadata(raw: Any) -> dict[str, Any]:
    """Best-effort metadata of an invalid row, so it still lands in its slices."""
    if isinstance(raw, bytes | bytearray):
        raw = raw.decode("utf-8", errors="replace")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            return {}
    return clean_json(dict(raw)) if isinstance(raw, Mapping) else {}


def _salvaged_timestamp(raw: Any) -> Any:
    try:
        return parse_timestamp(raw)
    except InvalidEventError:
        return None


def invalid_row(record: Any, reason: str) -> dict[str, Any]:
    """The `seer_judgments` row of a record that could not be parsed (`reason` says why)."""
    mapping = record if isinstance(record, Mapping) else {}
    return {
        "event_id": salvaged_event_id(record),
        "event_ts": _salvaged_timestamp(mapping.get("event_ts")),
        "status": "invalid",
        "reason": reason,
        "metadata": _salvaged_metadata(mapping.get("metadata")),
        **_NO_USAGE,
    }


def judged_row(
    event: RetrievalEvent, outcome: EvaluationOutcome, evaluator: Evaluator
) -> dict[str, Any]:
    """The `seer_judgments` row of a parsed event and its evaluation outcome."""
    ok = outcome.status == "ok" and outcome.judgment is not None
    judgment = outcome.judgment.restricted_to(event.context_ids) if ok else None
    return {
        "event_id": event.event_id,
        "event_ts": event.event_ts,
        "status": "ok" if ok else "error",
        "reason": None if ok else (outcome.reason or "evaluator_error: no reason given"),
        "judgment_key": judgment_key(event, evaluator.model, evaluator.prompt_version),
        "judgment": judgment.to_dict() if judgment is not None else None,
        "ranked_context": [[item.id, item.position] for item in event.context],
        "has_ranking": event.has_ranking,
        "n": event.n,
        "duplicate_ids": event.duplicate_ids,
        "metadata": dict(event.metadata),
        "cache_hit": bool(outcome.cache_hit),
        "model_calls": int(outcome.model_calls),
        # Not a table column: summed into run figures (a refused connection costs nothing).
        "unsent_requests": int(outcome.unsent_requests),
        "prompt_tokens": int(outcome.usage.prompt_tokens),
        "completion_tokens": int(outcome.usage.completion_tokens),
        "cost_usd": float(outcome.usage.cost_usd),
        "evaluator": evaluator.name,
        "model": evaluator.model,
        "prompt_version": evaluator.prompt_version,
    }


def unjudged_row(
    event: RetrievalEvent, status: str, reason: str, evaluator: Evaluator
) -> dict[str, Any]:
    """The `seer_judgments` row of a parsed event left unjudged on purpose: `not_sampled`
    (outside the day's sample) or `skipped_budget` (the day's budget was spent first)."""
    return {
        "event_id": event.event_id,
        "event_ts": event.event_ts,
        "status": status,
        "reason": reason,
        "judgment_key": judgment_key(event, evaluator.model, evaluator.prompt_version),
        "ranked_context": [[item.id, item.position] for item in event.context],
        "has_ranking": event.has_ranking,
        "n": event.n,
        "duplicate_ids": event.duplicate_ids,
        "metadata": dict(event.metadata),
        **_NO_USAGE,
        "evaluator": evaluator.name,
        "model": evaluator.model,
        "prompt_version": evaluator.prompt_version,
    }


def first_by_event_ts(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """`rows` ordered by event_ts (ties and missing times keep their order), so that the
    first row staged for a repeated event_id is its earliest, whatever its status."""
    return sorted(
        rows,
        key=lambda row: (row.get("event_ts") is None, row.get("event_ts") or 0),
    )


# -- seer_event_metrics ------------------------------------------------------------------


def _defined(value: Any) -> Any:
    """None for NULL and NaN, the value otherwise."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value


def event_metric_rows(judgments: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Score `seer_judgments` rows (plain dicts, NULL as None) into `seer_event_metrics`
    rows; the metrics of all ok rows are computed at once (`score_events`)."""
    inputs: list[dict[str, Any]] = []
    ok_index: list[int] = []
    rows: list[dict[str, Any]] = []
    for index, record in enumerate(judgments):
        n = _defined(record.get("n"))
        row: dict[str, Any] = {
            "event_id": record["event_id"],
            "event_ts": record.get("event_ts"),
            "status": record["status"],
            "reason": record.get("reason") if record["status"] != "ok" else None,
            "n": None if n is None else int(n),
            "metadata": record.get("metadata") or {},
            "stratum": record.get("stratum"),
            **{column: _defined(record.get(column)) for column in USAGE_COLUMNS},
            **dict.fromkeys(METRICS),
        }
        if record["status"] == "ok" and record.get("judgment") is not None:
            judgment = Judgment.from_dict(record["judgment"])
            ranked_ids = [str(pair[0]) for pair in record["ranked_context"]]
            cited = judgment.cited_ids
            inputs.append(
                {
                    "k": judgment.k,
                    "n": len(ranked_ids),
                    "supported_requirements": sum(1 for r in judgment.requirements if r.supported),
                    "cited_positions": [
                        i for i, pid in enumerate(ranked_ids, start=1) if pid in cited
                    ],
                    "has_ranking": bool(record.get("has_ranking")),
                }
            )
            ok_index.append(index)
            row.update(
                k=judgment.k,
                n=len(ranked_ids),
                cited_ids=[pid for pid in ranked_ids if pid in cited],
                missing_requirements=[r.text for r in judgment.requirements if not r.supported],
                hallucinated_citations=judgment.hallucinated_citations,
                unverified_citations=judgment.unverified_citations,
            )
        rows.append(row)
    if inputs:
        scores = score_events(pd.DataFrame(inputs))
        # One array per metric, not a pandas look-up per (row, metric).
        columns = {metric: scores[metric].to_numpy(dtype=float) for metric in METRICS}
        for metric, values in columns.items():
            defined = np.isfinite(values)
            for position, index in enumerate(ok_index):
                rows[index][metric] = float(values[position]) if defined[position] else None
    return rows


# -- seer_passage_judgments ------------------------------------------------------------


def passage_rows(judgments: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per (ok event, passage): ranked position, id, cited, by which requirements."""
    rows: list[dict[str, Any]] = []
    for record in judgments:
        if record["status"] != "ok" or record.get("judgment") is None:
            continue
        judgment = Judgment.from_dict(record["judgment"])
        for position, (passage_id, logged_position) in enumerate(record["ranked_context"], start=1):
            supporting = [r.id for r in judgment.requirements if str(passage_id) in r.supported_by]
            rows.append(
                {
                    "event_id": record["event_id"],
                    "position": position,
                    "logged_position": int(logged_position),
                    "passage_id": str(passage_id),
                    "cited": bool(supporting),
                    "supported_requirements": supporting,
                }
            )
    return rows


# -- seer evaluate --out -------------------------------------------------------------------


def score_line_row(line: int, metric_row: Mapping[str, Any]) -> dict[str, Any]:
    """The flat `seer evaluate --out` object of one input line, from its metric row."""
    return {
        "line": line,
        "event_id": metric_row["event_id"],
        "status": metric_row["status"],
        "reason": metric_row.get("reason"),
        **{metric: metric_row.get(metric) for metric in METRICS},
        "k": metric_row.get("k"),
        "n": metric_row.get("n"),
        "cited_ids": metric_row.get("cited_ids") or [],
        "missing_requirements": metric_row.get("missing_requirements") or [],
        "hallucinated_citations": metric_row.get("hallucinated_citations") or 0,
        **{column: metric_row.get(column) or _NO_USAGE[column] for column in USAGE_COLUMNS},
    }
