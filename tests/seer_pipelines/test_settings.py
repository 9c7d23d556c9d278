"""seer_pipelines.settings: declared variables only, validated values, secrets as EnvVars."""

from __future__ import annotations

import ast
from datetime import date, time
from pathlib import Path

import pytest
from dagster import EnvVar

from seer_pipelines.settings import (
    VARIABLES,
    Settings,
    SettingsError,
    comma_separated,
    load_settings,
    override,
    secret,
    setting,
)

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


def test_load_settings_defaults_are_the_documented_ones() -> None:
    defaults = load_settings({})
    assert defaults == Settings()
    assert (defaults.start_date, defaults.schedule_hour_utc, defaults.evaluator) == (
        date(2025, 1, 1),
        2,
        "lexical",
    )
    assert defaults.slice_keys == ("env", "feature_flag")
    assert (defaults.bloat_line, defaults.freshness_deadline) == (0.35, time(6, 0))
    assert (defaults.rules_file, defaults.asset_owners, defaults.asset_tags) == (None, (), {})


def test_load_settings_parses_every_kind_of_value(tmp_path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules: []\n")
    settings = load_settings(
        {
            "SEER_START_DATE": "2026-11-16",
            "SEER_SCHEDULE_HOUR_UTC": " 5 ",
            "SEER_SLICE_KEYS": "env, tenant,,env",
            "SEER_BLOAT_LINE": "0.5",
            "SEER_EVALUATOR": "OpenAI",
            "SEER_LLM_MODE": "batch",
            "SEER_SAMPLE_SIZE": "2000",
            "SEER_BUDGET_USD": "1.5",
            "SEER_RULES_FILE": str(rules),
            "SEER_FRESHNESS_DEADLINE": "9:05",
            "SEER_ASSET_OWNERS": "team:rag, alice@example.com,alice@example.com",
            "SEER_ASSET_TAGS": "domain=search, tier = 1 ,pii,",
            "OPENAI_API_KEY": "sk-test",
        }
    )
    assert settings.start_date == date(2026, 11, 16)
    assert settings.schedule_hour_utc == 5
    assert settings.slice_keys == ("env", "tenant")
    assert settings.bloat_line == 0.5
    assert (settings.evaluator, settings.llm_mode) == ("openai", "batch")
    assert (settings.sample_size, settings.budget_usd) == (2000, 1.5)
    assert settings.rules_file == rules
    assert settings.freshness_deadline == time(9, 5)
    assert settings.asset_owners == ("team:rag", "alice@example.com")
    assert settings.asset_tags == {"domain": "search", "tier": "1", "pii": ""}
    # The secret is an EnvVar, its value is nowhere in the settings.
    assert settings.secret("OPENAI_API_KEY") == EnvVar("OPENAI_API_KEY")
    assert settings.secret("SLACK_BOT_TOKEN") is None
    assert "sk-test" not in repr(settings)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("SEER_START_DATE", "16/11/2026", "SEER_START_DATE must be a date"),
        ("SEER_SCHEDULE_HOUR_UTC", "25", "SEER_SCHEDULE_HOUR_UTC must be an hour 0-23"),
        ("SEER_BLOAT_LINE", "high", "SEER_BLOAT_LINE must be a float"),
        ("SEER_BLOAT_LINE", "1.5", r"SEER_BLOAT_LINE must be in \(0, 1\]"),
        ("SEER_EVALUATOR", "gpt", "SEER_EVALUATOR must be lexical or openai"),
        ("SEER_LLM_MODE", "later", "SEER_LLM_MODE must be online or batch"),
        ("SEER_SAMPLE_SIZE", "many", "SEER_SAMPLE_SIZE must be a int"),
        ("SEER_BUDGET_USD", "$5", "SEER_BUDGET_USD must be a float"),
        ("SEER_RULES_FILE", "/nonexistent/rules.yaml", "SEER_RULES_FILE: no such file"),
        ("SEER_FRESHNESS_DEADLINE", "6am", "SEER_FRESHNESS_DEADLINE must be HH:MM"),
        ("SEER_ASSET_TAGS", "=x", "SEER_ASSET_TAGS: '=x' has no key"),
        ("SEER_LLM_MAX_TOKENS", "lots", "SEER_LLM_MAX_TOKENS must be a int"),
        ("SEER_LLM_PRICES", "{", "SEER_LLM_PRICES is not valid JSON"),
    ],
)
def test_a_bad_value_fails_naming_its_variable(name, value, message) -> None:
    with pytest.raises(SettingsError, match=message):
        load_settings({name: value})


def test_load_settings_reads_every_declared_variable() -> None:
    """What the README's table lists is what the settings read (nothing left to a module
    that would read it on its own)."""

    asked: set[str] = set()

    class Recording(dict):
        def get(self, key, default=None):
            asked.add(key)
            return super().get(key, default)

        def __contains__(self, key):
            asked.add(key)
            return super().__contains__(key)

    load_settings(Recording())
    assert set(VARIABLES) <= asked, set(VARIABLES) - asked


def test_comma_lists_are_parsed_by_one_helper() -> None:
    assert comma_separated(" a, b,,a ,") == ["a", "b"]
    assert comma_separated(None) == comma_separated("") == []


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


# Values `load_settings` must refuse, for every variable that is parsed or checked; the
# variables in FREE_TEXT take any text (a name, a path, a secret). Every declared variable
# is in one of the two, so a new one is covered the day it is declared.
INVALID_VALUES: dict[str, tuple[str, ...]] = {
    "SEER_WAREHOUSE_URL": ("postgres://u@h:port/db", "postgress://u@h/db"),
    "SEER_WAREHOUSE_SCHEMA": ("a.b", "x; drop table y"),
    "SEER_EVENTS_TABLE": ("events; drop table x", '"quoted"'),
    "SEER_START_DATE": ("16/11/2026",),
    "SEER_SCHEDULE_HOUR_UTC": ("25", "-1", "two"),
    "SEER_BLOAT_LINE": ("high", "1.5", "0", "nan"),
    "SEER_EVALUATOR": ("gpt",),
    "SEER_LLM_MODE": ("later",),
    "OPENAI_BASE_URL": ("api.openai.com/v1", "ftp://example.com/v1"),
    "SEER_LLM_REQUESTS_PER_MINUTE": ("fast", "-5", "nan", "inf"),
    "SEER_LLM_TOKENS_PER_MINUTE": ("lots", "-1"),
    "SEER_LLM_MAX_CONCURRENCY": ("many", "-3", "1.5"),
    "SEER_LLM_TIMEOUT_SECONDS": ("soon", "-1", "nan", "inf"),
    "SEER_LLM_MAX_RETRIES": ("x", "-1"),
    "SEER_LLM_MAX_TOKENS": ("lots", "0", "-5"),
    "SEER_LLM_MAX_REQUIREMENTS": ("many", "0"),
    "SEER_LLM_PRICES": ("{", "[]", '{"gpt-4o-mini": [NaN, 1]}', '{"m": [-1, 1]}'),
    "SEER_SLACK_API_URL": ("slack.com/api",),
    "SEER_DAGSTER_URL": ("localhost:3000",),
    "SEER_RULES_FILE": ("/nonexistent/rules.yaml",),
    "SEER_FRESHNESS_DEADLINE": ("6am", "24:00"),
    "SEER_SAMPLE_SIZE": ("many", "0", "-5"),
    "SEER_SAMPLE_MIN_PER_SLICE": ("some", "-1"),
    "SEER_BUDGET_USD": ("$5", "-1", "nan", "inf", "-inf"),
    "SEER_BUDGET_TOKENS": ("1e6", "-1"),
    "SEER_ASSET_OWNERS": ("not an owner",),
    "SEER_ASSET_TAGS": ("=x", "bad key!=1"),
}
FREE_TEXT = frozenset(
    {
        "SEER_SLICE_KEYS",
        "SEER_EVALUATOR_MODEL",
        "OPENAI_API_KEY",
        "SLACK_BOT_TOKEN",
        "SEER_SLACK_CHANNEL",
        "TIKTOKEN_CACHE_DIR",
        "DATA_GYM_CACHE_DIR",
        "DAGSTER_HOME",
    }
)


def test_every_variable_has_invalid_values_or_takes_any_text() -> None:
    declared = set(VARIABLES)
    assert set(INVALID_VALUES) | FREE_TEXT == declared, (
        "classify each variable: values load_settings refuses, or FREE_TEXT: "
        f"{sorted(declared - set(INVALID_VALUES) - FREE_TEXT)}"
    )
    assert not set(INVALID_VALUES) & FREE_TEXT


@pytest.mark.parametrize("name", sorted(VARIABLES))
def test_each_invalid_value_fails_the_load_naming_its_variable(name: str) -> None:
    """Not 'budget in USD must be a number >= 0': `SEER_BUDGET_USD must be ...`."""
    if name in FREE_TEXT:
        settings = load_settings({name: "any text at all: ☃ / ; 42"})
        assert isinstance(settings, Settings)
        return
    for bad in INVALID_VALUES[name]:
        with pytest.raises(SettingsError) as raised:
            load_settings({name: bad})
        assert name in str(raised.value), f"{name}={bad!r}: {raised.value}"
