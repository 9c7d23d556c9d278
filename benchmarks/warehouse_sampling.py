"""A sampled day costs what its sample costs: 1,000,000 and 4,000,000 events on PostgreSQL.

Seeds one day of events into a PostgreSQL warehouse (a schema of its own in the `test`
database, dropped at the end) with one INSERT ... SELECT over `generate_series`, from 2,000
synthetic templates, each event's query made distinct by its number. Then materializes the
day sampled to 20,000 events with the offline judge (nothing is paid): each step in a
fresh process, one after the other, `slice_metrics` with every check (`rows_accounted_for`
included) on one Dagster instance. Targets, each printed with its figure:

  (a) everything grows by at most 1.5x for 4x the events (the whole day's wall time and
      CPU seconds of Seer's processes; the offline judge of the 20,000 sampled events is
      included, the model calls of an LLM judge would not be);
  (b) the 4,000,000-event day at most 60 s besides judging (the whole day minus the
      evaluator's own seconds, which the judging step's metadata does not give: the whole
      day is held to it), every step at most 256 MB of peak RSS;
  (c) rows written grow with the sample, not the day: at most 1.05x for 4x the events
      (event-level tables hold the sample, `seer_day_strata` one row a stratum; the
      passages vary with the events chosen); 20,000 rows read into Seer at both sizes;
  (d) a re-run of the large day chooses the same events: zero events judged anew.

    .venv/bin/python benchmarks/warehouse_sampling.py             # 1M and 4M, ~6 minutes
    .venv/bin/python benchmarks/warehouse_sampling.py --events 100000 --large 400000
"""

from __future__ import annotations

import argparse
import concurrent.futures
import logging
import multiprocessing
import os
import resource
import sys
import tempfile
import time
import uuid
import warnings
from dataclasses import dataclass
from datetime import date
from typing import Any

import sqlalchemy as sa

DAY = date(2026, 3, 4)
URL = os.environ.get("SEER_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
SAMPLE_SIZE = 20_000
STEPS = ("event_judgments", "event_metrics", "passage_judgments", "slice_metrics")
TEMPLATES = 2_000
TARGET_GROWTH = 1.5
TARGET_LARGE_DAY_SECONDS = 60.0
TARGET_STEP_MB = 256.0
TARGET_ROWS_GROWTH = 1.05
QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}


@dataclass
class Step:
    step: str
    seconds: float
    cpu_seconds: float
    peak_rss_mb: float
    metadata: dict[str, Any]


def run_step(url: str, schema: str, home: str, step: str) -> Step:
    """One asset of DAY (slice_metrics with every check) in this fresh process."""
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    import dagster

    from seer_pipelines.alerts import SlackAlertResource
    from seer_pipelines.definitions import defs
    from seer_pipelines.defs.resources.evaluator import EvaluatorResource
    from seer_pipelines.defs.resources.warehouse import WarehouseResource

    # The accounting check runs with event_metrics, every other check with slice_metrics.
    checks = list(defs.asset_checks)
    accounting = [c for c in checks if "rows_accounted_for" in str(c.check_keys)]
    assets = {
        "event_judgments": [defs.get_assets_def("event_judgments")],
        "event_metrics": [defs.get_assets_def("event_metrics"), *accounting],
        "passage_judgments": [defs.get_assets_def("passage_judgments")],
        "slice_metrics": [
            defs.get_assets_def("slice_metrics"),
            *(c for c in checks if c not in accounting),
        ],
    }[step]
    resources = {
        "warehouse": WarehouseResource(url=url, db_schema=schema),
        "evaluator": EvaluatorResource(kind="lexical", sample_size=SAMPLE_SIZE),
        "slack": SlackAlertResource(),
    }
    instance = dagster.DagsterInstance.local_temp(tempdir=home)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu_before = usage.ru_utime + usage.ru_stime
    started = time.perf_counter()
    result = dagster.materialize(
        assets,
        partition_key=DAY.isoformat(),
        resources=resources,
        run_config=QUIET,
        instance=instance,
    )
    seconds = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    [materialization] = result.asset_materializations_for_node(step)
    metadata = {k: v.value for k, v in materialization.metadata.items()}
    for check in result.get_asset_check_evaluations():
        metadata[f"check/{check.check_name}"] = check.passed
        metadata[f"check/{check.check_name}/description"] = check.description
    return Step(
        step,
        seconds,
        usage.ru_utime + usage.ru_stime - cpu_before,
        usage.ru_maxrss / 1024,
        metadata,
    )


def _ready() -> None:
    import dagster  # noqa: F401

    import seer_pipelines.definitions  # noqa: F401


def seed(engine: sa.Engine, schema: str, events: int) -> float:
    """One day of `events` rows, by INSERT ... SELECT in the warehouse; its seconds."""
    from seer_pipelines.demo.source_table import events_table
    from seer_pipelines.demo.synthetic import generate_events

    started = time.perf_counter()
    templates = list(
        generate_events(1, end_day=DAY, events_per_day=TEMPLATES, seed=7, regression=None)
    )[:TEMPLATES]
    table = events_table("retrieval_events", schema)
    template = sa.Table(
        "event_templates",
        sa.MetaData(schema=schema),
        sa.Column("n", sa.Integer, primary_key=True),
        sa.Column("task", sa.Text),
        sa.Column("context", sa.Text),
        sa.Column("metadata", sa.Text),
    )
    with engine.begin() as connection:
        table.metadata.create_all(connection)
        template.create(connection)
        connection.execute(
            template.insert(),
            [
                {"n": n, "task": r["task"], "context": r["context"], "metadata": r["metadata"]}
                for n, r in enumerate(templates)
            ],
        )
        connection.execute(
            sa.text(
                f"insert into {schema}.retrieval_events (event_id, event_ts, task, context, "
                "metadata) select 'evt-' || i, :day + (i * 86399.0 / :events) * interval "
                "'1 second', t.task || ' (' || i || ')', t.context, t.metadata "
                f"from generate_series(1, :events) as i join {schema}.event_templates t "
                "on t.n = i % :templates"
            ),
            {"day": DAY, "events": events, "templates": len(templates)},
        )
    # A table that has been in the warehouse a while is vacuumed (its hint bits set);
    # without it the first scan after a bulk load writes the whole table back.
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(sa.text(f"vacuum analyze {schema}.retrieval_events"))
    return time.perf_counter() - started


def run_day(schema: str, home: str) -> dict[str, Step]:
    context = multiprocessing.get_context("spawn")
    figures = {}
    for step in STEPS:
        with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
            pool.submit(_ready).result()  # imports before the clock, as a step process has
            figures[step] = pool.submit(run_step, URL, schema, home, step).result()
    return figures


def rows_written(engine: sa.Engine, schema: str) -> int:
    tables = ("seer_judgments", "seer_event_metrics", "seer_passage_judgments")
    tables += ("seer_slice_metrics", "seer_day_strata")
    with engine.connect() as connection:
        return sum(
            int(connection.execute(sa.text(f"select count(*) from {schema}.{t}")).scalar_one())
            for t in tables
        )


def measure(events: int, rerun: bool) -> tuple[dict[str, Step], int, float, dict[str, Step] | None]:
    from seer_pipelines.warehouse.engine import create_warehouse_engine

    schema = f"seer_bench_{uuid.uuid4().hex[:8]}"
    engine = create_warehouse_engine(URL)
    with engine.begin() as connection:
        connection.execute(sa.text(f"create schema {schema}"))
    try:
        seconds = seed(engine, schema, events)
        with tempfile.TemporaryDirectory() as home:
            first = run_day(schema, home)
            written = rows_written(engine, schema)
            again = run_day(schema, home) if rerun else None
        return first, written, seconds, again
    finally:
        with engine.begin() as connection:
            connection.execute(sa.text(f"drop schema {schema} cascade"))
        engine.dispose()


def print_day(events: int, steps: dict[str, Step], seed_seconds: float) -> None:
    print(f"\n{events:,} events (seeded in {seed_seconds:.1f} s), sampled to {SAMPLE_SIZE:,}")
    print(f"{'step':<20}{'seconds':>9}{'CPU s':>8}{'peak RSS':>10}")
    for step in steps.values():
        print(
            f"{step.step:<20}{step.seconds:>9.1f}{step.cpu_seconds:>8.1f}"
            f"{step.peak_rss_mb:>7.0f} MB"
        )
    total = sum(s.seconds for s in steps.values())
    cpu = sum(s.cpu_seconds for s in steps.values())
    print(f"{'whole day':<20}{total:>9.1f}{cpu:>8.1f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--large", type=int, default=4_000_000)
    args = parser.parse_args(argv)
    small, small_written, small_seed, _ = measure(args.events, rerun=False)
    print_day(args.events, small, small_seed)
    large, large_written, large_seed, again = measure(args.large, rerun=True)
    print_day(args.large, large, large_seed)
    failures = []

    def check(ok: bool, text: str) -> None:
        print(("ok    " if ok else "MISSED") + " " + text)
        if not ok:
            failures.append(text)

    growth = args.large / args.events
    print()
    for name, figure in (("wall", "seconds"), ("CPU", "cpu_seconds")):
        a = sum(getattr(s, figure) for s in small.values())
        b = sum(getattr(s, figure) for s in large.values())
        check(
            b / a <= TARGET_GROWTH,
            f"(a) whole day {name} {a:.1f} -> {b:.1f} s: {b / a:.2f}x for {growth:.0f}x "
            f"the events (target <= {TARGET_GROWTH}x)",
        )
    large_seconds = sum(s.seconds for s in large.values())
    check(
        large_seconds <= TARGET_LARGE_DAY_SECONDS,
        f"(b) {args.large:,}-event day {large_seconds:.1f} s, offline judge included "
        f"(target <= {TARGET_LARGE_DAY_SECONDS:.0f} s besides judging)",
    )
    peak = max(s.peak_rss_mb for s in (*small.values(), *large.values()))
    check(peak <= TARGET_STEP_MB, f"(b) every step's peak RSS <= {peak:.0f} MB (target <= 256)")
    check(
        large_written <= TARGET_ROWS_GROWTH * small_written,
        f"(c) rows written {small_written:,} -> {large_written:,}: "
        f"{large_written / small_written:.2f}x (target <= {TARGET_ROWS_GROWTH}x: the "
        "sample's rows, whose passages vary with the events chosen)",
    )
    judging = large["event_judgments"].metadata
    check(
        judging.get("events") == SAMPLE_SIZE and judging.get("day_rows") == args.large,
        f"(c) rows read into Seer {judging.get('events'):,} of {judging.get('day_rows'):,}",
    )
    checks = large["event_metrics"].metadata
    check(
        bool(checks.get("check/rows_accounted_for")),
        f"rows_accounted_for: {checks.get('check/rows_accounted_for/description')}",
    )
    assert again is not None
    rerun = again["event_judgments"].metadata
    check(
        rerun.get("judged") == 0 and rerun.get("cache_hits", 0) > 0,
        f"(d) re-run: {rerun.get('judged')} judged anew, {rerun.get('cache_hits'):,} cache "
        f"hits, {sum(s.seconds for s in again.values()):.1f} s",
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
