"""The accounting check: every source row of a day is stored once, or counted as dropped.

For a day D the check recounts the source rows on D (`WarehouseResource.count_events`)
and holds them equal to the rows stored in `seer_event_metrics` for D plus the rows
`event_judgments` dropped because their event id repeated (the first row per id is
kept). A difference fails the check with ERROR: rows were lost, or the source changed
since the day was judged (re-run the day).

A sampled day is recounted in the warehouse instead (one count, never reading the
day into Seer): rows on the day = the strata populations + duplicate ids of
`seer_day_strata` as judged, and the rows stored = the events sampled.

Rows whose `event_ts` puts them on no day (NULL, `2026-11-31T...`, `yesterday`) are in
no day's count; they are counted over the whole table (`unplaced_rows`), the same figure
on every day, never added into a day, so nothing is counted twice. The check warns while
any exist.
"""

from datetime import date
from typing import Any

import sqlalchemy as sa
from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetRecordsFilter,
    DagsterInstance,
    DailyPartitionsDefinition,
)

from seer_pipelines.defs.assets.judgments import EVENT_JUDGMENTS_KEY
from seer_pipelines.defs.assets.metrics import EVENT_METRICS_KEY
from seer_pipelines.defs.partitions import daily_asset_check, partition_day
from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.warehouse.schema import DAY_STRATA_TABLE, EVENT_METRICS_TABLE


def judging_figures(instance: DagsterInstance, partition_key: str) -> dict[str, Any] | None:
    """The metadata of the latest `event_judgments` materialization of the partition."""
    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=EVENT_JUDGMENTS_KEY, asset_partitions=[partition_key]),
        limit=1,
    ).records
    if not records or records[0].asset_materialization is None:
        return None
    metadata = records[0].asset_materialization.metadata
    return {key: value.value for key, value in metadata.items()}


def recorded_strata(warehouse: WarehouseResource, day: date) -> dict[str, tuple[Any, ...]]:
    """The day's `seer_day_strata` rows as judged: stratum -> (values, population,
    duplicates, sampled); empty for a day judged whole."""
    table = warehouse.ensure_output_tables()[DAY_STRATA_TABLE]
    columns = ("stratum", "slice_values", "population", "duplicates", "sampled")
    query = sa.select(*(table.c[name] for name in columns)).where(table.c.partition_date == day)
    with warehouse.get_engine().connect() as connection:
        return {row[0]: tuple(row[1:]) for row in connection.execute(query)}


def account_for_sampled_day(
    warehouse: WarehouseResource, day: date, strata: dict[str, tuple[Any, ...]]
) -> AssetCheckResult:
    """Rows on the day (recounted in the warehouse) = populations + duplicates recorded,
    and rows stored = events sampled."""
    read = warehouse.count_day_rows(day)
    recorded = sum(
        int(population) + int(duplicates) for _, population, duplicates, _ in strata.values()
    )
    sampled = sum(int(row[3]) for row in strata.values())
    stored = warehouse.count_partition(EVENT_METRICS_TABLE, day)
    unplaced = warehouse.count_unplaced_events()
    figures: dict[str, Any] = {
        "rows_read": read,
        "strata_rows": recorded,
        "duplicates": sum(int(row[2]) for row in strata.values()),
        "rows_sampled": sampled,
        "rows_stored": stored,
        "strata": len(strata),
        "unplaced_rows": unplaced,
    }
    if read != recorded or stored != sampled:
        return AssetCheckResult(
            passed=False,
            severity=AssetCheckSeverity.ERROR,
            description=(
                f"{day}: {read} source rows on the day, but the strata recorded "
                f"{recorded} (populations + duplicate ids), and {stored} rows are stored for "
                f"{sampled} sampled; rows were lost or the source changed since the day was "
                "judged: re-run the day"
            ),
            metadata={**figures, "unaccounted": read - recorded},
        )
    description = (
        f"{day}: {read} source rows = {recorded} in {len(strata)} strata "
        f"(populations + duplicate ids); {stored} sampled rows stored"
    )
    if unplaced:
        return AssetCheckResult(
            passed=False,
            severity=AssetCheckSeverity.WARN,
            description=f"{description}; {unplaced} source rows of the table are on no day",
            metadata=figures,
        )
    return AssetCheckResult(passed=True, description=description, metadata=figures)


def account_for_day(
    warehouse: WarehouseResource, day: date, judged: dict[str, Any] | None
) -> AssetCheckResult:
    """The check result for `day`, given the figures `event_judgments` reported."""
    strata = recorded_strata(warehouse, day) if judged is not None else {}
    if strata:
        return account_for_sampled_day(warehouse, day, strata)
    read = warehouse.count_events(day)
    stored = warehouse.count_partition(EVENT_METRICS_TABLE, day)
    unplaced = warehouse.count_unplaced_events()
    figures: dict[str, Any] = {
        "rows_read": read,
        "rows_stored": stored,
        "unplaced_rows": unplaced,
    }
    if judged is None:
        return AssetCheckResult(
            passed=False,
            severity=AssetCheckSeverity.ERROR,
            description=f"{day}: event_judgments has no materialization for this day",
            metadata=figures,
        )
    duplicates = int(judged.get("duplicate_event_ids") or 0)
    figures["duplicates"] = duplicates
    figures["rows_read_when_judged"] = int(judged.get("rows_read") or 0)
    if stored + duplicates != read:
        missing = read - stored - duplicates
        return AssetCheckResult(
            passed=False,
            severity=AssetCheckSeverity.ERROR,
            description=(
                f"{day}: {read} source rows on the day, but {stored} stored + {duplicates} "
                f"duplicate ids = {stored + duplicates} ({missing:+d} unaccounted); rows were "
                "lost or the source changed since the day was judged: re-run the day"
            ),
            metadata={**figures, "unaccounted": missing},
        )
    if unplaced:
        return AssetCheckResult(
            passed=False,
            severity=AssetCheckSeverity.WARN,
            description=(
                f"{day}: accounted ({stored} stored + {duplicates} duplicate ids); {unplaced} "
                "source rows of the table have an event_ts on no day (NULL or not a date) "
                "and are in no partition"
            ),
            metadata=figures,
        )
    return AssetCheckResult(
        passed=True,
        description=f"{day}: {read} source rows = {stored} stored + {duplicates} duplicate ids",
        metadata=figures,
    )


def define_rows_accounted_for(partitions: DailyPartitionsDefinition) -> AssetChecksDefinition:
    """The accounting check of `event_metrics`, one result per day of `partitions`."""

    @daily_asset_check(
        asset=EVENT_METRICS_KEY,
        name="rows_accounted_for",
        description=(
            "Source rows on the day = rows stored + duplicate event ids dropped; rows with "
            "an event_ts on no day are counted table-wide (unplaced_rows) and warned about."
        ),
        partitions_def=partitions,
    )
    def rows_accounted_for(
        context: AssetCheckExecutionContext, warehouse: WarehouseResource
    ) -> AssetCheckResult:
        judged = judging_figures(context.instance, context.partition_key)
        return account_for_day(warehouse, partition_day(context.partition_key), judged)

    return rows_accounted_for
