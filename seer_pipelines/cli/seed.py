"""`seer seed`: write a realistic stream of retrieval events into a warehouse table.

The events are real multi-hop questions with BM25 contexts (`demo.realistic`), so a
clean day has the levels of a real retriever (some gold passages missed, precision
capped by the context size); the last `--regression-days` days carry a release that loses
the top hit of `env=prod` traffic on `feature_flag=retrieval-v2`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from datetime import date
from typing import Any

from tqdm import tqdm

from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.demo.realistic import DEFAULT_EVENTS_PER_DAY, Release, generate_stream
from seer_pipelines.demo.source_table import write_events
from seer_pipelines.demo.synthetic import default_end_day
from seer_pipelines.warehouse.engine import WarehouseConfigError

# A logging pipeline writes a few broken rows; the pipeline reports them as invalid.
INVALID_SHARE = 0.005


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--days", type=int, default=14, help="number of days (default 14)")
    parser.add_argument(
        "--end-day",
        type=date.fromisoformat,
        default=None,
        help="last day, YYYY-MM-DD (default: yesterday, UTC)",
    )
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
        help="warehouse SQLAlchemy URL (default $SEER_WAREHOUSE_URL or .seer/warehouse.sqlite)",
    )
    parser.add_argument(
        "--table",
        default=None,
        help="events table (default $SEER_EVENTS_TABLE or retrieval_events)",
    )
    parser.add_argument(
        "--schema", default=None, help="database schema (default $SEER_WAREHOUSE_SCHEMA)"
    )
    parser.add_argument(
        "--regression-days",
        type=int,
        default=2,
        help="days at the end on which prod traffic on retrieval-v2 loses its top hit "
        "(0 for none; default 2)",
    )


def seed_warehouse(
    warehouse: WarehouseResource,
    *,
    days: int,
    end_day: date,
    events_per_day: int,
    seed: int,
    regression_days: int,
    show_progress: bool = True,
    invalid_share: float = INVALID_SHARE,
) -> int:
    """Write the stream's events for `days` days ending on `end_day`; returns rows written."""
    if not 0 <= regression_days <= days:
        raise ValueError(f"regression days must be in 0..{days}, got {regression_days}")
    release = (
        Release(start=-regression_days, length=regression_days) if regression_days > 0 else None
    )
    stream = generate_stream(
        days,
        end_day=end_day,
        events_per_day=events_per_day,
        seed=seed,
        release=release,
        invalid_share=invalid_share,
    )
    records = (event.record for event in stream)
    # The daily volume varies around events_per_day, so the bar's total is an estimate,
    # corrected once the last event is written.
    with tqdm(
        total=days * events_per_day,
        desc="seeding events",
        unit="event",
        disable=not show_progress,
        file=sys.stderr,
    ) as progress:

        def counted() -> Iterator[dict[str, Any]]:
            for record in records:
                yield record
                progress.update()

        written = write_events(
            warehouse.get_engine(),
            counted(),
            table_name=warehouse.resolved_events_table(),
            schema=warehouse.resolved_schema(),
        )
        progress.total = progress.n
    return written


def run(args: argparse.Namespace) -> int:
    if args.days < 1 or args.events_per_day < 1:
        print("error: --days and --events-per-day must be at least 1", file=sys.stderr)
        return 2
    if not 0 <= args.regression_days <= args.days:
        print("error: --regression-days must be between 0 and --days", file=sys.stderr)
        return 2
    warehouse = WarehouseResource(url=args.url, events_table=args.table, db_schema=args.schema)
    try:
        end_day = args.end_day or default_end_day()
        written = seed_warehouse(
            warehouse,
            days=args.days,
            end_day=end_day,
            events_per_day=args.events_per_day,
            seed=args.seed,
            regression_days=args.regression_days,
        )
        print(
            f"wrote {written} events for {args.days} days ending {end_day} to table "
            f"{warehouse.resolved_events_table()} in {warehouse.describe()}"
        )
    except WarehouseConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    finally:
        warehouse.dispose()
    return 0
