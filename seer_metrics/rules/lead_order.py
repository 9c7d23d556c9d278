"""Which of two crossing leads on one statistic tells the story first.

Each change rule chooses its own leads (`attribution`). One rule, or a statistic
watched by two (recall: `recall_drop` against the trailing week, `recall_drift` against
the four weeks before the last one), can end with two leads on slices that share
events, neither inside the other. Among leads that explain as wide a change (the order
`attribution.alert_order` reads first), where the day has their intersection (two
one-key slices cross in a pair), the lead that fell less outside the other tells the
story second: its drop lives in the other's events. A drift over all of tenant=acme
(ideal judge, seed 102) had retrieval-v2 lead, 64% of its drop in its acme part with
42% of its events, beside acme's own drift. Read before what each explains, a small
rest's chance fall (~25 staging events of acme, lexical judge) had put acme before
env=prod, whose drift explained all's. Else the lead that moved the whole traffic's
mean the more (its `impact`) comes first. On a drift's first page (ideal judge, seed
108) a drop of `retrieval-v2 × tenant=initech` (impact 0.03, mostly prod × v2's own
events) came, as an ERROR explaining initech's drop, before the drift of prod × v2
(impact 0.07).

Of two nested leads, the narrower one that explains nothing wider comes after the
wider one when the wider one's rule reads it as not explaining its change
(`attribution`: neither rule says the change is concentrated in it). Where the rules
disagree, one finding the narrower slice explaining a wider change, `alert_order`'s
order stands (the one explaining the wider change first): neither rule is the better
judge of it. With tenant=acme losing its top hit (lexical judge) either way round
happened: the drop rule's lead a pair inside acme and the drift's acme, or the drift's
lead the pair and the drop's acme.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from seer_metrics.rules.model import CheckOutcome
from seer_metrics.rules.readings import TOLERANCE
from seer_metrics.rules.rest_figures import rest_of_parent
from seer_metrics.slices.identity import SliceIdentity

# How much one lead's slice fell (per event) outside another's: None without figures.
Outside = Callable[[CheckOutcome, CheckOutcome], "float | None"]


@dataclass(frozen=True)
class Lead:
    """A rule's lead and how much it moved the whole traffic's mean."""

    outcome: CheckOutcome
    impact: float | None


def _yields_to(lead: Lead, other: Lead, outside: Outside | None = None) -> bool:
    """Whether `other` (a crossing lead on the same statistic) tells the story first."""
    mine, theirs = lead.outcome, other.outcome
    if mine.statistic != theirs.statistic:
        return False
    here, there = SliceIdentity.decode(mine.slice), SliceIdentity.decode(theirs.slice)
    across = (
        here.may_overlap(there)
        and here != there
        and not here.is_narrower_than(there)
        and not there.is_narrower_than(here)
    )
    if not across:
        return False
    if outside is not None:
        mine_outside, theirs_outside = outside(mine, theirs), outside(theirs, mine)
        if (
            mine_outside is not None
            and theirs_outside is not None
            and abs(mine_outside - theirs_outside) > TOLERANCE
        ):
            return mine_outside < theirs_outside
    return (other.impact or 0.0) > (lead.impact or 0.0)


def outside_reader(
    outcomes: Sequence[CheckOutcome], rows: Mapping[str, Mapping[str, Any]]
) -> Outside:
    """How much a lead fell outside another's slice, on its own rule: the rest of it
    outside their intersection (`rest_of_parent`, from the day's slice `rows`), where
    the day has one."""
    by_pairs = {(o.rule, frozenset(SliceIdentity.decode(o.slice).pairs)): o for o in outcomes}

    def outside(lead: CheckOutcome, other: CheckOutcome) -> float | None:
        meet = SliceIdentity.decode(lead.slice).pairs + SliceIdentity.decode(other.slice).pairs
        part = by_pairs.get((lead.rule, frozenset(meet)))
        return None if part is None else rest_of_parent(part, lead, rows).delta

    return outside


def yielding_leads(leads: Sequence[Lead], outside: Outside | None = None) -> set[tuple[str, str]]:
    """The (rule, slice) of the leads a crossing lead on the same statistic (of any
    rule) tells the story before (see the module's docstring); `outside` reads how much
    a lead fell outside another's slice."""
    return {
        (lead.outcome.rule, lead.outcome.slice)
        for lead in leads
        if any(_yields_to(lead, other, outside) for other in leads)
    }
