"""How well an evaluator's label-free judgments agree with gold retrieval labels.

A labeled example (question, candidate passages, gold supporting passage ids) becomes a
retrieval event whose context is the top passages of a plain BM25 ranking of all the
candidates against the question; the ranking never looks at gold. The evaluator then
judges the event as it would judge production traffic, and we compare:

- citation precision / recall: the evaluator's cited passages against the gold passages
  that made it into the context (micro-averaged over events);
- flag agreement: the share of events where "recall < 1" (the evaluator found a missing
  requirement) coincides with "a gold passage is missing from the context";
- the mean label-free metrics (recall, precision, f1, ndcg) themselves.

Baselines that need no evaluator are reported next to them, so a number can be read
against what a constant answer would get.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from seer_metrics.evaluators.base import EvaluationOutcome, Evaluator
from seer_metrics.evaluators.lexical.text import content_terms
from seer_metrics.events import RetrievalEvent
from seer_metrics.scoring import score_event
from seer_metrics.text.jsonl import numbered_json_lines

DEFAULT_CONTEXT_SIZE = 4


class InvalidExampleError(ValueError):
    """A labeled example that does not have the documented shape."""


@dataclass(frozen=True)
class Passage:
    id: str
    title: str
    text: str


@dataclass(frozen=True)
class LabeledExample:
    id: str
    question: str
    passages: tuple[Passage, ...]
    gold_supporting_ids: frozenset[str]
    answer: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Any) -> LabeledExample:
        """Parse `{"id", "question", "passages": [{"id", "title", "text"}], ...}`."""
        if not isinstance(data, Mapping):
            raise InvalidExampleError("example must be a JSON object")
        example_id = data.get("id")
        question = data.get("question")
        if not isinstance(example_id, str | int) or isinstance(example_id, bool):
            raise InvalidExampleError("'id' must be a string or integer")
        if not isinstance(question, str) or not question.strip():
            raise InvalidExampleError("'question' must be a non-empty string")
        raw_passages = data.get("passages")
        if not isinstance(raw_passages, list) or not raw_passages:
            raise InvalidExampleError("'passages' must be a non-empty list")
        passages = []
        for index, raw in enumerate(raw_passages, start=1):
            if not isinstance(raw, Mapping):
                raise InvalidExampleError(f"passage {index} must be an object")
            passage_id, title, text = raw.get("id"), raw.get("title") or "", raw.get("text")
            if not isinstance(passage_id, str) or not passage_id:
                raise InvalidExampleError(f"passage {index}: 'id' must be a non-empty string")
            if not isinstance(title, str) or not isinstance(text, str):
                raise InvalidExampleError(f"passage {index}: 'title' and 'text' must be strings")
            if not (title.strip() or text.strip()):
                raise InvalidExampleError(f"passage {index} has neither title nor text")
            passages.append(Passage(passage_id, title.strip(), text.strip()))
        ids = [p.id for p in passages]
        if len(set(ids)) != len(ids):
            raise InvalidExampleError("passage ids are not unique")
        gold = data.get("gold_supporting_ids")
        if not isinstance(gold, list) or not all(isinstance(g, str) for g in gold):
            raise InvalidExampleError("'gold_supporting_ids' must be a list of passage ids")
        unknown = set(gold) - set(ids)
        if unknown:
            raise InvalidExampleError(f"gold ids not among the passages: {sorted(unknown)}")
        meta = data.get("meta") if isinstance(data.get("meta"), Mapping) else {}
        return cls(
            str(example_id),
            question.strip(),
            tuple(passages),
            frozenset(gold),
            str(data.get("answer") or ""),
            dict(meta),
        )


def passage_text(passage: Passage) -> str:
    """Title on the first line, then the text: how the judge sees a passage."""
    return f"{passage.title}\n{passage.text}" if passage.title else passage.text


def rank_passages(
    question: str, passages: Sequence[Passage], *, k1: float = 1.2, b: float = 0.75
) -> list[tuple[Passage, float]]:
    """BM25 over the example's own passages (title + text), best first; ties keep order."""
    documents = [content_terms(passage_text(p)) for p in passages]
    count = len(documents)
    average_length = sum(len(d) for d in documents) / count if count else 0.0
    frequency: Counter[str] = Counter()
    for document in documents:
        frequency.update(set(document))
    query_terms = list(dict.fromkeys(content_terms(question)))
    scored = []
    for position, (passage, document) in enumerate(zip(passages, documents, strict=True)):
        counts = Counter(document)
        norm = k1 * (1 - b + b * len(document) / average_length) if average_length else k1
        score = 0.0
        for term in query_terms:
            tf = counts.get(term, 0)
            if tf:
                idf = math.log(1 + (count - frequency[term] + 0.5) / (frequency[term] + 0.5))
                score += idf * tf * (k1 + 1) / (tf + norm)
        scored.append((position, passage, score))
    scored.sort(key=lambda entry: (-entry[2], entry[0]))
    return [(passage, score) for _, passage, score in scored]


def example_to_record(
    example: LabeledExample, *, context_size: int = DEFAULT_CONTEXT_SIZE
) -> dict[str, Any]:
    """A warehouse-shaped event row: the question and the top `context_size` passages."""
    if context_size < 1:
        raise ValueError(f"context_size must be at least 1, got {context_size}")
    ranked = rank_passages(example.question, example.passages)[:context_size]
    context = [
        {"id": passage.id, "text": passage_text(passage), "rank": rank, "score": round(score, 6)}
        for rank, (passage, score) in enumerate(ranked, start=1)
    ]
    metadata = {"source": "labeled", "example_id": example.id}
    for key in ("dataset", "type", "level", "hops"):
        if key in example.meta and isinstance(example.meta[key], str):
            metadata[key] = example.meta[key]
    return {
        "event_id": example.id,
        "task": example.question,
        "context": context,
        "metadata": metadata,
    }


@dataclass(frozen=True)
class LoadedExamples:
    examples: list[LabeledExample]
    problems: list[str]  # "line N: reason", one per skipped line


def load_examples(path: str | Path, *, limit: int | None = None) -> LoadedExamples:
    """Read labeled examples; bad lines are reported with their number, never fatal."""
    examples: list[LabeledExample] = []
    problems: list[str] = []
    for number, data, error in numbered_json_lines(path):
        if limit is not None and len(examples) >= limit:
            break
        if error is not None:
            problems.append(f"line {number}: {error}")
            continue
        try:
            examples.append(LabeledExample.from_dict(data))
        except InvalidExampleError as invalid:
            problems.append(f"line {number}: {invalid}")
    return LoadedExamples(examples, problems)


def write_events_jsonl(
    examples: Iterable[LabeledExample],
    path: str | Path,
    *,
    context_size: int = DEFAULT_CONTEXT_SIZE,
) -> int:
    """Write one event row per example (the input of `seer evaluate`); returns the count."""
    written = 0
    with Path(path).open("w", encoding="utf-8") as handle:
        for example in examples:
            record = example_to_record(example, context_size=context_size)
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            written += 1
    return written


@dataclass
class AgreementReport:
    examples: int = 0
    judged: int = 0
    errors: int = 0
    # citations against gold, within the context
    cited: int = 0
    cited_gold: int = 0
    gold_in_context: int = 0
    context_passages: int = 0
    # the recall < 1 flag against "a gold passage is missing from the context"
    flag_true_positive: int = 0
    flag_false_positive: int = 0
    flag_false_negative: int = 0
    flag_true_negative: int = 0
    metric_sums: dict[str, float] = field(default_factory=dict)
    metric_counts: dict[str, int] = field(default_factory=dict)
    error_reasons: Counter[str] = field(default_factory=Counter)

    @property
    def citation_precision(self) -> float | None:
        return self.cited_gold / self.cited if self.cited else None

    @property
    def citation_recall(self) -> float | None:
        return self.cited_gold / self.gold_in_context if self.gold_in_context else None

    @property
    def gold_missing(self) -> int:
        return self.flag_true_positive + self.flag_false_negative

    @property
    def flag_agreement(self) -> float | None:
        agreed = self.flag_true_positive + self.flag_true_negative
        return agreed / self.judged if self.judged else None

    @property
    def flag_balanced_accuracy(self) -> float | None:
        """Mean of the flag's hit rate on gold-missing and gold-complete events.

        A constant flag scores 0.5 whatever the class balance, so a figure above 0.5 means
        the flag tells the two apart; None unless both kinds of event occur.
        """
        complete = self.judged - self.gold_missing
        if not self.gold_missing or not complete:
            return None
        hit_missing = self.flag_true_positive / self.gold_missing
        hit_complete = self.flag_true_negative / complete
        return (hit_missing + hit_complete) / 2

    @property
    def majority_flag_agreement(self) -> float | None:
        """What a constant flag (always the commoner answer) would score."""
        if not self.judged:
            return None
        return max(self.gold_missing, self.judged - self.gold_missing) / self.judged

    @property
    def cite_everything_precision(self) -> float | None:
        """Citation precision of a judge that cites every passage."""
        return self.gold_in_context / self.context_passages if self.context_passages else None

    def mean(self, metric: str) -> float | None:
        count = self.metric_counts.get(metric, 0)
        return self.metric_sums[metric] / count if count else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "examples": self.examples,
            "judged": self.judged,
            "errors": self.errors,
            "citation_precision": self.citation_precision,
            "citation_recall": self.citation_recall,
            "flag_agreement": self.flag_agreement,
            "flag_balanced_accuracy": self.flag_balanced_accuracy,
            "flag_confusion": {
                "flagged_and_gold_missing": self.flag_true_positive,
                "flagged_but_gold_complete": self.flag_false_positive,
                "not_flagged_but_gold_missing": self.flag_false_negative,
                "not_flagged_and_gold_complete": self.flag_true_negative,
            },
            "gold_missing_share": self.gold_missing / self.judged if self.judged else None,
            "baseline_majority_flag_agreement": self.majority_flag_agreement,
            "baseline_cite_everything_precision": self.cite_everything_precision,
            "mean_recall": self.mean("recall"),
            "mean_precision": self.mean("precision"),
            "mean_f1": self.mean("f1"),
            "mean_ndcg": self.mean("ndcg"),
            "error_reasons": dict(self.error_reasons),
        }


def add_to_report(
    report: AgreementReport,
    example: LabeledExample,
    event: RetrievalEvent,
    outcome: EvaluationOutcome,
) -> None:
    """Fold one judged example into the running report."""
    report.examples += 1
    if outcome.status != "ok" or outcome.judgment is None:
        report.errors += 1
        report.error_reasons[(outcome.reason or "error").split(":")[0]] += 1
        return
    report.judged += 1
    score = score_event(event, outcome.judgment)
    context_ids = set(event.context_ids)
    gold_in_context = example.gold_supporting_ids & context_ids
    cited = set(score.cited_ids)
    report.cited += len(cited)
    report.cited_gold += len(cited & gold_in_context)
    report.gold_in_context += len(gold_in_context)
    report.context_passages += len(context_ids)
    flagged = score.recall is not None and score.recall < 1.0
    gold_missing = bool(example.gold_supporting_ids - context_ids)
    if flagged and gold_missing:
        report.flag_true_positive += 1
    elif flagged:
        report.flag_false_positive += 1
    elif gold_missing:
        report.flag_false_negative += 1
    else:
        report.flag_true_negative += 1
    for metric in ("recall", "precision", "f1", "ndcg"):
        value = getattr(score, metric)
        if value is not None:
            report.metric_sums[metric] = report.metric_sums.get(metric, 0.0) + value
            report.metric_counts[metric] = report.metric_counts.get(metric, 0) + 1


def format_report(report: AgreementReport, *, title: str = "") -> str:
    """The human-readable agreement report printed by `seer calibrate` and the benchmark."""

    def show(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.3f}"

    lines = [title] if title else []
    lines += [
        f"examples: {report.examples}  judged: {report.judged}  errors: {report.errors}",
        f"citation precision vs gold (in context): {show(report.citation_precision)}"
        f"   [cite-everything baseline {show(report.cite_everything_precision)}]",
        f"citation recall vs gold (in context):    {show(report.citation_recall)}",
        f"recall<1 flag agrees with 'gold missing from context': {show(report.flag_agreement)}"
        f"   [constant-flag baseline {show(report.majority_flag_agreement)}]",
        f"  balanced accuracy of the flag: {show(report.flag_balanced_accuracy)}"
        "   [constant flag 0.500]",
        f"  flagged & gold missing {report.flag_true_positive}, "
        f"flagged & gold complete {report.flag_false_positive}, "
        f"not flagged & gold missing {report.flag_false_negative}, "
        f"not flagged & gold complete {report.flag_true_negative}",
        "mean label-free metrics: "
        + "  ".join(f"{m} {show(report.mean(m))}" for m in ("recall", "precision", "f1", "ndcg")),
    ]
    if report.error_reasons:
        reasons = ", ".join(f"{r} x{c}" for r, c in report.error_reasons.most_common())
        lines.append(f"errors by reason: {reasons}")
    return "\n".join(lines)


async def measure_agreement(
    examples: Sequence[LabeledExample],
    evaluator: Evaluator,
    *,
    context_size: int = DEFAULT_CONTEXT_SIZE,
    batch_size: int = 64,
    on_batch: Callable[[int], None] | None = None,
) -> AgreementReport:
    """Convert, judge (in batches) and compare every example; `on_batch(n)` reports progress."""
    report = AgreementReport()
    for start in range(0, len(examples), batch_size):
        batch = examples[start : start + batch_size]
        events = [
            RetrievalEvent.from_record(example_to_record(example, context_size=context_size))
            for example in batch
        ]
        try:
            outcomes = await evaluator.evaluate(events)
            if len(outcomes) != len(events):
                raise RuntimeError(f"returned {len(outcomes)} outcomes for {len(events)} events")
        except Exception as error:  # count the batch as failed; keep measuring the rest
            reason = f"evaluator_failure: {type(error).__name__}: {error}"
            outcomes = [EvaluationOutcome(e.event_id, "error", reason=reason) for e in events]
        for example, event, outcome in zip(batch, events, outcomes, strict=True):
            add_to_report(report, example, event, outcome)
        if on_batch is not None:
            on_batch(len(batch))
    return report
