"""`seer demo`: the whole pipeline on a realistic stream, into a local Dagster instance.

Creates (or refreshes) a SQLite warehouse with 14 days of realistic events (real
multi-hop questions from the bundled samples, the top 4 passages of a BM25 ranking as
each context, so clean days have a real retriever's levels) and one injected release:
on the last two days, `env=prod` traffic on `feature_flag=retrieval-v2` loses its top
hit. It materializes every day through the `seer_daily_job` into the instance in
DAGSTER_HOME (default `.dagster_home` here, the one `make dev` opens) with the offline
evaluator, then prints the slice table, the f1 trend and the alerts. Nothing needs a
network or a key.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from seer_metrics.text.redaction import redact_url
from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.demo.instance import write_local_instance
from seer_pipelines.demo.realistic import DEFAULT_EVENTS_PER_DAY, Release
from seer_pipelines.settings import load_settings, override, setting
from seer_pipelines.warehouse.engine import WarehouseConfigError, default_warehouse_url

if TYPE_CHECKING:
    from dagster import Definitions

DEFAULT_DAGSTER_HOME = ".dagster_home"
# `make dev` reads this file so the UI starts its partitions at the demo's first day.
DEMO_START_DATE_FILE = "seer_demo_start_date"
# Dagster's own step logs would drown the progress lines; failures still show.
QUIET_RUN_CONFIG = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
REGRESSION_DAYS = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--days", type=int, default=14, help="days of events (default 14)")
    parser.add_argument(
        "--events-per-day",
        type=int,
        default=DEFAULT_EVENTS_PER_DAY,
        help=f"average events per weekday (default {DEFAULT_EVENTS_PER_DAY})",
    )
    parser.add_argument("--seed", type=int, default=7, help="random seed (default 7)")
    parser.add_argument(
        "--url",
        default=None,
        help="warehouse URL (default: a local SQLite file .seer/warehouse.sqlite; the demo "
        "never writes to $SEER_WAREHOUSE_URL unless you pass it here)",
    )
    parser.add_argument(
        "--dagster-home",
        default=None,
        help=f"Dagster instance directory (default $DAGSTER_HOME, else ./{DEFAULT_DAGSTER_HOME})",
    )


def _prepare_environment(args: argparse.Namespace) -> tuple[Path, str]:
    """Point this process at the demo's instance, warehouse and offline evaluator.

    Set before the code location is built, so its resources resolve to the same places
    `dagster dev` will use from this directory.
    """
    home = Path(args.dagster_home or setting("DAGSTER_HOME") or DEFAULT_DAGSTER_HOME)
    home = home.expanduser().resolve()
    # SQLite storage under this directory, the production instance's run limits.
    write_local_instance(home)
    url = args.url or default_warehouse_url()
    override(
        DAGSTER_HOME=str(home),
        SEER_WAREHOUSE_URL=url,
        SEER_EVALUATOR="lexical",
        SEER_EVALUATOR_MODEL=None,
    )
    return home, url


def rules_file_problem() -> str | None:
    """Why the rules in effect (`SEER_RULES_FILE`, else the packaged defaults) cannot be
    used, in one line naming the key at fault; None when they load.

    Asked before anything is written: the checks load the same file when the code
    location is imported, after the warehouse has been seeded.
    """
    from seer_metrics.rules import RulesConfigError, load_rules_config

    try:
        load_rules_config(setting("SEER_RULES_FILE"))
    except RulesConfigError as error:
        problems = "; ".join(line.strip() for line in str(error).splitlines() if line.strip())
        return f"SEER_RULES_FILE: {problems}"
    return None


def _format(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def format_slice_table(frame: pd.DataFrame) -> str:
    """The slice table of one day as aligned text."""
    columns = [
        ("slice", "slice"),
        ("events", "events"),
        ("invalid", "invalid"),
        ("errors", "errors"),
        ("mean_recall", "recall"),
        ("mean_precision", "precision"),
        ("mean_f1", "f1"),
        ("mean_ndcg", "ndcg"),
        ("share_recall_below_1", "recall<1"),
        ("share_precision_below_bloat", "bloat"),
    ]
    rows = [[header for _, header in columns]]
    for record in frame.to_dict("records"):
        rows.append([_format(record[name]) for name, _ in columns])
    widths = [max(len(row[i]) for row in rows) for i in range(len(columns))]
    lines = []
    for index, row in enumerate(rows):
        cells = [
            cell.ljust(widths[0]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row)
        ]
        lines.append("  ".join(cells))
        if index == 0:
            lines.append("  ".join("-" * width for width in widths))
    return "\n".join(lines)


def format_trend(history: pd.DataFrame, slices: list[str], metric: str = "mean_f1") -> str:
    """One line per day: `metric` in a few slices, so the regression is visible at a glance."""
    table = history[history["slice"].isin(slices)].pivot_table(
        index="partition_date", columns="slice", values=metric
    )
    width = max(len(label) for label in slices)
    header = "day         " + "  ".join(f"{label:>{width}}" for label in slices)
    lines = [header]
    for day, row in table.sort_index().iterrows():
        cells = "  ".join(f"{_format(row.get(label)):>{width}}" for label in slices)
        lines.append(f"{day!s:<10}  {cells}")
    return "\n".join(lines)


def materialize_days(days: list[date], instance: Any, defs: Definitions) -> None:
    """Run `seer_daily_job` for each day, one run per partition (like a backfill)."""
    job = defs.resolve_job_def("seer_daily_job")
    for index, day in enumerate(days, start=1):
        started = time.monotonic()
        result = job.execute_in_process(
            partition_key=day.isoformat(),
            instance=instance,
            run_config=QUIET_RUN_CONFIG,
            raise_on_error=False,
            tags={"seer/source": "seer-demo"},
        )
        if not result.success:
            raise RuntimeError(f"the run for {day} failed (run id {result.run_id})")
        scored = result.asset_materializations_for_node("event_metrics")[0].metadata
        summary = ", ".join(
            f"{name} {scored[f'mean_{name}'].value:.3f}"
            for name in ("recall", "precision", "f1")
            if f"mean_{name}" in scored
        )
        print(
            f"[{index:>2}/{len(days)}] {day}: {scored['events'].value} events "
            f"({scored['invalid'].value} invalid), {summary}  "
            f"({time.monotonic() - started:.1f} s)",
            flush=True,
        )


def run(args: argparse.Namespace) -> int:
    if args.days < 1 or args.events_per_day < 1:
        print("error: --days and --events-per-day must be at least 1", file=sys.stderr)
        return 2
    problem = rules_file_problem()
    if problem is not None:
        print(f"error: {problem}; nothing was written", file=sys.stderr)
        return 2
    home, url = _prepare_environment(args)

    from dagster import DagsterInstance

    from seer_pipelines.cli.seed import seed_warehouse
    from seer_pipelines.definitions import build_definitions
    from seer_pipelines.demo.synthetic import default_end_day

    end_day = default_end_day()
    days = [end_day - timedelta(days=offset) for offset in range(args.days - 1, -1, -1)]
    # Read after the demo's own variables are set, like the `dagster dev` that follows.
    settings = load_settings()
    if days[0] < settings.start_date:
        print(
            f"error: SEER_START_DATE makes the first partition {settings.start_date}, after "
            f"the demo's first day {days[0]}; unset it or set it earlier",
            file=sys.stderr,
        )
        return 2
    defs = build_definitions(settings)

    warehouse = WarehouseResource(url=url)
    print(
        f"Seer demo: {args.days} days of realistic retrieval events (multi-hop questions, "
        "BM25 top-4 contexts), offline evaluator"
    )
    print(f"  warehouse        {warehouse.describe()}")
    print(f"  Dagster instance {home}")
    started = time.monotonic()
    try:
        written = seed_warehouse(
            warehouse,
            days=args.days,
            end_day=end_day,
            events_per_day=args.events_per_day,
            seed=args.seed,
            regression_days=min(REGRESSION_DAYS, args.days),
        )
    except WarehouseConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"seeded {written} events ({days[0]} .. {days[-1]}); materializing each day:")

    with DagsterInstance.get() as instance:
        materialize_days(days, instance, defs)

    history = warehouse.read_table_range("seer_slice_metrics", days[0], days[-1])
    last = history[history["partition_date"] == days[-1]].sort_values("slice")
    warehouse.dispose()
    print()
    print(f"Slice metrics for {days[-1]} (table seer_slice_metrics):")
    print(format_slice_table(last))
    print()
    release = Release(start=-REGRESSION_DAYS, length=REGRESSION_DAYS)
    print(
        f"Mean f1 per day (the injected release: {release.slice_label} loses its top hit "
        f"on the last {REGRESSION_DAYS} days):"
    )
    print(format_trend(history, ["all", "feature_flag=retrieval-v2", release.slice_label]))
    print()
    # The alerts the checks raised (posted to Slack when SLACK_BOT_TOKEN and
    # SEER_SLACK_CHANNEL are set, else shown here); see docs/alerts.md.
    from seer_pipelines.alerts import SlackAlertResource, alerts_report
    from seer_pipelines.defs.checks.slice_rules import dispatcher_for

    print(alerts_report(dispatcher_for(warehouse, SlackAlertResource()), days))
    warehouse.dispose()
    print()
    print(f"Done in {time.monotonic() - started:.0f} s. Open the same instance in the Dagster UI:")
    # The UI should show the demo's days, not every day since the default start date.
    (home / DEMO_START_DATE_FILE).write_text(days[0].isoformat() + "\n")
    hint = f"  DAGSTER_HOME={home} SEER_START_DATE={days[0]}"
    if args.url:
        hint += f" SEER_WAREHOUSE_URL='{redact_url(args.url)}'"
    print(f"{hint} dagster dev -w workspace.yaml")
    if home == (Path.cwd() / DEFAULT_DAGSTER_HOME).resolve() and not args.url:
        print("  or simply: make dev")
    print(
        "  then open http://127.0.0.1:3000 -> Catalog -> slice_metrics "
        "(Partitions, Checks, Overview -> Metadata -> Plots)."
    )
    return 0
