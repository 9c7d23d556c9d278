"""The code location of an empty environment (`Settings()`, the documented defaults), for
tests that run its assets, checks and job directly rather than the process's `defs`."""

from __future__ import annotations

from seer_pipelines.definitions import build_definitions, define_assets
from seer_pipelines.defs.partitions import daily_partitions
from seer_pipelines.settings import Settings

DEFAULT_SETTINGS = Settings()
DEFAULT_DEFS = build_definitions(DEFAULT_SETTINGS)
DAILY_PARTITIONS = daily_partitions(DEFAULT_SETTINGS.start_date)
DEFAULT_ASSETS = define_assets(DEFAULT_SETTINGS)
retrieval_events, event_judgments, event_metrics, passage_judgments, slice_metrics = DEFAULT_ASSETS
