"""Alert quality of the default rules on realistic traffic: false pages and detection.

Streams of the realistic generator (`seer_pipelines.demo.realistic`: real multi-hop
questions, the BM25 top 4 as context, ~300 events a day) are scored with the ideal judge
(the gold passages) or, with `--judge lexical`, with the offline lexical judge `seer demo`
uses (judged once per distinct question and context, so it costs little), aggregated
into slices (by default `env`, `feature_flag` and `tenant`, with their pair slices) and
replayed through the rules day by day, as the daily job runs them
(`seer_pipelines.demo.replay`). A page is what would notify someone:
a failing drop after the day's false-discovery control, or a service-level incident
opened that day.

(a) Clean traffic: several seeded streams without any release. The first
    `--warm-up` days (the drop rules' trailing baseline) are left out; there the chronic
    breaches of a real retriever open their incidents once, reported apart. Over the
    other days: pages per clean week overall, and pages per clean month (30 days) for
    each slice family (`all`, one key, or one pair of keys: the `slice_key` column).
    Target: at most one page per clean month in every family.
(b) Releases: in each stream, at several places (a pair slice, a single-key slice, a
    thin one, a small one) and sizes (the share of the place's traffic that loses its
    top hit, or its top two), a release of `--release-days` days starting on a
    different day. Each release's size is measured as Δf1: the place's mean f1 (under
    the judge) on its first day without the release minus with it. It is caught on a day when that
    day pages on the place's own slice; reported per size: detection rate on the first
    day, mean delay. Target: every release with Δf1 ≥ 0.15 in a place of ≥ 100 events
    that day caught on its first day.

    .venv/bin/python benchmarks/alert_quality.py                # 4 streams of 63 days
    .venv/bin/python benchmarks/alert_quality.py --streams 2    # quicker
    .venv/bin/python benchmarks/alert_quality.py --judge lexical  # the demo's judge

Exits non-zero when a target is missed. A few minutes with the defaults on two cores.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import date

import numpy as np
import pandas as pd

from seer_metrics.evaluators.lexical import LexicalEvaluator
from seer_metrics.events import RetrievalEvent
from seer_metrics.judgment import Judgment
from seer_metrics.rules import DEFAULT_RULES, RulesConfig, load_rules_config
from seer_metrics.rules.incidents import Incident
from seer_metrics.slices import slice_metrics
from seer_pipelines.demo.realistic import (
    Release,
    StreamEvent,
    generate_stream,
    ideal_scores,
    load_pool,
)
from seer_pipelines.demo.replay import replay_rules

END_DAY = date(2026, 11, 27)
SLICE_KEYS = ("env", "feature_flag", "tenant")

TARGET_PAGES_PER_CLEAN_MONTH = 1.0  # per slice family
TARGET_CAUGHT_DELTA_F1 = 0.15  # releases at least this large ...
TARGET_CAUGHT_VOLUME = 100  # ... in a place with at least this many events that day
DAYS_PER_MONTH = 30

# Where the release happens: keys in the configured slice-key order, so the place is a slice.
PLACES: tuple[dict[str, str], ...] = (
    {"env": "prod", "feature_flag": "retrieval-v2"},  # a pair slice, ~145 events a weekday
    {"tenant": "acme"},  # one key, ~125 events
    {"feature_flag": "retrieval-v1"},  # one key, ~100 events: at the volume bar
    {"env": "staging"},  # one key, ~75 events: below the bar, reported only
)
# (share of the place's events affected, top hits lost)
SIZES: tuple[tuple[float, int], ...] = ((1.0, 2), (1.0, 1), (0.75, 1), (0.5, 1), (0.3, 1))


@dataclass(frozen=True)
class CleanStream:
    seed: int
    days: list[date]
    table: pd.DataFrame
    scores: pd.DataFrame
    families: dict[str, str]  # slice label -> slice family
    pages: dict[date, list[tuple[str, str]]]  # day -> (rule, slice)
    open_before: dict[date, tuple[Incident, ...]]


@dataclass(frozen=True)
class ReleaseResult:
    seed: int
    place: str
    share: float
    lost_top_hits: int
    start: date
    volume: int  # the place's events on the first day
    delta_f1: float  # the place's mean f1 under the judge, clean minus released, first day
    caught_on: int | None  # days after the start of the first page on the place's slice
    first_day_pages: int
    caught_by: tuple[str, ...]  # the rules that paged on the place's slice on the first day

    @property
    def must_be_caught(self) -> bool:
        return self.delta_f1 >= TARGET_CAUGHT_DELTA_F1 and self.volume >= TARGET_CAUGHT_VOLUME


JUDGES = ("ideal", "lexical")


class LexicalJudge:
    """The offline lexical judge over stream events, once per distinct question and context
    (a stream draws the same few hundred examples again and again)."""

    def __init__(self) -> None:
        self.evaluator = LexicalEvaluator()
        self.judgments: dict[tuple[str, tuple[str, ...]], Judgment] = {}

    def rejudge(self, events: Iterable[StreamEvent]) -> Iterator[StreamEvent]:
        for event in events:
            if event.judgment is None:  # a broken row: no judgment under any judge
                yield event
                continue
            key = (event.example_id, event.context_ids)
            if key not in self.judgments:
                parsed = RetrievalEvent.from_record(event.record)
                self.judgments[key] = self.evaluator.judge(parsed)
            yield replace(event, judgment=self.judgments[key])


def judged_scores(events: Iterable[StreamEvent], judge: LexicalJudge | None) -> pd.DataFrame:
    """Event scores under the ideal judge (None) or the lexical one."""
    return ideal_scores(events if judge is None else judge.rejudge(events))


def _table(scores: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    return slice_metrics(scores, list(keys))


def replay_clean(
    config: RulesConfig,
    seed: int,
    days: int,
    keys: Sequence[str],
    judge: LexicalJudge | None = None,
) -> CleanStream:
    scores = judged_scores(generate_stream(days, end_day=END_DAY, seed=seed), judge)
    table = _table(scores, keys)
    families = dict(zip(table["slice"], table["slice_key"], strict=True))
    pages: dict[date, list[tuple[str, str]]] = {}
    open_before: dict[date, tuple[Incident, ...]] = {}
    incidents: tuple[Incident, ...] = ()
    for replayed in replay_rules(config, table):
        open_before[replayed.day] = incidents
        incidents = replayed.open_incidents
        pages[replayed.day] = [(page.rule, page.slice) for page in replayed.pages]
    return CleanStream(seed, sorted(pages), table, scores, families, pages, open_before=open_before)


def _matches(metadata: pd.Series, where: dict[str, str]) -> np.ndarray:
    return np.array(
        [all(meta.get(key) == value for key, value in where.items()) for meta in metadata]
    )


def replay_release(
    config: RulesConfig,
    clean: CleanStream,
    keys: Sequence[str],
    where: dict[str, str],
    share: float,
    lost_top_hits: int,
    start_index: int,
    length: int,
    judge: LexicalJudge | None = None,
) -> ReleaseResult:
    """The clean stream with a release from day `start_index` on; only those days change."""
    release_days = clean.days[start_index : start_index + length]
    release = Release(
        where=where, start=0, length=len(release_days), share=share, lost_top_hits=lost_top_hits
    )
    released = judged_scores(
        generate_stream(
            len(release_days), end_day=release_days[-1], seed=clean.seed, release=release
        ),
        judge,
    )
    first = release_days[0]
    before = clean.scores[clean.scores["partition_date"] == first]
    after = released[released["partition_date"] == first]
    assert list(before["event_id"]) == list(after["event_id"]), "the streams must share events"
    in_place = _matches(after["metadata"], where)
    delta_f1 = float(
        before["f1"].to_numpy()[in_place].mean() - after["f1"].to_numpy()[in_place].mean()
    )
    table = pd.concat(
        [clean.table[~clean.table["partition_date"].isin(release_days)], _table(released, keys)],
        ignore_index=True,
    )
    caught_on = None
    first_day_pages = 0
    caught_by: tuple[str, ...] = ()
    replayed = replay_rules(
        config, table, days=release_days, open_incidents=clean.open_before[first]
    )
    for offset, day in enumerate(replayed):
        if offset == 0:
            first_day_pages = len(day.pages)
            caught_by = tuple(p.rule for p in day.pages if p.slice == release.slice_label)
        if caught_on is None and any(page.slice == release.slice_label for page in day.pages):
            caught_on = offset
    return ReleaseResult(
        clean.seed,
        release.slice_label,
        share,
        lost_top_hits,
        first,
        int(in_place.sum()),
        delta_f1,
        caught_on,
        first_day_pages,
        caught_by,
    )


def _check(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def report_clean(streams: Sequence[CleanStream], warm_up: int) -> bool:
    clean_days = 0
    by_family: Counter[str] = Counter()
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
    total = sum(by_family.values())
    print(
        f"(a) clean traffic: {len(streams)} streams, {clean_days} clean days after a "
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
            f"    {family:<22} {by_family[family]:>3} pages: "
            f"{7 * by_family[family] / clean_days:.2f} per clean week, {rate:.2f} per clean "
            f"month (target <= {TARGET_PAGES_PER_CLEAN_MONTH:.0f})  {_check(ok)}"
        )
    return passed


def report_releases(results: Sequence[ReleaseResult]) -> bool:
    print(f"(b) releases: {len(results)}")
    print(
        f"    {'place':<36} {'size':>12} {'events':>7} {'Δf1':>6} {'caught day 1':>12} "
        f"{'mean delay':>10}  first-day pages on the place"
    )
    groups: dict[tuple[str, float, int], list[ReleaseResult]] = defaultdict(list)
    for result in results:
        groups[(result.place, result.share, result.lost_top_hits)].append(result)
    for (place, share, lost), group in groups.items():
        caught = [r.caught_on for r in group if r.caught_on is not None]
        size = f"{share:.0%} -{lost} hit{'s' if lost > 1 else ''}"
        delay = f"{np.mean(caught):.2f} d" if caught else "never"
        rules = Counter(rule for r in group for rule in r.caught_by)
        print(
            f"    {place:<36} {size:>12} {np.mean([r.volume for r in group]):>7.0f} "
            f"{np.mean([r.delta_f1 for r in group]):>6.3f} "
            f"{sum(r.caught_on == 0 for r in group):>5} of {len(group):<4} {delay:>10}  "
            + ", ".join(f"{rule} {n}" for rule, n in sorted(rules.items()))
        )
    print("    by size of the drop (Δf1 on the first day):")
    bins = ((0.0, 0.05), (0.05, 0.10), (0.10, 0.15), (0.15, 0.25), (0.25, 1.0))
    for low, high in bins:
        inside = [r for r in results if low <= r.delta_f1 < high]
        if not inside:
            continue
        caught = [r.caught_on for r in inside if r.caught_on is not None]
        first = sum(r.caught_on == 0 for r in inside)
        delay = f"{np.mean(caught):.2f} d" if caught else "–"
        print(
            f"      Δf1 {low:.2f}-{high:.2f}: {len(inside):>3} releases, caught on day 1 "
            f"{first / len(inside):.0%}, ever {len(caught) / len(inside):.0%}, mean delay {delay}"
        )
    required = [r for r in results if r.must_be_caught]
    missed = [r for r in required if r.caught_on != 0]
    ok = not missed
    print(
        f"    Δf1 >= {TARGET_CAUGHT_DELTA_F1} in >= {TARGET_CAUGHT_VOLUME} events: "
        f"{len(required) - len(missed)} of {len(required)} caught on the first day "
        f"(target: all)  {_check(ok)}"
    )
    for result in missed:
        print(
            f"      missed: seed {result.seed}, {result.place} from {result.start}, "
            f"{result.volume} events, Δf1 {result.delta_f1:.3f}, caught on day "
            f"{'never' if result.caught_on is None else result.caught_on + 1}"
        )
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=4, help="seeded streams (default 4)")
    parser.add_argument("--days", type=int, default=63, help="days per stream (default 63)")
    parser.add_argument("--warm-up", type=int, default=7, help="days left out (default 7)")
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
    args = parser.parse_args(argv)
    if args.days < args.warm_up + args.release_days + 1:
        parser.error("--days must leave room for the warm-up and a release")
    keys = [key.strip() for key in args.slice_keys.split(",") if key.strip()]
    config = load_rules_config(args.rules) if args.rules else DEFAULT_RULES
    judge = LexicalJudge() if args.judge == "lexical" else None
    started = time.perf_counter()
    load_pool()
    streams = []
    results = []
    for stream_index in range(args.streams):
        seed = 101 + stream_index
        clean = replay_clean(config, seed, args.days, keys, judge)
        streams.append(clean)
        # Each release starts on a different day, spread over the stream after the warm-up.
        starts = range(args.warm_up, args.days - args.release_days + 1)
        for place_index, where in enumerate(PLACES):
            for size_index, (share, lost) in enumerate(SIZES):
                start = starts[(stream_index * 7 + place_index * 5 + size_index * 3) % len(starts)]
                results.append(
                    replay_release(
                        config, clean, keys, where, share, lost, start, args.release_days, judge
                    )
                )
        print(f"stream {seed}: done ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    print(
        f"Alert quality of the rules on realistic streams (slice keys {', '.join(keys)}, "
        f"~300 events a day, {args.judge} judge, incidents close after "
        f"{config.close_after_passes} clear passes)"
    )
    clean_ok = report_clean(streams, args.warm_up)
    releases_ok = report_releases(results)
    print(f"{time.perf_counter() - started:.0f} s")
    return 0 if clean_ok and releases_ok else 1


if __name__ == "__main__":
    sys.exit(main())
