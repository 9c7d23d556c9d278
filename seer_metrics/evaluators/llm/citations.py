"""Citations: a phase-2 answer turned into a judgment the event can trust.

The model cites passages by id with a verbatim quote; a citation counts only when its
passage is in the event's context and one of its quotes is found in that passage's text.
"""

from __future__ import annotations

from collections.abc import Sequence

from seer_metrics.evaluators.llm.answers import SupportAnswer, SupportItem
from seer_metrics.evaluators.llm.prompts import unescape_untrusted
from seer_metrics.events import RetrievalEvent
from seer_metrics.judgment import Judgment, Requirement
from seer_metrics.judgment_store import normalise_text


def build_judgment(
    event: RetrievalEvent, requirements: Sequence[Requirement], answer: SupportAnswer
) -> Judgment:
    """Turn a phase-2 answer into a judgment the event can trust.

    Unknown requirement ids are ignored and missing ones stay unsupported. A cited passage
    that the context lacks is dropped and counted as hallucinated; a cited passage of the
    context counts only when one of its quotes is found in its text (after whitespace and
    case normalisation), else it is dropped and counted as unverified.
    """
    texts = {item.id: normalise_text(item.text) for item in event.context}
    by_requirement: dict[str, list[SupportItem]] = {}
    for item in answer.requirements:
        by_requirement.setdefault(unescape_untrusted(item.id), []).append(item)
    unverified = 0
    result: list[Requirement] = []
    for requirement in requirements:
        cited: list[str] = []
        quotes: dict[str, list[str]] = {}
        for item in by_requirement.get(requirement.id, []):
            cited.extend(unescape_untrusted(pid) for pid in item.supported_by)
            for evidence in item.evidence:
                passage = unescape_untrusted(evidence.passage)
                quotes.setdefault(passage, []).append(evidence.quote)
        kept: list[str] = []
        for passage_id in dict.fromkeys(cited):
            if passage_id not in texts:
                kept.append(passage_id)  # dropped and counted by `restricted_to`
            elif any(quote_found(quote, texts[passage_id]) for quote in quotes.get(passage_id, [])):
                kept.append(passage_id)
            else:
                unverified += 1
        result.append(Requirement(requirement.id, requirement.text, tuple(kept)))
    judgment = Judgment(tuple(result), unverified_citations=unverified)
    return judgment.restricted_to(texts)


def quote_found(quote: str, normalised_passage: str) -> bool:
    """Whether `quote` (as written, or with the prompt's escaping undone) is in the passage."""
    candidates = {normalise_text(quote), normalise_text(unescape_untrusted(quote))}
    return any(candidate and candidate in normalised_passage for candidate in candidates)
