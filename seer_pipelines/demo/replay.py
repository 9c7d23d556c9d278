"""Replaying the alert rules over a slice table day by day, as the daily job runs them.

Each day is evaluated against the days before it (`evaluate_rules`, which holds the
false-discovery rate across the day's drop tests), then its outcomes advance the open
incidents (`advance_incidents`). What a day pages is what a person would be notified
of: the failing drops and the incidents opened that day. The stream test and the
alert-quality benchmark measure the rules with this, without Dagster or a warehouse.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date, timedelta

import pandas as pd

from seer_metrics.rules import CheckOutcome, RulesConfig, as_date, evaluate_rules
from seer_metrics.rules.breakage import baseline_exclusions
from seer_metrics.rules.incident_day import IncidentChanges, advance_incidents
from seer_metrics.rules.incidents import Incident, Verdict


@dataclass(frozen=True)
class ReplayedDay:
    """One day's outcomes and what they did to the incidents; `rows` are the day's slice
    rows the rules read (what an alert orders its outcomes by, `alert_order`)."""

    day: date
    outcomes: tuple[CheckOutcome, ...]
    changes: IncidentChanges
    rows: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False, compare=False)

    @property
    def pages(self) -> tuple[CheckOutcome, ...]:
        return self.changes.pages

    @property
    def open_incidents(self) -> tuple[Incident, ...]:
        return self.changes.still_open


def history_days(config: RulesConfig) -> int:
    """How many earlier days the rules of `config` read (their trailing windows, reaching
    back over the days of a breakage)."""
    return config.history_days


def replay_rules(
    config: RulesConfig,
    table: pd.DataFrame,
    *,
    days: Iterable[date] | None = None,
    open_incidents: Iterable[Incident] = (),
    verdicts: Iterable[Verdict] = (),
) -> Iterator[ReplayedDay]:
    """Evaluate `days` (default every day of `table`, in order) one after the other.

    `table` is the slice table (`slice_metrics` rows) of those days and of the days
    before them that the baselines read; `open_incidents` are those open before the
    first day replayed, `verdicts` the verdicts of the days before it (the breakage the
    baselines must not learn is read from them, as the daily job reads its store).
    """
    dates = pd.Series([as_date(value) for value in table["partition_date"]], index=table.index)
    chosen = sorted(set(dates)) if days is None else sorted(days)
    window = timedelta(days=history_days(config))
    incidents = tuple(open_incidents)
    past_verdicts = list(verdicts)
    change_rules = config.change_rules()
    for day in chosen:
        today = table[dates == day]
        history = table[(dates < day) & (dates >= day - window)]
        excluded = baseline_exclusions(past_verdicts, change_rules, day, config.close_after_passes)
        outcomes = evaluate_rules(config, today, history, day, excluded)
        changes = advance_incidents(incidents, outcomes, config.close_after_passes)
        # as the warehouse stores them: held passes held, so the folded incidents agree
        past_verdicts.extend(changes.verdicts)
        incidents = changes.still_open
        yield ReplayedDay(day, tuple(outcomes), changes, today)
