"""Which of two leads on one statistic, from two rules, tells the story first.

Each change rule chooses its own leads (`attribution`). A statistic watched by two rules
(recall: `recall_drop` against the trailing week, `recall_drift` against the four weeks
before the last one) can end with two leads on slices that share events, neither inside
the other: then the lead that moved the whole traffic's mean the more (its `impact`)
tells the story first. On a drift's first page (ideal judge, seed 108) a drop of
`retrieval-v2 × tenant=initech` (impact 0.03, mostly prod × v2's own events) came, as an
ERROR explaining initech's drop, before the drift of prod × v2 (impact 0.07).

Two nested leads keep `alert_order`'s order (the one explaining the wider change first):
there the rules disagree on whether the change is concentrated in the narrower slice,
and neither rule is the better judge of it. With tenant=acme losing its top hit (lexical
judge) either way round happened: the drop rule's lead a pair inside acme and the
drift's acme, or the drift's lead the pair and the drop's acme.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from seer_metrics.rules.model import CheckOutcome
from seer_metrics.slices.identity import SliceIdentity


@dataclass(frozen=True)
class Lead:
    """A rule's lead and how much it moved the whole traffic's mean."""

    outcome: CheckOutcome
    impact: float | None


def _yields_to(lead: Lead, other: Lead) -> bool:
    """Whether `other` (another rule, same statistic) tells the story before `lead`."""
    mine, theirs = lead.outcome, other.outcome
    if mine.rule == theirs.rule or mine.statistic != theirs.statistic:
        return False
    here, there = SliceIdentity.decode(mine.slice), SliceIdentity.decode(theirs.slice)
    across = (
        here.may_overlap(there)
        and here != there
        and not here.is_narrower_than(there)
        and not there.is_narrower_than(here)
    )
    return across and (other.impact or 0.0) > (lead.impact or 0.0)


def yielding_leads(leads: Sequence[Lead]) -> set[tuple[str, str]]:
    """The (rule, slice) of the leads another rule's lead on the same statistic tells
    the story before (see the module's docstring)."""
    return {
        (lead.outcome.rule, lead.outcome.slice)
        for lead in leads
        if any(_yields_to(lead, other) for other in leads)
    }
