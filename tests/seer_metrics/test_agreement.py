"""Agreement between an evaluator's label-free judgments and gold passage labels."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from seer_metrics import Judgment, RetrievalEvent
from seer_metrics.agreement import (
    AgreementReport,
    InvalidExampleError,
    LabeledExample,
    example_to_record,
    format_report,
    load_examples,
    measure_agreement,
    rank_passages,
    write_events_jsonl,
)
from seer_metrics.evaluators.base import EvaluationOutcome
from seer_metrics.evaluators.lexical import LexicalEvaluator
from seer_pipelines.demo import DATA_DIR

DATA = DATA_DIR
HOTPOT = DATA / "hotpotqa_train_distractor_hipporag100.jsonl"
MUSIQUE = DATA / "musique_ans_train_hipporag100.jsonl"


def example(gold: Sequence[str] = ("q#0", "q#2"), passages: int = 6) -> dict:
    texts = [
        ("Inception", "Inception is a 2010 film directed by Christopher Nolan."),
        ("Risotto", "Risotto is an Italian rice dish cooked with broth."),
        ("Christopher Nolan", "Christopher Nolan is a British-American film director."),
        ("Basalt", "Basalt is a fine-grained volcanic rock."),
        ("Tennis", "Tennis is played with rackets on a court."),
        ("Interstellar", "Interstellar is a 2014 film directed by Christopher Nolan."),
    ][:passages]
    return {
        "id": "q",
        "question": "Who directed Inception and what nationality is the film director?",
        "passages": [{"id": f"q#{i}", "title": t, "text": x} for i, (t, x) in enumerate(texts)],
        "gold_supporting_ids": list(gold),
        "answer": "British-American",
        "meta": {"dataset": "handmade", "type": "bridge"},
    }


def test_bundled_dev_samples_are_present_and_parse() -> None:
    for path in (HOTPOT, MUSIQUE):
        loaded = load_examples(path)
        assert len(loaded.examples) == 100
        assert loaded.problems == []
    assert (DATA / "README.md").read_text().count("CC BY") >= 2


def test_example_becomes_an_event_with_the_top_passages_ranked() -> None:
    record = example_to_record(LabeledExample.from_dict(example()), context_size=4)
    event = RetrievalEvent.from_record(record)
    assert event.event_id == "q"
    assert event.n == 4
    assert [item.rank for item in event.context] == [1, 2, 3, 4]
    scores = [item.score for item in event.context]
    assert scores == sorted(scores, reverse=True)
    assert event.context[0].text.startswith("Inception\n")
    assert record["metadata"]["dataset"] == "handmade"
    # the three passages sharing terms with the question lead; ties (score 0) keep list order
    assert set(event.context_ids[:3]) == {"q#0", "q#2", "q#5"}
    assert event.context_ids[3] == "q#1"


def test_ranking_never_looks_at_gold() -> None:
    first = example_to_record(LabeledExample.from_dict(example(gold=["q#0", "q#2"])))
    second = example_to_record(LabeledExample.from_dict(example(gold=["q#1", "q#3"])))
    assert first == second


def test_rank_passages_puts_the_obvious_match_first() -> None:
    parsed = LabeledExample.from_dict(example())
    ranked = rank_passages("Inception directed by Christopher Nolan", parsed.passages)
    assert ranked[0][0].id == "q#0"
    assert ranked[-1][1] == 0.0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"question": ""}, "question"),
        ({"question": None}, "question"),
        ({"id": None}, "'id'"),
        ({"passages": []}, "passages"),
        ({"passages": "text"}, "passages"),
        ({"passages": [{"id": "a", "title": "", "text": "  "}]}, "neither title nor text"),
        ({"passages": [{"id": "", "title": "t", "text": "x"}]}, "'id'"),
        ({"passages": [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}]}, "unique"),
        ({"gold_supporting_ids": "q#0"}, "gold_supporting_ids"),
        ({"gold_supporting_ids": ["q#99"]}, "not among the passages"),
    ],
)
def test_bad_examples_are_rejected_with_a_reason(change: dict, message: str) -> None:
    data = example() | change
    with pytest.raises(InvalidExampleError, match=message):
        LabeledExample.from_dict(data)


def test_load_examples_reports_bad_lines_and_reads_gzip(tmp_path: Path) -> None:
    lines = [json.dumps(example()), "{not json", "", json.dumps({"id": "x"}), json.dumps(example())]
    plain = tmp_path / "labeled.jsonl"
    plain.write_text("\n".join(lines) + "\n")
    packed = tmp_path / "labeled.jsonl.gz"
    with gzip.open(packed, "wt") as handle:
        handle.write("\n".join(lines) + "\n")
    for path in (plain, packed):
        loaded = load_examples(path)
        assert len(loaded.examples) == 2
        assert [p.split(":")[0] for p in loaded.problems] == ["line 2", "line 4"]
    assert len(load_examples(plain, limit=1).examples) == 1


class ScriptedEvaluator:
    """Returns fixed judgments by event id: lets the test know every expected figure."""

    name = "scripted"
    model = "scripted-1"
    prompt_version = "1"
    price = None

    def __init__(self, judgments: dict[str, dict | None]) -> None:
        self.judgments = judgments

    async def evaluate(self, events: Sequence[RetrievalEvent]) -> list[EvaluationOutcome]:
        outcomes = []
        for event in events:
            data = self.judgments[event.event_id]
            if data is None:
                outcomes.append(EvaluationOutcome(event.event_id, "error", reason="timeout: slow"))
            else:
                outcomes.append(
                    EvaluationOutcome(event.event_id, "ok", judgment=Judgment.from_dict(data))
                )
        return outcomes


def test_agreement_figures_match_a_hand_computed_case() -> None:
    complete = LabeledExample.from_dict(example(gold=["q#0", "q#2"]) | {"id": "a"})
    missing = LabeledExample.from_dict(example(gold=["q#0", "q#4"]) | {"id": "b"})
    failing = LabeledExample.from_dict(example() | {"id": "c"})
    ids = {
        ex.id: RetrievalEvent.from_record(example_to_record(ex)).context_ids
        for ex in (complete, missing)
    }
    assert "q#4" not in ids["b"]  # tennis is never retrieved: a gold passage is missing
    other = next(pid for pid in ids["a"] if pid not in {"q#0", "q#2"})
    judgments = {
        # a: both gold cited plus one non-gold; everything supported -> not flagged (agrees)
        "a": {
            "requirements": [
                {"id": "r1", "text": "x", "supported_by": ["q#0", other]},
                {"id": "r2", "text": "y", "supported_by": ["q#2"]},
            ]
        },
        # b: cites only the gold q#0, one requirement unsupported -> flagged (agrees)
        "b": {
            "requirements": [
                {"id": "r1", "text": "x", "supported_by": ["q#0"]},
                {"id": "r2", "text": "y", "supported_by": []},
            ]
        },
        "c": None,
    }
    report = asyncio.run(
        measure_agreement([complete, missing, failing], ScriptedEvaluator(judgments))
    )
    assert (report.examples, report.judged, report.errors) == (3, 2, 1)
    assert report.citation_precision == pytest.approx(3 / 4)
    assert report.citation_recall == pytest.approx(3 / 3)  # gold in context: 2 + 1
    assert report.flag_agreement == 1.0
    assert (report.flag_true_positive, report.flag_true_negative) == (1, 1)
    assert report.flag_balanced_accuracy == 1.0
    assert report.cite_everything_precision == pytest.approx(3 / 8)
    assert report.mean("recall") == pytest.approx((1.0 + 0.5) / 2)
    assert report.mean("precision") == pytest.approx((3 / 4 + 1 / 4) / 2)
    assert report.error_reasons == {"timeout": 1}
    text = format_report(report)
    assert "citation precision" in text and "0.750" in text and "timeout x1" in text


def test_an_evaluator_that_raises_counts_as_errors_not_a_crash() -> None:
    class Broken(ScriptedEvaluator):
        async def evaluate(self, events):
            raise ConnectionError("endpoint down")

    examples = [LabeledExample.from_dict(example())]
    report = asyncio.run(measure_agreement(examples, Broken({})))
    assert (report.judged, report.errors) == (0, 1)
    assert report.flag_agreement is None
    assert report.flag_balanced_accuracy is None


def test_lexical_agreement_on_the_bundled_sample_is_deterministic_and_bounded() -> None:
    examples = load_examples(HOTPOT, limit=25).examples
    first = asyncio.run(measure_agreement(examples, LexicalEvaluator(), batch_size=7))
    second = asyncio.run(measure_agreement(examples, LexicalEvaluator()))
    assert first.as_dict() == second.as_dict()
    assert first.judged == 25
    for figure in ("citation_precision", "citation_recall", "flag_agreement"):
        assert 0.0 <= first.as_dict()[figure] <= 1.0
    # better than citing every passage: the heuristic does tell gold from distractors
    assert first.citation_precision > first.cite_everything_precision


def test_events_file_round_trips(tmp_path: Path) -> None:
    examples = load_examples(MUSIQUE, limit=5).examples
    path = tmp_path / "events.jsonl"
    assert write_events_jsonl(examples, path, context_size=3) == 5
    events = [
        RetrievalEvent.from_record(json.loads(line)) for line in path.read_text().splitlines()
    ]
    assert [e.event_id for e in events] == [ex.id for ex in examples]
    assert all(e.n == 3 for e in events)


def test_balanced_accuracy_gives_a_constant_flag_one_half() -> None:
    # 8 gold-missing events, 2 complete; a flag raised on every event
    always = AgreementReport(judged=10, flag_true_positive=8, flag_false_positive=2)
    assert always.flag_agreement == pytest.approx(0.8)
    assert always.majority_flag_agreement == pytest.approx(0.8)
    assert always.flag_balanced_accuracy == pytest.approx(0.5)
    # half the missing events flagged, both complete ones left alone
    mixed = AgreementReport(
        judged=10, flag_true_positive=4, flag_false_negative=4, flag_true_negative=2
    )
    assert mixed.flag_balanced_accuracy == pytest.approx((4 / 8 + 2 / 2) / 2)
    only_missing = AgreementReport(judged=3, flag_true_positive=3)
    assert only_missing.flag_balanced_accuracy is None
    assert "balanced accuracy of the flag: 0.750" in format_report(mixed)
