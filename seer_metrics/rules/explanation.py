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
        the change lives in the child, not evenly over the parent."""
        rest_drop = self.rest_drop
        return rest_drop is not None and rest_drop <= CONCENTRATION * self.child_drop

    @property
    def explains(self) -> bool:
        return self.share >= EXPLAINING_SHARE and self.concentrated
