"""What judging a day with the LLM will cost, before anything is spent.

The figures come from the real prompts: phase 1 once per distinct normalised query, phase 2
once per event, each prompt rendered exactly as the judge would send it (the requirement
list of phase 2 is not known before phase 1, so it is sized from the query). Tokens are
counted with tiktoken when it is installed and already has the model's encoding on disk
(it would otherwise download it), else estimated at four characters a token; the result
says which. Completion sizes are the means measured on real judge replies; the price table
is the judge's own (`SEER_LLM_PRICES` extends it). The Batch API costs half the on-demand
price.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from seer_metrics.cache import normalise_text
from seer_metrics.evaluators.prompts import (
    REQUIREMENTS_SCHEMA,
    REQUIREMENTS_SCHEMA_NAME,
    SUPPORT_SCHEMA,
    SUPPORT_SCHEMA_NAME,
    requirements_messages,
    response_format,
    support_messages,
)
from seer_metrics.events import RetrievalEvent

# Means of real replies (gpt-4o-mini on multi-hop QA): about 100 completion tokens an
# event over its two calls.
REQUIREMENTS_COMPLETION_TOKENS = 45
SUPPORT_COMPLETION_TOKENS = 60
# A requirement list is about as long as the query that asks for it, plus its JSON.
REQUIREMENT_LIST_OVERHEAD_CHARACTERS = 40
MESSAGE_OVERHEAD_TOKENS = 4  # role and separators of each chat message
BATCH_PRICE_FACTOR = 0.5
CHARACTERS_PER_TOKEN = 4

TokenCounter = Callable[[str], int]


def _tiktoken_counter(model: str) -> TokenCounter | None:
    """tiktoken's count for `model`, only when its encoding is already cached on disk."""
    try:
        import tiktoken
    except ImportError:
        return None
    try:
        encoding_name = tiktoken.encoding_name_for_model(model)
    except KeyError:
        return None
    from tiktoken_ext import openai_public

    constructor = getattr(openai_public, encoding_name, None)
    if constructor is None:
        return None
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
    cache = Path(cache_dir or Path(tempfile.gettempdir()) / "data-gym-cache")
    url = {
        "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
    }.get(encoding_name)
    if url is None or not (cache / hashlib.sha1(url.encode()).hexdigest()).exists():
        return None
    encoding = tiktoken.get_encoding(encoding_name)
    return lambda text: len(encoding.encode(text, disallowed_special=()))


def _characters_counter(text: str) -> int:
    return math.ceil(len(text) / CHARACTERS_PER_TOKEN)


def token_counter(model: str) -> tuple[TokenCounter, str]:
    """The counter for `model` and its name (`tiktoken` or `estimate`)."""
    counter = _tiktoken_counter(model)
    return (counter, "tiktoken") if counter else (_characters_counter, "estimate")


def _prompt_tokens(
    messages: Sequence[Mapping[str, str]], schema: Mapping[str, Any], count: TokenCounter
) -> int:
    text_tokens = sum(count(message.get("content") or "") for message in messages)
    return text_tokens + MESSAGE_OVERHEAD_TOKENS * len(messages) + count(json.dumps(schema))


@dataclass(frozen=True)
class Spend:
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class CostEstimate:
    """Expected calls, tokens and cost of judging some events: on demand and in batch."""

    events: int
    distinct_queries: int
    model: str
    token_count_method: str
    online: Spend
    batch: Spend

    def as_dict(self) -> dict[str, Any]:
        return {
            "events": self.events,
            "distinct_queries": self.distinct_queries,
            "model": self.model,
            "token_count_method": self.token_count_method,
            "calls": {"online": self.online.calls, "batch": self.batch.calls},
            "prompt_tokens": {
                "online": self.online.prompt_tokens,
                "batch": self.batch.prompt_tokens,
            },
            "completion_tokens": {
                "online": self.online.completion_tokens,
                "batch": self.batch.completion_tokens,
            },
            "cost_usd": {"online": self.online.cost_usd, "batch": self.batch.cost_usd},
        }


def _cost(
    prompt_tokens: int, completion_tokens: int, price: tuple[float, float] | None
) -> float | None:
    if price is None:
        return None
    return (prompt_tokens * price[0] + completion_tokens * price[1]) / 1_000_000


def estimate_cost(
    events: Sequence[RetrievalEvent],
    model: str,
    price: tuple[float, float] | None,
    count: TokenCounter | None = None,
    method: str | None = None,
) -> CostEstimate:
    """The judge's expected spend on `events` (each one judged; cached calls are not known
    here and would only lower it). `price` is USD per 1M input and output tokens, or None
    for a model without a listed price (the cost is then unknown, never zero)."""
    if count is None:
        count, method = token_counter(model)
    requirements_format = response_format(REQUIREMENTS_SCHEMA_NAME, REQUIREMENTS_SCHEMA)
    support_format = response_format(SUPPORT_SCHEMA_NAME, SUPPORT_SCHEMA)
    queries: dict[str, str] = {}
    prompt_tokens = 0
    for event in events:
        normalised = normalise_text(event.task)
        if normalised not in queries:
            queries[normalised] = event.task
            prompt_tokens += _prompt_tokens(
                requirements_messages(event.task), requirements_format, count
            )
        sized_requirements = [("r1", event.task + " " * REQUIREMENT_LIST_OVERHEAD_CHARACTERS)]
        passages = [(item.id, item.text) for item in event.context]
        prompt_tokens += _prompt_tokens(
            support_messages(event.task, sized_requirements, passages), support_format, count
        )
    calls = len(queries) + len(events)
    completion_tokens = (
        len(queries) * REQUIREMENTS_COMPLETION_TOKENS + len(events) * SUPPORT_COMPLETION_TOKENS
    )
    online_cost = _cost(prompt_tokens, completion_tokens, price)
    return CostEstimate(
        events=len(events),
        distinct_queries=len(queries),
        model=model,
        token_count_method=method or "custom",
        online=Spend(calls, prompt_tokens, completion_tokens, online_cost),
        batch=Spend(
            calls,
            prompt_tokens,
            completion_tokens,
            None if online_cost is None else online_cost * BATCH_PRICE_FACTOR,
        ),
    )
