"""docs/metrics.md says what the code does: its example runs, its rule table is the rules file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
METRICS_DOC = ROOT / "docs" / "metrics.md"
DEFAULT_RULES = ROOT / "seer_metrics" / "rules" / "default_rules.yaml"


def _table_after(heading: str, text: str) -> list[list[str]]:
    """The rows of the first markdown table after `heading` (header and rule line dropped)."""
    block: list[str] = []
    for line in text.split(heading, 1)[1].splitlines():
        if line.startswith("|"):
            block.append(line)
        elif block:
            break
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in block[2:]]


def test_the_worked_example_runs_and_gives_the_numbers_the_text_states() -> None:
    text = METRICS_DOC.read_text()
    [code] = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    namespace: dict = {}
    exec(code, namespace)
    score = namespace["score"]
    assert (score.recall, round(score.precision, 3), score.k, score.n) == (1.0, 0.667, 2, 3)
    assert score.f1 == pytest.approx(0.8)
    assert score.ndcg == pytest.approx(1.0)
    assert set(score.cited_ids) == {"p1", "p2"}
    for stated in ("**1.0**", "**0.667**", "**0.8**"):
        assert stated in text


def test_the_rule_table_is_the_packaged_default_rules() -> None:
    rules = yaml.safe_load(DEFAULT_RULES.read_text())["rules"]
    rows = _table_after("## Rules", METRICS_DOC.read_text())
    documented = {row[0].strip("`"): row for row in rows}
    assert set(documented) == {rule["name"] for rule in rules}
    for rule in rules:
        _, statistic, fails_when, _, severity = documented[rule["name"]]
        assert statistic == f"`{rule['statistic']}`"
        assert severity == rule["severity"]
        threshold = float(rule["threshold"])
        assert any(float(number) == threshold for number in re.findall(r"\d+\.\d+", fails_when))


def test_the_slice_columns_are_all_described() -> None:
    from seer_metrics.slices import SLICE_COLUMNS

    rows = _table_after("## Per day and slice", METRICS_DOC.read_text())
    described: set[str] = set()
    for row in rows:
        for name in re.findall(r"`([a-z0-9_*]+)`", row[0]):
            described.add(name)
    for column in SLICE_COLUMNS:
        if column in {"partition_date", "slice", "slice_key", "slice_value"}:
            continue
        prefix = column.split("_")[0] + "_*"
        assert column in described or prefix in described, column
