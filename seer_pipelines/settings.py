"""Seer's configuration from the environment: the one module that reads it.

Every variable Seer understands is declared here once (`VARIABLES`: name, default,
meaning, and whether it is a secret); the README's configuration table lists the same
ones. `load_settings` reads all of them into one typed, validated `Settings`, which
`seer_pipelines.definitions.build_definitions` builds the code location from. Resources
ask for their own values by name (`setting`) when they are used, after Dagster config;
library code gets the mapping it reads its own keys from (`environment`). Nothing else
touches `os.environ`, and nothing reads it at import.

Secrets (the OpenAI key, the Slack token) reach the resources as Dagster `EnvVar`s (see
`secret`), so Dagster never shows or logs their values.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, time
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

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

DEFAULT_START_DATE = date(2025, 1, 1)
DEFAULT_SCHEDULE_HOUR_UTC = 2
DEFAULT_SLICE_KEYS = ("env", "feature_flag")
DEFAULT_BLOAT_LINE = 0.35
DEFAULT_FRESHNESS_DEADLINE = time(6, 0)
DEFAULT_EVENTS_TABLE = "retrieval_events"
EVALUATOR_KINDS = ("lexical", "openai")
LLM_MODES = ("online", "batch")
_DEADLINE = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")


class SettingsError(ValueError):
    """A variable with a value Seer cannot use; the message names the variable."""


def _value(env: Mapping[str, str], name: str) -> str | None:
    if name not in VARIABLES:
        raise KeyError(f"{name} is not a Seer setting; declare it in seer_pipelines.settings")
    raw = (env.get(name) or "").strip()
    return raw or None


def environment() -> Mapping[str, str]:
    """The process environment, for library code that reads its own keys from a mapping."""
    return os.environ


def setting(name: str) -> str | None:
    """The value of a declared variable, stripped; None when unset or blank."""
    return _value(os.environ, name)


def comma_separated(text: str | None) -> list[str]:
    """`a, b,,a` -> ["a", "b"]: the items of a comma list, stripped, blanks and repeats out."""
    items = (item.strip() for item in (text or "").split(","))
    return list(dict.fromkeys(item for item in items if item))


def _number(name: str, text: str | None, kind: type[int] | type[float]) -> int | float | None:
    if text is None:
        return None
    try:
        return kind(text)
    except ValueError:
        raise SettingsError(f"{name} must be a {kind.__name__}, got {text!r}") from None


def override(**values: str | None) -> None:
    """Set (or, with None, unset) declared variables for this process and its children.

    `seer demo` points the code location it builds at its own warehouse and evaluator.
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
    return _secret(name, setting(name) is not None)


def _secret(name: str, is_set: bool) -> EnvVar | None:
    from dagster import EnvVar  # here, so `seer evaluate` never imports Dagster

    if not VARIABLES[name].secret:
        raise KeyError(f"{name} is not a secret")
    return EnvVar(name) if is_set else None


@dataclass(frozen=True)
class Settings:
    """Every Seer variable, parsed and validated: what the code location is built from.

    The defaults are the documented ones, so `Settings()` is the code location of an
    empty environment. Secrets are kept as whether they are set, never as values.
    """

    warehouse_url: str | None = None
    warehouse_schema: str | None = None
    events_table: str = DEFAULT_EVENTS_TABLE
    start_date: date = DEFAULT_START_DATE
    schedule_hour_utc: int = DEFAULT_SCHEDULE_HOUR_UTC
    slice_keys: tuple[str, ...] = DEFAULT_SLICE_KEYS
    bloat_line: float = DEFAULT_BLOAT_LINE
    evaluator: str = "lexical"
    evaluator_model: str | None = None
    llm_mode: str = "online"
    openai_base_url: str | None = None
    sample_size: int | None = None
    sample_minimum_per_slice: int | None = None
    budget_usd: float | None = None
    budget_tokens: int | None = None
    slack_channel: str | None = None
    slack_api_url: str | None = None
    dagster_url: str | None = None
    rules_file: Path | None = None
    freshness_deadline: time = DEFAULT_FRESHNESS_DEADLINE
    asset_owners: tuple[str, ...] = ()
    asset_tags: Mapping[str, str] = field(default_factory=dict)
    tiktoken_cache_dir: str | None = None
    dagster_home: str | None = None
    secrets_set: frozenset[str] = frozenset()

    def secret(self, name: str) -> EnvVar | None:
        """The secret as a Dagster `EnvVar` when it was set; None otherwise."""
        return _secret(name, name in self.secrets_set)


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Every variable of `env` (default: the process environment), validated; a bad value
    raises `SettingsError` naming the variable."""
    env = os.environ if env is None else env

    def value(name: str) -> str | None:
        return _value(env, name)

    _register_secrets(env)
    _check_llm_settings(env)
    for name in ("OPENAI_BASE_URL", "SEER_SLACK_API_URL", "SEER_DAGSTER_URL"):
        _check_http_url(name, value(name))
    return Settings(
        warehouse_url=_warehouse_url(value("SEER_WAREHOUSE_URL")),
        warehouse_schema=_identifier("SEER_WAREHOUSE_SCHEMA", value("SEER_WAREHOUSE_SCHEMA")),
        events_table=_identifier("SEER_EVENTS_TABLE", value("SEER_EVENTS_TABLE"))
        or DEFAULT_EVENTS_TABLE,
        start_date=_start_date(value("SEER_START_DATE")),
        schedule_hour_utc=_schedule_hour(value("SEER_SCHEDULE_HOUR_UTC")),
        slice_keys=tuple(comma_separated(value("SEER_SLICE_KEYS"))) or DEFAULT_SLICE_KEYS,
        bloat_line=_bloat_line(value("SEER_BLOAT_LINE")),
        evaluator=_choice("SEER_EVALUATOR", value("SEER_EVALUATOR"), EVALUATOR_KINDS),
        evaluator_model=value("SEER_EVALUATOR_MODEL"),
        llm_mode=_choice("SEER_LLM_MODE", value("SEER_LLM_MODE"), LLM_MODES),
        openai_base_url=value("OPENAI_BASE_URL"),
        sample_size=_at_least("SEER_SAMPLE_SIZE", value("SEER_SAMPLE_SIZE"), int, 1),
        sample_minimum_per_slice=_at_least(
            "SEER_SAMPLE_MIN_PER_SLICE", value("SEER_SAMPLE_MIN_PER_SLICE"), int, 0
        ),
        budget_usd=_at_least("SEER_BUDGET_USD", value("SEER_BUDGET_USD"), float, 0),
        budget_tokens=_at_least("SEER_BUDGET_TOKENS", value("SEER_BUDGET_TOKENS"), int, 0),
        slack_channel=value("SEER_SLACK_CHANNEL"),
        slack_api_url=value("SEER_SLACK_API_URL"),
        dagster_url=value("SEER_DAGSTER_URL"),
        rules_file=_rules_file(value("SEER_RULES_FILE")),
        freshness_deadline=parse_deadline(value("SEER_FRESHNESS_DEADLINE")),
        asset_owners=_owners(value("SEER_ASSET_OWNERS")),
        asset_tags=_tags(value("SEER_ASSET_TAGS")),
        tiktoken_cache_dir=value("TIKTOKEN_CACHE_DIR") or value("DATA_GYM_CACHE_DIR"),
        dagster_home=value("DAGSTER_HOME"),
        secrets_set=frozenset(
            name for name, variable in VARIABLES.items() if variable.secret and value(name)
        ),
    )


def _register_secrets(env: Mapping[str, str]) -> None:
    """Hide the secret variables' values, and the warehouse URL's password, in every error
    text of this process (`redact_secrets`): an endpoint may echo a key in its error."""
    from seer_metrics.text.redaction import register_secret, register_url_secrets

    for name, variable in VARIABLES.items():
        if variable.secret:
            register_secret(_value(env, name))
    register_url_secrets(_value(env, "SEER_WAREHOUSE_URL"))


def _at_least(
    name: str, text: str | None, kind: type[int] | type[float], minimum: int
) -> int | float | None:
    """A finite number >= `minimum` (a budget, a sample size); None when unset."""
    number = _number(name, text, kind)
    if number is not None and not (math.isfinite(number) and number >= minimum):
        what = "a whole number" if kind is int else "a finite number"
        raise SettingsError(f"{name} must be {what} >= {minimum}, got {text!r}")
    return number


def _warehouse_url(configured: str | None) -> str | None:
    """A SQLAlchemy URL of a dialect SQLAlchemy has (or a SQLite file's path)."""
    if configured is None:
        return None
    from sqlalchemy.engine import make_url

    from seer_metrics.text.redaction import redact_secrets, redact_url
    from seer_pipelines.warehouse.engine import location_url

    url = location_url(configured)
    try:
        sa_url = make_url(url)
        sa_url.get_dialect()
    except Exception as error:
        problem = redact_secrets(f"{type(error).__name__}: {error}")
        raise SettingsError(
            f"SEER_WAREHOUSE_URL is not a usable SQLAlchemy URL: {redact_url(url)} ({problem})"
        ) from None
    return configured


def _identifier(name: str, configured: str | None) -> str | None:
    """A plain SQL identifier (no quote, dot or space can reach a statement)."""
    if configured is None:
        return None
    from seer_pipelines.warehouse.engine import WarehouseConfigError, validate_identifier

    try:
        return validate_identifier(configured, name)
    except WarehouseConfigError as error:
        raise SettingsError(str(error)) from None


def _check_http_url(name: str, configured: str | None) -> None:
    if configured is None:
        return
    from seer_metrics.text.redaction import redact_secrets

    parts = urlsplit(configured)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise SettingsError(
            f"{name} must be an http:// or https:// URL, got {redact_secrets(configured)!r}"
        )


def _owners(configured: str | None) -> tuple[str, ...]:
    """Emails or `team:name`, as Dagster takes asset owners."""
    owners = tuple(comma_separated(configured))
    if owners:
        from dagster import AssetSpec

        try:
            AssetSpec("seer_settings_check", owners=list(owners))
        except Exception as error:
            raise SettingsError(f"SEER_ASSET_OWNERS: {error}") from None
    return owners


def _start_date(configured: str | None) -> date:
    if not configured:
        return DEFAULT_START_DATE
    try:
        return date.fromisoformat(configured)
    except ValueError:
        raise SettingsError(
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
        raise SettingsError(f"SEER_SCHEDULE_HOUR_UTC must be an hour 0-23, got {configured!r}")
    return hour


def _bloat_line(configured: str | None) -> float:
    line = _number("SEER_BLOAT_LINE", configured, float)
    if line is None:
        return DEFAULT_BLOAT_LINE
    if not 0.0 < line <= 1.0:
        raise SettingsError(f"SEER_BLOAT_LINE must be in (0, 1], got {configured!r}")
    return float(line)


def _choice(name: str, configured: str | None, choices: tuple[str, ...]) -> str:
    chosen = (configured or choices[0]).lower()
    if chosen not in choices:
        raise SettingsError(f"{name} must be {' or '.join(choices)}, got {configured!r}")
    return chosen


def _rules_file(configured: str | None) -> Path | None:
    if configured is None:
        return None
    path = Path(configured).expanduser()
    if not path.is_file():
        raise SettingsError(f"SEER_RULES_FILE: no such file {str(path)!r}")
    return path


def parse_deadline(configured: str | None) -> time:
    """`HH:MM` (UTC) as a time; unset: 06:00 (`SEER_FRESHNESS_DEADLINE`)."""
    if configured is None:
        return DEFAULT_FRESHNESS_DEADLINE
    match = _DEADLINE.match(configured.strip())
    if not match:
        raise SettingsError(
            f"SEER_FRESHNESS_DEADLINE must be HH:MM (UTC), e.g. 06:00; got {configured!r}"
        )
    return time(int(match.group(1)), int(match.group(2)))


def _tags(configured: str | None) -> dict[str, str]:
    """`domain=search,tier=1,pii`: `key=value` items, or a bare `key` (an empty value)."""
    tags: dict[str, str] = {}
    for item in comma_separated(configured):
        key, _, tag_value = item.partition("=")
        if not key.strip():
            raise SettingsError(f"SEER_ASSET_TAGS: {item!r} has no key (key=value or key)")
        tags[key.strip()] = tag_value.strip()
    if tags:
        from dagster import AssetSpec

        try:
            AssetSpec("seer_settings_check", tags=tags)
        except Exception as error:
            raise SettingsError(f"SEER_ASSET_TAGS: {error}") from None
    return tags


def _check_llm_settings(env: Mapping[str, str]) -> None:
    """The LLM judge's `SEER_LLM_*` values, parsed as the judge will parse them, so a bad
    one fails the load rather than the first judged day."""
    from seer_metrics.evaluators.llm.settings import LLMSettings

    names = [name for name in VARIABLES if name.startswith("SEER_LLM_")]
    try:
        LLMSettings.from_env({name: env[name] for name in names if name in env})
    except ValueError as error:
        raise SettingsError(str(error).removeprefix("environment variable ")) from None
