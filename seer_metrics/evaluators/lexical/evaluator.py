"""`LexicalEvaluator`: a passage's share of each requirement's terms, and the judgment.

Why the memos: the stream repeats its queries and passages, so the judge keeps each
query's requirements, each requirement's profile of a passage text and its outcome for a
context's profiles, within fixed bounds; the judgments are the same as from scratch.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import NamedTuple

from seer_metrics.evaluators.base import EvaluationOutcome
from seer_metrics.evaluators.lexical.grounding import ground_passages, split_title
from seer_metrics.evaluators.lexical.requirements import (
    MAX_CLAUSE_TERMS,
    RequirementPattern,
    extract_requirements,
)
from seer_metrics.evaluators.lexical.text import content_terms
from seer_metrics.events import RetrievalEvent
from seer_metrics.judgment import Judgment, Requirement

LEXICAL_MODEL = "lexical-v1"
LEXICAL_PROMPT_VERSION = "heuristic-3"

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[^a-z\s])|\n+")


class _PassageTerms(NamedTuple):
    """A passage's terms: a function of its text, so one is kept per distinct text."""

    title_terms: frozenset[str]
    terms: frozenset[str]
    # title terms plus one sentence's terms, for each sentence: a fact is usually stated
    # within one sentence about the passage's subject (its title)
    sentence_terms: tuple[frozenset[str], ...]


@lru_cache(maxsize=4096)
def _text_terms(text: str) -> _PassageTerms:
    """A passage's title terms, all terms and per-sentence terms: a function of its text,
    kept for the passages retrieved again and again (popular documents)."""
    title, body = split_title(text)
    title_terms = frozenset(content_terms(title))
    sentences = tuple(
        title_terms | frozenset(content_terms(sentence))
        for sentence in _SENTENCE_END.split(body)
        if sentence.strip()
    ) or (title_terms,)
    return _PassageTerms(title_terms, title_terms.union(*sentences), sentences)


def context_idf(term: str, document_frequency: int, documents: int) -> float:
    """BM25's IDF within the event's context; a term no passage has weighs the most."""
    return math.log(1.0 + (documents - document_frequency + 0.5) / (document_frequency + 0.5))


# Which of a requirement's terms a passage has, in all and in each sentence (with the
# title), as bit masks (bit i: the requirement's term i): all its shares depend on.
_Profile = tuple[int, tuple[int, ...]]
# (each passage's share, positions of the supporting passages when none is grounded)
_Outcome = tuple[tuple[float, ...], tuple[int, ...]]
# What an evaluator keeps before it starts over (memory bounds, about 2.5 MB each): queries
# (about 1 kB each), and passage profiles, outcomes and judgments (about 300 bytes each).
_QUERIES_KEPT = 2048
_ENTRIES_KEPT = 8192


class _RequirementFacts:
    """A requirement's terms, its profile of each passage text and its outcome for each
    context's profiles: kept per requirement, which many queries and contexts share."""

    __slots__ = ("outcomes", "profiles", "terms", "weak_terms")

    def __init__(self, terms: tuple[str, ...], weak_terms: frozenset[str]) -> None:
        self.terms = terms
        self.weak_terms = weak_terms
        self.profiles: dict[str, _Profile] = {}
        self.outcomes: dict[tuple[_Profile, ...], _Outcome] = {}


class _QueryFacts:
    """What judging needs of a query, computed once per query as logged."""

    __slots__ = ("judgments", "requirement_facts", "requirements", "terms")

    def __init__(
        self,
        requirements: tuple[RequirementPattern, ...],
        requirement_facts: tuple[_RequirementFacts, ...],
    ) -> None:
        self.requirements = requirements
        self.requirement_facts = requirement_facts
        # the query's content terms (which passage titles it names), once a context has titles
        self.terms: frozenset[str] | None = None
        # each requirement's supporting passage ids -> the judgment (immutable, so shared)
        self.judgments: dict[tuple[tuple[str, ...], ...], Judgment] = {}


def _term_profile(terms: tuple[str, ...], passage: _PassageTerms) -> _Profile:
    present = 0
    for bit, term in enumerate(terms):
        if term in passage.terms:
            present |= 1 << bit
    if not present or len(passage.sentence_terms) == 1:
        return present, (present,)  # the one unit is all its terms; or no sentence has any
    # Sentences with the same terms are listed once: the best sentence stays the same.
    units = dict.fromkeys(
        sum(1 << bit for bit, term in enumerate(terms) if term in unit)
        for unit in passage.sentence_terms
    )
    return present, tuple(units)


def _tuning_suffix(tuning: dict[str, object]) -> str:
    """A fingerprint of non-default settings, so cached judgments made with other settings
    are never re-used (the cache keys on model and prompt version)."""
    defaults = inspect.signature(LexicalEvaluator.__init__).parameters
    changed = {name: value for name, value in tuning.items() if value != defaults[name].default}
    if not changed:
        return ""
    canonical = json.dumps(changed, sort_keys=True)
    return "+" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:10]


class LexicalEvaluator:
    """Deterministic term-overlap judge: the offline default for demos and tests.

    A passage's coverage of a requirement is the weighted share of the requirement's terms
    found in one of its sentences (together with its title); a term weighs `idf_floor` plus
    its BM25 IDF within the event's context, and question fillers (`WEAK_TERMS`) weigh
    `weak_term_weight` times that.

    When some passage's title is named by the query, only grounded passages (anchored by
    that title, or linked to it through a bridge: `ground_passages`) may support a
    requirement, from `grounded_support_threshold`: distractors that merely repeat the
    question's words are not evidence. A requirement that no grounded passage covers is
    given to a linked (bridge) passage not yet used by another such requirement, since a
    question only describes its bridge entities and their passages share few of its
    words; each hop needs its own passage, so a chain with a missing link leaves a
    requirement unsupported. Without any anchored passage (untitled text, or titles the
    query does not name) every passage may support, from `support_threshold`.

    Each requirement cites the eligible passages whose share is within `citation_margin`
    of its best one. Defaults were tuned on the bundled dev samples only
    (docs/agreement.md). A heuristic: see the package docstring for what it cannot do.
    """

    name = "lexical"
    price = None  # no model is called

    def __init__(
        self,
        *,
        model: str = LEXICAL_MODEL,
        prompt_version: str = LEXICAL_PROMPT_VERSION,
        support_threshold: float = 0.55,
        grounded_support_threshold: float = 0.45,
        citation_margin: float = 0.1,
        weak_term_weight: float = 0.3,
        sentence_level: bool = True,
        max_clause_terms: int = MAX_CLAUSE_TERMS,
        idf_floor: float = 2.0,
        grounding: bool = True,
    ) -> None:
        for setting, value in (
            ("support_threshold", support_threshold),
            ("grounded_support_threshold", grounded_support_threshold),
        ):
            if not 0.0 < value <= 1.0:
                raise ValueError(f"{setting} must be in (0, 1], got {value}")
        if not 0.0 <= citation_margin <= 1.0:
            raise ValueError(f"citation_margin must be in [0, 1], got {citation_margin}")
        self.model = model
        tuning = {
            "support_threshold": support_threshold,
            "grounded_support_threshold": grounded_support_threshold,
            "citation_margin": citation_margin,
            "weak_term_weight": weak_term_weight,
            "sentence_level": sentence_level,
            "max_clause_terms": max_clause_terms,
            "idf_floor": idf_floor,
            "grounding": grounding,
        }
        self.prompt_version = prompt_version + _tuning_suffix(tuning)
        self.support_threshold = support_threshold
        self.grounded_support_threshold = grounded_support_threshold
        self.citation_margin = citation_margin
        self.weak_term_weight = weak_term_weight
        self.sentence_level = sentence_level
        self.max_clause_terms = max_clause_terms
        self.idf_floor = idf_floor
        self.grounding = grounding
        self._queries: dict[str, _QueryFacts] = {}
        self._requirement_facts: dict[
            tuple[tuple[str, ...], frozenset[str]], _RequirementFacts
        ] = {}
        self._entries = 0

    def requirements(self, query: str) -> tuple[RequirementPattern, ...]:
        return extract_requirements(query, max_clause_terms=self.max_clause_terms)

    def _keep(self) -> None:
        """Count one more profile or outcome kept; at `_ENTRIES_KEPT`, start over."""
        if self._entries >= _ENTRIES_KEPT:
            self._forget()
        self._entries += 1

    def _forget(self) -> None:
        """Drop every query, profile and outcome kept (they are all recomputed at need)."""
        self._queries.clear()
        self._requirement_facts.clear()
        self._entries = 0

    def _query(self, query: str) -> _QueryFacts:
        """The query's facts, kept per query as logged: the stream repeats its questions."""
        if not isinstance(query, str):
            self.requirements(query)  # fails as it always did: a query must be text
        facts = self._queries.get(query)
        if facts is None:
            if len(self._queries) >= _QUERIES_KEPT:
                self._forget()
            patterns = self.requirements(query)
            requirement_facts = []
            for pattern in patterns:
                key = (pattern.terms, pattern.weak_terms)
                kept = self._requirement_facts.get(key)
                if kept is None:
                    kept = self._requirement_facts[key] = _RequirementFacts(*key)
                requirement_facts.append(kept)
            facts = _QueryFacts(patterns, tuple(requirement_facts))
            self._queries[query] = facts
        return facts

    def _profile(self, requirement: _RequirementFacts, text: str) -> _Profile:
        """Which of the requirement's terms the passage has (`_term_profile`), kept."""
        profile = _term_profile(requirement.terms, _text_terms(text))
        self._keep()
        requirement.profiles[text] = profile
        return profile

    def _outcome(self, requirement: _RequirementFacts, profiles: tuple[_Profile, ...]) -> _Outcome:
        """A requirement's shares of each passage and, if no passage is grounded, the
        positions of the passages that support it: a function of the passages' profiles,
        kept per requirement and profiles (contexts differ, their profiles seldom do)."""
        shares = self._shares(requirement.terms, requirement.weak_terms, profiles)
        outcome = (shares, self._supporting(shares, self.support_threshold))
        self._keep()
        requirement.outcomes[profiles] = outcome
        return outcome

    def _shares(
        self, terms: tuple[str, ...], weak_terms: frozenset[str], profiles: tuple[_Profile, ...]
    ) -> tuple[float, ...]:
        """Each passage's weighted share of the requirement's terms (best sentence + title)."""
        documents = len(profiles)
        weights = []  # in the requirement's order, so every sum adds in the same order
        for bit, term in enumerate(terms):
            frequency = sum(1 for present, _ in profiles if present >> bit & 1)
            weight = context_idf(term, frequency, documents) + self.idf_floor
            if term in weak_terms:
                weight *= self.weak_term_weight
            weights.append(weight)
        total = sum(weights)
        shares = []
        for present, units in profiles:
            found = max(
                sum(weight for bit, weight in enumerate(weights) if unit >> bit & 1)
                for unit in (units if self.sentence_level else (present,))
            )
            shares.append(found / total if total > 0 else 0.0)
        return tuple(shares)

    def _supporting(self, coverage: Sequence[float], threshold: float) -> tuple[int, ...]:
        """Positions of the passages within `citation_margin` of the best, if it is enough."""
        best = max(coverage, default=0.0)
        if not best >= threshold:
            return ()
        floor = max(threshold, best - self.citation_margin)
        return tuple(i for i, share in enumerate(coverage) if share >= floor)

    def judge(self, event: RetrievalEvent) -> Judgment:
        """The judgment for one event (synchronous; `evaluate` wraps it)."""
        facts = self._query(event.task)
        context = event.context
        texts = [item.text for item in context]
        outcomes = []
        for requirement in facts.requirement_facts:
            known = requirement.profiles
            # a passage that is not text fails here, before grounding, as it always did
            profiles = tuple(
                [known.get(text) or self._profile(requirement, text) for text in texts]
            )
            outcome = requirement.outcomes.get(profiles) or self._outcome(requirement, profiles)
            outcomes.append(outcome)
        # only a passage with a title (a first line) can be grounded
        depth = {}
        if self.grounding and any("\n" in text for text in texts):
            if facts.terms is None:
                facts.terms = frozenset(content_terms(event.task))
            depth = ground_passages(facts.terms, texts)
        if depth:
            supports = self._grounded_supports([shares for shares, _ in outcomes], depth)
        else:
            supports = [supporting for _, supporting in outcomes]
        cited = tuple(
            [
                tuple([context[i].id for i in supporting]) if supporting else ()
                for supporting in supports
            ]
        )
        judgment = facts.judgments.get(cited)
        if judgment is None:
            judgment = Judgment(
                tuple(
                    Requirement(pattern.id, pattern.text, supported_by)
                    for pattern, supported_by in zip(facts.requirements, cited, strict=True)
                )
            )
            self._keep()
            facts.judgments[cited] = judgment
        return judgment

    def _grounded_supports(
        self, shares: list[tuple[float, ...]], depth: dict[int, int]
    ) -> list[tuple[int, ...]]:
        """Only grounded passages support, from `grounded_support_threshold`; then bridges."""
        coverages = [
            [share if i in depth else 0.0 for i, share in enumerate(requirement_shares)]
            for requirement_shares in shares
        ]
        supports = [
            self._supporting(coverage, self.grounded_support_threshold) for coverage in coverages
        ]
        # Bridges: a requirement no grounded passage covers goes to a linked passage, one
        # requirement per linked passage, the best-covering first.
        bridges = [i for i, level in sorted(depth.items()) if level >= 2]
        for index, supporting in enumerate(supports):
            if supporting or not bridges:
                continue
            chosen = max(bridges, key=lambda i: (coverages[index][i], -i))
            bridges.remove(chosen)
            supports[index] = (chosen,)
        return supports

    async def evaluate(self, events: Sequence[RetrievalEvent]) -> list[EvaluationOutcome]:
        outcomes = []
        for event in events:
            try:
                judgment = self.judge(event)
            except Exception as error:  # one odd event must not sink the batch
                outcomes.append(
                    EvaluationOutcome(
                        event.event_id,
                        "error",
                        reason=f"lexical_failure: {type(error).__name__}: {error}",
                    )
                )
                continue
            outcomes.append(EvaluationOutcome(event.event_id, "ok", judgment=judgment))
        return outcomes
