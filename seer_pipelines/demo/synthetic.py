"""Synthetic retrieval events for pipeline tests and the partition-scale benchmark.

`seer demo` and `seer seed` use the realistic stream (`realistic.py`); these events stay
for what it cannot give: any volume of distinct queries and contexts (a large day that
is really judged, not served from the cache), every context shape (`string[]`, ranks,
scores, neither) and invalid rows, with one injected regression.

A small product knowledge base (fictional products, one passage per fact) backs a RAG
assistant used in three environments. Each event asks one to three facts about one
product; its context holds the passages stating those facts plus distractors (other
facts of the same product, or release notes), ranked by a retriever. The offline
lexical evaluator judges these sensibly: supporting passages contain the asked terms,
distractors do not.

The regression: on the last `regression_days` days, `feature_flag=retrieval-v2` in
`env=prod` (a new reranker build) drops one supporting passage from every context and
puts a distractor in its place, so recall and f1 fall in `env=prod` and
`feature_flag=retrieval-v2`, and nowhere else. Everything is deterministic for a seed.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

ENVS = ("prod", "staging", "dev")
ENV_SHARE = (0.68, 0.2, 0.12)
FEATURE_FLAGS = ("retrieval-v1", "retrieval-v2")
TENANTS = ("acme", "globex", "initech", "umbrella", "hooli")
TENANT_SHARE = (0.34, 0.24, 0.18, 0.14, 0.10)
PRODUCT_AREAS = ("billing", "security", "platform", "support")

PRODUCTS = (
    "Orbit Pro",
    "Nimbus Vault",
    "Quill Analytics",
    "Harbor Pay",
    "Lumen Search",
    "Atlas CRM",
    "Beacon Mail",
    "Cobalt Edge",
    "Fjord Storage",
    "Granite DB",
)

CITIES = ("Lisbon", "Toronto", "Austin", "Dublin", "Singapore", "Oslo", "Denver", "Melbourne")
REGION_PAIRS = (
    ("Frankfurt", "Dublin"),
    ("Virginia", "Oregon"),
    ("Tokyo", "Sydney"),
    ("Paris", "Stockholm"),
    ("Montreal", "Ohio"),
)


@dataclass(frozen=True)
class FactType:
    """One kind of fact: how a user asks for it, and how the knowledge base states it."""

    name: str
    area: str
    question: str
    passage: str


FACT_TYPES = (
    FactType(
        "refund",
        "billing",
        "what is the {product} refund window",
        "The refund window for {product} is {days} days after the purchase date.",
    ),
    FactType(
        "pricing",
        "billing",
        "how much does the {product} team plan cost",
        "The {product} team plan costs {price} dollars per seat each month.",
    ),
    FactType(
        "invoice",
        "billing",
        "which currencies can {product} invoices use",
        "{product} invoices can use {currencies} as the billing currency.",
    ),
    FactType(
        "sso",
        "security",
        "which single sign-on protocol does {product} support",
        "{product} supports the {protocol} single sign-on protocol for every workspace.",
    ),
    FactType(
        "audit",
        "security",
        "how long does {product} retain audit logs",
        "{product} retains audit logs for {retention} days before deleting them.",
    ),
    FactType(
        "encryption",
        "security",
        "what encryption protects {product} backups",
        "Backups of {product} are protected with {cipher} encryption at rest.",
    ),
    FactType(
        "rate_limit",
        "platform",
        "what is the {product} API rate limit",
        "The {product} API rate limit is {limit} requests per minute per token.",
    ),
    FactType(
        "regions",
        "platform",
        "which regions host {product} customer data",
        "{product} customer data is hosted in the {region_a} and {region_b} regions.",
    ),
    FactType(
        "headquarters",
        "support",
        "where is the {product} support team headquartered",
        "The {product} support team is headquartered in {city}.",
    ),
    FactType(
        "uptime",
        "support",
        "what uptime does the {product} SLA guarantee",
        "The {product} SLA guarantees {uptime} percent monthly uptime.",
    ),
)

RELEASE_NOTES = (
    "Release notes: the dashboard now loads twice as fast on large workspaces.",
    "Release notes: dark mode arrives in the desktop client this quarter.",
    "Changelog: webhook retries now use exponential backoff with jitter.",
    "Changelog: the mobile app supports offline drafts for comments.",
    "Blog: five tips for organising shared folders across many teams.",
    "Status page: scheduled maintenance of the notification service on Sunday.",
)


def _slug(text: str) -> str:
    return text.lower().replace(" ", "-")


def _fact_values(product: str, fact: FactType) -> dict[str, str]:
    """The knowledge base is fixed: a fact's value depends only on (product, fact)."""
    digest = int(hashlib.sha256(f"{product}|{fact.name}".encode()).hexdigest(), 16)
    regions = REGION_PAIRS[digest % len(REGION_PAIRS)]
    return {
        "product": product,
        "days": str((14, 30, 45, 60)[digest % 4]),
        "price": str(8 + digest % 40),
        "currencies": ("euros or dollars", "pounds or euros", "yen or dollars")[digest % 3],
        "protocol": ("SAML", "OpenID Connect", "SAML and OpenID Connect")[digest % 3],
        "retention": str((90, 180, 365, 730)[digest % 4]),
        "cipher": ("AES-256", "ChaCha20", "AES-128")[digest % 3],
        "limit": str((300, 600, 1200, 3000)[digest % 4]),
        "region_a": regions[0],
        "region_b": regions[1],
        "city": CITIES[digest % len(CITIES)],
        "uptime": ("99.9", "99.95", "99.99")[digest % 3],
    }


def fact_passage(product: str, fact: FactType) -> dict[str, str]:
    """The knowledge-base passage stating `fact` about `product`, with its document id."""
    return {
        "id": f"kb-{_slug(product)}-{fact.name}",
        "text": fact.passage.format(**_fact_values(product, fact)),
    }


def question(product: str, facts: Sequence[FactType]) -> str:
    clauses = [fact.question.format(product=product) for fact in facts]
    text = " and ".join(clauses)
    return text[0].upper() + text[1:] + "?"


@dataclass(frozen=True)
class Regression:
    """Where and when the injected regression happens."""

    env: str = "prod"
    feature_flag: str = "retrieval-v2"
    days: int = 2

    def applies(self, metadata: dict[str, str], day_index: int, total_days: int) -> bool:
        return (
            self.days > 0
            and day_index >= total_days - self.days
            and metadata.get("env") == self.env
            and metadata.get("feature_flag") == self.feature_flag
        )


def default_end_day() -> date:
    """Yesterday (UTC): the last complete day, the one the daily schedule processes."""
    return datetime.now(tz=UTC).date() - timedelta(days=1)


def _weighted(rng: random.Random, values: Sequence[str], weights: Sequence[float]) -> str:
    return rng.choices(values, weights=weights, k=1)[0]


def _v2_share(env: str, day_index: int, total_days: int) -> float:
    """retrieval-v2 rolls out in prod over the period; staging and dev run mostly v2."""
    if env == "prod":
        progress = day_index / max(total_days - 1, 1)
        return 0.35 + 0.4 * progress
    return 0.5 if env == "staging" else 1.0


def _context(
    rng: random.Random,
    product: str,
    asked: Sequence[FactType],
    *,
    drop_support: bool,
    miss_support: bool,
) -> list[Any]:
    supporting = [fact_passage(product, fact) for fact in asked]
    others = [fact for fact in FACT_TYPES if fact not in asked]
    # Mostly one or two distractors: precision around 0.5-0.75, now and then a bloated list.
    distractor_count = rng.choices((1, 2, 3), weights=(0.6, 0.33, 0.07), k=1)[0]
    distractors = [fact_passage(product, fact) for fact in rng.sample(others, distractor_count)]
    if rng.random() < 0.25:
        note = rng.randrange(len(RELEASE_NOTES))
        distractors[-1] = {"id": f"notes-{note}", "text": RELEASE_NOTES[note]}
    if drop_support or miss_support:
        # The retriever loses one supporting passage and fills the slot with a distractor.
        lost = rng.randrange(len(supporting))
        del supporting[lost]
        spare = [f for f in others if fact_passage(product, f)["id"] not in _ids(distractors)]
        distractors.append(fact_passage(product, rng.choice(spare)))
    ranked = supporting + distractors
    # A real retriever sometimes ranks a distractor above a supporting passage.
    if len(ranked) > 2 and rng.random() < 0.2:
        i = rng.randrange(len(supporting)) if supporting else 0
        j = rng.randrange(len(supporting), len(ranked)) if len(supporting) < len(ranked) else 0
        ranked[i], ranked[j] = ranked[j], ranked[i]
    shape = rng.random()
    if shape < 0.1:
        return [passage["text"] for passage in ranked]  # string[] contexts: no ranking
    score = 0.97 - rng.random() * 0.05
    items: list[dict[str, Any]] = []
    for rank, passage in enumerate(ranked, start=1):
        item: dict[str, Any] = {"id": passage["id"], "text": passage["text"]}
        if shape < 0.8:
            item["rank"] = rank
        if shape < 0.9:
            item["score"] = round(score, 4)
        score -= 0.03 + rng.random() * 0.08
        items.append(item)
    if shape >= 0.95:
        rng.shuffle(items)  # lists without rank or score come in no particular order
    return items


def _ids(passages: Sequence[dict[str, str]]) -> set[str]:
    return {passage["id"] for passage in passages}


def _invalid_record(rng: random.Random, record: dict[str, Any]) -> dict[str, Any]:
    """A row the pipeline must report as invalid, never drop."""
    kind = rng.randrange(4)
    if kind == 0:
        record["task"] = "   "
    elif kind == 1:
        record["context"] = '[{"id": "kb-1", "text": "truncated log line'
    elif kind == 2:
        record["context"] = json.dumps([{"id": "kb-1", "score": 0.9}])
    else:
        record["context"] = json.dumps({"passages": "not a list"})
    return record


def generate_events(
    days: int = 14,
    *,
    end_day: date | None = None,
    events_per_day: int = 260,
    seed: int = 7,
    regression: Regression | None = Regression(),
    invalid_share: float = 0.008,
) -> Iterator[dict[str, Any]]:
    """Warehouse rows (`event_id`, `event_ts`, `task`, `context`, `metadata`) for `days`
    days ending on `end_day` (default yesterday, UTC). `context` and `metadata` are JSON
    text, as a logging pipeline writes them; a few rows are invalid on purpose.
    """
    if days < 1:
        raise ValueError(f"days must be >= 1, got {days}")
    if events_per_day < 1:
        raise ValueError(f"events_per_day must be >= 1, got {events_per_day}")
    last = end_day or default_end_day()
    first = last - timedelta(days=days - 1)
    for day_index in range(days):
        day = first + timedelta(days=day_index)
        rng = random.Random(f"{seed}:{day.isoformat()}")
        weekend = day.weekday() >= 5
        count = max(1, round(events_per_day * (0.75 if weekend else 1.0) * rng.uniform(0.93, 1.07)))
        seconds = sorted(rng.randrange(86_400) for _ in range(count))
        for number, second in enumerate(seconds):
            env = _weighted(rng, ENVS, ENV_SHARE)
            flag = (
                FEATURE_FLAGS[1]
                if rng.random() < _v2_share(env, day_index, days)
                else (FEATURE_FLAGS[0])
            )
            area = rng.choice(PRODUCT_AREAS)
            product = rng.choice(PRODUCTS)
            in_area = [fact for fact in FACT_TYPES if fact.area == area]
            k = rng.choices((1, 2, 3), weights=(0.3, 0.5, 0.2), k=1)[0]
            first_fact = rng.choice(in_area)
            rest = rng.sample([f for f in FACT_TYPES if f is not first_fact], k - 1)
            asked = [first_fact, *rest]
            metadata = {
                "env": env,
                "feature_flag": flag,
                "tenant": _weighted(rng, TENANTS, TENANT_SHARE),
                "product_area": area,
            }
            regressed = regression is not None and regression.applies(metadata, day_index, days)
            # Outside the regression, non-production retrievers miss a passage now and then.
            miss_rate = {"prod": 0.0, "staging": 0.03, "dev": 0.08}[env]
            context = _context(
                rng,
                product,
                asked,
                drop_support=regressed,
                miss_support=not regressed and rng.random() < miss_rate,
            )
            timestamp = datetime.combine(day, datetime.min.time()) + timedelta(seconds=second)
            record: dict[str, Any] = {
                "event_id": f"evt-{day.isoformat()}-{number:05d}",
                "event_ts": timestamp,
                "task": question(product, asked),
                "context": json.dumps(context),
                "metadata": json.dumps(metadata),
            }
            if rng.random() < invalid_share:
                record = _invalid_record(rng, record)
            yield record
