"""The kinds of trouble of the alert-quality benchmark: each scenario's replay and the
targets it met.

Each scenario (`kind_scenarios`) injects one kind of trouble (`seer_pipelines.demo.trouble`)
into a clean seeded stream from a day after the warm-up, regenerates only the days it
replays (the trouble's days and some after: a stream with trouble equals the clean one
outside the trouble's slice and days) and replays them through the rules, starting from
the incidents the clean stream had open. What each target means
(`kind_scenarios.TARGETS`) is what a person on call would need from the alerts; what the
targets read off a replay is in `kind_targets`, the day-by-day trace in `kind_trace`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import date

import numpy as np
import pandas as pd
from kind_scenarios import DRIFT_RECALL_FALL, OTHER_JUDGE, Scenario
from kind_targets import (
    WEEK,
    MissedLead,
    corrected,
    days_to_close,
    is_volume,
    judge_change_pages,
    lead_slice,
    missed_lead,
    overlaps,
    pages_slice,
    recovered_after_fix,
    slice_events,
    slice_recall,
    still_moved,
    window_days,
)
from kind_trace import trace_days

from seer_metrics.rules import RulesConfig
from seer_metrics.rules.incidents import Incident
from seer_metrics.slices import slice_metrics
from seer_pipelines.demo.judges import with_judge_column
from seer_pipelines.demo.realistic import DEFAULT_EVENTS_PER_DAY, generate_stream, ideal_scores
from seer_pipelines.demo.replay import ReplayedDay, replay_rules
from seer_pipelines.demo.trouble import JudgeChange, SlowDrift, Trouble


@dataclass(frozen=True)
class BaseStream:
    """A clean stream replayed day by day: its table, pages and incidents on each day."""

    seed: int
    judge: str
    days: list[date]
    table: pd.DataFrame
    scores: pd.DataFrame
    families: dict[str, str]  # slice label -> slice family
    pages: dict[date, list[tuple[str, str]]]  # day -> (rule, slice)
    open_before: dict[date, tuple[Incident, ...]]
    tenants: int | None = None
    troubles: tuple[Trouble, ...] = ()
    events_per_day: int = DEFAULT_EVENTS_PER_DAY  # a weekday's events, about


def slice_table(scores: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """The slice rows of `scores`, with the judge of each day on every row."""
    return with_judge_column(slice_metrics(scores, list(keys)), scores)


def replay_base(
    config: RulesConfig,
    seed: int,
    days: int,
    end_day: date,
    keys: Sequence[str],
    judge: str,
    tenants: int | None = None,
    troubles: Sequence[Trouble] = (),
    events_per_day: int = DEFAULT_EVENTS_PER_DAY,
) -> BaseStream:
    events = generate_stream(
        days,
        end_day=end_day,
        events_per_day=events_per_day,
        seed=seed,
        judge=judge,
        tenants=tenants,
        troubles=troubles,
    )
    scores = ideal_scores(events)
    table = slice_table(scores, keys)
    families = dict(zip(table["slice"], table["slice_key"], strict=True))
    pages: dict[date, list[tuple[str, str]]] = {}
    open_before: dict[date, tuple[Incident, ...]] = {}
    incidents: tuple[Incident, ...] = ()
    for replayed in replay_rules(config, table):
        open_before[replayed.day] = incidents
        incidents = replayed.open_incidents
        pages[replayed.day] = [(page.rule, page.slice) for page in replayed.pages]
    return BaseStream(
        seed,
        judge,
        sorted(pages),
        table,
        scores,
        families,
        pages,
        open_before,
        tenants,
        tuple(troubles),
        events_per_day,
    )


@dataclass
class ScenarioResult:
    seed: int
    scenario: Scenario
    start: date
    events: int  # the trouble slice's events on its first day
    recall_before: float  # the slice's mean recall over the week before
    recall_first_day: float
    results: dict[str, bool] = field(default_factory=dict)
    false_recoveries: int = 0  # "Recovered" on overlapping slices while it lasted
    # of them, those said while the trouble still moved the slice (`still_moved`)
    held_recoveries: int = 0
    # of them, those a later page of the slice named as "failing again" (`corrected`)
    corrected_recoveries: int = 0
    # incidents opened before the trouble (clean traffic's) closed while it lasted
    earlier_closed: int = 0
    change_pages: int = 0  # change pages after a judge change, its rule's window reaching it
    later_change_pages: int = 0  # those on days its window holds the new judge only
    # of `change_pages`, those on a day the new judge's own clean stream pages a change on
    # an overlapping slice: that day's traffic, not the change
    own_judge_pages: int = 0
    # after a fix: every incident it opened closed within a week (stricter than the target)
    all_closed_in_a_week: bool | None = None
    # after a fix: the day (from 1) its slice's incidents, and all it opened, had closed
    closed_by: tuple[int | None, int | None] | None = None
    # a drift: the day (from 1) its recall fell 0.15, else its last day (`fell` False)
    deadline: int | None = None
    fell: bool = True
    # caught by a message led by its slice, whose incident from before the trouble was open
    caught_open_before: bool = False
    # a missed lead: the day its message was read on, the slice it led with, its headline
    missed_lead: MissedLead | None = None
    trace: str = ""  # the day-by-day trace, when asked for (`trace_days`)


def run_scenario(
    config: RulesConfig,
    base: BaseStream,
    keys: Sequence[str],
    scenario: Scenario,
    start: int,
    trace: bool = False,
    new_judge: BaseStream | None = None,
) -> ScenarioResult:
    """`scenario` injected into `base` from its `start`-th day; the targets it measures
    (and, with `trace`, what each day did: `trace_days`). `new_judge`: for a judge
    change, the same stream judged by the new judge all along (`judge_change_pages`)."""
    replay_days = base.days[start : start + scenario.replayed_days]
    first = replay_days[0]
    trouble = replace(scenario.trouble, start=first, length=scenario.days)
    if isinstance(trouble, JudgeChange):
        trouble = replace(trouble, judge=OTHER_JUDGE[base.judge])
    events = generate_stream(
        len(replay_days),
        end_day=replay_days[-1],
        events_per_day=base.events_per_day,
        seed=base.seed,
        judge=base.judge,
        tenants=base.tenants,
        troubles=(*base.troubles, trouble),
    )
    scores = ideal_scores(events)
    table = pd.concat(
        [base.table[~base.table["partition_date"].isin(replay_days)], slice_table(scores, keys)],
        ignore_index=True,
    )
    replayed = list(
        replay_rules(config, table, days=replay_days, open_incidents=base.open_before[first])
    )
    label = trouble.slice_label
    week_before = base.days[max(0, start - 7) : start]
    recall_before = float(np.mean(slice_recall(base.scores, trouble.where, week_before)))
    recall = slice_recall(scores, trouble.where, replay_days)
    # the slice's events on the first day: what the stream would have logged
    clean_first = base.scores[base.scores["partition_date"] == first]
    result = ScenarioResult(
        base.seed,
        scenario,
        first,
        slice_events(clean_first, trouble.where, first),
        recall_before,
        recall[0],
    )
    trouble_days = replayed[: scenario.days] if scenario.days else replayed
    # the day the trouble must be caught by, and whose message must lead with its slice
    deadline = 0
    if isinstance(trouble, SlowDrift):
        fallen = [i for i, r in enumerate(recall) if r <= recall_before - DRIFT_RECALL_FALL]
        deadline = fallen[0] if fallen else len(trouble_days) - 1
        result.deadline, result.fell = deadline + 1, bool(fallen)
    caught = [i for i, d in enumerate(replayed) if _names_it(d, label, first)]
    result.caught_open_before = bool(caught) and not pages_slice(replayed[caught[0]], label)
    # the message read is the one that pages: a drift's, on the day it was caught
    led_on = caught[0] if caught and caught[0] <= deadline else deadline
    for target in scenario.targets:
        if target == "caught":
            result.results[target] = bool(caught) and caught[0] <= deadline
        elif target == "led":
            result.missed_lead = missed_lead(replayed[led_on], label)
            result.results[target] = result.missed_lead is None
        elif target == "no_false_recovery":
            # An incident the clean stream had open before the trouble (a chance drop of
            # recall in a slice a bloat then lifts) is not the trouble's: reported apart.
            closing = [
                i
                for d in trouble_days
                for i in d.changes.closed
                if i.paged and overlaps(i.slice, trouble.where)
            ]
            false = [i for i in closing if i.opened_on >= first]
            result.results[target] = not false
            result.false_recoveries = len(false)
            result.held_recoveries = sum(still_moved(i, config, table, base.table) for i in false)
            result.corrected_recoveries = sum(corrected(i, replayed) for i in false)
            result.earlier_closed = len(closing) - len(false)
        elif target == "recovered":
            fixed_on = scenario.days or 0
            result.results[target] = recovered_after_fix(replayed, fixed_on, trouble)
            result.all_closed_in_a_week = recovered_after_fix(
                replayed, fixed_on, trouble, own_within=WEEK, all_within=WEEK
            )
            result.closed_by = days_to_close(replayed, fixed_on, trouble)
        elif target == "volume_said":
            result.results[target] = any(
                o.failed and o.slice == label and is_volume(o.statistic)
                for o in replayed[0].outcomes
            )
        elif target == "judge_not_paged":
            drops = [(i, p) for i, d in enumerate(replayed) for p in d.pages if p.kind == "drop"]
            spanning = [(replayed[i].day, p) for i, p in drops if i < window_days(config, p.rule)]
            own = judge_change_pages(
                config, spanning, new_judge.pages if new_judge is not None else None
            )
            result.results[target] = not own
            result.change_pages = len(own)
            result.own_judge_pages = len(spanning) - len(own)
            result.later_change_pages = len(drops) - len(spanning)
    if trace:
        result.trace = trace_days(replayed, trouble.where, f"seed {base.seed} {scenario.place}")
    return result


def _names_it(day: ReplayedDay, label: str, first: date) -> bool:
    """Whether the day's message tells the trouble: it pages the trouble's slice, or, where
    the slice had an incident open from before the trouble (a chance dip of the clean
    traffic, which carries it without a page), it pages and leads with that slice
    (lexical judge, seed 148: prod x v1 opened on a clean day 5 days before losing its
    top hit; that day's page of retrieval-v1 led "env=prod x retrieval-v1 explains 95% of
    retrieval-v1's recall drop: recall -0.17")."""
    if pages_slice(day, label):
        return True
    held = any(i.slice == label and i.opened_on < first for i in day.open_incidents)
    return held and bool(day.pages) and lead_slice(day) == label
