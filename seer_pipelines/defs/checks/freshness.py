"""The freshness check: Dagster's own time-partition freshness check on `slice_metrics`
(`freshness_check`: yesterday's partition exists once the deadline passed,
`Settings.freshness_deadline`: $SEER_FRESHNESS_DEADLINE, HH:MM UTC, default 06:00). It is
run when due by `seer_freshness_checks_sensor`, and `seer_freshness_sensor` delivers its
results (`seer_pipelines.defs.sensors.freshness`).
"""

import warnings
from datetime import time

from dagster import (
    AssetCheckKey,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetKey,
    SupersessionWarning,
    build_time_partition_freshness_checks,
)

from seer_pipelines.defs.assets.metrics import SLICE_METRICS_KEY

# The name Dagster gives the check `build_time_partition_freshness_checks` builds.
FRESHNESS_CHECK_NAME = "freshness_check"
FRESHNESS_CHECK_KEY = AssetCheckKey(SLICE_METRICS_KEY, FRESHNESS_CHECK_NAME)


def build_freshness_checks(
    deadline: time, asset_key: AssetKey = SLICE_METRICS_KEY
) -> list[AssetChecksDefinition]:
    """Dagster's time-partition freshness check: the partition of the last complete UTC
    day exists once `deadline` (UTC) passed.

    Dagster marks these factories superseded by `FreshnessPolicy`; that policy judges the
    latest materialization of any partition (a backfill of an old day would look fresh)
    and produces no check result to deliver, so the per-day check is the one that fits.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SupersessionWarning)
        return list(
            build_time_partition_freshness_checks(
                assets=[asset_key],
                deadline_cron=f"{deadline.minute} {deadline.hour} * * *",
                timezone="UTC",
                severity=AssetCheckSeverity.ERROR,
            )
        )
