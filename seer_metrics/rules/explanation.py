"""What one narrower slice explains of a parent slice's drop, for one drop rule.

Kept apart from `attribution` (which chooses the leads) so that `wording` can word an
explanation without importing the code that chooses it.
"""

from __future__ import annotations

from dataclasses import dataclass

from seer_metrics.rules.model import RestOfParent

# A narrower slice explains its parent when it accounts for this share of its change...
EXPLAINING_SHARE = 0.75
# ... and the rest of the parent fell at most this much per event as the slice did.
CONCENTRATION = 0.5
# A drift rule's change is read over its recent days when the child's drop over them is at
# least this share of today's: a change under way for days. A release's first day (an
# eighth of today's drop over 8 days) is judged on its day, where all of it is.
GRADUAL = 1 / 3


@dataclass(frozen=True)
class Explanation:
    """How much of a parent slice's drop one narrower slice accounts for (one rule)."""

    child: str
    parent: str
    share: float  # of the parent's drop: events_C * drop_C / (events_P * drop_P)
    event_share: float  # of the parent's events today
    parent_events: int
    surprise: float  # the child's drop in multiples of its noise
    child_drop: float
    parent_drop: float
    rest: RestOfParent
    # the child's drop over a drift rule's recent days (None for other rules)
    child_recent_drop: float | None = None

    @property
    def rest_drop(self) -> float | None:
        """How much the rest of the parent fell per event: exact from the slice table when
        it has figures, else from the shares (`drop_P * (1 - share) / (1 - event_share)`)."""
        if self.rest.delta is not None:
            return self.rest.delta
        if self.event_share >= 1:
            return None
        return self.parent_drop * (1 - self.share) / (1 - self.event_share)

    @property
    def concentrated(self) -> bool:
        """The rest of the parent fell at most `CONCENTRATION` times as much as the child:
        the change lives in the child, not evenly over the parent. A change under way for
        days (`GRADUAL`) is read over a drift rule's recent days: on a drift's first page
        the rest of retrieval-v2 (~50 staging events) read 0.07 down by chance beside
        prod × v2's 0.095 (ideal judge, seed 106), and retrieval-v2 led a drift that was
        prod × v2's alone."""
        recent_rest, recent_drop = self.rest.recent_delta, self.child_recent_drop
        if (
            recent_rest is not None
            and recent_drop is not None
            and recent_drop >= GRADUAL * self.child_drop
        ):
            return recent_rest <= CONCENTRATION * recent_drop
        rest_drop = self.rest_drop
        return rest_drop is not None and rest_drop <= CONCENTRATION * self.child_drop

    @property
    def explains(self) -> bool:
        return self.share >= EXPLAINING_SHARE and self.concentrated
