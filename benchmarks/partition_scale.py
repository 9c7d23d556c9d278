"""How one large daily partition runs through the Dagster pipeline: speed and memory.

Seeds a SQLite warehouse (temporary directory) with one day of synthetic events, then
materializes every asset of that partition with `dagster.materialize` (ephemeral
instance, offline lexical evaluator, default chunk size), each asset in a fresh child
process, as Dagster's default multiprocess executor runs each step of a job. For each
asset it prints events/s and peak memory (the child's peak RSS, and its growth over the
RSS the process had before the step: what the step itself allocated), each with its
target, and exits non-zero when a target is missed:

  (a) whole first run (judging every event offline): at least 500 events/s, so a day of
      100,000 events is processed within about three and a half minutes;
  (b) memory bounded by the chunk size, not the day: for 4x the events, each step's RSS
      growth may grow by at most 1.5x (plus 8 MB of allocator noise), and no step may
      exceed 600 MB of peak RSS;
  (c) re-run of the same day (every judgment cached): zero model calls, zero events sent
      to the evaluator, and at least 2x faster than the first run.

    .venv/bin/python benchmarks/partition_scale.py                  # 100,000 and 25,000 events
    .venv/bin/python benchmarks/partition_scale.py --events 20000   # quicker

About four minutes with the defaults on two cores (seeding included).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import logging
import multiprocessing
import resource
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

DAY = date(2026, 3, 4)  # a Wednesday: weekdays carry the full synthetic volume
STEPS = ("event_judgments", "event_metrics", "passage_judgments", "slice_metrics")

TARGET_EVENTS_PER_SECOND = 500.0
TARGET_GROWTH_RATIO = 1.5
GROWTH_NOISE_MB = 8.0
TARGET_PEAK_RSS_MB = 600.0
TARGET_RERUN_SPEEDUP = 2.0

QUIET_RUN_CONFIG = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}


def _peak_rss_mb() -> float:
    """Peak resident set size of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@dataclass
class StepFigures:
    step: str
    seconds: float
    peak_rss_mb: float
    growth_mb: float
    metadata: dict[str, Any]


def run_step(url: str, step: str, chunk_size: int | None) -> StepFigures:
    """Materialize one asset of DAY in this (fresh) process and measure it."""
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    import dagster

    from seer_pipelines.alerts import SlackAlertResource
    from seer_pipelines.assets.judgments import event_judgments
    from seer_pipelines.assets.metrics import event_metrics, passage_judgments, slice_metrics_asset
    from seer_pipelines.definitions import ASSET_CHECKS
    from seer_pipelines.resources import EvaluatorResource, WarehouseResource

    assets = {
        "event_judgments": [event_judgments],
        "event_metrics": [event_metrics],
        "passage_judgments": [passage_judgments],
        # The daily job runs the slice checks right after slice_metrics, in the same step.
        "slice_metrics": [slice_metrics_asset, *ASSET_CHECKS],
    }[step]
    settings = {"chunk_size": chunk_size} if chunk_size else {}
    warehouse = WarehouseResource(url=url, **settings)
    resources = {
        "warehouse": warehouse,
        "evaluator": EvaluatorResource(kind="lexical"),
        "slack": SlackAlertResource(),
    }
    before = _peak_rss_mb()
    started = time.perf_counter()
    result = dagster.materialize(
        assets,
        partition_key=DAY.isoformat(),
        resources=resources,
        run_config=QUIET_RUN_CONFIG,
    )
    seconds = time.perf_counter() - started
    peak = _peak_rss_mb()
    [materialization] = result.asset_materializations_for_node(step)
    metadata = {
        key: value.value
        for key, value in materialization.metadata.items()
        if isinstance(value.value, int | float)
    }
    return StepFigures(step, seconds, peak, peak - before, metadata)


def seed(url: str, events: int) -> int:
    from seer_pipelines.commands.seed import seed_warehouse
    from seer_pipelines.resources import WarehouseResource

    warehouse = WarehouseResource(url=url)
    try:
        seed_warehouse(
            warehouse,
            days=1,
            end_day=DAY,
            events_per_day=events,
            seed=7,
            regression_days=0,
            show_progress=False,
        )
        return warehouse.count_events(DAY)
    finally:
        warehouse.dispose()


def run_pipeline(url: str, chunk_size: int | None) -> dict[str, StepFigures]:
    """Every step in its own fresh process, in dependency order."""
    context = multiprocessing.get_context("spawn")
    figures: dict[str, StepFigures] = {}
    for step in STEPS:
        with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
            figures[step] = pool.submit(run_step, url, step, chunk_size).result()
    return figures


def print_run(title: str, events: int, figures: dict[str, StepFigures]) -> float:
    """Print one run's table; returns its total seconds."""
    total = sum(f.seconds for f in figures.values())
    print(f"\n{title}: {events:,} events")
    print(f"  {'step':<20} {'seconds':>8} {'events/s':>9} {'peak RSS MB':>12} {'growth MB':>10}")
    for f in figures.values():
        print(
            f"  {f.step:<20} {f.seconds:>8.1f} {events / f.seconds:>9.0f} "
            f"{f.peak_rss_mb:>12.0f} {f.growth_mb:>10.1f}"
        )
    peak = max(f.peak_rss_mb for f in figures.values())
    print(f"  {'total':<20} {total:>8.1f} {events / total:>9.0f} {peak:>12.0f}")
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000, help="events in the large day")
    parser.add_argument(
        "--ratio", type=int, default=4, help="the small day has events / ratio events"
    )
    parser.add_argument(
        "--chunk-size", type=int, default=None, help="warehouse chunk_size (default: resource's)"
    )
    args = parser.parse_args(argv)
    if args.events < 100 or args.ratio < 2:
        parser.error("--events must be at least 100 and --ratio at least 2")
    missed: list[str] = []

    def check(ok: bool, label: str) -> str:
        if not ok:
            missed.append(label)
        return "ok" if ok else "MISSED"

    with tempfile.TemporaryDirectory(prefix="seer-partition-scale-") as directory:
        runs: dict[str, tuple[int, dict[str, StepFigures]]] = {}
        for name, requested in (("small", args.events // args.ratio), ("large", args.events)):
            url = f"sqlite:///{Path(directory) / f'{name}.sqlite'}"
            started = time.perf_counter()
            events = seed(url, requested)
            print(f"seeded {events:,} events for {DAY} in {time.perf_counter() - started:.0f} s")
            runs[name] = (events, run_pipeline(url, args.chunk_size))
            if name == "large":
                runs["rerun"] = (events, run_pipeline(url, args.chunk_size))

        small_events, small = runs["small"]
        large_events, large = runs["large"]
        _, rerun = runs["rerun"]
        print_run("first run, small day", small_events, small)
        first_total = print_run("first run, large day", large_events, large)
        rerun_total = print_run("re-run, large day (judgments cached)", large_events, rerun)

        print("\ntargets")
        rate = large_events / first_total
        print(
            f"  (a) first run: {rate:.0f} events/s, target >= {TARGET_EVENTS_PER_SECOND:.0f} "
            f"({large_events:,} events in {first_total:.0f} s) "
            f"{check(rate >= TARGET_EVENTS_PER_SECOND, 'throughput')}"
        )
        scale = large_events / small_events
        for step in STEPS:
            grown, base = large[step].growth_mb, small[step].growth_mb
            ratio = grown / max(base, 1.0)
            bounded = grown <= TARGET_GROWTH_RATIO * base + GROWTH_NOISE_MB
            print(
                f"  (b) {step}: RSS growth {base:.1f} MB -> {grown:.1f} MB for {scale:.1f}x "
                f"the events ({ratio:.2f}x), target <= {TARGET_GROWTH_RATIO}x "
                f"(+{GROWTH_NOISE_MB:.0f} MB) {check(bounded, f'memory of {step}')}"
            )
        peak = max(f.peak_rss_mb for run in (small, large, rerun) for f in run.values())
        small_peak = max(f.peak_rss_mb for f in small.values())
        large_peak = max(f.peak_rss_mb for f in large.values())
        print(
            f"  (b) peak RSS: {small_peak:.0f} MB -> {large_peak:.0f} MB "
            f"({large_peak / small_peak:.2f}x), highest {peak:.0f} MB, target <= "
            f"{TARGET_PEAK_RSS_MB:.0f} MB {check(peak <= TARGET_PEAK_RSS_MB, 'peak RSS')}"
        )
        judged = rerun["event_judgments"].metadata
        calls, sent = int(judged["model_calls"]), int(judged["judged"])
        print(
            f"  (c) re-run: {calls} model calls, {sent} events sent to the evaluator, "
            f"{int(judged['cache_hits']):,} cache hits, target 0 and 0 "
            f"{check(calls == 0 and sent == 0, 're-run model calls')}"
        )
        speedup = first_total / rerun_total
        print(
            f"  (c) re-run: {rerun_total:.0f} s vs {first_total:.0f} s ({speedup:.1f}x faster), "
            f"target >= {TARGET_RERUN_SPEEDUP:.0f}x "
            f"{check(speedup >= TARGET_RERUN_SPEEDUP, 're-run speed')}"
        )
    if missed:
        print(f"\nmissed: {', '.join(missed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
