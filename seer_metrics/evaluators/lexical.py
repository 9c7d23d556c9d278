"""The offline evaluator: a deterministic lexical heuristic, no network, no key.

It is a heuristic, not a reader. It splits the query into requirements by its surface
syntax (relative clauses, conjunctions, long clauses cut at prepositions when both sides
carry a fact of their own, so "the API rate limit of Lumen Search" stays one requirement;
quoted titles and hyphenated words such as "sign-on" are never cut) and measures how much
of a requirement's stemmed content terms, weighted by how rare they are in that event's
context (BM25-style IDF on top of a floor), occur in one sentence of a passage together
with its title (a first line followed by a newline is taken as the title). When the query
names a passage's title, only passages tied to the query's entities may support a
requirement: those it names, and those reached from them through a bridge (the next
passage's title, or a shared multi-word name, appears in the previous one), one bridge
passage per hop. It cannot follow a bridge between passages that share no name, count the
hops a question needs, read negation or paraphrase, and without a named title it falls
back to word overlap, accepting a passage that repeats the query's words without answering
it. Its measured agreement with gold labels is in docs/agreement.md; use the LLM evaluator
where that matters.

K depends on the query only: requirements are computed from the normalised query
(`normalise_text`: NFKC, case-folded, whitespace collapsed), so the same query always
gets the same requirement list, whatever the context.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from seer_metrics.cache import normalise_text
from seer_metrics.evaluators.base import EvaluationOutcome
from seer_metrics.events import RetrievalEvent
from seer_metrics.judgment import Judgment, Requirement

LEXICAL_MODEL = "lexical-v1"
LEXICAL_PROMPT_VERSION = "heuristic-3"

_STOPWORD_TEXT = """
    a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing down during each
    either else ever few for from further had has have having he her here hers herself him
    himself his how i if in into is it its itself just me more most my myself neither no
    nor not of off on once only or other our ours out over own same she should so some
    such than that the their theirs them themselves then there these they this those
    through to too under until up upon very was we were what whatever when where whether
    which while who whom whose why will with within would you your yours s t
    did does doesn don isn wasn weren aren
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())

# Words that occur in questions but say little about which passage answers them.
_WEAK_TERM_TEXT = "name named called known many much one two type kind year years time located"
WEAK_TERMS = frozenset(_WEAK_TERM_TEXT.split())

RELATIVE_MARKERS = frozenset({"which", "who", "whom", "whose", "that", "where", "when"})
CONJUNCTIONS = frozenset({"and", "or", "but"})
# Where a long clause may be cut into phrases (each a smaller fact to look for).
PHRASE_MARKERS = frozenset(
    {
        "in",
        "of",
        "on",
        "at",
        "by",
        "for",
        "from",
        "with",
        "during",
        "after",
        "before",
        "since",
        "including",
        "following",
        "about",
        "as",
        "to",
        "into",
        "is",
        "was",
        "are",
        "were",
    }
)
PREPOSITIONS = frozenset({"in", "of", "on", "at", "by", "for", "from", "with", "to", "into"})
WH_WORDS = frozenset({"what", "which", "who", "whom", "whose", "where", "when", "why", "how"})

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[^a-z\s])|\n+")
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
# In a query, a hyphenated word ("sign-on", "state-of-the-art") is one token: never a cut.
_QUERY_WORD = re.compile(r"[^\W_]+(?:['’‐‑-][^\W_]+)*")
_QUOTED = re.compile(r"\"[^\"]+\"|“[^”]+”|'[^']{2,}'(?!\w)")


def fold_accents(text: str) -> str:
    """`Aschenbrödel` and `Aschenbrodel` must match: strip combining marks."""
    if text.isascii():
        return text  # nothing to decompose or strip
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


# (suffix, replacement, shortest stem kept), tried in order; the first match applies.
_SUFFIX_RULES: tuple[tuple[str, str, int], ...] = (
    ("ational", "ate", 3),
    ("ization", "ize", 3),
    ("ation", "", 3),
    ("ition", "", 3),
    ("ments", "", 3),
    ("ment", "", 3),
    ("ness", "", 3),
    ("ings", "", 3),
    ("ing", "", 3),
    ("edly", "", 3),
    ("ied", "y", 2),
    ("ed", "", 3),
    ("ers", "", 3),
    ("ors", "", 3),
    ("er", "", 3),
    ("or", "", 4),
    ("ion", "", 4),
    ("ly", "", 4),
)


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A small suffix-stripping stemmer: `directed`, `director`, `directors` -> `direct`.

    Crude on purpose (no dictionary); it only has to map a query word and a passage word
    to the same key more often than not.
    """
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 4:
        word = word[:-1]
    for suffix, replacement, shortest in _SUFFIX_RULES:
        if word.endswith(suffix) and len(word) - len(suffix) >= shortest:
            word = word[: -len(suffix)] + replacement
            if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]
            break
    if len(word) > 4 and word.endswith("e"):
        word = word[:-1]
    return word


def words(text: str) -> list[str]:
    """Lower-case, accent-folded words; a possessive `'s` is dropped."""
    folded = fold_accents(text).casefold()
    found = _WORD.findall(folded)
    if "'" not in folded and "’" not in folded:
        return found  # no apostrophe: every match is a word as it stands
    split = []
    for word in found:
        word = word.replace("’", "'")
        if word.endswith("'s"):
            word = word[:-2]
        split.extend(part for part in word.split("'") if part)
    return split


def is_content_word(word: str) -> bool:
    return word not in STOPWORDS and (len(word) > 1 or word.isdigit())


def content_terms(text: str) -> list[str]:
    """Stemmed content terms of a text, in order, with repeats."""
    return [
        stem(word)
        for word in words(text)
        if word not in STOPWORDS and (len(word) > 1 or word.isdigit())
    ]


_NO_TERMS: frozenset[str] = frozenset()  # shared: an empty frozenset takes 216 bytes


@dataclass(frozen=True)
class RequirementPattern:
    """One requirement as the heuristic sees it: readable text and the terms to find."""

    id: str
    text: str
    terms: tuple[str, ...]
    weak_terms: frozenset[str] = frozenset()


class _Token(NamedTuple):
    word: str
    start: int
    end: int
    quoted: bool
    content: bool  # is_content_word(word), asked again and again while splitting


# Every hyphen a query word may hold ("‐", "‑", "-") becomes "-".
_HYPHEN_TABLE = str.maketrans({"‐": "-", "‑": "-"})


def _tokens(query: str) -> list[_Token]:
    quoted_spans = [match.span() for match in _QUOTED.finditer(query)]
    tokens = []
    for match in _QUERY_WORD.finditer(query):
        start, end = match.span()
        quoted = bool(quoted_spans) and any(
            span_start <= start < span_end for span_start, span_end in quoted_spans
        )
        word = match.group()
        if not word.isascii():  # accents, "’" and the other hyphens are not ASCII
            word = fold_accents(word).replace("’", "'").translate(_HYPHEN_TABLE)
        if word.endswith("'s"):
            word = word[:-2]
        content = word not in STOPWORDS and (len(word) > 1 or word.isdigit())
        tokens.append(_Token(word, start, end, quoted, content))
    return tokens


def _is_split_point(tokens: Sequence[_Token], index: int) -> bool:
    token = tokens[index]
    if index == 0 or token.quoted or index == len(tokens) - 1:
        return False
    if token.word in RELATIVE_MARKERS:
        # "... and when was it published": the conjunction has already opened the clause
        return tokens[index - 1].word not in CONJUNCTIONS
    if token.word in CONJUNCTIONS:
        after = tokens[index + 1]
        after_ok = after.content or after.word in WH_WORDS
        return tokens[index - 1].content and after_ok
    return False


def _split_long(tokens: Sequence[_Token], segment: list[int], max_terms: int) -> list[list[int]]:
    """Cut a clause with more than `max_terms` content words at its prepositions.

    Each piece keeps at least two content words, so "the island of Oahu" stays whole.
    """
    content = [tokens[i].content for i in segment]
    if sum(content) <= max_terms:
        return [segment]
    pieces: list[list[int]] = [[]]
    in_piece = 0
    remaining = sum(content)
    for offset, index in enumerate(segment):
        token = tokens[index]
        if token.word in PHRASE_MARKERS and not token.quoted and in_piece >= 2 and remaining >= 2:
            pieces.append([])
            in_piece = 0
        pieces[-1].append(index)
        if content[offset]:
            in_piece += 1
            remaining -= 1
    return _attach_names(tokens, pieces)


# Verbs that, between two content words, make a phrase a fact of its own: "what position
# did the receiver" (the receiver's position) against "what is the API rate limit".
_AUXILIARY_TEXT = "did does do is was are were has have had can could will would"
AUXILIARIES = frozenset(_AUXILIARY_TEXT.split())


def _carries_own_fact(words_here: Sequence[str], *, relative_clause: bool) -> bool:
    """A relation between two things: an auxiliary or an `of` between content words.

    "what position did the receiver", "by the birthplace of the author" and a relative
    clause ("who portrayed Corliss Archer") carry a fact;
    "what is the api rate limit" only names the thing asked for.
    """
    content = [is_content_word(word) for word in words_here]
    if relative_clause and sum(content) >= 2:
        return True  # "who portrayed corliss archer": a relative clause states a fact
    return any(
        (word in AUXILIARIES or word == "of") and any(content[:at]) and any(content[at + 1 :])
        for at, word in enumerate(words_here)
    )


def _only_names(words_here: Sequence[str]) -> bool:
    """A prepositional phrase without a verb or a question word: "of lumen search"."""
    return words_here[0] in PREPOSITIONS and not any(
        word in PHRASE_MARKERS or word in WH_WORDS or word in RELATIVE_MARKERS
        for word in words_here[1:]
    )


def _attach_names(tokens: Sequence[_Token], pieces: list[list[int]]) -> list[list[int]]:
    """Cut at a preposition only when both sides carry their own facts.

    A phrase that only names what the clause is about ("what is the API rate limit | of
    Lumen Search") goes back to the piece before it, unless that piece is a fact of its
    own ("what position did the receiver | of the 2007 FIFA U-20 Golden Shoe").
    """
    attached: list[list[int]] = [pieces[0]]
    for piece in pieces[1:]:
        before = [tokens[i].word for i in attached[-1]]
        # a question's opening "which"/"who" asks; only a later one opens a relative clause
        relative_clause = attached[-1][0] > 0 and before[0] in RELATIVE_MARKERS
        own_fact = _carries_own_fact(before, relative_clause=relative_clause)
        if _only_names([tokens[i].word for i in piece]) and not own_fact:
            attached[-1] = attached[-1] + piece
        else:
            attached.append(piece)
    return attached


def _segments(tokens: Sequence[_Token], max_terms: int) -> list[list[int]]:
    segments: list[list[int]] = [[]]
    for index, token in enumerate(tokens):
        # only a relative marker or a conjunction may be a split point
        may_split = token.word in RELATIVE_MARKERS or token.word in CONJUNCTIONS
        if may_split and _is_split_point(tokens, index) and segments[-1]:
            # "the county in which ...": the preposition belongs to the relative clause
            moved = (
                [segments[-1].pop()]
                if len(segments[-1]) > 1
                and tokens[index].word in RELATIVE_MARKERS
                and tokens[index - 1].word in PREPOSITIONS
                else []
            )
            segments.append(moved)
        segments[-1].append(index)
    segments = [piece for segment in segments for piece in _split_long(tokens, segment, max_terms)]
    # A segment without content words (e.g. "who is it") joins its neighbour.
    merged: list[list[int]] = []
    for segment in segments:
        has_content = any(tokens[i].content for i in segment)
        previous_has_content = bool(merged) and any(tokens[i].content for i in merged[-1])
        if merged and (not has_content or not previous_has_content):
            merged[-1].extend(segment)
        else:
            merged.append(list(segment))
    return merged


MAX_CLAUSE_TERMS = 4


def _segment_words(tokens: Sequence[_Token], segment: Sequence[int]) -> list[str]:
    """The segment's words, a hyphenated token split into its parts as passages split it."""
    return [part for index in segment for part in tokens[index].word.split("-") if part]


def extract_requirements(
    query: str, *, max_clause_terms: int = MAX_CLAUSE_TERMS
) -> tuple[RequirementPattern, ...]:
    """Split a query into requirements; depends on the normalised query only.

    A relative clause ("... the film that was shot in Leland") becomes its own requirement,
    its text prefixed with the noun it hangs from so that it reads on its own; a
    conjunction between content words ("Nolan and Kalathil") splits too. Terms are
    disjoint across requirements: a term already owned by an earlier one is not repeated.
    """
    return _extract_requirements_cached(normalise_text(query), max_clause_terms)


@lru_cache(maxsize=4096)
def _extract_requirements_cached(
    normalised: str, max_clause_terms: int
) -> tuple[RequirementPattern, ...]:
    tokens = _tokens(normalised)
    if not tokens:
        return (RequirementPattern("r1", normalised or "(empty query)", ()),)
    requirements: list[RequirementPattern] = []
    owned: set[str] = set()
    previous_head: str | None = None
    for segment in _segments(tokens, max_clause_terms):
        first, last = tokens[segment[0]], tokens[segment[-1]]
        start = (
            tokens[segment[1]].start
            if first.word in CONJUNCTIONS and len(segment) > 1
            else first.start
        )
        end = last.end
        while end < len(normalised) and normalised[end] in "\"”'":
            end += 1  # keep a closing quote
        text = normalised[start:end].strip(" ,;:")
        opens_clause = first.word in RELATIVE_MARKERS or (
            first.word in PREPOSITIONS
            and len(segment) > 1
            and tokens[segment[1]].word in RELATIVE_MARKERS
        )
        if opens_clause and previous_head and requirements:
            text = f"{previous_head} {text}"
        seen_here: list[str] = []
        weak: set[str] = set()
        for word in _segment_words(tokens, segment):
            if not is_content_word(word):
                continue
            term = stem(word)
            if term in owned or term in seen_here:
                continue
            seen_here.append(term)
            if word in WEAK_TERMS:
                weak.add(term)
        if not seen_here:
            # Every term is owned already; keep the clause, with its own words, so K stays
            # a function of the query and the clause can still be looked for.
            seen_here = list(dict.fromkeys(stem(w) for w in _segment_words(tokens, segment)))
        owned.update(seen_here)
        content_words = [tokens[i].word for i in segment if tokens[i].content]
        previous_head = content_words[-1] if content_words else previous_head
        requirements.append(
            RequirementPattern(
                id=f"r{len(requirements) + 1}",
                text=text,
                terms=tuple(seen_here),
                weak_terms=frozenset(weak) if weak else _NO_TERMS,
            )
        )
    return tuple(requirements)


class _PassageTerms(NamedTuple):
    """A passage's terms: a function of its text, so one is kept per distinct text."""

    title_terms: frozenset[str]
    terms: frozenset[str]
    # title terms plus one sentence's terms, for each sentence: a fact is usually stated
    # within one sentence about the passage's subject (its title)
    sentence_terms: tuple[frozenset[str], ...]


def split_title(text: str) -> tuple[str, str]:
    """(title, body): a first line followed by a newline is the passage's title."""
    if "\n" not in text:
        return "", text
    title, _, body = text.partition("\n")
    return title.strip(), body


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


_DISAMBIGUATION = re.compile(r"\s*\([^)]*\)\s*$")
# A run of capitalised words, optionally joined by a lower-case particle: "Bank of England".
_NAMED_ENTITY = re.compile(
    r"[A-Z][\w'’-]*(?:\s+(?:(?:of|the|de|and|for|in|von|van|la|le|du|da)\s+)?[A-Z][\w'’-]*)*"
)
MIN_LINK_ENTITY_TERMS = 2


def title_key(title: str) -> str:
    """The title without its disambiguation: "Kiss and Tell (1945 film)" -> "Kiss and Tell"."""
    return _DISAMBIGUATION.sub("", title).strip()


def _name_candidates(text: str) -> list[tuple[str, ...]]:
    """Capitalised multi-word names in `text`, as stemmed terms, before any exclusion."""
    found = []
    for match in _NAMED_ENTITY.finditer(fold_accents(text)):
        terms = tuple(content_terms(match.group(0)))
        if len(terms) >= MIN_LINK_ENTITY_TERMS:
            found.append(terms)
    return found


def named_entities(text: str, exclude: frozenset[str] | set[str]) -> set[tuple[str, ...]]:
    """Capitalised multi-word names in `text` (as stemmed terms) not wholly made of `exclude`."""
    return {terms for terms in _name_candidates(text) if not set(terms) <= exclude}


@lru_cache(maxsize=4096)
def _title_facts(text: str) -> tuple[str, frozenset[str]]:
    """A passage's title key and its content terms: whether a query names it."""
    title, _ = split_title(text)
    key = title_key(title)
    return key, frozenset(content_terms(key))


class _BridgeFacts(NamedTuple):
    """What linking needs of a passage, kept per distinct text."""

    folded_body: str
    # finds this passage's title in another passage's folded body (None: no title terms)
    title_pattern: re.Pattern[str] | None
    # its multi-word names, as stemmed terms and as a set (to exclude the query's)
    names: tuple[tuple[tuple[str, ...], frozenset[str]], ...]


@lru_cache(maxsize=4096)
def _bridge_facts(text: str) -> _BridgeFacts:
    _, body = split_title(text)
    key, key_terms = _title_facts(text)
    pattern = (
        re.compile(r"(?<!\w)" + re.escape(fold_accents(key).casefold()) + r"(?!\w)")
        if key_terms
        else None
    )
    names = tuple((terms, frozenset(terms)) for terms in _name_candidates(body))
    return _BridgeFacts(fold_accents(body).casefold(), pattern, names)


def ground_passages(query_terms: set[str] | frozenset[str], texts: Sequence[str]) -> dict[int, int]:
    """Which context passages are tied to the query's entities, and by how many hops.

    Depth 1 (anchored): every content term of the passage's title (disambiguation dropped)
    is in the query, so the query names the passage's subject. Depth d+1 (linked, a bridge):
    the passage's title occurs in the body of a depth-d passage, or the two bodies share a
    multi-word capitalised name the query does not contain; that is how a multi-hop chain
    reaches an entity the question only describes. Passages without a title are never
    grounded. Returns {context position: depth}.
    """
    titles = [_title_facts(text) for text in texts]
    depth: dict[int, int] = {}
    for index, (_, key_terms) in enumerate(titles):
        if key_terms and key_terms <= query_terms:
            depth[index] = 1
    if not depth:
        return depth
    facts = [_bridge_facts(text) for text in texts]
    entities = [
        {terms for terms, term_set in passage.names if not term_set <= query_terms}
        for passage in facts
    ]
    changed = True
    while changed:
        changed = False
        for index, passage in enumerate(facts):
            if index in depth or not titles[index][0]:
                continue
            pattern = passage.title_pattern
            for source in sorted(depth):
                titled = (
                    pattern is not None and pattern.search(facts[source].folded_body) is not None
                )
                if titled or entities[index] & entities[source]:
                    depth[index] = depth[source] + 1
                    changed = True
                    break
    return depth


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
    (docs/agreement.md). A heuristic: see the module docstring for what it cannot do.
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
