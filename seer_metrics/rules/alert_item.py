"""One failing outcome in an alert's order (`attribution.alert_order`)."""

from __future__ import annotations

from dataclasses import dataclass

from seer_metrics.rules import wording
from seer_metrics.rules.explanation import Explanation
from seer_metrics.rules.model import CheckOutcome
from seer_metrics.slices.identity import SliceIdentity


@dataclass(frozen=True)
class AlertItem:
    """One failing outcome in alert order, with what it explains or what explains it.

    `leads`: a failing drop beyond noise that no narrower slice explains, the end of an
    explanation (a message's lead is the first). `explanation`: the failing parent it
    explains the most of; `largest_part`: for a lead that a failing narrower slice does
    not explain, the largest share one accounts for (to say the change is spread).
    `impact`: its events times its drop over the events of `all`, how much it moved the
    whole traffic's mean (comparable between slices and rules of one statistic).
    """

    outcome: CheckOutcome
    leads: bool = False
    explanation: Explanation | None = None
    largest_part: Explanation | None = None
    explained_by: str | None = None
    explained_share: float | None = None
    impact: float | None = None
    # every failing parent whose drop it explains (`explanation` is the largest)
    explained_parents: tuple[str, ...] = ()

    @property
    def explains(self) -> bool:
        """A drop on this slice explains a failing parent's drop."""
        return self.explanation is not None

    @property
    def key(self) -> tuple[str, str]:
        return (self.outcome.rule, self.outcome.slice)

    @property
    def explained_width(self) -> int | None:
        """The keys of the parent whose drop it explains (0 for `all`); None for none."""
        return (
            None
            if self.explanation is None
            else SliceIdentity.decode(self.explanation.parent).arity
        )

    def headline(self) -> str:
        return wording.alert_headline(
            self.outcome,
            self.explanation,
            self.largest_part,
            self.explained_by,
            self.explained_share,
        )
