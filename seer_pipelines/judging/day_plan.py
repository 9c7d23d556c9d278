"""What the judging step may judge: the day's sample, its cost estimate and its budget.

A sampled day is counted and sampled in the warehouse (`warehouse.day_sample`): one
grouped count gives the strata, `allocate` their sample sizes, and one windowed query
hands Seer only the chosen rows, so nothing here reads the rest of the day. For a paid
judge the chosen events' prompt sizes go to `CostEstimator` before any call (a fully
judged day is read once for it); `BudgetGate` then decides before each call batch which
events still fit in the budget.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from dagster import MetadataValue

from seer_metrics.evaluators.base import Evaluator
from seer_metrics.evaluators.llm.settings import is_price
from seer_metrics.events import SKIPPED_BUDGET, InvalidEventError, RetrievalEvent
from seer_metrics.judgment_store import JudgmentStore, judgment_key, requirements_key
from seer_metrics.rows import unjudged_row
from seer_metrics.slices import DEFAULT_SLICE_KEYS, event_stratum
from seer_metrics.spend.budget import Budget, BudgetTracker, UnknownCostError
from seer_metrics.spend.cost_estimate import (
    REQUIREMENTS_COMPLETION_TOKENS,
    SUPPORT_COMPLETION_TOKENS,
    CostEstimate,
    CostEstimator,
)
from seer_metrics.spend.sampling import SamplePlan, SamplingSettings, allocate
from seer_pipelines.defs.resources.evaluator import EvaluatorResource
from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.warehouse.day import day_bounds
from seer_pipelines.warehouse.day_sample import DayStrata


@dataclass(frozen=True)
class JudgingLimits:
    """The judging step's sampling and budget, and whether its judge is paid (LLM)."""

    sampling: SamplingSettings
    budget: Budget
    slice_keys: tuple[str, ...]
    paid: bool

    @classmethod
    def of(cls, evaluator: EvaluatorResource) -> JudgingLimits:
        return cls(
            sampling=evaluator.sampling_settings(),
            budget=Budget(evaluator.budget_usd, evaluator.budget_tokens),
            slice_keys=tuple(evaluator.sample_slice_keys or DEFAULT_SLICE_KEYS),
            paid=evaluator.resolved_kind() == "openai",
        )

    def stratum(self, metadata: Any) -> str:
        """The event's stratum: its values of the slice keys (`env=prod|feature_flag=v2`)."""
        return event_stratum(metadata, self.slice_keys)


@dataclass(frozen=True)
class DayPlan:
    """The day's sample (None: every event is judged), its strata as the warehouse counted
    them, and the cost estimates (of every event on a fully judged day, of the sample)."""

    sample: SamplePlan | None
    estimate: CostEstimate | None
    sampled_estimate: CostEstimate | None
    strata: DayStrata | None = None

    def summary(self) -> str:
        """One log line: the sample and the estimates."""
        parts = []
        if self.sample is not None:
            parts.append(
                f"judging a sample of {self.sample.judged} of {self.sample.events} events "
                f"over {len(self.sample.population)} strata"
            )
        for name, estimate in (("every event", self.estimate), ("sample", self.sampled_estimate)):
            if estimate is not None:
                cost = estimate.online.cost_usd
                parts.append(
                    f"estimate for {name}: {estimate.online.calls} calls, "
                    f"{estimate.online.prompt_tokens + estimate.online.completion_tokens} tokens"
                    + ("" if cost is None else f", ${cost:.4f} on demand")
                )
        return "; ".join(parts)

    def metadata(self) -> dict[str, Any]:
        """The `seer estimate` figures, and the sample's size, for the asset's metadata."""
        metadata: dict[str, Any] = {}
        if self.sample is not None:
            metadata["sample_population"] = self.sample.events
            metadata["sample_size"] = self.sample.judged
            metadata["sample_strata"] = len(self.sample.population)
        if self.strata is not None:  # counted in the warehouse: the rows never read
            metadata["day_rows"] = self.strata.rows
        for prefix, estimate in (
            ("estimate", self.estimate),
            ("estimate_sampled", self.sampled_estimate),
        ):
            if estimate is None:
                continue
            metadata[f"{prefix}_calls"] = estimate.online.calls
            metadata[f"{prefix}_tokens"] = (
                estimate.online.prompt_tokens + estimate.online.completion_tokens
            )
            for mode, spend in (("online", estimate.online), ("batch", estimate.batch)):
                if spend.cost_usd is not None:
                    metadata[f"{prefix}_cost_usd_{mode}"] = float(spend.cost_usd)
            metadata[prefix] = MetadataValue.json(estimate.as_dict())
        return metadata


def day_valid_events(records: Sequence[Any], day: date) -> list[RetrievalEvent]:
    """The chunk's events that parse and belong to `day`, as the judging step keeps them."""
    start, end = day_bounds(day)
    events = []
    for record in records:
        try:
            event = RetrievalEvent.from_record(record)
        except InvalidEventError:
            continue
        if event.event_ts is None or start <= event.event_ts < end:
            events.append(event)
    return events


def plan_day(
    warehouse: WarehouseResource,
    day: date,
    limits: JudgingLimits,
    model: str | None = None,
    price: tuple[float, float] | None = None,
) -> DayPlan:
    """The day's sample (counted and chosen in the warehouse) and, for a paid judge, its
    cost estimate from the events it will judge.

    Nothing is read when neither is needed (every event judged by the offline judge).
    """
    sampling = limits.sampling.enabled
    estimator = CostEstimator(model, price) if limits.paid and model is not None else None
    if not sampling:
        if estimator is None:
            return DayPlan(None, None, None)
        for records in warehouse.iter_event_chunks(day):
            estimator.add(day_valid_events(records, day))
        return DayPlan(None, estimator.estimate(), None)
    strata = warehouse.count_day_strata(day, limits.slice_keys, limits.sampling.key)
    population = {stratum.stratum: stratum.population for stratum in strata.strata}
    sizes = allocate(population, limits.sampling)
    sample = SamplePlan(population, sizes, cutoffs={}, key=limits.sampling.key)
    plan = DayPlan(sample, None, None, strata)
    if estimator is None:
        return plan
    for records in day_records(warehouse, day, plan, limits):
        estimator.add(day_valid_events(records, day))
    return DayPlan(sample, None, estimator.estimate(), strata)


def day_records(
    warehouse: WarehouseResource, day: date, plan: DayPlan | None, limits: JudgingLimits
) -> Iterator[list[dict[str, Any]]]:
    """The rows the judging step reads: the day's sample from the warehouse (each with its
    `stratum`), or every row of the day when it is judged whole."""
    if plan is None or plan.sample is None:
        yield from warehouse.iter_event_chunks(day)
        return
    sizes = {str(stratum): int(size) for stratum, size in plan.sample.sample_sizes.items()}
    populations = {str(stratum): int(n) for stratum, n in plan.sample.population.items()}
    yield from warehouse.iter_sample_chunks(
        day, limits.slice_keys, limits.sampling.key, sizes, populations
    )


class BudgetGate:
    """Before each call batch: which events still fit in the budget, from the cache and the
    real prompts (a cached judgment is free; a cached requirement list saves phase 1).

    With `as_of`, the cache is read as it was at that moment (a batch day's first
    submission): what the day's own batches answered since still counts at its projected
    cost, so every run of the day draws the line at the same event and a finished day
    re-runs without a call; the projections, not the spend, are then what the cap holds.

    A USD cap on a paid judge whose model has no price (or a non-finite one) raises
    `UnknownCostError` before any call: its projections would all be 0 (or NaN), and the
    cap would hold nothing. `paid=False` (the offline judge) costs nothing.
    """

    def __init__(
        self,
        budget: Budget,
        store: JudgmentStore,
        model: str,
        prompt_version: str,
        price: tuple[float, float] | None,
        as_of: datetime | None = None,
        *,
        paid: bool = True,
    ) -> None:
        if paid and budget.usd is not None and not is_price(price):
            raise UnknownCostError(
                f"SEER_BUDGET_USD is set ({budget.describe()}) but the judge's model "
                f"{model!r} has no usable price ({price!r}), so no cost can be projected "
                "and the budget would hold nothing: add the model to SEER_LLM_PRICES "
                "(JSON, e.g. '{\"my-model\": [0.15, 0.6]}', USD per 1M input and output "
                "tokens), or cap it with SEER_BUDGET_TOKENS instead"
            )
        self.paid = paid
        self.tracker = BudgetTracker(budget)
        self.store = store
        self.model = model
        self.prompt_version = prompt_version
        self.price = price
        self.as_of = as_of
        # Sized like `seer estimate`, with the judge's own model.
        self._estimator = CostEstimator(model, price)
        # Queries whose phase 1 is already projected (by an earlier call batch too).
        self._projected_queries: set[str] = set()

    def split(
        self, events: Sequence[RetrievalEvent]
    ) -> tuple[list[RetrievalEvent], list[RetrievalEvent]]:
        """(events to judge, events over the budget), each in the order given."""
        keys = [judgment_key(event, self.model, self.prompt_version) for event in events]
        cached = self.store.get_judgments(keys, created_before=self.as_of)
        query_keys = {
            index: requirements_key(event.task, self.model, self.prompt_version)
            for index, event in enumerate(events)
            if keys[index] not in cached
        }
        known_queries = self.store.get_requirements(
            set(query_keys.values()), created_before=self.as_of
        )
        projected_queries = self._projected_queries
        judge: list[RetrievalEvent] = []
        over: list[RetrievalEvent] = []
        sizer = self._estimator.sizer
        for index, event in enumerate(events):
            prompt = completion = 0
            query_key = query_keys.get(index)
            first_of_query = False
            if query_key is not None:  # not cached: phase 2, and phase 1 for a new query
                prompt, completion = sizer.support_tokens(event), SUPPORT_COMPLETION_TOKENS
                if query_key not in known_queries and query_key not in projected_queries:
                    prompt += sizer.requirements_tokens(event)
                    completion += REQUIREMENTS_COMPLETION_TOKENS
                    first_of_query = True
            if self.tracker.admit(self._cost(prompt, completion), prompt + completion):
                judge.append(event)
                if first_of_query:
                    projected_queries.add(query_key)
            else:
                over.append(event)
        return judge, over

    def _cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        if self.price is None:  # a free judge, or no USD cap (see the class)
            return 0.0
        return (prompt_tokens * self.price[0] + completion_tokens * self.price[1]) / 1_000_000

    def settle(self, spent_usd: float, spent_tokens: int) -> None:
        """Replace the call batch's projections by what it cost; a gate reading the cache
        `as_of` a past moment keeps its projections (see the class)."""
        if self.as_of is None:
            self.tracker.settle(spent_usd, spent_tokens)

    def metadata(self) -> Mapping[str, Any]:
        tracker = self.tracker
        return {
            "budget": tracker.budget.describe(),
            "budget_stopped": tracker.stopped,
            "budget_stopped_by": tracker.stopped_by or "",
        }


@dataclass(frozen=True)
class DayLimits:
    """What the judging pass applies: the slice keys of the strata and the budget gate."""

    limits: JudgingLimits
    gate: BudgetGate | None = None


def limited_events(
    events: list[RetrievalEvent], day_limits: DayLimits | None, evaluator: Evaluator
) -> tuple[list[RetrievalEvent], list[dict[str, Any]], dict[str, str]]:
    """(events to judge, `seer_judgments` rows of the events left unjudged over the
    budget, stratum by event id) of one chunk's valid events."""
    if day_limits is None:
        return events, [], {}
    limits = day_limits.limits
    strata = {event.event_id: limits.stratum(event.metadata) for event in events}
    chosen: list[RetrievalEvent] = list(events)
    rows: list[dict[str, Any]] = []
    if day_limits.gate is not None:
        chosen, over = day_limits.gate.split(chosen)
        reason = (
            f"{SKIPPED_BUDGET}: the day's budget ({day_limits.gate.tracker.budget.describe()}) "
            "would be passed by judging it"
        )
        rows.extend(unjudged_row(event, SKIPPED_BUDGET, reason, evaluator) for event in over)
    for row in rows:
        row["stratum"] = strata[row["event_id"]]
    return chosen, rows, strata
