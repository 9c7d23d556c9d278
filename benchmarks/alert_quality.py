"""Alert quality of the default rules on realistic traffic: false pages and detection.

Streams of the realistic generator (`seer_pipelines.demo.realistic`: real multi-hop
questions, the BM25 top 4 as context, ~300 events a day, or `--events-per-day`) are scored
with the ideal judge (the gold passages) or, with `--judge lexical`, with the offline
lexical judge `seer demo` uses (judged once per distinct question and context, so it
costs little), aggregated into slices (by default `env`, `feature_flag` and `tenant`, with
their pair slices) and replayed through the rules day by day, as the daily job runs them
(`seer_pipelines.demo.replay`). A page is what would notify someone:
a failing drop after the day's false-discovery control, or a service-level incident
opened that day.

(a) Clean traffic: several seeded streams without any release. The first
    `--warm-up` days (the drop rules' trailing baseline) are left out; there the chronic
    breaches of a real retriever open their incidents once, reported apart. Over the
    other days: pages per clean week overall, and pages per clean month (30 days) for
    each slice family (`all`, one key, or one pair of keys: the `slice_key` column), and
    the days it paged on (a day's pages are one message). Target: at most one page per
    clean month in every family.
(b) Releases (`release_kinds.py`): in each stream, at several places (a pair slice, a
    single-key slice, a thin one, a small one) and sizes (the share of the place's
    traffic that loses its top hit, or its top two), a release of `--release-days` days
    starting on a different day. Each release's size is measured as Δf1: the place's mean f1 (under
    the judge) on its first day without the release minus with it. It is caught on a day when that
    day pages on the place's own slice; reported per size: detection rate on the first
    day, mean delay. Target: every release with Δf1 ≥ 0.15 in a place of ≥ 100 events
    that day caught on its first day.

(c) Kinds of trouble (`kind_scenarios.py`, replayed by `trouble_kinds.py`): in each
    stream, a lost top hit at several places and sizes (one an intersection of ~80
    events a day, below the pair slices' volume bar), context bloat, empty contexts, a
    tenant of 20 on a wrong index, a slow drift, a release then its fix, a bloat then its
    fix, a judge change, a volume loss and a vanishing slice.
    Targets per kind: caught on its first day (a page of its slice; or, where its slice
    had an incident open from before it, which carries it without a page, a message that
    day led by its slice: counted apart), led by its own slice, no "Recovered"
    while it lasts, a "Recovered" after a fix, the volume loss said on its day, a judge
    change never paged as a change (a page on a day the stream judged by the new judge
    all along pages a change too is that day's, not the change's). Beside them: of the
    "Recovered" said while a trouble lasts, those on a day it still moved the slice (the
    same events without it read better by a quarter of the rule's step) and those a later
    page of the slice names as failing again; after a fix, the day its slice's incidents,
    and all it opened, had closed; under each place, every missed lead (the day, the
    slice that led, narrower, wider, crossing or apart from the trouble's, and its
    headline); a drift whose recall never fell 0.15 is read on its last day ("never").
(d) Clean mix: 20 tenants, weekday/weekend volumes and a new tenant from mid-stream on;
    the target of (a).

    .venv/bin/python benchmarks/alert_quality.py                # 4 streams of 63 days
    .venv/bin/python benchmarks/alert_quality.py --streams 1 --kinds context_bloat,clean
    .venv/bin/python benchmarks/alert_quality.py --streams 2    # quicker
    .venv/bin/python benchmarks/alert_quality.py --judge lexical  # the demo's judge
    .venv/bin/python benchmarks/alert_quality.py --seed 105       # streams not tuned on
    .venv/bin/python benchmarks/alert_quality.py --events-per-day 900  # a busier retriever
    .venv/bin/python benchmarks/alert_quality.py --kinds release_fix --trace "prod × v2"

Exits non-zero when a target is missed. A few minutes with the defaults on two cores
(`--workers`: streams side by side).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import date, timedelta
from functools import partial

from kind_report import check, report_kinds
from kind_scenarios import KINDS, OTHER_JUDGE, SCENARIOS, scenario_start, scenario_starts
from release_kinds import PLACES, SIZES, ReleaseResult, replay_release, report_releases
from trouble_kinds import BaseStream, ScenarioResult, replay_base, run_scenario

from seer_metrics.rules import DEFAULT_RULES, RulesConfig, load_rules_config
from seer_pipelines.demo.realistic import DEFAULT_EVENTS_PER_DAY, WEEKEND_VOLUME, load_pool
from seer_pipelines.demo.trouble import NewTenant

END_DAY = date(2026, 11, 27)
SLICE_KEYS = ("env", "feature_flag", "tenant")

TARGET_PAGES_PER_CLEAN_MONTH = 1.0  # per slice family
DAYS_PER_MONTH = 30

JUDGES = ("ideal", "lexical")
MIX_TENANTS = 20  # the clean mix: this many tenants, and a new one from mid-stream on
ALL_KINDS = ("clean", "release", *KINDS, "clean_mix")


def report_clean(
    streams: Sequence[BaseStream], warm_up: int, title: str = "(a) clean traffic"
) -> bool:
    clean_days = 0
    by_family: Counter[str] = Counter()
    # the days each family paged on: a day's pages reach a person as one message
    family_days: Counter[str] = Counter()
    by_rule: Counter[str] = Counter()
    families: set[str] = set()
    warm_up_pages = 0
    for stream in streams:
        families.update(stream.families.values())
        for index, day in enumerate(stream.days):
            if index < warm_up:
                warm_up_pages += len(stream.pages[day])
                continue
            clean_days += 1
            for rule, label in stream.pages[day]:
                by_family[stream.families.get(label, label)] += 1
                by_rule[rule] += 1
            paged = {stream.families.get(label, label) for _, label in stream.pages[day]}
            family_days.update(paged)
    total = sum(by_family.values())
    print(
        f"{title}: {len(streams)} streams, {clean_days} clean days after a "
        f"{warm_up}-day warm-up ({warm_up_pages} pages in the warm-ups: incidents opened "
        "on the first evaluation)"
    )
    print(f"    pages per clean week, all slices: {7 * total / clean_days:.2f}")
    if by_rule:
        print("    pages by rule: " + ", ".join(f"{r} {n}" for r, n in by_rule.most_common()))
    passed = True
    for family in sorted(families, key=lambda f: (f.count(",") + (f != "all"), f)):
        rate = DAYS_PER_MONTH * by_family[family] / clean_days
        ok = rate <= TARGET_PAGES_PER_CLEAN_MONTH
        passed &= ok
        print(
            f"    {family:<22} {by_family[family]:>3} pages on {family_days[family]:>2} days: "
            f"{7 * by_family[family] / clean_days:.2f} per clean week, {rate:.2f} per clean "
            f"month (target <= {TARGET_PAGES_PER_CLEAN_MONTH:.0f})  {check(ok)}"
        )
    return passed


def _kinds(text: str, parser: argparse.ArgumentParser) -> list[str]:
    kinds = [kind.strip() for kind in text.split(",") if kind.strip()]
    unknown = sorted(set(kinds) - set(ALL_KINDS))
    if unknown:
        parser.error(f"unknown kinds {unknown}; kinds: {', '.join(ALL_KINDS)}")
    return kinds


@dataclass(frozen=True)
class StreamRun:
    """What one seeded stream gave: its clean bases, releases and scenarios."""

    bases: dict[str, BaseStream]
    releases: list[ReleaseResult]
    scenarios: list[ScenarioResult]


def run_stream(
    config: RulesConfig,
    args: argparse.Namespace,
    keys: Sequence[str],
    kinds: Sequence[str],
    stream_index: int,
) -> StreamRun:
    """Every chosen kind on the stream seeded `--seed + stream_index` (one worker's share)."""
    started = time.perf_counter()
    seed = args.seed + stream_index
    # a clean stream of this seed, days and volume, judged by the given judge
    replay = partial(
        replay_base, config, seed, args.days, END_DAY, keys, events_per_day=args.events_per_day
    )
    scenarios = [s for s in SCENARIOS if s.kind in kinds]
    bases: dict[str, BaseStream] = {}
    if {"clean", "release"} & set(kinds) or any(s.base == "default" for s in scenarios):
        bases["default"] = replay(args.judge)
    if "clean_mix" in kinds or any(s.base == "mix" for s in scenarios):
        # 20 tenants, a new tenant (8% of the traffic) from mid-stream on
        new_tenant = NewTenant(start=END_DAY - timedelta(days=args.days // 2))
        bases["mix"] = replay(args.judge, MIX_TENANTS, (new_tenant,))
    if "judge_change" in kinds:
        # what the judge change's days page judged by the new judge all along
        bases["new_judge"] = replay(OTHER_JUDGE[args.judge])
    releases = []
    if "release" in kinds:
        # Each release starts on a different day, spread over the stream after the warm-up.
        starts = range(args.warm_up, args.days - args.release_days + 1)
        for place_index, where in enumerate(PLACES):
            for size_index, (share, lost) in enumerate(SIZES):
                start = starts[(stream_index * 7 + place_index * 5 + size_index * 3) % len(starts)]
                releases.append(
                    replay_release(
                        config, bases["default"], keys, where, share, lost, start, args.release_days
                    )
                )
    starts = scenario_starts(args.days, args.warm_up)
    # Each scenario starts on its own day, the same whichever kinds are run.
    results = [
        run_scenario(
            config,
            bases[scenario.base],
            keys,
            scenario,
            scenario_start(
                starts, stream_index * 7 + SCENARIOS.index(scenario) * 5, args.days, scenario
            ),
            trace=bool(args.trace) and args.trace in scenario.place,
            new_judge=bases.get("new_judge") if scenario.kind == "judge_change" else None,
        )
        for scenario in scenarios
    ]
    print(f"stream {seed}: done ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    return StreamRun(bases, releases, results)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=4, help="seeded streams (default 4)")
    parser.add_argument(
        "--seed", type=int, default=101, help="the first stream's seed (default 101)"
    )
    parser.add_argument("--days", type=int, default=63, help="days per stream (default 63)")
    parser.add_argument("--warm-up", type=int, default=7, help="days left out (default 7)")
    parser.add_argument(
        "--events-per-day",
        type=int,
        default=DEFAULT_EVENTS_PER_DAY,
        help=f"a weekday's events, about (default {DEFAULT_EVENTS_PER_DAY})",
    )
    parser.add_argument("--release-days", type=int, default=3, help="days a release lasts")
    parser.add_argument(
        "--slice-keys", default=",".join(SLICE_KEYS), help="metadata keys to slice by"
    )
    parser.add_argument("--rules", default=None, help="rules file (default: the built-in rules)")
    parser.add_argument(
        "--judge",
        choices=JUDGES,
        default="ideal",
        help="ideal (the gold passages, default) or lexical (the offline judge of seer demo)",
    )
    parser.add_argument(
        "--workers", type=int, default=2, help="streams run side by side (default 2)"
    )
    parser.add_argument(
        "--kinds",
        default=",".join(ALL_KINDS),
        help=f"the kinds to run, comma-separated (default all: {','.join(ALL_KINDS)})",
    )
    parser.add_argument(
        "--trace",
        default="",
        help="print day by day what the scenarios whose place contains this text did",
    )
    args = parser.parse_args(argv)
    kinds = _kinds(args.kinds, parser)
    longest = max(scenario.replayed_days for scenario in SCENARIOS)
    if args.events_per_day < 1:
        parser.error("--events-per-day must be at least 1")
    if args.days < max(args.warm_up + args.release_days + 1, 2 * args.warm_up + longest):
        parser.error("--days must leave room for two warm-ups and the longest trouble")
    keys = [key.strip() for key in args.slice_keys.split(",") if key.strip()]
    config = load_rules_config(args.rules) if args.rules else DEFAULT_RULES
    started = time.perf_counter()
    load_pool()
    run = partial(run_stream, config, args, keys, kinds)
    if args.workers > 1 and args.streams > 1:
        with ProcessPoolExecutor(min(args.workers, args.streams)) as pool:
            runs = list(pool.map(run, range(args.streams)))
    else:
        runs = [run(index) for index in range(args.streams)]
    streams = [r.bases["default"] for r in runs if "clean" in kinds]
    mixes = [r.bases["mix"] for r in runs if "clean_mix" in kinds]
    results = [result for r in runs for result in r.releases]
    scenario_results = [result for r in runs for result in r.scenarios]
    print(
        f"Alert quality of the rules on realistic streams (slice keys {', '.join(keys)}, "
        f"~{args.events_per_day} events a day, {args.judge} judge, incidents close after "
        f"{config.close_after_passes} clear passes)"
    )
    passed = True
    if "clean" in kinds:
        passed &= report_clean(streams, args.warm_up)
    if "release" in kinds:
        passed &= report_releases(results)
    if scenario_results:
        passed &= report_kinds(scenario_results)
    for result in scenario_results:
        if result.trace:
            print(result.trace)
    if "clean_mix" in kinds:
        passed &= report_clean(
            mixes,
            args.warm_up,
            f"(d) clean mix ({MIX_TENANTS} tenants, weekends at {WEEKEND_VOLUME:.0%}, a new "
            "tenant from mid-stream on)",
        )
    print(f"{time.perf_counter() - started:.0f} s")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
