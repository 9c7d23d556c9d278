"""The days a baseline must not learn: the breakage of a slice's change rules.

Once broken days enter a trailing baseline, the baseline and its day-to-day spread absorb
the breakage and the drop is "within the noise" a few days later: a monitor that says
"recovered" while the index is still broken. So the days a change rule failed on a slice,
and the days inside its open incident there, are left out of that statistic's baselines
on the slice (`evaluate_rules(..., excluded_days=...)`), and the trailing window reaches
back over them: during an incident the baseline stays at its pre-incident level.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import date, timedelta

from seer_metrics.rules.incidents import Verdict, incident_runs
from seer_metrics.rules.model import DEFAULT_CLOSE_AFTER_PASSES


def baseline_exclusions(
    verdicts: Iterable[Verdict],
    change_rules: Mapping[str, str],
    before: date,
    close_after_passes: int = DEFAULT_CLOSE_AFTER_PASSES,
) -> dict[tuple[str, str], frozenset[date]]:
    """The days each (statistic, slice)'s baselines must not learn, before `before`.

    `change_rules` maps the name of each rule compared with its own trailing days to its
    statistic. A day is left out when such a rule failed on the slice that day, or when it
    lay inside one of the rule's incidents on the slice (from the day it opened to the day
    before it closed; to `before` while it is open), so during an incident the baseline
    stays where it was before it. Service levels against a fixed line (a real retriever's
    chronic breaches) freeze nothing.
    """
    by_pair: dict[tuple[str, str], list[Verdict]] = {}
    for verdict in verdicts:
        if verdict.rule in change_rules and verdict.day < before:
            by_pair.setdefault((verdict.rule, verdict.slice), []).append(verdict)
    excluded: dict[tuple[str, str], set[date]] = {}
    for (rule, label), sequence in by_pair.items():
        sequence.sort(key=lambda verdict: verdict.day)
        days = excluded.setdefault((change_rules[rule], label), set())
        days.update(v.day for v in sequence if v.status == "fail")
        for run in incident_runs(sequence, close_after_passes):
            end = run.closed_on or before
            days.update(
                run.opened_on + timedelta(days=offset)
                for offset in range((end - run.opened_on).days)
            )
    return {key: frozenset(days) for key, days in excluded.items() if days}
