"""The judges a realistic stream can be judged by, each with the identity Seer records.

A judge's identity names its evaluator, model and prompt version
(`ideal:gold:v1`, `lexical:lexical-v1:heuristic-3`), as the judgments table does: a
change of identity is a judge change, after which levels are not comparable with the
days before. The ideal judge cites exactly the gold supporting passages in the context,
so benchmarks measure the rules on realistic levels without any model; the lexical judge
is the offline judge `seer demo` uses, run once per distinct question and context (a
stream draws the same few hundred examples again and again).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any, Protocol

import pandas as pd

from seer_metrics.agreement import LabeledExample
from seer_metrics.evaluators.lexical import LexicalEvaluator
from seer_metrics.events import RetrievalEvent
from seer_metrics.judgment import Judgment, Requirement

IDEAL = "ideal"


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


class StreamJudge(Protocol):
    identity: str

    def judge(
        self, example: LabeledExample, record: Mapping[str, Any], context_ids: tuple[str, ...]
    ) -> Judgment: ...


class IdealJudge:
    """The gold passages; `prompt_version` changes only its identity (a re-labelled judge)."""

    def __init__(self, prompt_version: str = "v1") -> None:
        self.identity = f"ideal:gold:{prompt_version}"

    def judge(
        self, example: LabeledExample, record: Mapping[str, Any], context_ids: tuple[str, ...]
    ) -> Judgment:
        return ideal_judgment(example, context_ids)


class LexicalStreamJudge:
    """The offline lexical evaluator, once per (example, context); `tuning` as
    `LexicalEvaluator` takes it (another tuning is another prompt version)."""

    def __init__(self, **tuning: Any) -> None:
        self.evaluator = LexicalEvaluator(**tuning)
        self.identity = (
            f"{self.evaluator.name}:{self.evaluator.model}:{self.evaluator.prompt_version}"
        )
        self.judgments: dict[tuple[str, tuple[str, ...]], Judgment] = {}

    def judge(
        self, example: LabeledExample, record: Mapping[str, Any], context_ids: tuple[str, ...]
    ) -> Judgment:
        key = (example.id, context_ids)
        if key not in self.judgments:
            self.judgments[key] = self.evaluator.judge(RetrievalEvent.from_record(dict(record)))
        return self.judgments[key]


# name -> how to build the judge; `stream_judge` keeps one of each per process
JUDGE_FACTORIES = {
    IDEAL: lambda: IdealJudge("v1"),
    "ideal-v2": lambda: IdealJudge("v2"),  # the same judgments under another identity
    "lexical": LexicalStreamJudge,
    "lexical-strict": lambda: LexicalStreamJudge(support_threshold=0.7),
}
JUDGES = tuple(JUDGE_FACTORIES)


@cache
def stream_judge(name: str) -> StreamJudge:
    """The judge named `name` (one of `JUDGES`), built once per process."""
    if name not in JUDGE_FACTORIES:
        raise ValueError(f"unknown judge {name!r}; judges: {', '.join(JUDGES)}")
    return JUDGE_FACTORIES[name]()


def with_judge_column(table: pd.DataFrame, scores: pd.DataFrame) -> pd.DataFrame:
    """`table` (slice rows) with a `judge` column: the identity of the judge of each day's
    events (several, joined by `+`, on a day judged by more than one), on every row."""
    judges = scores.groupby("partition_date")["judge"].agg(lambda ids: "+".join(sorted(set(ids))))
    return table.assign(judge=table["partition_date"].map(judges))
