"""seer_pipelines.settings: declared variables only, validated values, secrets as EnvVars."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from dagster import EnvVar

from seer_pipelines.settings import VARIABLES, load_settings, override, secret, setting

ROOT = Path(__file__).resolve().parents[2]


def test_a_setting_is_stripped_and_blank_means_unset(monkeypatch) -> None:
    monkeypatch.setenv("SEER_EVENTS_TABLE", "  rag_events ")
    assert setting("SEER_EVENTS_TABLE") == "rag_events"
    monkeypatch.setenv("SEER_EVENTS_TABLE", "   ")
    assert setting("SEER_EVENTS_TABLE") is None
    monkeypatch.delenv("SEER_EVENTS_TABLE")
    assert setting("SEER_EVENTS_TABLE") is None


def test_an_undeclared_variable_is_refused() -> None:
    with pytest.raises(KeyError, match="SEER_EVENT_TABLE is not a Seer setting"):
        setting("SEER_EVENT_TABLE")
    with pytest.raises(KeyError):
        override(SEER_EVENT_TABLE="x")


def test_load_settings_defaults_and_validation(monkeypatch) -> None:
    for name in ("SEER_START_DATE", "SEER_SCHEDULE_HOUR_UTC", "SEER_EVALUATOR"):
        monkeypatch.delenv(name, raising=False)
    defaults = load_settings()
    assert (defaults.start_date, defaults.schedule_hour_utc, defaults.evaluator) == (
        "2025-01-01",
        2,
        None,
    )
    monkeypatch.setenv("SEER_START_DATE", "2026-11-16")
    monkeypatch.setenv("SEER_SCHEDULE_HOUR_UTC", "5")
    assert load_settings().start_date == "2026-11-16"
    assert load_settings().schedule_hour_utc == 5
    monkeypatch.setenv("SEER_SCHEDULE_HOUR_UTC", "25")
    with pytest.raises(ValueError, match="SEER_SCHEDULE_HOUR_UTC must be an hour 0-23"):
        load_settings()
    monkeypatch.setenv("SEER_SCHEDULE_HOUR_UTC", "2")
    monkeypatch.setenv("SEER_START_DATE", "16/11/2026")
    with pytest.raises(ValueError, match="SEER_START_DATE must be a date"):
        load_settings()


def test_secrets_are_envvars_and_only_when_set(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert secret("OPENAI_API_KEY") == EnvVar("OPENAI_API_KEY")
    monkeypatch.delenv("OPENAI_API_KEY")
    assert secret("OPENAI_API_KEY") is None
    with pytest.raises(KeyError):
        secret("SEER_EVENTS_TABLE")
    assert {name for name, variable in VARIABLES.items() if variable.secret} == {
        "OPENAI_API_KEY",
        "SLACK_BOT_TOKEN",
    }


def test_override_sets_and_unsets(monkeypatch) -> None:
    monkeypatch.setenv("SEER_EVALUATOR_MODEL", "gpt-4o")
    monkeypatch.delenv("SEER_EVALUATOR", raising=False)
    override(SEER_EVALUATOR="lexical", SEER_EVALUATOR_MODEL=None)
    assert setting("SEER_EVALUATOR") == "lexical"
    assert setting("SEER_EVALUATOR_MODEL") is None


def test_every_variable_the_product_asks_for_is_declared() -> None:
    """`setting("X")` with an undeclared X fails only when run; this finds it statically."""
    asked: set[str] = set()
    for path in [*ROOT.glob("seer_pipelines/**/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in {"setting", "secret"}
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                asked.add(node.args[0].value)
    assert asked
    assert asked <= set(VARIABLES), asked - set(VARIABLES)


def test_the_checks_follow_the_rules_file_named_by_seer_rules_file(tmp_path, monkeypatch) -> None:
    from seer_pipelines.defs.checks.slice_rules import build_slice_checks

    path = tmp_path / "rules.yaml"
    path.write_text(
        "rules:\n  - name: only_rule\n    kind: threshold\n    statistic: mean_recall\n"
        "    comparison: below\n    threshold: 0.5\n    severity: WARN\n"
    )
    monkeypatch.setenv("SEER_RULES_FILE", str(path))
    assert {spec.name for spec in build_slice_checks().check_specs} == {"only_rule"}
    monkeypatch.delenv("SEER_RULES_FILE")
    assert "f1_drop" in {spec.name for spec in build_slice_checks().check_specs}
