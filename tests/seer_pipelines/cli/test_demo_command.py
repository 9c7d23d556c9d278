"""`seer demo` refuses an unusable rules file before it writes anything."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from seer_pipelines.cli import main as seer

BAD_THRESHOLD = """\
rules:
  - name: recall_floor
    kind: threshold
    severity: WARN
    statistic: mean_recall
    threshold: high
"""


@pytest.mark.parametrize(
    ("rules_text", "named"),
    [
        (BAD_THRESHOLD, "rules[0] (recall_floor).threshold: expected a number, got 'high'"),
        ("rules: [\n", "not valid YAML"),
        (None, "does not exist"),
    ],
)
def test_a_bad_rules_file_is_one_line_naming_the_key_and_the_warehouse_is_untouched(
    tmp_path: Path, monkeypatch, capsys, rules_text: str | None, named: str
) -> None:
    rules = tmp_path / "rules.yaml"
    if rules_text is not None:
        rules.write_text(rules_text)
    monkeypatch.setenv("SEER_RULES_FILE", str(rules))
    # An earlier demo's warehouse, and no instance yet.
    warehouse = tmp_path / "warehouse.sqlite"
    with sqlite3.connect(warehouse) as connection:
        connection.execute("create table earlier_demo (day text)")
        connection.execute("insert into earlier_demo values ('2026-11-29')")
    before = warehouse.read_bytes()
    home = tmp_path / "dagster_home"

    code = seer(["demo", "--url", f"sqlite:///{warehouse}", "--dagster-home", str(home)])

    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    [line] = captured.err.splitlines()
    assert line.startswith("error: SEER_RULES_FILE: ") and named in line, line
    assert line.endswith("; nothing was written")
    assert "Traceback" not in captured.err
    assert warehouse.read_bytes() == before
    assert not home.exists()
