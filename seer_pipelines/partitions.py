"""The daily partitions: one partition per UTC day of `event_ts`."""

from __future__ import annotations

import os
from datetime import date

from dagster import DailyPartitionsDefinition

# A fixed default keeps the partition set stable from one day to the next; set
# SEER_START_DATE (YYYY-MM-DD) to the first day the events table has data.
DEFAULT_START_DATE = "2025-01-01"


def start_date() -> str:
    """First partition: $SEER_START_DATE, else DEFAULT_START_DATE."""
    configured = os.environ.get("SEER_START_DATE", "").strip()
    if configured:
        try:
            return date.fromisoformat(configured).isoformat()
        except ValueError:
            raise ValueError(
                f"SEER_START_DATE must be a date like 2026-01-31, got {configured!r}"
            ) from None
    return DEFAULT_START_DATE


daily_partitions = DailyPartitionsDefinition(start_date=start_date(), timezone="UTC")


def partition_day(partition_key: str) -> date:
    """The `date` of a daily partition key (YYYY-MM-DD)."""
    return date.fromisoformat(partition_key)
