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

from seer_pipelines.settings import load_settings

# A fixed default start keeps the partition set stable from one day to the next; set
# SEER_START_DATE (YYYY-MM-DD) to the first day the events table has data.


def start_date() -> str:
    """First partition: $SEER_START_DATE, else 2025-01-01."""
    return load_settings().start_date


daily_partitions = DailyPartitionsDefinition(start_date=start_date(), timezone="UTC")


def partition_day(partition_key: str) -> date:
    """The `date` of a daily partition key (YYYY-MM-DD)."""
    return date.fromisoformat(partition_key)


def daily_asset_check(
    *, asset: AssetKey, name: str, description: str
) -> Callable[[Callable[..., Any]], AssetChecksDefinition]:
    """`@asset_check` on the daily partitions: one result per day.

    Partitioned checks are a Dagster preview feature, used knowingly: its warning is
    silenced here, for the checks that take one day each.
    """

    def decorate(function: Callable[..., Any]) -> AssetChecksDefinition:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PreviewWarning)
            return asset_check(
                asset=asset, name=name, partitions_def=daily_partitions, description=description
            )(function)

    return decorate
