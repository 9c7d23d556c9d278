"""Crossing leads on one statistic that each yield to another: one of them stands."""

from __future__ import annotations

import pytest

from seer_metrics.rules import CheckOutcome
from seer_metrics.rules.lead_order import Lead, Outside, yielding_leads
from tests.seer_metrics.rules.test_attribution import drift

PROD, INITECH, V2 = "env=prod", "tenant=initech", "feature_flag=retrieval-v2"


def lead(label: str, impact: float) -> Lead:
    return Lead(drift(label, 100, 0.1, noise=0.05, status="fail"), impact)


def falls_outside(falls: dict[tuple[str, str], float]):
    """How much each lead fell outside the other's slice, in units of its noise of 1."""

    def outside(mine: CheckOutcome, theirs: CheckOutcome) -> Outside | None:
        fall = falls.get((mine.slice, theirs.slice))
        return None if fall is None else Outside(fall, 1.0)

    return outside


# env=prod fell less outside initech than initech outside env=prod (prod yields to
# initech), initech less outside v2 than v2 outside initech, v2 less outside env=prod:
# each pair read on its own, every lead yields to another.
CIRCLE = {
    (PROD, INITECH): 1.4,
    (INITECH, PROD): 1.6,
    (INITECH, V2): 0.5,
    (V2, INITECH): 1.2,
    (V2, PROD): 0.3,
    (PROD, V2): 0.9,
}


@pytest.mark.parametrize("strongest", [PROD, INITECH, V2])
def test_of_leads_whose_yielding_goes_round_the_one_that_moved_the_traffic_most_stands(
    strongest: str,
) -> None:
    """Lexical judge, seed 248, before falls outside were read for their noise: env=prod
    yielded to initech, initech to prod x v2, retrieval-v2 to env=prod, and a bloat of
    prod x initech headed the page. The one of the circle with the largest impact
    stands, and the two others yield, each to the one it yields to or through it."""
    leads = [lead(label, 0.05 if label == strongest else 0.02) for label in (PROD, INITECH, V2)]
    yielding = yielding_leads(leads, falls_outside(CIRCLE))
    assert yielding == {("recall_drift", s) for s in (PROD, INITECH, V2) if s != strongest}


def test_a_lead_whose_yielding_ends_at_a_standing_lead_still_yields() -> None:
    """Without a circle nothing changes: env=prod yields to initech, retrieval-v2 to
    env=prod (through it to initech); initech stands, whatever the impacts."""
    falls = dict(CIRCLE)
    falls[(INITECH, V2)], falls[(V2, INITECH)] = 1.2, 0.5  # initech no longer yields
    leads = [lead(PROD, 0.05), lead(INITECH, 0.01), lead(V2, 0.04)]
    yielding = yielding_leads(leads, falls_outside(falls))
    assert yielding == {("recall_drift", PROD), ("recall_drift", V2)}


def test_a_lead_yielding_into_a_circle_yields_whatever_its_impact() -> None:
    """tenant=acme yields to env=prod and retrieval-v2, which are on the circle: acme
    moved the traffic most, yet the lead that stands is the circle's own strongest, and
    acme yields."""
    acme = "tenant=acme"
    falls = dict(CIRCLE)
    falls[(acme, PROD)], falls[(PROD, acme)] = 0.2, 1.5
    falls[(acme, V2)], falls[(V2, acme)] = 0.2, 1.5
    leads = [lead(PROD, 0.03), lead(INITECH, 0.02), lead(V2, 0.01), lead(acme, 0.09)]
    yielding = yielding_leads(leads, falls_outside(falls))
    assert yielding == {("recall_drift", s) for s in (INITECH, V2, acme)}
