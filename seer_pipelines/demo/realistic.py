"""A realistic stream of retrieval events, built from the bundled labeled QA samples.

Synthetic traffic where every clean event finds every fact hides what a real retriever
looks like: some queries always miss a passage, precision is capped by the context size,
and a release that hurts one corner of the traffic is diluted in the aggregate. This
stream is made of real multi-hop questions (`data/*.jsonl`): each event picks an example,
ranks all of its candidate passages against the question with BM25 (the same ranking the
judge-agreement measurements use, `seer_metrics.agreement.rank_passages`, computed once
per example) and keeps the top `context_size` as its context, with rank and score.

The gold supporting passages give an *ideal judge*: one requirement per gold passage,
supported by that passage when it made it into the context. `StreamEvent.judgment`
carries it and `ideal_scores` scores a stream with it, so tests and benchmarks can measure
the rules on realistic levels without any model.

A `Release` injects a regression: on its days, a share of the traffic in its slice
(default `env=prod` with `feature_flag=retrieval-v2`) loses its top hit(s), the context
becoming ranks 2-5 instead of 1-4. Every random draw is made whether or not a release
applies, so a stream with a release differs from the same stream without one only in
the released contexts. Everything is deterministic for a seed, and each day depends only
on the seed and its date. Pure functions, no Dagster.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from seer_metrics.agreement import (
    DEFAULT_CONTEXT_SIZE,
    LabeledExample,
    Passage,
    load_examples,
    passage_text,
    rank_passages,
)
from seer_metrics.judgment import Judgment, Requirement
from seer_metrics.scoring import score_events
from seer_pipelines.demo import DATA_DIR

DATASET_FILES = {
    "hotpotqa": DATA_DIR / "hotpotqa_train_distractor_hipporag100.jsonl",
    "musique": DATA_DIR / "musique_ans_train_hipporag100.jsonl",
}
# Mostly two-hop encyclopedic questions, some deeper compositional ones.
DATASET_SHARES = {"hotpotqa": 0.8, "musique": 0.2}
ENV_SHARES = {"prod": 0.75, "staging": 0.25}
# Share of each environment's traffic already on the new retriever build.
V2_SHARES = {"prod": 0.65, "staging": 0.7}
FEATURE_FLAGS = ("retrieval-v1", "retrieval-v2")
# Several tenants, one of them small (about 20 events a day at the default volume).
TENANT_SHARES = {"acme": 0.42, "globex": 0.30, "initech": 0.22, "umbrella": 0.06}
DEFAULT_EVENTS_PER_DAY = 300
DEFAULT_DAYS = 21
WEEKEND_VOLUME = 0.85

DEFAULT_RELEASE_SLICE = {"env": "prod", "feature_flag": "retrieval-v2"}


@dataclass(frozen=True)
class PoolExample:
    """One labeled example with its BM25 ranking, ready to be drawn as an event."""

    example: LabeledExample
    dataset: str
    product_area: str
    ranked: tuple[tuple[Passage, float], ...]


def product_area(dataset: str, example: LabeledExample) -> str:
    """The surface a question comes from: its kind of reasoning."""
    if dataset == "musique":
        return "multi-hop"
    return "comparison" if example.meta.get("type") == "comparison" else "lookup"


@lru_cache(maxsize=4)
def _load_pool(
    files: tuple[tuple[str, str], ...],
) -> tuple[tuple[str, tuple[PoolExample, ...]], ...]:
    pools = []
    for dataset, path in files:
        loaded = load_examples(path)
        if loaded.problems:
            raise ValueError(f"{path}: {loaded.problems[0]}")
        pools.append(
            (
                dataset,
                tuple(
                    PoolExample(
                        example,
                        dataset,
                        product_area(dataset, example),
                        tuple(rank_passages(example.question, example.passages)),
                    )
                    for example in loaded.examples
                ),
            )
        )
    return tuple(pools)


def load_pool(files: Mapping[str, str | Path] | None = None) -> dict[str, tuple[PoolExample, ...]]:
    """The examples of each dataset with their rankings (ranked once, then cached)."""
    chosen = files or DATASET_FILES
    return dict(_load_pool(tuple((name, str(path)) for name, path in chosen.items())))


@dataclass(frozen=True)
class Release:
    """A retriever release that loses the top hit(s) of part of one slice's traffic.

    `start` is the first day affected, counted from the stream's first day (negative:
    from its end, as in Python indexing), and `length` the number of days; on those
    days each event of the slice `where` is affected with probability `share`, and its
    context starts `lost_top_hits` places lower in the ranking (ranks 2-5 for one).
    """

    where: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_RELEASE_SLICE))
    start: int = -2
    length: int = 2
    share: float = 1.0
    lost_top_hits: int = 1

    def __post_init__(self) -> None:
        if not self.where:
            raise ValueError("a release needs a slice (where)")
        if self.length < 1:
            raise ValueError(f"release length must be >= 1, got {self.length}")
        if not 0.0 < self.share <= 1.0:
            raise ValueError(f"release share must be in (0, 1], got {self.share}")
        if self.lost_top_hits < 1:
            raise ValueError(f"lost_top_hits must be >= 1, got {self.lost_top_hits}")

    @property
    def slice_label(self) -> str:
        """The slice as Seer labels it (keys in the order given): `env=prod,feature_flag=...`."""
        return ",".join(f"{key}={value}" for key, value in self.where.items())

    def day_indices(self, total_days: int) -> range:
        first = self.start if self.start >= 0 else total_days + self.start
        if not 0 <= first < total_days:
            raise ValueError(f"release start {self.start} is outside a {total_days}-day stream")
        return range(first, min(first + self.length, total_days))

    def matches(self, metadata: Mapping[str, Any]) -> bool:
        return all(metadata.get(key) == value for key, value in self.where.items())


@dataclass(frozen=True)
class StreamEvent:
    """One event of the stream: the warehouse row, and what the ideal judge says of it.

    `record` has `event_id`, `event_ts`, `task`, `context` and `metadata` (JSON text, as
    a logging pipeline writes them); `judgment` is None for the few rows that are invalid
    on purpose. `released` says whether the injected release changed this context.
    """

    record: dict[str, Any]
    day: date
    metadata: Mapping[str, str]
    context_ids: tuple[str, ...]
    judgment: Judgment | None
    example_id: str
    released: bool


def ideal_judgment(example: LabeledExample, context_ids: Iterable[str]) -> Judgment:
    """One requirement per gold passage, supported by it when it is in the context."""
    present = set(context_ids)
    titles = {passage.id: passage.title for passage in example.passages}
    requirements = tuple(
        Requirement(
            id=f"r{index}",
            text=f"the supporting fact in '{titles[passage_id]}'",
            supported_by=(passage_id,) if passage_id in present else (),
        )
        for index, passage_id in enumerate(sorted(example.gold_supporting_ids), start=1)
    )
    return Judgment(requirements)


def _choice(rng: np.random.Generator, shares: Mapping[str, float], size: int) -> np.ndarray:
    names = list(shares)
    weights = np.array([shares[name] for name in names], dtype=float)
    return np.array(names, dtype=object)[
        rng.choice(len(names), size=size, p=weights / weights.sum())
    ]


def _broken(kind: int, record: dict[str, Any]) -> dict[str, Any]:
    """A row the pipeline must report as invalid, never drop."""
    if kind == 0:
        record["task"] = "   "
    elif kind == 1:
        record["context"] = record["context"][: len(record["context"]) // 2]  # truncated log line
    else:
        record["context"] = json.dumps({"passages": "not a list"})
    return record


def generate_stream(
    days: int = DEFAULT_DAYS,
    *,
    end_day: date,
    events_per_day: int = DEFAULT_EVENTS_PER_DAY,
    seed: int = 7,
    release: Release | None = None,
    context_size: int = DEFAULT_CONTEXT_SIZE,
    invalid_share: float = 0.0,
    pool: Mapping[str, Sequence[PoolExample]] | None = None,
) -> Iterator[StreamEvent]:
    """The events of `days` days ending on `end_day`, day by day in time order.

    About `events_per_day` events a weekday (weekends 85%, each day's volume within
    ±7%); a share `invalid_share` of rows is broken on purpose (reported as invalid by
    the pipeline, no judgment here).
    """
    if days < 1:
        raise ValueError(f"days must be >= 1, got {days}")
    if events_per_day < 1:
        raise ValueError(f"events_per_day must be >= 1, got {events_per_day}")
    if context_size < 1:
        raise ValueError(f"context_size must be >= 1, got {context_size}")
    pool = pool or load_pool()
    datasets = {name: share for name, share in DATASET_SHARES.items() if pool.get(name)}
    if not datasets:
        raise ValueError("the pool has no examples")
    released_days = set(release.day_indices(days)) if release is not None else set()
    first = end_day - timedelta(days=days - 1)
    for day_index in range(days):
        day = first + timedelta(days=day_index)
        rng = np.random.default_rng([seed, day.toordinal()])
        volume = events_per_day * (WEEKEND_VOLUME if day.weekday() >= 5 else 1.0)
        count = max(1, round(volume * rng.uniform(0.93, 1.07)))
        seconds = np.sort(rng.integers(0, 86_400, size=count))
        dataset = _choice(rng, datasets, count)
        picks = rng.random(count)
        env = _choice(rng, ENV_SHARES, count)
        on_v2 = rng.random(count) < np.array([V2_SHARES[e] for e in env])
        tenant = _choice(rng, TENANT_SHARES, count)
        release_draw = rng.random(count)
        invalid_draw = rng.random(count)
        invalid_kind = rng.integers(0, 3, size=count)
        for number in range(count):
            examples = pool[dataset[number]]
            entry = examples[int(picks[number] * len(examples))]
            metadata = {
                "env": str(env[number]),
                "feature_flag": FEATURE_FLAGS[int(on_v2[number])],
                "tenant": str(tenant[number]),
                "product_area": entry.product_area,
            }
            released = (
                day_index in released_days
                and release is not None
                and release.matches(metadata)
                and release_draw[number] < release.share
            )
            skip = release.lost_top_hits if released and release is not None else 0
            ranked = entry.ranked[skip : skip + context_size]
            context = [
                {
                    "id": passage.id,
                    "text": passage_text(passage),
                    "rank": rank,
                    "score": round(score, 4),
                }
                for rank, (passage, score) in enumerate(ranked, start=1)
            ]
            timestamp = datetime.combine(day, datetime.min.time()) + timedelta(
                seconds=int(seconds[number])
            )
            record: dict[str, Any] = {
                "event_id": f"rt-{day.isoformat()}-{number:05d}",
                "event_ts": timestamp,
                "task": entry.example.question,
                "context": json.dumps(context, ensure_ascii=False),
                "metadata": json.dumps(metadata),
            }
            context_ids = tuple(item["id"] for item in context)
            judgment: Judgment | None = ideal_judgment(entry.example, context_ids)
            if invalid_draw[number] < invalid_share:
                record = _broken(int(invalid_kind[number]), record)
                judgment = None
            yield StreamEvent(
                record=record,
                day=day,
                metadata=metadata,
                context_ids=context_ids,
                judgment=judgment,
                example_id=entry.example.id,
                released=released,
            )


def ideal_scores(events: Iterable[StreamEvent]) -> pd.DataFrame:
    """Event scores under the ideal judge, in the shape `slice_metrics` takes.

    Columns: `partition_date`, `event_id`, `status` (`ok`, or `invalid` for broken rows),
    recall, precision, f1, ndcg, `k`, `metadata` and `released`. Every context is ranked,
    so nDCG is defined whenever a gold passage was retrieved.
    """
    rows: list[dict[str, Any]] = []
    inputs: list[dict[str, Any]] = []
    for event in events:
        row: dict[str, Any] = {
            "partition_date": event.day,
            "event_id": event.record["event_id"],
            "status": "invalid" if event.judgment is None else "ok",
            "k": None,
            "metadata": dict(event.metadata),
            "released": event.released,
        }
        rows.append(row)
        if event.judgment is None:
            continue
        cited = event.judgment.cited_ids
        row["k"] = event.judgment.k
        inputs.append(
            {
                "k": event.judgment.k,
                "n": len(event.context_ids),
                "supported_requirements": sum(r.supported for r in event.judgment.requirements),
                "cited_positions": [
                    position
                    for position, passage_id in enumerate(event.context_ids, start=1)
                    if passage_id in cited
                ],
                "has_ranking": True,
            }
        )
    frame = pd.DataFrame(rows)
    metrics = ("recall", "precision", "f1", "ndcg")
    for metric in metrics:
        frame[metric] = np.nan
    if inputs:
        ok = (frame["status"] == "ok").to_numpy()
        scored = score_events(pd.DataFrame(inputs))
        for metric in metrics:
            frame.loc[ok, metric] = scored[metric].to_numpy()
    return frame
