"""One failing outcome in an alert's order (`attribution.alert_order`)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from seer_metrics.rules import wording
from seer_metrics.rules.explanation import Explanation
from seer_metrics.rules.model import CheckOutcome


@dataclass(frozen=True)
class AlertItem:
    """One failing outcome in alert order, with what it explains or what explains it.

    `leads`: a failing drop beyond noise that no narrower slice explains, the end of an
    explanation (a message's lead is the first). `explanation`: the failing parent it
    explains the most of; `nearest_part`: for a lead that a failing narrower slice does
    not explain, the part that comes nearest to explaining it (to say the change is
    spread, or how far its nearest part falls short).
    `impact`: its events times its drop over the events of `all`, how much it moved the
    whole traffic's mean (comparable between slices and rules of one statistic).
    """

    outcome: CheckOutcome
    leads: bool = False
    explanation: Explanation | None = None
    nearest_part: Explanation | None = None
    explained_by: str | None = None
    explained_share: float | None = None
    impact: float | None = None
    # every failing parent whose drop it explains (`explanation` is the largest)
    explained_parents: tuple[str, ...] = ()
    # a lead's: what its slice's failing changes name ("context bloat: 8.0 passages ...")
    troubles: tuple[str, ...] = ()

    @property
    def explains(self) -> bool:
        """A drop on this slice explains a failing parent's drop."""
        return self.explanation is not None

    @property
    def key(self) -> tuple[str, str]:
        return (self.outcome.rule, self.outcome.slice)

    def paged(self) -> PagedCheck:
        """It as a check that pages (`headline_check`)."""
        return PagedCheck(self.outcome.rule, self.outcome.slice, self.leads, self.explained_by)

    def headline(self) -> str:
        return wording.alert_headline(
            self.outcome,
            self.explanation,
            self.nearest_part,
            self.explained_by,
            self.explained_share,
            self.troubles,
        )


@dataclass(frozen=True)
class PagedCheck:
    """A check that pages on a day's message, as the message knows it: whether it leads
    (and has a headline to show), and the slice its change is explained by, if any."""

    rule: str
    slice: str
    leads: bool = False
    explained_by: str | None = None


def headline_check(
    paged: Sequence[PagedCheck], open_stories: Collection[tuple[str, str]]
) -> tuple[str, str] | None:
    """The (rule, slice) whose headline heads a day's message; None: no headline.

    `paged` is in alert order; `open_stories` are the (rule, slice) of incidents carried
    open that day with a headline. The first lead among what pages heads it; without one,
    when the first page is a wider slice explained by a slice whose incident is already
    open, that incident's story does: the page alone would send the on-call to the wider
    slice (a pair of env=prod x retrieval-v1 open since a chance dip days before its top
    hit was lost, the day's page was retrieval-v1's drop, 95% of it the pair's; lexical
    judge, seed 148). An incident carried without a page never heads it otherwise. The
    message (`seer_pipelines.alerts.message`) and the benchmark's reading of it share this.
    """
    lead = next((check for check in paged if check.leads), None)
    if lead is not None:
        return (lead.rule, lead.slice)
    if not paged or paged[0].explained_by is None:
        return None
    story = (paged[0].rule, paged[0].explained_by)
    return story if story in open_stories else None
