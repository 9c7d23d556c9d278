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

Its modules, in the order a judgment uses them: `text` (words and stemmed terms),
`requirements` (the query split into requirements), `grounding` (which passages the query's
entities reach) and `evaluator` (shares, support, the memos and `LexicalEvaluator`).
"""

from seer_metrics.evaluators.lexical.evaluator import (
    LEXICAL_MODEL,
    LEXICAL_PROMPT_VERSION,
    LexicalEvaluator,
    context_idf,
)
from seer_metrics.evaluators.lexical.grounding import ground_passages, split_title, title_key
from seer_metrics.evaluators.lexical.requirements import (
    RequirementPattern,
    extract_requirements,
)
from seer_metrics.evaluators.lexical.text import (
    content_terms,
    fold_accents,
    is_content_word,
    stem,
    words,
)

__all__ = [
    "LEXICAL_MODEL",
    "LEXICAL_PROMPT_VERSION",
    "LexicalEvaluator",
    "RequirementPattern",
    "content_terms",
    "context_idf",
    "extract_requirements",
    "fold_accents",
    "ground_passages",
    "is_content_word",
    "split_title",
    "stem",
    "title_key",
    "words",
]
