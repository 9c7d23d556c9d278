"""The daily partitions: one partition per UTC day of `event_ts`."""

from __future__ import annotations

from datetime import date

from dagster import DailyPartitionsDefinition

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
