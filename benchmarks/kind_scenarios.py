"""The scenarios of the alert-quality benchmark's kinds of trouble: where each trouble
goes, how long it lasts, which targets it is measured by (`TARGETS`), and the day it
starts in its stream (`scenario_start`). `trouble_kinds` replays them."""

from __future__ import annotations

from dataclasses import dataclass

from kind_targets import WEEK

from seer_pipelines.demo.trouble import (
    ContextBloat,
    EmptyContexts,
    JudgeChange,
    Release,
    SlowDrift,
    Trouble,
    VolumeLoss,
    WrongIndex,
)

PROD_V2 = {"env": "prod", "feature_flag": "retrieval-v2"}
PROD_V1 = {"env": "prod", "feature_flag": "retrieval-v1"}  # ~80 events a day
DRIFT_RECALL_FALL = 0.15  # a drift must be caught before the slice's recall fell this much

TARGETS = {
    "caught": "caught on its first day (drift: before recall fell 0.15 below its first week)",
    "led": "the message that pages it led by its own (narrowest) slice",
    "no_false_recovery": 'no "Recovered" of its incidents (overlapping) while it lasts',
    "recovered": 'a "Recovered" for its slice within a week of the fix, for all within two',
    "volume_said": "the loss said on its day: a volume statistic failing on the slice",
    "judge_not_paged": "a judge change never paged as a change (beyond the new judge's own)",
}


@dataclass(frozen=True)
class Scenario:
    """One trouble of one kind; `days` it lasts (None: to the end of the replay), `after`
    the days replayed after it; `base` the clean stream it goes into."""

    kind: str
    place: str
    trouble: Trouble
    days: int | None
    after: int
    targets: tuple[str, ...]
    base: str = "default"

    @property
    def replayed_days(self) -> int:
        return (self.days or 0) + self.after


CHANGE = ("caught", "led", "no_false_recovery")  # the targets of a change of level
VOLUME = ("volume_said", "no_false_recovery")
SCENARIOS: tuple[Scenario, ...] = (
    Scenario("lost_top_hit", "prod × v2, all lose 1", Release(PROD_V2), 7, 0, CHANGE),
    Scenario("lost_top_hit", "prod × v1 (~80/day), all lose 1", Release(PROD_V1), 7, 0, CHANGE),
    Scenario(
        "lost_top_hit",
        "tenant=acme, 75% lose 1",
        Release({"tenant": "acme"}, share=0.75),
        7,
        0,
        CHANGE,
    ),
    Scenario(
        "lost_top_hit", "env=prod, 50% lose 1", Release({"env": "prod"}, share=0.5), 7, 0, CHANGE
    ),
    Scenario(
        "lost_top_hit",
        "feature_flag=retrieval-v2, all lose 2",
        Release({"feature_flag": "retrieval-v2"}, lost_top_hits=2),
        7,
        0,
        CHANGE,
    ),
    Scenario("context_bloat", "prod × v2, 4 -> 8 passages", ContextBloat(PROD_V2), 7, 0, CHANGE),
    Scenario(
        "context_bloat",
        "tenant=acme, 4 -> 8 passages",
        ContextBloat({"tenant": "acme"}),
        7,
        0,
        CHANGE,
    ),
    Scenario(
        "empty_context",
        "env=prod, 25% empty",
        EmptyContexts({"env": "prod"}, share=0.25),
        7,
        0,
        CHANGE,
    ),
    Scenario(
        "empty_context", "prod × v2, 50% empty", EmptyContexts(PROD_V2, share=0.5), 7, 0, CHANGE
    ),
    Scenario(
        "wrong_index", "tenant=t1 of 20 (~21%)", WrongIndex({"tenant": "t1"}), 7, 0, CHANGE, "mix"
    ),
    Scenario(
        "wrong_index", "tenant=t2 of 20 (~12%)", WrongIndex({"tenant": "t2"}), 7, 0, CHANGE, "mix"
    ),
    Scenario(
        "slow_drift", "prod × v2, +4% a day lose 1", SlowDrift(PROD_V2, step=0.04), 14, 0, CHANGE
    ),
    Scenario(
        "release_fix",
        "prod × v2 3 days, then fixed",
        Release(PROD_V2, length=3),
        3,
        2 * WEEK,
        (*CHANGE, "recovered"),
    ),
    Scenario(
        "judge_change",
        "all, another judge from day 1",
        JudgeChange(),
        None,
        10,
        ("judge_not_paged",),
    ),
    Scenario("volume_loss", "all, 10% of the events", VolumeLoss(share=0.9), 1, 3, VOLUME),
    Scenario(
        "slice_vanish",
        "tenant=initech vanishes 3 days",
        VolumeLoss({"tenant": "initech"}, share=1.0),
        3,
        3,
        VOLUME,
    ),
    # Scenarios added later come last, so that the others keep their start days: a drift
    # over a whole tenant, where its largest pair must not take the lead, and a bloat then
    # its fix (a top-k change rolled back: "Recovered" on a statistic that barely varies).
    Scenario(
        "slow_drift",
        "tenant=acme, +4% a day lose 1",
        SlowDrift({"tenant": "acme"}, step=0.04),
        14,
        0,
        CHANGE,
    ),
    Scenario(
        "bloat_fix",
        "prod × v2 bloat 3 days, then fixed",
        ContextBloat(PROD_V2, length=3),
        3,
        2 * WEEK,
        (*CHANGE, "recovered"),
    ),
)
KINDS = tuple(dict.fromkeys(s.kind for s in SCENARIOS))
# the judge a judge change moves to, for the stream's judge
OTHER_JUDGE = {"ideal": "lexical", "lexical": "ideal"}

# Days a scenario's start leaves before the stream's end: the longest trouble (the drift).
# A longer replay (a fix followed for two weeks) starts earlier where it would not fit.
START_ROOM = 2 * WEEK


def scenario_starts(total_days: int, warm_up: int) -> range:
    """The days a scenario may start on: after two baselines' worth of days, leaving
    `START_ROOM` days."""
    return range(2 * warm_up, total_days - START_ROOM + 1)


def scenario_start(starts: range, index: int, total_days: int, scenario: Scenario) -> int:
    """The `index`-th start (cycling), earlier where the scenario's replay would not fit."""
    return min(starts[index % len(starts)], total_days - scenario.replayed_days)
