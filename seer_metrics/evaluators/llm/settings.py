"""What the LLM judge can be told, and what its models cost.

`LLMSettings` holds every setting of the on-demand judge (and of batch mode, which sends
the same requests); `LLMSettings.from_env` reads them from a caller's environment mapping
(the library never reads the process environment). `DEFAULT_PRICES` is the price list a
call's usage is priced with, extended through `SEER_LLM_PRICES`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from seer_metrics.evaluators.base import TokenUsage
from seer_metrics.text.redaction import register_secret

DEFAULT_MODEL = "gpt-4o-mini"
DEFAULT_BASE_URL = "https://api.openai.com/v1"  # the SDK's, when neither setting nor env

# USD per one million (input, output) tokens, from the providers' public price lists.
# Override or extend through `LLMSettings(prices=...)` or SEER_LLM_PRICES (JSON, e.g.
# '{"my-deployment": [0.15, 0.6]}'); a model missing here costs 0.0
# (with a warning), e.g. a local vLLM or Ollama model.
DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
}


def is_price(price: object) -> bool:
    """Whether `price` is (input_per_1M, output_per_1M): two finite numbers >= 0.

    NaN or infinity would make every cost NaN or infinite, and a budget compares nothing
    against NaN: a non-finite price would switch the budget off, so it is refused.
    """
    return (
        isinstance(price, list | tuple)
        and len(price) == 2
        and all(
            isinstance(part, int | float)
            and not isinstance(part, bool)
            and math.isfinite(part)
            and part >= 0
            for part in price
        )
    )


def parse_prices(text: str, where: str) -> dict[str, tuple[float, float]]:
    """`{"model": [input_per_1M, output_per_1M], ...}` as JSON, e.g. from SEER_LLM_PRICES;
    every price two finite numbers >= 0 (JSON's NaN and Infinity are refused)."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{where} is not valid JSON ({error.msg})") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{where} must be a JSON object of model -> [input, output] prices")
    prices: dict[str, tuple[float, float]] = {}
    for model, price in raw.items():
        if not isinstance(price, list) or not is_price(price):
            raise ValueError(
                f"{where}: price of {model!r} must be [input_per_1M, output_per_1M] in USD, "
                f"two finite numbers >= 0, got {json.dumps(price)}"
            )
        prices[model] = (float(price[0]), float(price[1]))
    return prices


class LLMSettingError(ValueError):
    """An LLM setting that cannot be used: `setting` is its name, `requirement` what it
    must be (so `from_env` can name the environment variable it came from instead)."""

    def __init__(self, setting: str, requirement: str, value: Any) -> None:
        super().__init__(f"LLM setting {setting!r} {requirement}, got {value!r}")
        self.setting = setting
        self.requirement = requirement


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


# The environment variable of each setting `from_env` reads (and its type).
ENVIRONMENT_VARIABLES: dict[str, tuple[str, type[int] | type[float]]] = {
    "SEER_LLM_TIMEOUT_SECONDS": ("timeout_seconds", float),
    "SEER_LLM_MAX_CONCURRENCY": ("max_concurrency", int),
    "SEER_LLM_REQUESTS_PER_MINUTE": ("requests_per_minute", float),
    "SEER_LLM_TOKENS_PER_MINUTE": ("tokens_per_minute", float),
    "SEER_LLM_MAX_RETRIES": ("max_retries", int),
    "SEER_LLM_MAX_TOKENS": ("max_completion_tokens", int),
    "SEER_LLM_MAX_REQUIREMENTS": ("max_requirements", int),
}


@dataclass(frozen=True)
class LLMSettings:
    """Everything the LLM judge can be told. `api_key`/`base_url` default as the SDK does.

    `requests_per_minute` / `tokens_per_minute` are the endpoint's limits (None: no client
    pacing); the client paces itself `rate_limit_headroom` below them. `max_retries` is
    the number of retries after a transport error, 429 or 5xx (each call, not each event).
    `timeout_seconds` bounds a whole call; `max_completion_tokens` caps a reply (a slow
    endpoint needs the cap to fit the timeout). A phase-1 answer with more than
    `max_requirements` requirements (or none) is no judgment.
    """

    model: str = DEFAULT_MODEL
    temperature: float = 0.0
    timeout_seconds: float = 60.0
    max_concurrency: int = 16
    requests_per_minute: float | None = 500.0
    tokens_per_minute: float | None = 200_000.0
    max_retries: int = 4
    max_completion_tokens: int = 1500
    max_completion_tokens_ceiling: int = 6000
    max_requirements: int = 20
    backoff_initial_seconds: float = 1.0
    backoff_max_seconds: float = 60.0
    rate_limit_headroom: float = 0.02
    prices: Mapping[str, tuple[float, float]] = field(default_factory=lambda: dict(DEFAULT_PRICES))
    api_key: str | None = field(default=None, repr=False)
    base_url: str | None = None

    def __post_init__(self) -> None:
        if not self.model or not self.model.strip():
            raise LLMSettingError("model", "must be a non-empty model name", self.model)
        positive = {
            "timeout_seconds": self.timeout_seconds,
            "max_concurrency": self.max_concurrency,
            "max_completion_tokens": self.max_completion_tokens,
            "max_completion_tokens_ceiling": self.max_completion_tokens_ceiling,
            "max_requirements": self.max_requirements,
            "requests_per_minute": self.requests_per_minute,
            "tokens_per_minute": self.tokens_per_minute,
        }
        for name, value in positive.items():
            if value is not None and not (_is_number(value) and value > 0):
                raise LLMSettingError(name, "must be a finite number > 0", value)
        non_negative = {
            "temperature": self.temperature,
            "max_retries": self.max_retries,
            "backoff_initial_seconds": self.backoff_initial_seconds,
            "backoff_max_seconds": self.backoff_max_seconds,
        }
        for name, value in non_negative.items():
            if not (_is_number(value) and value >= 0):
                raise LLMSettingError(name, "must be a finite number >= 0", value)
        headroom = self.rate_limit_headroom
        if not (_is_number(headroom) and 0 <= headroom < 1):
            raise LLMSettingError("rate_limit_headroom", "must be in [0, 1)", headroom)
        register_secret(self.api_key)  # hidden in every error text from now on
        for model, price in self.prices.items():
            if not is_price(price):
                raise ValueError(
                    f"LLM price of {model!r} (LLMSettings prices, SEER_LLM_PRICES) must be "
                    f"(input_per_1M, output_per_1M), two finite numbers >= 0, got {price!r}"
                )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> LLMSettings:
        """Settings from `environ` (the caller's environment mapping: `SEER_EVALUATOR_MODEL`,
        `SEER_LLM_*`, `OPENAI_API_KEY`, `OPENAI_BASE_URL`), then overrides.

        The library never reads the process environment itself; None means an empty one.
        """
        environ = {} if environ is None else environ
        values: dict[str, Any] = {}
        for variable, name in (("OPENAI_API_KEY", "api_key"), ("OPENAI_BASE_URL", "base_url")):
            if environ.get(variable, "").strip():
                values[name] = environ[variable].strip()
        if environ.get("SEER_EVALUATOR_MODEL"):
            values["model"] = environ["SEER_EVALUATOR_MODEL"]
        unlimited = {"SEER_LLM_REQUESTS_PER_MINUTE", "SEER_LLM_TOKENS_PER_MINUTE"}
        from_variable: dict[str, tuple[str, str]] = {}  # setting -> (variable, raw value)
        if "model" in values:
            from_variable["model"] = ("SEER_EVALUATOR_MODEL", environ["SEER_EVALUATOR_MODEL"])
        for variable, (name, kind) in ENVIRONMENT_VARIABLES.items():
            raw = environ.get(variable)
            if raw is None or not raw.strip():
                continue
            if variable in unlimited and raw.strip().lower() in ("none", "0", "unlimited"):
                values[name] = None  # no client-side pacing (e.g. a local server)
                continue
            from_variable[name] = (variable, raw)
            try:
                values[name] = kind(raw)
            except ValueError:
                raise ValueError(
                    f"environment variable {variable} must be a {kind.__name__}, got {raw!r}"
                ) from None
        if environ.get("SEER_LLM_PRICES", "").strip():
            values["prices"] = {
                **DEFAULT_PRICES,
                **parse_prices(environ["SEER_LLM_PRICES"], "SEER_LLM_PRICES"),
            }
        known = {f.name for f in fields(cls)}
        unknown = set(overrides) - known
        if unknown:
            raise ValueError(f"unknown LLM settings: {', '.join(sorted(unknown))}")
        # `model=None` (and a None key or endpoint) means "not given" (the factory passes it
        # through); any other None is meant, e.g. `requests_per_minute=None` for no pacing.
        not_given = {"model", "api_key", "base_url"}
        given = {k: v for k, v in overrides.items() if not (k in not_given and v is None)}
        values.update(given)
        try:
            return cls(**values)
        except LLMSettingError as error:
            if error.setting not in from_variable or error.setting in given:
                raise
            variable, raw = from_variable[error.setting]
            raise ValueError(
                f"environment variable {variable} {error.requirement}, got {raw!r}"
            ) from None

    def price_for(self, model: str) -> tuple[float, float] | None:
        """Exact model name, else the longest listed prefix (dated snapshots)."""
        if model in self.prices:
            return self.prices[model]
        prefixes = [name for name in self.prices if model.startswith(name)]
        return self.prices[max(prefixes, key=len)] if prefixes else None

    def usage(self, prompt_tokens: int, completion_tokens: int) -> TokenUsage:
        price = self.price_for(self.model)
        cost = 0.0
        if price is not None:
            cost = (prompt_tokens * price[0] + completion_tokens * price[1]) / 1_000_000
        return TokenUsage(prompt_tokens, completion_tokens, cost)
