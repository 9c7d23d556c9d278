"""Hostile metadata keys and values are slices like any other, end to end.

A tenant `acme,env=prod`, keys `k=eq`, `ключ`, `drop table x;--` and `all`, a value
`all`: the slice table, the default rules, the examples and the Slack message must treat
each slice by what it is (its keys and values), never by what its label looks like. Each
slice gets the rules of an ordinary slice of as many keys and the same priority, a
one-key slice is never an intersection nor high priority because its value mentions
`env=prod`, and its examples are those of its own events.
"""

from __future__ import annotations

from datetime import date, timedelta

import numpy as np
import pandas as pd
import pytest

from seer_metrics.rules import DEFAULT_RULES, CheckOutcome, evaluate_rules
from seer_metrics.slices import slice_metrics
from seer_pipelines.alerts import build_check_message, top_missing_requirements
from seer_pipelines.alerts.alert_row import Alert

TODAY = date(2026, 11, 20)
HISTORY_DAYS = 14
KEYS = ("env", "feature_flag", "tenant", "ключ", "drop table x;--", "k=eq", "all")
# name: (events a day, metadata, the one missing requirement each of its events has)
GROUPS = {
    "A": (
        40,
        {"env": "prod", "feature_flag": "v1", "tenant": "globex", "all": "everything"},
        "alpha",
    ),
    "B": (
        50,
        {
            "env": "dev",
            "feature_flag": "v2",
            "tenant": "acme,env=prod",
            "ключ": "значение",
            "drop table x;--": "1; drop",
            "k=eq": "v1",
        },
        "beta",
    ),
    "C": (
        60,
        {
            "env": "dev",
            "feature_flag": "v1",
            "tenant": "all",
            "ключ": "другое",
            "drop table x;--": "2",
            "k=eq": "v2",
        },
        "gamma",
    ),
}
BROKEN_TODAY = "B"
# Reference slices (ordinary keys and values) of each arity and priority.
ORDINARY = {
    (1, True): "env=prod",
    (1, False): "env=dev",
    (2, True): "env=prod,feature_flag=v1",
    (2, False): "env=dev,feature_flag=v1",
}
HIGH_PRIORITY_SLICES = {
    "env=prod",
    "env=prod,feature_flag=v1",
    "env=prod,tenant=globex",
    "env=prod,all=everything",
}


def _scores() -> pd.DataFrame:
    rng = np.random.default_rng(19)
    rows = []
    for offset in range(HISTORY_DAYS, -1, -1):
        day = TODAY - timedelta(days=offset)
        for name, (size, metadata, requirement) in GROUPS.items():
            broken = offset == 0 and name == BROKEN_TODAY
            for _ in range(size):
                recall = rng.uniform(0.1, 0.3) if broken else rng.uniform(0.88, 1.0)
                precision = rng.uniform(0.4, 0.6)
                rows.append(
                    {
                        "partition_date": day.isoformat(),
                        "status": "ok",
                        "recall": recall,
                        "precision": precision,
                        "f1": 2 * recall * precision / (recall + precision),
                        "ndcg": recall,
                        "k": 2,
                        "metadata": dict(metadata),
                        "missing_requirements": [requirement],
                    }
                )
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def evaluated() -> tuple[pd.DataFrame, pd.DataFrame, list[CheckOutcome]]:
    scores = _scores()
    table = slice_metrics(scores, slice_keys=KEYS)
    today = table[table["partition_date"] == TODAY.isoformat()]
    history = table[table["partition_date"] != TODAY.isoformat()]
    return scores, today, evaluate_rules(DEFAULT_RULES, today, history)


def _single_key_rows(today: pd.DataFrame) -> pd.DataFrame:
    return today[today["slice_key"].isin(KEYS) & (today["slice"] != "all")]


def _pair_rows(today: pd.DataFrame) -> pd.DataFrame:
    return today[~today["slice_key"].isin(KEYS) & (today["slice"] != "all")]


def _rules_on(outcomes: list[CheckOutcome], label: str) -> set[str]:
    return {outcome.rule for outcome in outcomes if outcome.slice == label}


def test_the_table_has_every_hostile_slice_once(evaluated) -> None:
    _, today, _ = evaluated
    singles = _single_key_rows(today)
    expected = {(key, metadata[key]) for _, metadata, _ in GROUPS.values() for key in metadata}
    assert set(zip(singles["slice_key"], singles["slice_value"], strict=True)) == expected
    assert today["slice"].is_unique
    # every pair of keys of each group (each pair of values belongs to one group)
    assert len(_pair_rows(today)) == sum(
        len(metadata) * (len(metadata) - 1) // 2 for _, metadata, _ in GROUPS.values()
    )


def test_each_slice_gets_the_rules_of_an_ordinary_slice_of_its_arity(evaluated) -> None:
    _, today, outcomes = evaluated
    reference = {
        arity_priority: _rules_on(outcomes, label) for arity_priority, label in ORDINARY.items()
    }
    assert reference[(1, False)] != reference[(2, False)]  # levels skip intersections
    for arity, rows in ((1, _single_key_rows(today)), (2, _pair_rows(today))):
        for label in rows["slice"]:
            if arity == 1:
                row = rows[rows["slice"] == label].iloc[0]
                high = (row["slice_key"], row["slice_value"]) == ("env", "prod")
            else:
                high = label in HIGH_PRIORITY_SLICES
            assert _rules_on(outcomes, label) == reference[(arity, high)], label
            of_slice = [outcome for outcome in outcomes if outcome.slice == label]
            assert all(outcome.high_priority == high for outcome in of_slice), label


def test_each_slice_gets_the_examples_of_its_own_events(evaluated) -> None:
    scores, today, _ = evaluated
    day_scores = scores[scores["partition_date"] == TODAY.isoformat()]
    examples = top_missing_requirements([day_scores], list(today["slice"]))
    requirement_of_size = {size: requirement for size, _, requirement in GROUPS.values()}
    for row in _single_key_rows(today).itertuples():
        wanted = sorted(
            (requirement, size)
            for size, metadata, requirement in GROUPS.values()
            if metadata.get(row.slice_key) == row.slice_value
        )
        assert sorted(examples.get(row.slice, [])) == wanted, row.slice
    for row in _pair_rows(today).itertuples():
        # each pair of values belongs to one group, told apart by its size
        assert examples.get(row.slice) == [(requirement_of_size[row.events], row.events)], row.slice


def test_the_alert_marks_no_hostile_slice_high_priority(evaluated) -> None:
    scores, today, outcomes = evaluated
    failing = [outcome for outcome in outcomes if outcome.failed]
    tenant = _single_key_rows(today).query(
        "slice_key == 'tenant' and slice_value == 'acme,env=prod'"
    )
    assert tenant["slice"].iloc[0] in {outcome.slice for outcome in failing}
    alerts = [
        Alert(
            id=index,
            partition_date=TODAY,
            kind="check",
            rule=outcome.rule,
            slice=outcome.slice,
            severity=outcome.severity,
            state="pending",
            fingerprint=str(index),
            payload=outcome.to_dict(),
            run_id="run-1",
        )
        for index, outcome in enumerate(failing)
    ]
    day_scores = scores[scores["partition_date"] == TODAY.isoformat()]
    examples = top_missing_requirements([day_scores], sorted({a.slice for a in alerts}))
    message = build_check_message(TODAY, alerts, examples)
    texts = [block["text"]["text"] for block in message.blocks if "text" in block]
    texts += [element["text"] for block in message.blocks for element in block.get("elements", [])]
    # only group B broke, and it has no event in env=prod
    assert not any("(high priority)" in text for text in texts)
    # people read the display form (special keys and values quoted), not the codec's escapes
    assert any('tenant="acme,env=prod"' in text for text in texts)
    assert not any("\\," in text or "\\=" in text for text in texts)
    shown = [text for text in texts if text.startswith("Top missing requirements in")]
    assert shown and all("“beta” (50 events)" in text for text in shown)
