"""The rows of Seer's event-level tables, built once for the pipelines and `seer evaluate`.

A source record becomes one `seer_judgments` row: `invalid_row` when it cannot be parsed
(its id, time and metadata are salvaged so it still counts in its day and slices), else
`judged_row` from the evaluator's outcome. Judgment rows become `seer_event_metrics` rows
(`event_metric_rows`, scored vectorised) and `seer_passage_judgments` rows
(`passage_rows`). `seer evaluate` writes `score_line_row`, a flat view of a metric row.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from itertools import compress
from typing import Any

import numpy as np

from seer_metrics.evaluators.base import EvaluationOutcome, Evaluator
from seer_metrics.events import InvalidEventError, RetrievalEvent, derive_event_id, parse_timestamp
from seer_metrics.judgment import judgment_parts
from seer_metrics.judgment_store import judgment_key
from seer_metrics.scoring import METRICS, score_arrays
from seer_metrics.text.cleaning import clean_json, clean_text

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

_NO_METRICS = dict.fromkeys(METRICS)


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
        # An ok row's reason is why its usage is an estimate (the endpoint's was odd).
        "reason": outcome.usage.note
        if ok
        else (outcome.reason or "evaluator_error: no reason given"),
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
    if value is None or (isinstance(value, float) and value != value):
        return None
    return value


def event_metric_rows(judgments: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Score `seer_judgments` rows (plain dicts, NULL as None) into `seer_event_metrics`
    rows; the metrics of all ok rows are computed at once (`score_arrays`), from the
    stored judgments' parts rather than `Judgment` objects."""
    rows: list[dict[str, Any]] = []
    scored: list[dict[str, Any]] = []
    k_values: list[int] = []
    n_values: list[int] = []
    supported: list[int] = []
    has_ranking: list[bool] = []
    cited_flags: list[bool] = []  # each scored event's ranked passages, event after event
    for record in judgments:
        status = record["status"]
        n = _defined(record.get("n"))
        row: dict[str, Any] = {
            "event_id": record["event_id"],
            "event_ts": record.get("event_ts"),
            "status": status,
            "reason": record.get("reason") if status != "ok" else None,
            "n": None if n is None else int(n),
            "metadata": record.get("metadata") or {},
            "stratum": record.get("stratum"),
            "cache_hit": _defined(record.get("cache_hit")),
            "model_calls": _defined(record.get("model_calls")),
            "prompt_tokens": _defined(record.get("prompt_tokens")),
            "completion_tokens": _defined(record.get("completion_tokens")),
            "cost_usd": _defined(record.get("cost_usd")),
            **_NO_METRICS,
        }
        rows.append(row)
        if status != "ok" or record.get("judgment") is None:
            continue
        ids, texts, supports, hallucinated, unverified = judgment_parts(record["judgment"])
        ranked_ids = [str(pair[0]) for pair in record["ranked_context"]]
        cited = set().union(*supports)
        flags = [passage_id in cited for passage_id in ranked_ids]
        cited_flags += flags
        k_values.append(len(ids))
        n_values.append(len(ranked_ids))
        supported.append(len(supports) - supports.count([]))
        has_ranking.append(bool(record.get("has_ranking")))
        scored.append(row)
        row["k"] = len(ids)
        row["n"] = len(ranked_ids)
        row["cited_ids"] = list(compress(ranked_ids, flags))
        row["missing_requirements"] = [
            text for text, support in zip(texts, supports, strict=True) if not support
        ]
        row["hallucinated_citations"] = hallucinated
        row["unverified_citations"] = unverified
    if scored:
        _add_scores(scored, k_values, n_values, supported, has_ranking, cited_flags)
    return rows


def _add_scores(
    scored: list[dict[str, Any]],
    k_values: list[int],
    n_values: list[int],
    supported: list[int],
    has_ranking: list[bool],
    cited_flags: list[bool],
) -> None:
    """Set the metrics of the scored rows (None where undefined), all rows at once."""
    n = np.array(n_values, dtype=np.intp)
    cited_at = np.flatnonzero(np.array(cited_flags, dtype=bool))
    position_rows = np.repeat(np.arange(len(n)), n)[cited_at]
    positions = cited_at - (np.cumsum(n) - n)[position_rows] + 1
    scores = score_arrays(
        k=np.array(k_values, dtype=float),
        n=n.astype(float),
        supported=np.array(supported, dtype=float),
        cited_count=np.bincount(position_rows, minlength=len(n)),
        positions=positions.astype(float),
        position_rows=position_rows,
        has_ranking=np.array(has_ranking, dtype=bool),
    )
    for metric in METRICS:
        values = scores[metric]
        # One list per metric (NaN and inf as None), not a look-up per (row, metric).
        defined = np.where(np.isfinite(values), values, None).tolist()
        for row, value in zip(scored, defined, strict=True):
            row[metric] = value


# -- seer_passage_judgments ------------------------------------------------------------


def passage_rows(judgments: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per (ok event, passage): ranked position, id, cited, by which requirements."""
    rows: list[dict[str, Any]] = []
    for record in judgments:
        if record["status"] != "ok" or record.get("judgment") is None:
            continue
        ids, _texts, supports, _hallucinated, _unverified = judgment_parts(record["judgment"])
        # Passage id -> the requirements it supports, in requirement order, each once.
        supporting_by_id: dict[str, list[str]] = {}
        for requirement_id, support in zip(ids, supports, strict=True):
            for passage_id in support:
                supporting = supporting_by_id.setdefault(passage_id, [])
                if not supporting or supporting[-1] != requirement_id:
                    supporting.append(requirement_id)
        event_id = record["event_id"]
        for position, (passage_id, logged_position) in enumerate(record["ranked_context"], start=1):
            passage_id = str(passage_id)
            supporting = supporting_by_id.get(passage_id)
            rows.append(
                {
                    "event_id": event_id,
                    "position": position,
                    "logged_position": int(logged_position),
                    "passage_id": passage_id,
                    "cited": supporting is not None,
                    "supported_requirements": [] if supporting is None else supporting.copy(),
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
