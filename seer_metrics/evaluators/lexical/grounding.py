"""Which passages of a context the query's entities reach: titles, names and bridges.

Why: a distractor that repeats the question's words is no evidence; a passage the query
names (by its title), or one linked to it hop by hop, is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import NamedTuple

from seer_metrics.evaluators.lexical.text import content_terms, fold_accents


def split_title(text: str) -> tuple[str, str]:
    """(title, body): a first line followed by a newline is the passage's title."""
    if "\n" not in text:
        return "", text
    title, _, body = text.partition("\n")
    return title.strip(), body


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
