"""The evaluator resource: which judge scores the events, and how much of a day it sees.

Every setting can come from Dagster config or, when left unset, from the environment
(`SEER_EVALUATOR`, `SEER_EVALUATOR_MODEL`, `SEER_LLM_MODE`, `SEER_SAMPLE_SIZE`, ...).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from dagster import ConfigurableResource
from pydantic import Field

from seer_metrics.evaluators.base import Evaluator
from seer_metrics.judgment_store import JudgmentStore
from seer_metrics.spend.sampling import DEFAULT_MINIMUM_PER_STRATUM, SamplingSettings
from seer_pipelines.settings import environment, setting


class EvaluatorResource(ConfigurableResource):
    """Builds the evaluator (offline lexical heuristic or an OpenAI-compatible judge)."""

    kind: str | None = Field(
        default=None, description="lexical or openai; default $SEER_EVALUATOR, else lexical."
    )
    model: str | None = Field(
        default=None, description="Judge model; default $SEER_EVALUATOR_MODEL."
    )
    api_key: str | None = Field(
        default=None,
        description="API key for the openai evaluator; pass EnvVar('OPENAI_API_KEY'). "
        "Never logged.",
    )
    base_url: str | None = Field(
        default=None,
        description="OpenAI-compatible endpoint (Azure, vLLM, Ollama); default $OPENAI_BASE_URL.",
    )
    max_concurrency: int | None = Field(
        default=None, description="Concurrent requests to the judge."
    )
    requests_per_minute: int | None = Field(
        default=None, description="Client-side request budget per minute."
    )
    tokens_per_minute: int | None = Field(
        default=None, description="Client-side token budget per minute."
    )
    timeout_seconds: float | None = Field(default=None, description="Per-request timeout.")
    max_retries: int | None = Field(
        default=None, description="Retries on transport errors and 429s."
    )
    mode: str | None = Field(
        default=None,
        description="online (each call as the day is judged) or batch (the Batch API: half "
        "the price, the day completes when its batches are done); default $SEER_LLM_MODE, "
        "else online. The lexical evaluator makes no call and always runs online.",
    )
    # Any: Dagster config has no union of text and mapping; `resolved_prices` validates.
    prices: Any = Field(
        default=None,
        description="Judge prices in USD per 1M tokens, model -> [input, output], as JSON "
        "text ('{\"my-deployment\": [0.15, 0.6]}') or a mapping; extends the built-in list. "
        "Default $SEER_LLM_PRICES.",
    )

    sample_size: int | None = Field(
        default=None,
        description="Events to judge per day, a sample stratified by slice; unset: every "
        "event. Default $SEER_SAMPLE_SIZE.",
    )
    sample_minimum_per_slice: int | None = Field(
        default=None,
        description="Judged events at least per slice combination (or all of its events); "
        "default $SEER_SAMPLE_MIN_PER_SLICE, else 30.",
    )
    sample_slice_keys: list[str] | None = Field(
        default=None,
        description="Metadata keys whose value combinations stratify the sample; default "
        "the slice keys ($SEER_SLICE_KEYS, else env,feature_flag).",
    )
    budget_usd: float | None = Field(
        default=None,
        description="Cap on one partition's judging cost in USD; unset: no cap. Default "
        "$SEER_BUDGET_USD.",
    )
    budget_tokens: int | None = Field(
        default=None,
        description="Cap on one partition's judging tokens; unset: no cap. Default "
        "$SEER_BUDGET_TOKENS.",
    )

    def sampling_settings(self) -> SamplingSettings:
        """How many events of a day the judge sees (raises `SamplingConfigError`)."""
        minimum = self.sample_minimum_per_slice
        return SamplingSettings(
            target=self.sample_size,
            minimum_per_stratum=DEFAULT_MINIMUM_PER_STRATUM if minimum is None else minimum,
        )

    def resolved_kind(self) -> str:
        kind = (self.kind or setting("SEER_EVALUATOR") or "lexical").strip().lower()
        if kind not in ("lexical", "openai"):
            raise ValueError(f"SEER_EVALUATOR / kind must be 'lexical' or 'openai', got {kind!r}")
        return kind

    def resolved_mode(self) -> str:
        """`online` or `batch`; always `online` for the lexical evaluator."""
        mode = (self.mode or setting("SEER_LLM_MODE") or "online").strip().lower()
        if mode not in ("online", "batch"):
            raise ValueError(f"SEER_LLM_MODE / mode must be 'online' or 'batch', got {mode!r}")
        return mode if self.resolved_kind() == "openai" else "online"

    def resolved_model(self) -> str | None:
        return self.model or setting("SEER_EVALUATOR_MODEL")

    def resolved_prices(self) -> dict[str, tuple[float, float]] | None:
        """The configured price table on top of the built-in one; None when unset, so
        the judge falls back to $SEER_LLM_PRICES."""
        from seer_metrics.evaluators.llm import DEFAULT_PRICES, parse_prices

        if self.prices is None:
            return None
        if isinstance(self.prices, str):
            text = self.prices
        elif isinstance(self.prices, Mapping):
            text = json.dumps(
                {
                    str(model): list(price) if isinstance(price, list | tuple) else price
                    for model, price in self.prices.items()
                }
            )
        else:
            raise ValueError(
                "evaluator setting prices must be JSON text or a mapping of model -> "
                f"[input, output] USD per 1M tokens, got {type(self.prices).__name__}"
            )
        return {**DEFAULT_PRICES, **parse_prices(text, "evaluator setting prices")}

    def build(self, store: JudgmentStore | None = None) -> Evaluator:
        """A fresh evaluator; settings left unset fall back to the evaluator's defaults.

        `store` lets the LLM judge re-use cached requirement lists (phase 1) across runs.
        """
        from seer_metrics.evaluators import build_evaluator

        kind = self.resolved_kind()
        prices = self.resolved_prices()  # refused early even for the offline judge
        if kind == "lexical":
            return build_evaluator(kind, model=self.resolved_model(), store=store)
        options: dict[str, Any] = {
            "api_key": self.api_key,
            "base_url": self.base_url or setting("OPENAI_BASE_URL"),
            "max_concurrency": self.max_concurrency,
            "requests_per_minute": self.requests_per_minute,
            "tokens_per_minute": self.tokens_per_minute,
            "timeout_seconds": self.timeout_seconds,
            "max_retries": self.max_retries,
            "prices": prices,
        }
        return build_evaluator(
            kind,
            model=self.resolved_model(),
            store=store,
            environ=environment(),
            **{key: value for key, value in options.items() if value is not None},
        )
