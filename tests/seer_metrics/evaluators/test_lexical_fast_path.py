"""The lexical evaluator's fast path against a plain reference.

`LexicalEvaluator.judge` keeps each query's requirements, each requirement's profile of a
passage (which of its terms the passage has, as bits) and each requirement's outcome for a
context's profiles. The reference below is the judge as first written: every event from
scratch, dicts of float weights, no memo. Both must give the same judgments, errors and
reasons on every event, under any settings.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
from datetime import date
from functools import lru_cache

import pytest

from seer_metrics.evaluators.lexical import LexicalEvaluator
from seer_metrics.evaluators.lexical import evaluator as lexical_evaluator
from seer_metrics.evaluators.lexical import text as lexical_text
from seer_metrics.evaluators.lexical.evaluator import context_idf
from seer_metrics.evaluators.lexical.grounding import split_title, title_key
from seer_metrics.evaluators.lexical.requirements import extract_requirements
from seer_metrics.evaluators.lexical.text import fold_accents, is_content_word, stem
from seer_metrics.events import ContextItem, RetrievalEvent
from seer_metrics.judgment import Judgment, Requirement
from seer_pipelines.demo.realistic import generate_stream
from seer_pipelines.demo.synthetic import generate_events

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[^a-z\s])|\n+")
_NAMED_ENTITY = re.compile(
    r"[A-Z][\w'’-]*(?:\s+(?:(?:of|the|de|and|for|in|von|van|la|le|du|da)\s+)?[A-Z][\w'’-]*)*"
)


def reference_words(text: str) -> list[str]:
    found = []
    for match in _WORD.finditer(fold_accents(text).casefold()):
        word = match.group(0).replace("’", "'")
        if word.endswith("'s"):
            word = word[:-2]
        found.extend(part for part in word.split("'") if part)
    return found


def reference_terms(text: str) -> list[str]:
    return [stem(word) for word in reference_words(text) if is_content_word(word)]


@lru_cache(maxsize=4096)  # as first written: an unhashable text fails on the cache
def reference_passage(text: str) -> tuple[frozenset[str], tuple[frozenset[str], ...]]:
    title, body = split_title(text)
    title_terms = frozenset(reference_terms(title))
    sentences = tuple(
        title_terms | frozenset(reference_terms(sentence))
        for sentence in _SENTENCE_END.split(body)
        if sentence.strip()
    ) or (title_terms,)
    return title_terms.union(*sentences), sentences


def reference_ground(query_terms: set[str], texts: list[str]) -> dict[int, int]:
    parts = [split_title(text) for text in texts]
    keys = [title_key(title) for title, _ in parts]
    depth = {}
    for index, key in enumerate(keys):
        terms = set(reference_terms(key))
        if terms and terms <= query_terms:
            depth[index] = 1
    if not depth:
        return depth
    bodies = [fold_accents(body).casefold() for _, body in parts]
    patterns = [
        re.compile(r"(?<!\w)" + re.escape(fold_accents(key).casefold()) + r"(?!\w)")
        if reference_terms(key)
        else None
        for key in keys
    ]
    entities = []
    for _, body in parts:
        found = set()
        for match in _NAMED_ENTITY.finditer(fold_accents(body)):
            terms = tuple(reference_terms(match.group(0)))
            if len(terms) >= 2 and not set(terms) <= query_terms:
                found.add(terms)
        entities.append(found)
    changed = True
    while changed:
        changed = False
        for index, pattern in enumerate(patterns):
            if index in depth or not keys[index]:
                continue
            for source in sorted(depth):
                titled = pattern is not None and pattern.search(bodies[source]) is not None
                if titled or entities[index] & entities[source]:
                    depth[index] = depth[source] + 1
                    changed = True
                    break
    return depth


def reference_judge(judge: LexicalEvaluator, event: RetrievalEvent) -> Judgment:
    patterns = extract_requirements(event.task, max_clause_terms=judge.max_clause_terms)
    passages = [reference_passage(item.text) for item in event.context]
    texts = [item.text for item in event.context]
    depth = reference_ground(set(reference_terms(event.task)), texts) if judge.grounding else {}
    threshold = judge.grounded_support_threshold if depth else judge.support_threshold
    supports, coverages = [], []
    for pattern in patterns:
        weights = {}
        for term in pattern.terms:
            frequency = sum(1 for terms, _ in passages if term in terms)
            weight = context_idf(term, frequency, len(passages)) + judge.idf_floor
            if term in pattern.weak_terms:
                weight *= judge.weak_term_weight
            weights[term] = weight
        total = sum(weights.values())
        coverage = []
        for index, (terms, sentences) in enumerate(passages):
            units = sentences if judge.sentence_level else (terms,)
            found = max(sum(w for term, w in weights.items() if term in unit) for unit in units)
            share = found / total if total > 0 else 0.0
            coverage.append(share if not depth or index in depth else 0.0)
        coverages.append(coverage)
        best = max(coverage, default=0.0)
        supported_by: tuple[str, ...] = ()
        if best >= threshold:
            floor = max(threshold, best - judge.citation_margin)
            supported_by = tuple(
                item.id
                for item, share in zip(event.context, coverage, strict=True)
                if share >= floor
            )
        supports.append(supported_by)
    bridges = [i for i, level in sorted(depth.items()) if level >= 2]
    for index, supported_by in enumerate(supports):
        if supported_by or not bridges:
            continue
        chosen = max(bridges, key=lambda i: (coverages[index][i], -i))
        bridges.remove(chosen)
        supports[index] = (event.context[chosen].id,)
    return Judgment(
        tuple(
            Requirement(pattern.id, pattern.text, supported_by)
            for pattern, supported_by in zip(patterns, supports, strict=True)
        )
    )


def reference_outcome(judge: LexicalEvaluator, event: RetrievalEvent) -> tuple[str, object]:
    try:
        return "ok", reference_judge(judge, event)
    except Exception as error:
        return "error", f"lexical_failure: {type(error).__name__}: {error}"


def fast_outcomes(judge: LexicalEvaluator, events: list[RetrievalEvent]) -> list[tuple]:
    outcomes = asyncio.run(judge.evaluate(events))
    return [(o.status, o.judgment if o.status == "ok" else o.reason) for o in outcomes]


def parsed(records) -> list[RetrievalEvent]:
    events = []
    for record in records:
        with contextlib.suppress(ValueError):  # the few invalid rows are not judged
            events.append(RetrievalEvent.from_record(record))
    return events


def event(task, texts, event_id="e") -> RetrievalEvent:
    context = tuple(ContextItem(f"p{i}", text, i + 1) for i, text in enumerate(texts))
    return RetrievalEvent(event_id, task, context)


EDGE_EVENTS = [
    event("Who directed Inception and when was Christopher Nolan born?", []),
    event("Who directed Inception?", ["Inception\nInception is a film. Nolan directed it."] * 3),
    event("Which sign‑on does Orbit Pro use?", ["Orbit Pro uses sign-on.", "Orbit Pro", ""]),
    event("NUL \x00 and a lone \ud800 surrogate?", ["NUL \x00 here.\n\ud800 there", "x"]),
    event("Wie alt ist Aschenbrödel?", ["Aschenbrodel\nAschenbrödel ist alt. Sehr alt!"]),
    event(
        "Where was the director of Kiss and Tell born?",
        [
            "Kiss and Tell (1945 film)\nKiss and Tell was directed by Richard Wallace.",
            "Richard Wallace\nRichard Wallace was born in Sacramento. He directed films.",
            "Sacramento\nSacramento is a city in California.",
        ],
    ),
    event(
        "What is O'Brien's and the Bank of England's role?",
        [
            "Bank of England\nThe Bank of England works with Mary O'Brien's Trust Fund.",
            "Trust Fund\nMary O'Brien's Trust Fund is a charity. O’Brien’s role is chair.",
        ],
    ),
    event("½ ² ٣ ﬁnancial İstanbul?", ["ﬁnancial İstanbul ½", "2 3 financial istanbul"]),
    event(5, ["text"]),
    event(["a list"], ["text"]),
    event("a query", [5]),
    event("a query", [["unhashable"]]),
    event("a query", ["fine", None]),
]

SETTINGS = [
    {},
    {"sentence_level": False},
    {"grounding": False},
    {"idf_floor": 0.0, "weak_term_weight": 1.0, "max_clause_terms": 2},
    {"citation_margin": 1.0, "support_threshold": 1.0, "grounded_support_threshold": 0.2},
    {"idf_floor": math.nan},
    {"idf_floor": -3.0},
]


@pytest.fixture(scope="module")
def stream_events() -> list[RetrievalEvent]:
    synthetic = generate_events(1, end_day=date(2026, 3, 4), events_per_day=600, seed=3)
    realistic = (item.record for item in generate_stream(1, end_day=date(2026, 3, 4), seed=3))
    return parsed(synthetic) + parsed(realistic) + EDGE_EVENTS


@pytest.mark.parametrize("settings", SETTINGS, ids=[str(s) for s in SETTINGS])
def test_fast_path_judges_as_the_reference(stream_events, settings) -> None:
    judge = LexicalEvaluator(**settings)
    # twice through one evaluator: the second pass is served from what the first kept
    for _ in range(2):
        fast = fast_outcomes(judge, stream_events)
        assert fast == [reference_outcome(judge, e) for e in stream_events]


def test_memory_bounds_start_over_with_the_same_judgments(stream_events, monkeypatch) -> None:
    monkeypatch.setattr(lexical_evaluator, "_ENTRIES_KEPT", 7)
    monkeypatch.setattr(lexical_evaluator, "_QUERIES_KEPT", 3)
    judge = LexicalEvaluator()
    assert fast_outcomes(judge, stream_events) == [
        reference_outcome(judge, e) for e in stream_events
    ]
    assert len(judge._queries) <= 3
    assert judge._entries <= 7
    kept = sum(len(r.profiles) + len(r.outcomes) for r in judge._requirement_facts.values())
    assert kept <= 7


@pytest.mark.parametrize(
    "text",
    [
        "O'Brien's brother’s",
        "’s 's x's rock'n'roll",
        "Aschenbrödel ﬁ İ",
        "a\x00b \ud800",
        "",
        "_a_",
    ],
)
def test_words_fast_path_matches_the_reference(text: str) -> None:
    assert lexical_text.words(text) == reference_words(text)
    assert lexical_text.content_terms(text) == reference_terms(text)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (
            "Which state‐of‐the‑art sign‑on provider does Orbit Pro use?",
            [("which state‐of‐the‐art sign‐on provider does orbit pro use",
              ("stat", "art", "sign", "provid", "orbit", "pro", "use"))],
        ),
        (
            "Who wrote “The Road’s End” and in which year was it published?",
            [("who wrote “the road’s end” and", ("wrot", "road", "end")),
             ("end in which year was it published", ("year", "publish"))],
        ),
        (
            "What is O'Brien's brother’s name and who is Nolan's wife?",
            [("what is o'brien's brother’s name", ("o'brien", "broth", "name")),
             ("who is nolan's wife", ("nolan", "wife"))],
        ),
        (
            'In which county is the town where "Kiss and Tell" was shot?',
            [("in which county is the town", ("county", "town")),
             ('town where "kiss and tell" was shot', ("kiss", "tell", "shot"))],
        ),
    ],
)  # fmt: skip
def test_query_tokens_keep_hyphens_quotes_and_apostrophes(query: str, expected) -> None:
    """Measured on the tokenizer as it was before its ASCII fast path."""
    found = [(r.text, r.terms) for r in extract_requirements(query)]
    assert found == expected
