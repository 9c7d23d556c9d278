"""Seer's configuration from the environment: the one module that reads it.

Every variable Seer understands is declared here once (`VARIABLES`: name, default,
meaning, and whether it is a secret); the README's configuration table lists the same
ones. Other modules ask for a value by name (`setting`), for a typed, validated snapshot
(`load_settings`), or for the mapping that library code reads its own keys from
(`environment`); none of them touches `os.environ`. Values are read when asked for, not
at import, so a resource resolves its setting when it is used, after Dagster config.

Secrets (the OpenAI key, the Slack token) reach the resources as Dagster `EnvVar`s (see
`secret`), so Dagster never shows or logs their values.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dagster import EnvVar


@dataclass(frozen=True)
class Variable:
    name: str
    default: str
    meaning: str
    secret: bool = False


VARIABLES: dict[str, Variable] = {
    variable.name: variable
    for variable in (
        Variable("SEER_WAREHOUSE_URL", "sqlite:///./.seer/warehouse.sqlite",
                 "SQLAlchemy URL of the warehouse; output tables are written there too"),
        Variable("SEER_WAREHOUSE_SCHEMA", "connection default",
                 "schema of the events and output tables"),
        Variable("SEER_EVENTS_TABLE", "retrieval_events",
                 "source table (column names are resource config)"),
        Variable("SEER_START_DATE", "2025-01-01", "first daily partition (YYYY-MM-DD)"),
        Variable("SEER_SCHEDULE_HOUR_UTC", "2",
                 "hour (UTC) at which the schedule runs yesterday's partition"),
        Variable("SEER_SLICE_KEYS", "env,feature_flag", "metadata keys to slice by"),
        Variable("SEER_BLOAT_LINE", "0.35", "precision below this counts as context bloat"),
        Variable("SEER_EVALUATOR", "lexical", "lexical (offline heuristic) or openai"),
        Variable("SEER_EVALUATOR_MODEL", "lexical-v1 / gpt-4o-mini", "judge model"),
        Variable("SEER_LLM_MODE", "online", "online, or batch (the provider's Batch API)"),
        Variable("OPENAI_API_KEY", "unset", "key of the openai evaluator", secret=True),
        Variable("OPENAI_BASE_URL", "OpenAI", "any OpenAI-compatible endpoint"),
        Variable("SEER_LLM_REQUESTS_PER_MINUTE", "500", "client-side request pacing"),
        Variable("SEER_LLM_TOKENS_PER_MINUTE", "200000", "client-side token pacing"),
        Variable("SEER_LLM_MAX_CONCURRENCY", "16", "requests in flight"),
        Variable("SEER_LLM_TIMEOUT_SECONDS", "60", "timeout of one call, its whole reply included"),
        Variable("SEER_LLM_MAX_RETRIES", "4", "retries of a failed request"),
        Variable("SEER_LLM_MAX_TOKENS", "1500", "completion cap of one reply"),
        Variable("SEER_LLM_MAX_REQUIREMENTS", "20",
                 "more requirements than this for a query is a failed judgment"),
        Variable("SEER_LLM_PRICES", "built-in list", "model prices, USD per 1M tokens"),
        Variable("SLACK_BOT_TOKEN", "unset", "Slack bot token", secret=True),
        Variable("SEER_SLACK_CHANNEL", "unset", "Slack channel of the alerts"),
        Variable("SEER_SLACK_API_URL", "https://slack.com/api/", "Slack Web API base URL"),
        Variable("SEER_DAGSTER_URL", "http://localhost:3000", "Dagster UI base URL"),
        Variable("SEER_RULES_FILE", "the packaged default rules", "alert rules file"),
        Variable("SEER_FRESHNESS_DEADLINE", "06:00",
                 "UTC time by which yesterday's partition must have landed"),
        Variable("SEER_SAMPLE_SIZE", "unset: every event",
                 "events judged per day, a stratified sample"),
        Variable("SEER_SAMPLE_MIN_PER_SLICE", "30", "minimum sampled events per slice"),
        Variable("SEER_BUDGET_USD", "unset: no cap", "judging budget per day in USD"),
        Variable("SEER_BUDGET_TOKENS", "unset: no cap", "judging budget per day in tokens"),
        Variable("SEER_ASSET_OWNERS", "unset: no owner",
                 "owners of every Seer asset: emails or team:name, comma-separated"),
        Variable("SEER_ASSET_TAGS", "unset: no tags",
                 "tags of every Seer asset: key=value or key, comma-separated"),
        Variable("TIKTOKEN_CACHE_DIR", "tiktoken's, under the temporary directory",
                 "tiktoken's encodings; seer estimate counts exact tokens when cached there"),
        Variable("DATA_GYM_CACHE_DIR", "unset", "older name of TIKTOKEN_CACHE_DIR"),
        Variable("DAGSTER_HOME", "./.dagster_home for make dev and seer demo",
                 "Dagster instance directory"),
    )
}  # fmt: skip

DEFAULT_START_DATE = "2025-01-01"
DEFAULT_SCHEDULE_HOUR_UTC = 2


def environment() -> Mapping[str, str]:
    """The process environment, for library code that reads its own keys from a mapping."""
    return os.environ


def setting(name: str) -> str | None:
    """The value of a declared variable, stripped; None when unset or blank."""
    if name not in VARIABLES:
        raise KeyError(f"{name} is not a Seer setting; declare it in seer_pipelines.settings")
    raw = os.environ.get(name, "").strip()
    return raw or None


def number_setting(name: str, kind: type[int] | type[float]) -> int | float | None:
    """A declared variable as a number; None when unset; a bad value fails naming it."""
    text = setting(name)
    if text is None:
        return None
    try:
        return kind(text)
    except ValueError:
        raise ValueError(f"{name} must be a {kind.__name__}, got {text!r}") from None


def override(**values: str | None) -> None:
    """Set (or, with None, unset) declared variables for this process and its children.

    `seer demo` points the code location it imports at its own warehouse and evaluator.
    """
    for name, new in values.items():
        if name not in VARIABLES:
            raise KeyError(f"{name} is not a Seer setting")
        if new is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = new


def secret(name: str) -> EnvVar | None:
    """A secret as a Dagster `EnvVar` (resolved by Dagster, never logged); None when unset."""
    from dagster import EnvVar  # here, so `seer evaluate` never imports Dagster

    if not VARIABLES[name].secret:
        raise KeyError(f"{name} is not a secret")
    return EnvVar(name) if setting(name) else None


@dataclass(frozen=True)
class Settings:
    """The settings the code location is built from when it loads."""

    start_date: str
    schedule_hour_utc: int
    evaluator: str | None


def load_settings() -> Settings:
    """Validated settings; a bad value fails the load naming the variable."""
    return Settings(
        start_date=_start_date(setting("SEER_START_DATE")),
        schedule_hour_utc=_schedule_hour(setting("SEER_SCHEDULE_HOUR_UTC")),
        evaluator=setting("SEER_EVALUATOR"),
    )


def _start_date(configured: str | None) -> str:
    if not configured:
        return DEFAULT_START_DATE
    try:
        return date.fromisoformat(configured).isoformat()
    except ValueError:
        raise ValueError(
            f"SEER_START_DATE must be a date like 2026-01-31, got {configured!r}"
        ) from None


def _schedule_hour(configured: str | None) -> int:
    if not configured:
        return DEFAULT_SCHEDULE_HOUR_UTC
    try:
        hour = int(configured)
    except ValueError:
        hour = -1
    if not 0 <= hour <= 23:
        raise ValueError(f"SEER_SCHEDULE_HOUR_UTC must be an hour 0-23, got {configured!r}")
    return hour
