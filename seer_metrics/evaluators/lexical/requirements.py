"""A query split into requirements (the facts an answer needs), from its surface syntax.

Why from the query alone: K, the number of requirements, must not change with the
context, so the same query always gets the same requirement list.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from seer_metrics.evaluators.lexical.text import STOPWORDS, fold_accents, is_content_word, stem
from seer_metrics.judgment_store import normalise_text

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

# In a query, a hyphenated word ("sign-on", "state-of-the-art") is one token: never a cut.
_QUERY_WORD = re.compile(r"[^\W_]+(?:['’‐‑-][^\W_]+)*")
_QUOTED = re.compile(r"\"[^\"]+\"|“[^”]+”|'[^']{2,}'(?!\w)")


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
