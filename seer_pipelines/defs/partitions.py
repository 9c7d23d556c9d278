"""The daily partitions: one partition per UTC day of `event_ts`."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from datetime import date
from typing import Any

from dagster import (
    AssetChecksDefinition,
    AssetKey,
    DailyPartitionsDefinition,
    PreviewWarning,
    asset_check,
)


def daily_partitions(start_date: date) -> DailyPartitionsDefinition:
    """One partition per UTC day from `start_date` (`Settings.start_date`: a fixed default
    keeps the partition set stable from one day to the next)."""
    return DailyPartitionsDefinition(start_date=start_date.isoformat(), timezone="UTC")


def partition_day(partition_key: str) -> date:
    """The `date` of a daily partition key (YYYY-MM-DD)."""
    return date.fromisoformat(partition_key)


def daily_asset_check(
    *, asset: AssetKey, name: str, description: str, partitions_def: DailyPartitionsDefinition
) -> Callable[[Callable[..., Any]], AssetChecksDefinition]:
    """`@asset_check` on the daily partitions: one result per day.

    Partitioned checks are a Dagster preview feature, used knowingly: its warning is
    silenced here, for the checks that take one day each.
    """

    def decorate(function: Callable[..., Any]) -> AssetChecksDefinition:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PreviewWarning)
            return asset_check(
                asset=asset, name=name, partitions_def=partitions_def, description=description
            )(function)

    return decorate
