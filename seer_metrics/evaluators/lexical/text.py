"""Words and terms as the lexical judge compares them, in queries and passages alike.

Why one place: a query word and a passage word only match if both went through the same
accent folding, possessive dropping and stemming.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

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

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")


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
