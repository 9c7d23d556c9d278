"""What one narrower slice explains of a parent slice's drop, for one drop rule.

Kept apart from `attribution` (which chooses the leads) so that `wording` can word an
explanation without importing the code that chooses it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from seer_metrics.rules.model import CheckOutcome, RestOfParent, moved_bad_way
from seer_metrics.rules.rest_figures import rest_of_parent, same_baseline, today_figures

# A narrower slice explains its parent when it accounts for this share of its change...
EXPLAINING_SHARE = 0.75
# ... and the rest of the parent fell at most this much per event as the slice did.
CONCENTRATION = 0.5
# ... or, when the rest of the parent fell no more than its noise and at most this much per
# event as the slice did, a majority of its change: the rest's chance dip, not a second
# trouble, is what keeps the share short.
STRONG_CONCENTRATION = 0.1
MAJORITY_SHARE = 0.5
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
    # the child's events and noise today (the rule's confidence times its standard
    # error), and its events over a drift rule's recent days: how sure the gap is
    child_events: int = 0
    child_noise: float = 0.0
    child_recent_events: int = 0
    # the parent's noise today: the rest's spread when the child's own values collapsed
    parent_noise: float = 0.0

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
        """The rest of the parent fell at most `CONCENTRATION` times as much as the child,
        and less than the child beyond the noise of both (`apart`). A change under way for
        days (`GRADUAL`) is read over a drift rule's recent days: on a drift's first page
        the rest of retrieval-v2 (~50 staging events) read 0.07 down by chance beside
        prod × v2's 0.095 (ideal judge, seed 106), and retrieval-v2 led a drift that was
        prod × v2's alone. Where over those days the rest fell at most that much but the
        gap is within their noise (a drift's early days are small), today decides: the
        rest of retrieval-v2 read 0.023 down over 8 days beside prod × v2's 0.051, and
        0.007 today beside 0.128 (lexical judge, seed 242)."""
        today = self._today()
        recent = self._recent()
        if recent is None:
            return today is not None and self.apart(*today)
        if self.apart(*recent):
            return True
        child_drop, rest_drop, _, _ = recent
        return rest_drop <= CONCENTRATION * child_drop and today is not None and self.apart(*today)

    def _compared(self) -> tuple[float, float, int, int] | None:
        """The child's drop, the rest's, and their events: over a drift rule's recent days
        for a change under way for days, else today."""
        return self._recent() or self._today()

    def _recent(self) -> tuple[float, float, int, int] | None:
        """Over a drift rule's recent days, for a change under way for days (`GRADUAL`)."""
        recent_rest, recent_drop = self.rest.recent_delta, self.child_recent_drop
        if (
            recent_rest is not None
            and recent_drop is not None
            and recent_drop >= GRADUAL * self.child_drop
        ):
            return recent_drop, recent_rest, self.child_recent_events, self.rest.recent_events
        return None

    def _today(self) -> tuple[float, float, int, int] | None:
        rest_drop = self.rest_drop
        if rest_drop is None:
            return None
        return self.child_drop, rest_drop, self.child_events, self.rest_events

    @property
    def strongly_concentrated(self) -> bool:
        """The rest of the parent fell at most `STRONG_CONCENTRATION` times as much as the
        child and no more than its own noise: what the child does not account for is a
        chance dip of the rest. A tenant of 20 on a wrong index (recall 0.77 to 0, 25 of
        250 events) held 74% of all's drop beside the rest's dip of 0.03, within its noise
        (ideal judge, seed 165), and `all` led. At a quarter as much, the first page of a
        drift over all of tenant=acme was led by retrieval-v1 x acme (40 events, 0.19
        down, 67% of acme's drop) beside the rest of acme's 0.04 (ideal judge, seed 150).
        Read over a drift rule's recent days, the rest must be within its noise today too:
        with half of env=prod losing its top hit, env=prod x globex (59 events, low on
        earlier days by chance) held 52% of env=prod's drift, the rest flat over 8 days but
        0.08 down today over 127 events, beyond its noise of 0.06 (lexical judge, seed
        301)."""
        recent, today = self._recent(), self._today()
        reading = recent or today  # as `_compared` reads it
        if reading is None or self.child_noise <= 0:
            return False
        child_drop, rest_drop, _, rest_events = reading
        if rest_drop > STRONG_CONCENTRATION * child_drop:
            return False
        if not self._rest_within_noise(rest_drop, rest_events):
            return False
        return recent is None or today is None or self._rest_within_noise(today[1], today[3])

    def _rest_within_noise(self, rest_drop: float, rest_events: int) -> bool:
        """The rest's fall over `rest_events` events is no more than its noise."""
        return rest_events > 0 and rest_drop <= math.sqrt(self._rest_variance(rest_events))

    def _rest_variance(self, events: int) -> float:
        """The variance of the rest's mean over `events` events: the larger of the child's
        noise and the parent's scaled to them. A child whose values collapsed reads almost
        no spread: tenant=t2 on a wrong index (31 events, recall 0.83 to 0.03) held 74% of
        all's drop, and the rest's chance dip of 0.037 over 240 events read beyond a noise
        of 0.014 scaled from t2's, within the 0.042 scaled from all's (lexical judge,
        seed 106)."""
        from_parent = self.parent_noise**2 * self.parent_events / events
        return max(self._mean_variance(events), from_parent)

    @property
    def rest_events(self) -> int:
        """The rest's events today: from the slice table, else the parent's less the child's."""
        return self.rest.events or self.parent_events - self.child_events

    def apart(
        self, child_drop: float, rest_drop: float, child_events: int, rest_events: int
    ) -> bool:
        """Whether a child that fell `child_drop` over `child_events` events and the rest
        of its parent that fell `rest_drop` over `rest_events` moved apart: the rest at
        most `CONCENTRATION` times as much, and the gap beyond the noise of the two means.
        A small rest's chance reading says little: on the first page of a drift over all
        of tenant=acme (ideal judge, seed 103) retrieval-v2 × acme (86 events, 0.12 down)
        led; the rest of acme (43 events) read half as low by chance, a gap of 0.6 times
        its noise."""
        if rest_drop > CONCENTRATION * child_drop:
            return False
        return child_drop - rest_drop > self.gap_noise(child_events, rest_events)

    def gap_noise(self, child_events: int, rest_events: int) -> float:
        """The noise of the gap between the child's mean over `child_events` events and the
        rest's over `rest_events`, at the rule's confidence, from the child's noise today
        (its per-event spread, day-to-day wobble included); 0 without figures."""
        if self.child_noise <= 0 or min(self.child_events, child_events, rest_events) <= 0:
            return 0.0
        return math.sqrt(self._mean_variance(child_events) + self._mean_variance(rest_events))

    def _mean_variance(self, events: int) -> float:
        """The variance of a mean over `events` events, from the child's noise today (its
        per-event spread at the rule's confidence times its events)."""
        return self.child_noise**2 * self.child_events / events

    @property
    def spread(self) -> bool:
        """The rest of the parent fell too: more than `CONCENTRATION` times as much as the
        child, and beyond its own noise (a positive reading, where a rest that reads
        unchanged may only be too small to tell): the change reaches past the child."""
        rest_drop, rest_events = self.rest_drop, self.rest_events
        if rest_drop is None or min(rest_events, self.child_events) <= 0 or self.child_noise <= 0:
            return False
        rest_noise = math.sqrt(self._mean_variance(rest_events))
        return rest_drop > max(CONCENTRATION * self.child_drop, rest_noise)

    @property
    def carries_the_change(self) -> bool:
        """An explaining share of the parent's change: `EXPLAINING_SHARE`, or a majority
        when the rest only dipped by chance (`strongly_concentrated`)."""
        return self.share >= EXPLAINING_SHARE or (
            self.share > MAJORITY_SHARE and self.strongly_concentrated
        )

    @property
    def explains(self) -> bool:
        return self.carries_the_change and self.concentrated


def beyond_noise(outcome: CheckOutcome) -> bool:
    """The slice's own drop is larger than its noise: only such a slice may lead."""
    return outcome.delta is not None and outcome.delta > max(outcome.noise or 0.0, 0.0)


def surprise(outcome: CheckOutcome) -> float | None:
    """How many times its noise the slice's drop is (infinite without a noise test)."""
    if outcome.delta is None:
        return None
    if not outcome.noise or outcome.noise <= 0:
        return math.inf if outcome.delta > 0 else 0.0
    return outcome.delta / outcome.noise


def explanation(
    child: CheckOutcome,
    parent: CheckOutcome,
    slice_rows: Mapping[str, Mapping[str, Any]] | None = None,
) -> Explanation | None:
    """The share of `parent`'s drop that `child` accounts for; None when either has no
    drop to share (no figures, or the parent did not fall)."""
    rows = slice_rows or {}
    child_events, _ = today_figures(child, rows)
    parent_events, _ = today_figures(parent, rows)
    if child.delta is None or parent.delta is None or parent.delta <= 0 or parent_events <= 0:
        return None
    if not same_baseline(child, parent):  # drops against other days do not add up
        return None
    return Explanation(
        child=child.slice,
        parent=parent.slice,
        share=(child_events * child.delta) / (parent_events * parent.delta),
        event_share=child_events / parent_events,
        parent_events=parent_events,
        surprise=surprise(child) or 0.0,
        child_drop=child.delta,
        parent_drop=parent.delta,
        rest=rest_of_parent(child, parent, rows),
        child_recent_drop=moved_bad_way(child.recent_observed, child.baseline, child.worse_when),
        child_events=child_events,
        child_noise=max(child.noise or 0.0, 0.0),
        child_recent_events=child.recent_sample_size or 0,
        parent_noise=max(parent.noise or 0.0, 0.0),
    )
