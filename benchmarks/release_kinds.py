"""The releases of the alert-quality benchmark, section (b): a release at several places
and sizes in each clean stream, whether the rules catch it on its first day, and the
report of them."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

import numpy as np
import pandas as pd
from kind_report import check
from kind_targets import pages_slice
from trouble_kinds import BaseStream, slice_table

from seer_metrics.rules import RulesConfig
from seer_pipelines.demo.realistic import Release, generate_stream, ideal_scores
from seer_pipelines.demo.replay import replay_rules

TARGET_CAUGHT_DELTA_F1 = 0.15  # releases at least this large ...
TARGET_CAUGHT_VOLUME = 100  # ... in a place with at least this many events that day

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


def _matches(metadata: pd.Series, where: dict[str, str]) -> np.ndarray:
    return np.array(
        [all(meta.get(key) == value for key, value in where.items()) for meta in metadata]
    )


def replay_release(
    config: RulesConfig,
    clean: BaseStream,
    keys: Sequence[str],
    where: dict[str, str],
    share: float,
    lost_top_hits: int,
    start_index: int,
    length: int,
) -> ReleaseResult:
    """The clean stream with a release from day `start_index` on; only those days change."""
    release_days = clean.days[start_index : start_index + length]
    release = Release(
        where=where, start=0, length=len(release_days), share=share, lost_top_hits=lost_top_hits
    )
    released = ideal_scores(
        generate_stream(
            len(release_days),
            end_day=release_days[-1],
            events_per_day=clean.events_per_day,
            seed=clean.seed,
            release=release,
            judge=clean.judge,
        )
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
        [
            clean.table[~clean.table["partition_date"].isin(release_days)],
            slice_table(released, keys),
        ],
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
        if caught_on is None and pages_slice(day, release.slice_label):
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
        f"(target: all)  {check(ok)}"
    )
    for result in missed:
        print(
            f"      missed: seed {result.seed}, {result.place} from {result.start}, "
            f"{result.volume} events, Δf1 {result.delta_f1:.3f}, caught on day "
            f"{'never' if result.caught_on is None else result.caught_on + 1}"
        )
    return ok
