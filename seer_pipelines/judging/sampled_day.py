"""A sampled day's strata: what the warehouse counted, recorded next to what Seer stored.

Why a table: the events outside the sample are counted, never read or stored, so the
slice estimates (their populations) and the accounting check (rows read = populations +
duplicates) need the counts somewhere; `seer_day_strata` keeps them, one row a stratum.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date
from typing import Any

import sqlalchemy as sa

from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.warehouse.day_sample import DayStrata
from seer_pipelines.warehouse.engine import WarehouseConfigError
from seer_pipelines.warehouse.schema import DAY_STRATA_TABLE


def write_day_strata(
    warehouse: WarehouseResource,
    day: date,
    strata: DayStrata | None,
    stored_by_stratum: Mapping[str, int],
) -> int:
    """Replace the day's `seer_day_strata` rows: a sampled day's strata with the events
    stored of each, none for a day judged whole (a stale sample must not outlive it)."""
    rows = []
    for stratum in strata.strata if strata is not None else ():
        rows.append(
            {
                "stratum": stratum.stratum,
                "slice_values": stratum.values,
                "population": stratum.population,
                "duplicates": stratum.duplicates,
                "sampled": stored_by_stratum.get(stratum.stratum, 0),
            }
        )
    with warehouse.partition_writer(DAY_STRATA_TABLE, day) as writer:
        writer.write(rows)
        return writer.commit()


def counted_strata(
    warehouse: WarehouseResource, day: date, slice_keys: Sequence[str]
) -> list[tuple[str, dict[str, Any], int]]:
    """(stratum, slice values, events never read) of a sampled day, for its slice rows;
    empty for a day judged whole. A slice key the day was not sampled by cannot place
    the unread events, so it is refused with the two settings to align."""
    table = warehouse.ensure_output_tables()[DAY_STRATA_TABLE]
    query = sa.select(table.c.stratum, table.c.slice_values, table.c.population, table.c.sampled)
    query = query.where(table.c.partition_date == day).order_by(table.c.stratum)
    with warehouse.get_engine().connect() as connection:
        rows = connection.execute(query).all()
    counted = []
    for stratum, values, population, sampled in rows:
        values = values or {}
        missing = [key for key in slice_keys if key not in values]
        if missing:
            raise WarehouseConfigError(
                f"{day} was sampled by the keys {sorted(values)}, so its unread events have "
                f"no value for {missing}: slice by the sampling keys (SEER_SLICE_KEYS sets "
                "both; the evaluator's sample_slice_keys and slice_metrics' slice_keys)"
            )
        counted.append((stratum, values, int(population) - int(sampled)))
    return counted
