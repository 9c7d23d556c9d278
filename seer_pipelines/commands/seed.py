"""`seer seed`: write realistic synthetic retrieval events into a warehouse table."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from datetime import date
from typing import Any

from tqdm import tqdm

from seer_pipelines.demo_data.synthetic import (
    Regression,
    default_end_day,
    generate_events,
    write_events,
)
from seer_pipelines.resources import WarehouseConfigError, WarehouseResource


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--days", type=int, default=14, help="number of days (default 14)")
    parser.add_argument(
        "--end-day",
        type=date.fromisoformat,
        default=None,
        help="last day, YYYY-MM-DD (default: yesterday, UTC)",
    )
    parser.add_argument(
        "--events-per-day", type=int, default=260, help="average events per weekday (default 260)"
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
        help="days at the end with the injected regression (0 for none; default 2)",
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
) -> int:
    """Write the synthetic events for `days` days ending on `end_day`; returns rows written."""
    regression = Regression(days=regression_days) if regression_days > 0 else None
    records = generate_events(
        days, end_day=end_day, events_per_day=events_per_day, seed=seed, regression=regression
    )
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
