"""A spending cap per partition: events are judged only while the projected spend fits.

Before each call batch the judge's spend is projected from the real prompts (`PromptSizer`)
and the price table, counting nothing for judgments already in the cache. The first event
whose projected spend would pass a cap stops the day: every later event that would need a
model call is left unjudged (`skipped_budget`), so the day is never silently cut short
and the budget is never passed by more than the projection's error on one batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


class BudgetConfigError(ValueError):
    """A budget that cannot be used; the message names the setting."""


class UnknownCostError(BudgetConfigError):
    """A USD budget is set but a cost cannot be known (no price, or a non-finite one).

    Raised rather than counting the cost as 0 or NaN: either would let every event
    through, a budget switched off without a word.
    """


@dataclass(frozen=True)
class Budget:
    """Caps on one partition's judging spend: USD and tokens (None: no cap)."""

    usd: float | None = None
    tokens: int | None = None

    def __post_init__(self) -> None:
        usd = self.usd
        if usd is not None and (
            isinstance(usd, bool)
            or not isinstance(usd, int | float)
            or not math.isfinite(usd)
            or usd < 0
        ):
            raise BudgetConfigError(
                f"SEER_BUDGET_USD (budget_usd) must be a finite number >= 0, not {usd!r}"
            )
        tokens = self.tokens
        if tokens is not None and (
            isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0
        ):
            raise BudgetConfigError(
                f"SEER_BUDGET_TOKENS (budget_tokens) must be a whole number >= 0, not {tokens!r}"
            )

    @property
    def enabled(self) -> bool:
        return self.usd is not None or self.tokens is not None

    def describe(self) -> str:
        caps = []
        if self.usd is not None:
            caps.append(f"${self.usd:,.2f}")
        if self.tokens is not None:
            caps.append(f"{self.tokens:,} tokens")
        return " and ".join(caps) if caps else "no cap"


@dataclass
class BudgetTracker:
    """The spend of one partition against its `Budget`, call batch by call batch."""

    budget: Budget
    spent_usd: float = 0.0
    spent_tokens: int = 0
    reserved_usd: float = 0.0
    reserved_tokens: int = 0
    stopped_by: str | None = None  # "usd" or "tokens" once the budget stopped the day

    @property
    def stopped(self) -> bool:
        return self.stopped_by is not None

    def admit(self, projected_usd: float, projected_tokens: int) -> bool:
        """Whether an event whose calls are projected to cost this is judged.

        A free event (its judgment is cached) is always judged; once one event did not
        fit, no other paid one is, so the events judged are the day's first ones. A
        projected cost that is not a finite number under a USD cap raises
        `UnknownCostError`: compared with NaN, every event would fit.
        """
        if self.budget.usd is not None and not _finite(projected_usd):
            raise UnknownCostError(
                f"the projected cost of an event is {projected_usd!r}, not a number, so "
                f"SEER_BUDGET_USD ({self.budget.describe()}) cannot be held; check the "
                "judge's price (SEER_LLM_PRICES)"
            )
        if projected_usd <= 0 and projected_tokens <= 0:
            return True
        if self.stopped:
            return False
        usd = self.spent_usd + self.reserved_usd + projected_usd
        tokens = self.spent_tokens + self.reserved_tokens + projected_tokens
        if self.budget.usd is not None and usd > self.budget.usd:
            self.stopped_by = "usd"
            return False
        if self.budget.tokens is not None and tokens > self.budget.tokens:
            self.stopped_by = "tokens"
            return False
        self.reserved_usd += projected_usd
        self.reserved_tokens += projected_tokens
        return True

    def settle(self, spent_usd: float, spent_tokens: int) -> None:
        """Replace the batch's projections by what its calls actually cost."""
        if self.budget.usd is not None and not _finite(spent_usd):
            raise UnknownCostError(
                f"the judge reported a spend of {spent_usd!r}, not a number, so "
                f"SEER_BUDGET_USD ({self.budget.describe()}) cannot be held"
            )
        self.spent_usd += spent_usd
        self.spent_tokens += spent_tokens
        self.reserved_usd = 0.0
        self.reserved_tokens = 0


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
