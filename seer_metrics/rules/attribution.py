"""Which failing slice explains a drop: the order an alert lists its outcomes in.

A release that hurts `env=prod` with `feature_flag=retrieval-v2` also moves `env=prod`,
`feature_flag=retrieval-v2`, `all` and every intersection that overlaps it. The alert
should lead with the narrowest slice that explains the drop, and say why: the rest of its
parent (the parent's events outside it) did not move. That rest is computed from figures
the slice table already has: counts and means of the parent and the child, today and in
their baselines, since `n_rest * mean_rest = n_parent * mean_parent - n_child * mean_child`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from seer_metrics.rules import wording
from seer_metrics.rules.model import CheckOutcome, RestOfParent
from seer_metrics.rules.scope import slice_components
from seer_metrics.slices.groups import ALL_SLICE

_SEVERITY_ORDER = {"ERROR": 0, "WARN": 1}


def parent_slices(label: str) -> tuple[str, ...]:
    """The slices one step wider: an intersection's components; `all` for a one-key slice."""
    if label == ALL_SLICE:
        return ()
    components = slice_components(label)
    return components if len(components) > 1 else (ALL_SLICE,)


@dataclass(frozen=True)
class AlertItem:
    """One failing outcome in alert order, with what explains it or what it explains."""

    outcome: CheckOutcome
    rest_of_parents: tuple[RestOfParent, ...] = ()
    explained_by: str | None = None

    @property
    def explains(self) -> bool:
        """A drop on this slice leaves the rest of one of its parents unchanged."""
        return any(rest.unchanged for rest in self.rest_of_parents)

    def headline(self) -> str:
        return wording.alert_headline(self.outcome, self.rest_of_parents, self.explained_by)


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def _today_figures(
    outcome: CheckOutcome, rows: Mapping[str, Mapping[str, Any]]
) -> tuple[int, float | None]:
    """(events with a defined value, mean) of the outcome's slice today."""
    metric = outcome.statistic.removeprefix("mean_")
    row = rows.get(outcome.slice)
    if row is not None:
        count = _number(row.get(f"count_{metric}"))
        return (int(count) if count is not None else 0), _number(row.get(outcome.statistic))
    return outcome.sample_size, outcome.observed


def _remove(total: float, count: int, part: float, part_count: int) -> tuple[int, float | None]:
    rest = count - part_count
    if rest <= 0:
        return 0, None
    return rest, (total * count - part * part_count) / rest


def rest_of_parent(
    child: CheckOutcome,
    parent: CheckOutcome,
    slice_rows: Mapping[str, Mapping[str, Any]] | None = None,
) -> RestOfParent:
    """The parent's events outside `child` for the same drop rule, today and in baseline.

    Today's counts and means come from the day's slice rows when given (else from the
    outcomes); the baselines from the two outcomes (mean and event count of each).
    """
    rows = slice_rows or {}
    child_count, child_mean = _today_figures(child, rows)
    parent_count, parent_mean = _today_figures(parent, rows)
    events, observed = 0, None
    if child_mean is not None and parent_mean is not None:
        events, observed = _remove(parent_mean, parent_count, child_mean, child_count)
    baseline = None
    if (
        child.baseline is not None
        and parent.baseline is not None
        and child.baseline_sample_size
        and parent.baseline_sample_size
    ):
        _, baseline = _remove(
            parent.baseline,
            parent.baseline_sample_size,
            child.baseline,
            child.baseline_sample_size,
        )
    return RestOfParent(
        parent=parent.slice,
        statistic=child.statistic,
        events=max(events, 0),
        observed=observed,
        baseline=baseline,
        threshold=child.threshold,
    )


def _rows_by_slice(slice_rows: pd.DataFrame | None) -> dict[str, Mapping[str, Any]]:
    if slice_rows is None or slice_rows.empty:
        return {}
    return {str(row["slice"]): row for row in slice_rows.to_dict("records")}


def alert_order(
    outcomes: Sequence[CheckOutcome], slice_rows: pd.DataFrame | None = None
) -> list[AlertItem]:
    """The failing outcomes of a day, the narrowest slice that explains a drop first.

    For each failing drop on a slice with parents (an intersection's components, or `all`
    for a one-key slice), the rest of each parent is computed; a failing parent whose rest
    moved by less than half the rule's alerting drop is explained by the child (followed
    down to the narrowest such slice). Order: drops that explain a parent (those that
    explain the most failing parents first), then other failures (changes before levels, ERROR
    before WARN, narrower and high-priority slices first, larger drops first), then the
    explained parents. `slice_rows` are the day's rows of the slice table.
    """
    rows = _rows_by_slice(slice_rows)
    by_key = {(o.rule, o.slice): o for o in outcomes}
    failing_outcomes = [o for o in outcomes if o.failed]
    rests: dict[tuple[str, str], tuple[RestOfParent, ...]] = {}
    explained_by: dict[tuple[str, str], str] = {}
    # narrowest first, so a parent is explained by the narrowest child that explains it
    for outcome in sorted(failing_outcomes, key=lambda o: -len(slice_components(o.slice))):
        if outcome.kind != "drop":
            continue
        found = []
        for parent_label in parent_slices(outcome.slice):
            parent = by_key.get((outcome.rule, parent_label))
            if parent is None or parent.observed is None:
                continue
            rest = rest_of_parent(outcome, parent, rows)
            found.append(rest)
            if rest.unchanged and parent.failed:
                narrowest = explained_by.get((outcome.rule, outcome.slice), outcome.slice)
                explained_by.setdefault((outcome.rule, parent_label), narrowest)
        rests[(outcome.rule, outcome.slice)] = tuple(found)
    items = [
        AlertItem(
            outcome=o,
            rest_of_parents=rests.get((o.rule, o.slice), ()),
            explained_by=explained_by.get((o.rule, o.slice)),
        )
        for o in failing_outcomes
    ]

    explained_count: dict[tuple[str, str], int] = {}
    for (rule, _), child in explained_by.items():
        explained_count[(rule, child)] = explained_count.get((rule, child), 0) + 1

    def order(item: AlertItem) -> tuple[Any, ...]:
        o = item.outcome
        return (
            item.explained_by is not None,
            not item.explains,
            -explained_count.get((o.rule, o.slice), 0),
            o.kind != "drop",
            _SEVERITY_ORDER.get(o.severity, 2),
            -len(slice_components(o.slice)),
            not o.high_priority,
            -(o.delta or 0.0),
            o.rule,
            o.slice,
        )

    return sorted(items, key=order)


def lead_slices(items: Iterable[AlertItem]) -> list[str]:
    """The slices an alert should name first: those of the explaining drops, in order."""
    return list(dict.fromkeys(item.outcome.slice for item in items if item.explains))
