"""The freshness check: Dagster's own time-partition freshness check on `slice_metrics`
(`freshness_check`: yesterday's partition exists once the deadline passed,
$SEER_FRESHNESS_DEADLINE, HH:MM UTC, default 06:00). It is run when due by
`seer_freshness_checks_sensor`, and `seer_freshness_sensor` delivers its results
(`seer_pipelines.defs.sensors.freshness`).
"""

import re
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

from seer_pipelines.defs.assets.metrics import slice_metrics
from seer_pipelines.settings import setting

FRESHNESS_DEADLINE_ENV = "SEER_FRESHNESS_DEADLINE"
DEFAULT_FRESHNESS_DEADLINE = "06:00"
_DEADLINE = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")


def freshness_deadline(value: str | None = None) -> time:
    """The deadline (UTC) by which yesterday's partition must exist; HH:MM."""
    raw = (value or setting(FRESHNESS_DEADLINE_ENV) or DEFAULT_FRESHNESS_DEADLINE).strip()
    match = _DEADLINE.match(raw)
    if not match:
        raise ValueError(f"{FRESHNESS_DEADLINE_ENV} must be HH:MM (UTC), e.g. 06:00; got {raw!r}")
    return time(int(match.group(1)), int(match.group(2)))


# The name Dagster gives the check `build_time_partition_freshness_checks` builds.
FRESHNESS_CHECK_NAME = "freshness_check"
FRESHNESS_CHECK_KEY = AssetCheckKey(slice_metrics.key, FRESHNESS_CHECK_NAME)


def build_freshness_checks(
    deadline: time, asset_key: AssetKey = slice_metrics.key
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


FRESHNESS_CHECKS = build_freshness_checks(freshness_deadline())
