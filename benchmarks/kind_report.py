"""The report of the kinds of trouble of the alert-quality benchmark: per kind, how many
scenarios met each target (`kind_scenarios.TARGETS`), then per place what they did."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

import numpy as np
from kind_scenarios import TARGETS
from trouble_kinds import ScenarioResult


def _mean(values: Sequence[float]) -> str:
    defined = [v for v in values if not np.isnan(v)]
    return f"{np.mean(defined):.2f}" if defined else "none"


def _day(day: int | None) -> str:
    return "never" if day is None else str(day)


def _met(results: Sequence[ScenarioResult], target: str) -> list[bool]:
    """Whether each scenario that has `target` met it."""
    return [r.results[target] for r in results if target in r.results]


def check(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def report_kinds(results: Sequence[ScenarioResult]) -> bool:
    """Per kind, each target: how many of its scenarios met it; then per place."""
    print(f"(c) kinds of trouble: {len(results)} scenarios")
    passed = True
    by_kind: dict[str, list[ScenarioResult]] = defaultdict(list)
    for result in results:
        by_kind[result.scenario.kind].append(result)
    for kind, group in by_kind.items():
        print(f"    {kind}:")
        for target in TARGETS:
            met = _met(group, target)
            if not met:
                continue
            ok = all(met)
            passed &= ok
            print(f"      {TARGETS[target]:<84} {sum(met):>3} of {len(met):<3} {check(ok)}")
        places: dict[str, list[ScenarioResult]] = defaultdict(list)
        for result in group:
            places[result.scenario.place].append(result)
        for place, runs in places.items():
            notes = []
            if any(r.false_recoveries for r in runs):
                counts = ", ".join(str(r.false_recoveries) for r in runs)
                notes.append(f"Recovered while it lasted: {counts}")
                counts = ", ".join(str(r.held_recoveries) for r in runs)
                notes.append(f"of them with the trouble still moving the slice that day: {counts}")
                counts = ", ".join(str(r.corrected_recoveries) for r in runs)
                notes.append(f'of them followed by a "failing again" page: {counts}')
            if any(r.caught_open_before for r in runs):
                counts = ", ".join(str(int(r.caught_open_before)) for r in runs)
                notes.append(f"caught by a message led by its slice, open from before it: {counts}")
            if any(r.earlier_closed for r in runs):
                counts = ", ".join(str(r.earlier_closed) for r in runs)
                notes.append(f"incidents opened before it closed while it lasted: {counts}")
            week = [r.all_closed_in_a_week for r in runs if r.all_closed_in_a_week is not None]
            if week:
                notes.append(f"every incident closed within a week {sum(week)}/{len(week)}")
            closed = [r.closed_by for r in runs if r.closed_by is not None]
            if closed:
                own = ", ".join(_day(own) for own, _ in closed)
                every = ", ".join(_day(every) for _, every in closed)
                notes.append(f"its slice closed by day {own} after the fix, every one by {every}")
            if any(r.change_pages for r in runs):
                notes.append(f"change pages: {', '.join(str(r.change_pages) for r in runs)}")
            if any(r.own_judge_pages for r in runs):
                counts = ", ".join(str(r.own_judge_pages) for r in runs)
                notes.append(f"change pages the new judge's own stream makes that day: {counts}")
            if any(r.later_change_pages for r in runs):
                counts = ", ".join(str(r.later_change_pages) for r in runs)
                notes.append(f"change pages once the window holds the new judge only: {counts}")
            if any(r.deadline for r in runs):
                # a drift whose recall never fell 0.15 is read on its last day
                days = ", ".join(
                    str(r.deadline) if r.fell else f"never (read on {r.deadline})" for r in runs
                )
                notes.append(f"recall 0.15 down on day {days}")
            met = ", ".join(
                f"{target} {sum(r.results[target] for r in runs)}/{len(runs)}"
                for target in runs[0].results
            )
            print(
                f"        {place:<38} {np.mean([r.events for r in runs]):>5.0f} events, recall "
                f"{np.nanmean([r.recall_before for r in runs]):.2f} -> "
                f"{_mean([r.recall_first_day for r in runs])}: {met}"
                + "".join(f"; {note}" for note in notes)
            )
            for run in runs:
                if (missed := run.missed_lead) is not None:
                    print(
                        f"          led by {missed.lead} ({missed.relation}), seed {run.seed} "
                        f"{missed.day}: {missed.headline}"
                    )
    print("    all kinds:")
    for target in TARGETS:
        met = _met(results, target)
        if met:
            rate = f"{sum(met)} of {len(met)} ({sum(met) / len(met):.0%})"
            print(f"      {TARGETS[target]:<84} {rate}")
    relations = Counter(r.missed_lead.relation for r in results if r.missed_lead is not None)
    if relations:
        # a narrower lead read a part as all of the change; a wider one read the rest of it
        # as changed too; a crossing one, another cut of the same events; one apart,
        # sharing no events with it, another story
        counts = ", ".join(f"{relation} {n}" for relation, n in sorted(relations.items()))
        print(f"      missed leads, by the lead against the trouble's slice: {counts}")
    return passed
