"""The evaluator contract shared by the offline heuristic and the LLM judge."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from seer_metrics.events import RetrievalEvent
from seer_metrics.judgment import Judgment


@dataclass(frozen=True)
class TokenUsage:
    """Tokens and cost of calls. `note` says why the figures are an estimate rather than
    what the endpoint reported (its usage was not a usable count); None when they are."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    note: str | None = None

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.cost_usd + other.cost_usd,
            self.note or other.note,
        )

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class EvaluationOutcome:
    """What an evaluator says about one event.

    `status` is "ok" with a judgment, or "error" with a reason code such as
    `invalid_json`, `schema_mismatch`, `timeout`, `rate_limited`, `refused`, `truncated`.
    `model_calls` counts requests that reached the endpoint; `unsent_requests` counts
    attempts whose connection failed before the request was sent (nothing to pay).
    """

    event_id: str
    status: Literal["ok", "error"]
    judgment: Judgment | None = None
    reason: str | None = None
    usage: TokenUsage = TokenUsage()
    model_calls: int = 0
    cache_hit: bool = False
    unsent_requests: int = 0


# USD per one million (input, output) tokens of an evaluator's model.
Price = tuple[float, float]


# Told about each outcome as it completes: (index of the event in the batch, outcome).
OutcomeCallback = Callable[[int, EvaluationOutcome], None]


@runtime_checkable
class Evaluator(Protocol):
    """Judges a batch of events; never raises for a single event's failure.

    An evaluator whose `evaluate` also takes `on_outcome: OutcomeCallback` calls it as
    each event completes, so `CachingEvaluator` can commit judgments before the batch ends.

    `price` is what its model costs per one million (input, output) tokens, None when it
    has no listed price (an offline judge, or a model missing from the price list): budgets
    and estimates read it there, whatever wraps the evaluator.
    """

    name: str
    model: str
    prompt_version: str
    price: Price | None

    async def evaluate(self, events: Sequence[RetrievalEvent]) -> list[EvaluationOutcome]:
        """One outcome per event, in the input order."""
        ...
