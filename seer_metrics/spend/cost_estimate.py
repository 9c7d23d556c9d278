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
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from seer_metrics.evaluators.llm.prompts import (
    REQUIREMENTS_SCHEMA,
    REQUIREMENTS_SCHEMA_NAME,
    SUPPORT_SCHEMA,
    SUPPORT_SCHEMA_NAME,
    requirements_messages,
    response_format,
    support_messages,
)
from seer_metrics.evaluators.llm.settings import is_price
from seer_metrics.events import RetrievalEvent
from seer_metrics.judgment_store import normalise_text

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


def _tiktoken_counter(model: str, cache_dir: str | None = None) -> TokenCounter | None:
    """tiktoken's count for `model`, only when its encoding is already cached on disk.

    `cache_dir` is tiktoken's cache (its `TIKTOKEN_CACHE_DIR`, passed by the caller);
    None means tiktoken's default under the temporary directory.
    """
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


def token_counter(model: str, cache_dir: str | None = None) -> tuple[TokenCounter, str]:
    """The counter for `model` and its name (`tiktoken` or `estimate`)."""
    counter = _tiktoken_counter(model, cache_dir)
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
    """USD at `price`; None (unknown, never NaN) without a usable price."""
    if not is_price(price):
        return None
    return (prompt_tokens * price[0] + completion_tokens * price[1]) / 1_000_000


class PromptSizer:
    """Prompt tokens of the judge's two calls for one event, from its real prompts."""

    def __init__(self, model: str, count: TokenCounter | None = None, method: str | None = None):
        if count is None:
            count, method = token_counter(model)
        self.count = count
        self.method = method or "custom"
        self._requirements_format = response_format(REQUIREMENTS_SCHEMA_NAME, REQUIREMENTS_SCHEMA)
        self._support_format = response_format(SUPPORT_SCHEMA_NAME, SUPPORT_SCHEMA)

    def requirements_tokens(self, event: RetrievalEvent) -> int:
        """Phase 1, once per distinct query."""
        return _prompt_tokens(
            requirements_messages(event.task), self._requirements_format, self.count
        )

    def support_tokens(self, event: RetrievalEvent) -> int:
        """Phase 2, once per event (its requirement list sized from the query)."""
        sized_requirements = [("r1", event.task + " " * REQUIREMENT_LIST_OVERHEAD_CHARACTERS)]
        passages = [(item.id, item.text) for item in event.context]
        return _prompt_tokens(
            support_messages(event.task, sized_requirements, passages),
            self._support_format,
            self.count,
        )


def query_digest(task: str) -> int:
    """A 64-bit digest of the normalised query: distinct queries are counted from these."""
    digest = hashlib.blake2b(normalise_text(task).encode("utf-8", "surrogatepass"), digest_size=8)
    return int.from_bytes(digest.digest(), "big")


class CostEstimator:
    """`estimate_cost` over events added chunk by chunk, for all of them or a subset.

    Per event only its query digest and the prompt tokens of its two calls are kept (16
    bytes), so a day read in chunks is estimated in bounded memory, and the estimate of
    its sample (`selected`) comes from the same pass.
    """

    def __init__(
        self,
        model: str,
        price: tuple[float, float] | None,
        count: TokenCounter | None = None,
        method: str | None = None,
    ) -> None:
        self.model = model
        self.price = price
        self.sizer = PromptSizer(model, count, method)
        self._digests: list[np.ndarray] = []
        self._requirements: list[np.ndarray] = []
        self._support: list[np.ndarray] = []

    def add(self, events: Sequence[RetrievalEvent]) -> None:
        self._digests.append(
            np.fromiter((query_digest(e.task) for e in events), np.uint64, len(events))
        )
        self._requirements.append(
            np.fromiter((self.sizer.requirements_tokens(e) for e in events), np.int64, len(events))
        )
        self._support.append(
            np.fromiter((self.sizer.support_tokens(e) for e in events), np.int64, len(events))
        )

    def estimate(self, selected: np.ndarray | None = None) -> CostEstimate:
        """The estimate for every event added, or for those where `selected` is true."""
        digests = np.concatenate(self._digests) if self._digests else np.empty(0, np.uint64)
        requirements = np.concatenate(self._requirements) if self._digests else np.empty(0)
        support = np.concatenate(self._support) if self._digests else np.empty(0)
        if selected is not None:
            keep = np.asarray(selected, dtype=bool)
            digests, requirements, support = digests[keep], requirements[keep], support[keep]
        _, first = np.unique(digests, return_index=True)
        events, queries = len(digests), len(first)
        prompt_tokens = int(requirements[first].sum() + support.sum())
        completion_tokens = (
            queries * REQUIREMENTS_COMPLETION_TOKENS + events * SUPPORT_COMPLETION_TOKENS
        )
        online_cost = _cost(prompt_tokens, completion_tokens, self.price)
        calls = queries + events
        return CostEstimate(
            events=events,
            distinct_queries=queries,
            model=self.model,
            token_count_method=self.sizer.method,
            online=Spend(calls, prompt_tokens, completion_tokens, online_cost),
            batch=Spend(
                calls,
                prompt_tokens,
                completion_tokens,
                None if online_cost is None else online_cost * BATCH_PRICE_FACTOR,
            ),
        )


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
    estimator = CostEstimator(model, price, count, method)
    estimator.add(events)
    return estimator.estimate()
