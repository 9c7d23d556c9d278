"""When a change or a level is back: the tests `incidents.follow` closes an incident on.

A change is back when it came half way back from where its incident opened and its
latest readings together are within their pooled noise (or the rule's margin) of the
level before it; a level against the slice's normal when its latest passes together are
clearly within its line; either, when it failed on one day only, no sooner than twice
the count to close after it opened.
"""

from __future__ import annotations

import math
from datetime import date
from typing import Protocol

from seer_metrics.rules.model import moved_bad_way
from seer_metrics.rules.readings import TOLERANCE


class Incident(Protocol):
    """What the tests read of an `incidents.Incident` (this module sits below it)."""

    @property
    def kind(self) -> str: ...
    @property
    def opened_on(self) -> date: ...
    @property
    def failed_days(self) -> int: ...
    @property
    def opened_observed(self) -> float | None: ...
    @property
    def opened_baseline(self) -> float | None: ...
    @property
    def recent_readings(self) -> tuple[tuple[float, float, bool], ...]: ...


class Verdict(Protocol):
    """What the tests read of an `incidents.Verdict`."""

    @property
    def observed(self) -> float | None: ...
    @property
    def baseline(self) -> float | None: ...
    @property
    def threshold(self) -> float | None: ...
    @property
    def worse_when(self) -> str: ...


def pooled_recovery(incident: Incident, margin: float | None = None) -> bool:
    """The latest readings of a change (its clear passes and those short of back among
    them, at most the count to close and one more), taken together, are back within noise
    of the level before the incident: their mean gap below it is at most their mean noise
    over the square root of their number. One pass within noise says little about a slice
    a breakage hurts only in part (a real gap of 0.07 behind a noise of 0.08); several
    together say it is still low; a mean gap within the rule's `margin` (a quarter of the
    change it pages on) is back however small the noise. Levels (and passes without
    figures) keep the count."""
    readings = incident.recent_readings
    if incident.kind != "drop" or len(readings) < 2:
        return True
    mean_gap, pooled_noise = _pooled(readings)
    if pooled_noise <= 0:
        return True
    return mean_gap <= max(pooled_noise, margin or 0.0)


def seen_long_enough(incident: Incident, day: date, needed: int) -> bool:
    """A change, or a level against the slice's normal, that failed on one day only
    closes no sooner than twice the count to close after it opened. One failing day does
    not tell a chance reading from the first day of a slow drift: the drift's next days
    read a residual (0.04-0.07) inside the pooled noise of three ~100-event days, and
    "Recovered" went out 10 times in ten benchmark runs of drifts, 8 of them paged again
    within two weeks; a level did the same (env=prod's share of events missing a
    passage, opened on a drift's third day, closed three days later). Twice the count
    gives a growing trouble time to fail again (which starts the count over) and costs a
    fix nothing: its incidents fail on several days, or opened days before the fix. A
    level against a fixed line (a chronic one) keeps its count."""
    return incident.failed_days > 1 or (day - incident.opened_on).days >= 2 * needed


def _pooled(readings: tuple[tuple[float, float, bool], ...]) -> tuple[float, float]:
    """The mean of readings' gaps (or moves), and their noise pooled: the mean noise over
    the square root of their number."""
    count = len(readings)
    mean_gap = sum(gap for gap, _, _ in readings) / count
    return mean_gap, sum(noise for _, noise, _ in readings) / count / math.sqrt(count)


def pooled_level(verdict: Verdict) -> bool:
    """A level whose verdict carries its line and normal (`pooled_level_recovery`)."""
    return verdict.threshold is not None and verdict.baseline is not None


def pooled_level_recovery(incident: Incident, threshold: float | None) -> bool:
    """A level against the slice's normal is clearly back within its line over its latest
    consecutive passes taken together: their mean move from the normal, plus their mean
    noise over the square root of their number, is under the line. Each day clearly
    within alone is a weak test where the noise is most of the line (0.07 of 0.10): a
    normal env=prod met it on 3 days in a row about half the time, and after a fix its
    `recall_high_priority` incident stayed open for two weeks, readings alternating
    0.04 above and below its normal. A slice hovering at the line still stays open, and
    so does one whose latest reading is not clearly within alone (`follow`): pooled, a
    drift's first days closed env=prod's level on a reading 0.09 above its normal, the
    line 0.10 (lexical judge)."""
    readings = incident.recent_readings
    if threshold is None or not readings:
        return False
    mean_move, pooled_noise = _pooled(readings)
    return mean_move + pooled_noise < threshold - TOLERANCE


def level_may_close(clear: bool, move: float, waiting: bool = False) -> bool:
    """Whether today's pass may close a level against the slice's normal once its latest
    passes pooled are clearly within its line (`pooled_level_recovery`): a clear pass (a
    drift's 4th day read 0.09 above the normal, the line 0.10, and pooled would have
    closed), or one at or better than the normal (`move` <= 0), which is clear unless
    the noise is wider than the line. No day alone is clearly within it then: env=prod's
    `recall_high_priority` (noise 0.13, line 0.10) stayed open for the two weeks after a
    fix, reading 0.36-0.43 against a normal of 0.38 (lexical judge, seed 262). A
    `waiting` pass never closes (`verdict_holds._beside_another_change`)."""
    return not waiting and (clear or move <= 0)


def back_from_the_drop(verdict: Verdict, incident: Incident) -> bool:
    """A change incident's pass is a recovery only when the statistic came back at least
    half the way from where the incident opened to the level before it: a slice that a
    breakage hurts only a little is not "recovered" on the first day its drop is no
    longer significant. Levels (and verdicts without figures) keep the plain rule."""
    return half_way_back(incident, verdict.observed, verdict.baseline, verdict.worse_when)


def half_way_back(
    incident: Incident, observed: float | None, baseline: float | None, worse_when: str
) -> bool:
    """`back_from_the_drop` of a reading `observed` against `baseline` (None: the level
    the incident opened against)."""
    if incident.kind != "drop":
        return True
    opened = moved_bad_way(incident.opened_observed, incident.opened_baseline, worse_when)
    now = moved_bad_way(observed, recovery_baseline(baseline, incident), worse_when)
    if opened is None or now is None or opened <= 0:
        return True
    return now <= opened / 2


def recovery_baseline(baseline: float | None, incident: Incident) -> float | None:
    """The level a change incident's reading is judged back against: the reading's own
    baseline (inside an incident, the days before it: `evaluation.recovery_rule`), else
    the one it opened against."""
    return baseline if baseline is not None else incident.opened_baseline
