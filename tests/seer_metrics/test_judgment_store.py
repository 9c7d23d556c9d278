"""The judgment store (SQLite and PostgreSQL) and the caching evaluator wrapper."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
import sqlalchemy as sa

from seer_metrics.evaluators.base import EvaluationOutcome, Evaluator, TokenUsage
from seer_metrics.evaluators.caching import CachingEvaluator
from seer_metrics.events import RetrievalEvent
from seer_metrics.judgment import Judgment, Requirement
from seer_metrics.judgment_store import (
    JudgmentRecord,
    JudgmentStore,
    RequirementsRecord,
    judgment_key,
    requirements_key,
)

JUDGMENT = Judgment(
    (
        Requirement("r1", "The director of Inception", ("p1",)),
        Requirement("r2", "The nationality of that director", ()),
    ),
    hallucinated_citations=1,
    unverified_citations=2,
)
REQUIREMENTS = (Requirement("r1", "The director"), Requirement("r2", "Their nationality"))


def _event(
    event_id: str, task: str = "Who directed Inception?", text: str = "Nolan."
) -> RetrievalEvent:
    return RetrievalEvent.from_record(
        {"event_id": event_id, "task": task, "context": [{"id": "p1", "text": text}]}
    )


def _exercise_store(store: JudgmentStore) -> None:
    keys = [f"key-{index}" for index in range(1203)]  # more than one IN (...) batch
    records = [JudgmentRecord(key, f"e{i}", "m", "v1", JUDGMENT) for i, key in enumerate(keys)]
    assert store.put_judgments(records) == len(keys)
    found = store.get_judgments([*keys, "absent"])
    assert set(found) == set(keys)
    assert found["key-7"] == JUDGMENT
    # A key already stored is left alone (first writer wins), never duplicated.
    other = Judgment((Requirement("r1", "something else", ()),))
    store.put_judgments([JudgmentRecord("key-7", "e7", "m", "v1", other)])
    assert store.get_judgments(["key-7"])["key-7"] == JUDGMENT
    assert store.count()["seer_judgment_cache"] == len(keys)

    key = requirements_key("  Who directed   INCEPTION? ", "m", "v1")
    store.put_requirements(
        [RequirementsRecord(key, "Who directed Inception?", "m", "v1", REQUIREMENTS)]
    )
    store.put_requirements([RequirementsRecord(key, "again", "m", "v1", REQUIREMENTS[:1])])
    assert store.get_requirements([key, "absent"]) == {key: REQUIREMENTS}
    assert store.get_requirements([]) == {}


def test_sqlite_file_store_round_trips_and_survives_reopening(tmp_path) -> None:
    path = tmp_path / "nested" / "cache.sqlite"
    _exercise_store(JudgmentStore(path))
    reopened = JudgmentStore(str(path))
    assert reopened.get_judgments(["key-0"])["key-0"] == JUDGMENT
    assert (
        JudgmentStore(sa.create_engine(f"sqlite:///{path}")).count()["seer_judgment_cache"] == 1203
    )


@pytest.mark.postgres
def test_postgres_store_round_trips(postgres_url: str, postgres_schema: str) -> None:
    engine = sa.create_engine(
        postgres_url, connect_args={"options": f"-csearch_path={postgres_schema}"}
    )
    try:
        _exercise_store(JudgmentStore(engine))
        # A second store on the same database finds the tables and the rows.
        assert JudgmentStore(engine).get_judgments(["key-1"])["key-1"] == JUDGMENT
        with engine.connect() as connection:
            tables = set(sa.inspect(connection).get_table_names())
        assert {"seer_judgment_cache", "seer_requirement_cache"} <= tables
    finally:
        engine.dispose()


class _CountingEvaluator:
    """A deterministic inner evaluator that records what reached it."""

    name = "counting"
    model = "counting-model"
    prompt_version = "v1"
    price = None

    def __init__(self, fail_ids: Sequence[str] = ()) -> None:
        self.seen: list[str] = []
        self.fail_ids = set(fail_ids)

    async def evaluate(self, events: Sequence[RetrievalEvent]) -> list[EvaluationOutcome]:
        outcomes = []
        for event in events:
            self.seen.append(event.event_id)
            if event.event_id in self.fail_ids:
                outcomes.append(
                    EvaluationOutcome(event.event_id, "error", reason="timeout", model_calls=2)
                )
            else:
                judgment = Judgment((Requirement("r1", event.task, event.context_ids[:1]),))
                outcomes.append(
                    EvaluationOutcome(
                        event.event_id, "ok", judgment, usage=TokenUsage(10, 5, 0.1), model_calls=2
                    )
                )
        return outcomes


def test_caching_evaluator_judges_only_misses_and_never_stores_errors(tmp_path) -> None:
    store = JudgmentStore(tmp_path / "cache.sqlite")
    inner = _CountingEvaluator(fail_ids=["bad"])
    caching = CachingEvaluator(inner, store)
    assert isinstance(caching, Evaluator)
    events = [
        _event("a"),
        _event("b", text="Other text."),
        _event("a-again"),  # same content as "a": judged once within the batch
        _event("bad", task="A query that fails"),
    ]
    first = asyncio.run(caching.evaluate(events))
    assert [o.event_id for o in first] == ["a", "b", "a-again", "bad"]
    assert inner.seen == ["a", "b", "bad"]
    assert [o.status for o in first] == ["ok", "ok", "ok", "error"]
    assert first[2].cache_hit and first[2].model_calls == 0
    assert first[2].judgment == first[0].judgment

    inner.seen.clear()
    inner.fail_ids.clear()
    second = asyncio.run(caching.evaluate(events))
    assert inner.seen == ["bad"]  # errors were not stored, so only they are retried
    assert [o.cache_hit for o in second] == [True, True, True, False]
    assert sum(o.model_calls for o in second[:3]) == 0
    assert second[0].judgment == first[0].judgment
    key = judgment_key(events[0], inner.model, inner.prompt_version)
    assert store.get_judgments([key])[key] == first[0].judgment


def test_caching_evaluator_stores_per_call_so_a_new_process_resumes(tmp_path) -> None:
    path = tmp_path / "cache.sqlite"
    events = [_event(f"e{index}", text=f"Passage {index}.") for index in range(6)]
    asyncio.run(CachingEvaluator(_CountingEvaluator(), JudgmentStore(path)).evaluate(events[:4]))
    # A "new process": fresh store object and evaluator on the same file.
    inner = _CountingEvaluator()
    outcomes = asyncio.run(CachingEvaluator(inner, JudgmentStore(path)).evaluate(events))
    assert inner.seen == ["e4", "e5"]
    assert [o.cache_hit for o in outcomes] == [True] * 4 + [False] * 2


def test_a_repeated_event_that_errored_does_not_count_the_usage_twice(tmp_path) -> None:
    class _FailingWithUsage(_CountingEvaluator):
        async def evaluate(self, events: Sequence[RetrievalEvent]) -> list[EvaluationOutcome]:
            return [
                EvaluationOutcome(
                    e.event_id, "error", reason="truncated", usage=TokenUsage(50, 7, 0.2)
                )
                for e in events
            ]

    caching = CachingEvaluator(_FailingWithUsage(), JudgmentStore(tmp_path / "cache.sqlite"))
    first, repeat = asyncio.run(caching.evaluate([_event("a"), _event("a-again")]))
    assert (first.status, repeat.status) == ("error", "error")
    assert repeat.event_id == "a-again" and repeat.reason == "truncated"
    assert first.usage == TokenUsage(50, 7, 0.2)
    assert repeat.usage == TokenUsage() and repeat.model_calls == 0


def test_cache_keys_are_pinned() -> None:
    """Keys are sha256 digests of canonical JSON: a change would orphan every stored row."""
    event = RetrievalEvent.from_record(
        {
            "event_id": "e1",
            "task": "  Which  Currencies, Ｏrbit? ",
            "context": [
                {"id": "p1", "text": 'Euros "or" dollars\\ café'},
                "Ünïcode ✓ text",
                {"id": "p1", "text": "dup", "rank": 1},
            ],
        }
    )
    key = "e18101b5e8b6ededf84b05a5f9bcbc28a9331150f809cbe64747520039009a56"
    assert judgment_key(event, "lexical-v1", "p1") == key
    other = judgment_key(event, "lexical-v2", "p1")
    assert other != key and judgment_key(event, "lexical-v1", "p1") == key
    assert judgment_key(event, "lexical-v1", "p2") not in {key, other}
    assert requirements_key("  Which  Currencies, Ｏrbit? ", "lexical-v1", "p1") == (
        "bd14cb4430da9a1ac1b9f072e772ed0142855e6f4f4ebafc4dd1d36443f3e738"
    )


def test_a_judgment_key_is_the_digest_of_its_canonical_json_whatever_the_parts() -> None:
    import hashlib
    import json

    from seer_metrics.events import ContextItem
    from seer_metrics.judgment_store import normalise_text

    def digest(event: RetrievalEvent, model: object, prompt_version: object) -> str:
        context = [[item.id, item.text] for item in event.context]
        parts = ["judgment", normalise_text(event.task), context, model, prompt_version]
        text = json.dumps(parts, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
        return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()

    events = [
        RetrievalEvent(
            "e", "T\u00a0a\u2003s k\n", (ContextItem("p\ud800", 't\x00"\\\u2028😀', 1),)
        ),
        RetrievalEvent("e", "t", (ContextItem(1, 2.5, 1), ContextItem(True, None, 2))),  # type: ignore[arg-type]
        RetrievalEvent("e", "t", ()),
    ]
    for event in events:
        for model, prompt_version in (("m", "p"), (None, 3), ("m\ud800", "p")):
            expected = digest(event, model, prompt_version)
            assert judgment_key(event, model, prompt_version) == expected  # type: ignore[arg-type]
            assert judgment_key(event, model, prompt_version) == expected  # type: ignore[arg-type]


def test_normalising_collapses_the_whitespace_the_regex_did() -> None:
    import re
    import sys
    import unicodedata

    from seer_metrics.judgment_store import normalise_text

    spaces = "".join(chr(code) for code in range(sys.maxunicode + 1) if chr(code).isspace())
    text = f"{spaces}Ａ b{spaces}ÇÉ\u00a0x{spaces}ǅ{spaces}"
    expected = re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text)).strip().casefold()
    assert normalise_text(text) == expected == "a b çé x dž"
