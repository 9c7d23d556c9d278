"""Kinds of trouble a real retriever has, to inject into the realistic stream.

Each kind is scoped to a slice (`where`, a metadata match; empty: all traffic) and a day
range (`start`, counted from the stream's first day, negative from its end, or a date;
`length` days, None: to the end), and hits each event of its slice on its days with
probability `share` (a volume loss: the share of events lost). Every kind draws its own
random numbers for every event of every day, whether or not it applies, from a generator
seeded by the stream's seed, the date and the kind's place in the list: a stream with a
trouble differs from the same stream without it only in the events the trouble hit.

What a kind does to an event is `apply`: it changes the event's `EventPlan` (its ranking,
which part of it becomes the context, its metadata, its judge, or whether it is logged).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from typing import Any, ClassVar

from seer_metrics.slices.identity import SliceIdentity

DEFAULT_RELEASE_SLICE = {"env": "prod", "feature_flag": "retrieval-v2"}
BLOATED_CONTEXT_SIZE = 8


@dataclass(frozen=True)
class EventPlan:
    """What an event will be: its metadata, the ranking its context is cut from (`skip`
    places down, `size` passages), the judge that judges it, and whether it is logged."""

    metadata: Mapping[str, str]
    example_index: int
    ranked: tuple[Any, ...]
    skip: int
    size: int
    judge: str
    logged: bool = True


@dataclass(frozen=True)
class Trouble:
    """A trouble of one slice over a range of days; subclasses say what it does."""

    where: Mapping[str, str] = field(default_factory=dict)
    start: int | date = 0
    length: int | None = None
    share: float = 1.0

    kind: ClassVar[str] = "trouble"
    needs_slice: ClassVar[bool] = False
    # applied before the others, which then match the changed metadata
    changes_metadata: ClassVar[bool] = False

    def __post_init__(self) -> None:
        if self.needs_slice and not self.where:
            raise ValueError(f"a {self.kind} needs a slice (where)")
        if self.length is not None and self.length < 1:
            raise ValueError(f"{self.kind} length must be >= 1, got {self.length}")
        if not 0.0 < self.share <= 1.0:
            raise ValueError(f"{self.kind} share must be in (0, 1], got {self.share}")

    @property
    def slice_label(self) -> str:
        """The slice as Seer labels it (keys in the order given): `env=prod,feature_flag=...`."""
        return SliceIdentity(tuple(self.where.items())).label

    def first_index(self, first_day: date, total_days: int) -> int:
        """The index of the first day affected in a stream starting on `first_day`."""
        if isinstance(self.start, date):
            return (self.start - first_day).days
        return self.start if self.start >= 0 else total_days + self.start

    def day_indices(self, total_days: int, first_day: date | None = None) -> range:
        """The indices of the days affected in a stream of `total_days` days."""
        if isinstance(self.start, date) and first_day is None:
            raise ValueError(
                f"{self.kind} starts on {self.start}: the stream's first day is needed"
            )
        first = self.first_index(first_day or date.min, total_days)
        if isinstance(self.start, date):
            last = total_days if self.length is None else first + self.length
            return range(max(first, 0), min(last, total_days))
        if not 0 <= first < total_days:
            raise ValueError(f"{self.kind} start {self.start} is outside a {total_days}-day stream")
        return range(
            first, total_days if self.length is None else min(first + self.length, total_days)
        )

    def matches(self, metadata: Mapping[str, Any]) -> bool:
        return all(metadata.get(key) == value for key, value in self.where.items())

    def share_on(self, offset: int) -> float:
        """The share of the slice's events hit on the trouble's `offset`-th day."""
        return self.share

    def apply(self, plan: EventPlan, pick: float, examples: Sequence[Any]) -> EventPlan:
        """The event after the trouble; `pick` is the event's own draw in [0, 1)."""
        raise NotImplementedError


@dataclass(frozen=True)
class Release(Trouble):
    """A retriever release that loses the top hit(s): the context starts `lost_top_hits`
    places lower in the ranking (ranks 2-5 instead of 1-4 for one)."""

    where: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_RELEASE_SLICE))
    start: int | date = -2
    length: int | None = 2
    lost_top_hits: int = 1

    kind: ClassVar[str] = "lost_top_hit"
    needs_slice: ClassVar[bool] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.lost_top_hits < 1:
            raise ValueError(f"lost_top_hits must be >= 1, got {self.lost_top_hits}")

    def apply(self, plan: EventPlan, pick: float, examples: Sequence[Any]) -> EventPlan:
        return replace(plan, skip=plan.skip + self.lost_top_hits)


@dataclass(frozen=True)
class SlowDrift(Release):
    """A slow degradation: on its `d`-th day a share `min(share, step * (d + 1))` of the
    slice's events loses its top hit, so it grows by `step` a day."""

    start: int | date = 0
    length: int | None = None
    step: float = 0.05

    kind: ClassVar[str] = "slow_drift"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 < self.step <= 1.0:
            raise ValueError(f"drift step must be in (0, 1], got {self.step}")

    def share_on(self, offset: int) -> float:
        return min(self.share, self.step * (offset + 1))


@dataclass(frozen=True)
class ContextBloat(Trouble):
    """Contexts grow to `context_size` passages (the ranking's top 8 instead of its top
    4): precision falls, recall rises."""

    context_size: int = BLOATED_CONTEXT_SIZE

    kind: ClassVar[str] = "context_bloat"
    needs_slice: ClassVar[bool] = True

    def apply(self, plan: EventPlan, pick: float, examples: Sequence[Any]) -> EventPlan:
        return replace(plan, size=self.context_size)


@dataclass(frozen=True)
class EmptyContexts(Trouble):
    """Retriever time-outs: a share of the slice's events is logged with an empty context."""

    share: float = 0.25

    kind: ClassVar[str] = "empty_context"
    needs_slice: ClassVar[bool] = True

    def apply(self, plan: EventPlan, pick: float, examples: Sequence[Any]) -> EventPlan:
        return replace(plan, size=0)


@dataclass(frozen=True)
class WrongIndex(Trouble):
    """A slice (a tenant) served from the wrong index: its contexts are the top of another
    example's ranking (drawn from the same dataset), so recall is about 0."""

    where: Mapping[str, str] = field(default_factory=lambda: {"tenant": "t1"})

    kind: ClassVar[str] = "wrong_index"
    needs_slice: ClassVar[bool] = True

    def apply(self, plan: EventPlan, pick: float, examples: Sequence[Any]) -> EventPlan:
        # any example but the event's own: 1 .. len - 1 places further in its dataset
        shift = 1 + int(pick * (len(examples) - 1))
        other = examples[(plan.example_index + shift) % len(examples)]
        return replace(plan, ranked=other.ranked)


@dataclass(frozen=True)
class VolumeLoss(Trouble):
    """Events missing upstream (a logging loss): a share of the slice's events is never
    logged; `share=1.0` on a slice makes the slice vanish."""

    start: int | date = -1
    length: int | None = 1
    share: float = 0.9

    kind: ClassVar[str] = "volume_loss"

    def apply(self, plan: EventPlan, pick: float, examples: Sequence[Any]) -> EventPlan:
        return replace(plan, logged=False)


@dataclass(frozen=True)
class JudgeChange(Trouble):
    """From `start` on, the slice's events are judged by another judge (a name of
    `seer_pipelines.demo.judges.JUDGES`: another evaluator, model or prompt)."""

    judge: str = "lexical"

    kind: ClassVar[str] = "judge_change"

    def apply(self, plan: EventPlan, pick: float, examples: Sequence[Any]) -> EventPlan:
        return replace(plan, judge=self.judge)


@dataclass(frozen=True)
class NewTenant(Trouble):
    """Clean traffic that grows: from `start` on, a share of the slice's events comes from
    a tenant never seen before."""

    tenant: str = "newco"
    share: float = 0.08

    kind: ClassVar[str] = "new_tenant"
    changes_metadata: ClassVar[bool] = True

    def apply(self, plan: EventPlan, pick: float, examples: Sequence[Any]) -> EventPlan:
        return replace(plan, metadata={**plan.metadata, "tenant": self.tenant})


def tenant_shares(tenants: int) -> dict[str, float]:
    """`tenants` tenants `t1`..`tN` of decreasing size (share ∝ 1 / rank^0.8), so a few
    are large enough for their own verdicts and most are small."""
    if tenants < 1:
        raise ValueError(f"tenants must be >= 1, got {tenants}")
    weights = [1.0 / (rank**0.8) for rank in range(1, tenants + 1)]
    total = sum(weights)
    return {f"t{rank}": weight / total for rank, weight in enumerate(weights, start=1)}
