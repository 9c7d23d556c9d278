"""Seer's daily-partitioned assets."""

import warnings

from dagster import BetaWarning

# Every asset uses `BackfillPolicy.multi_run(1)` on purpose (per-day check results); the
# beta notice it triggers at import would be printed once per asset to every user.
warnings.filterwarnings(
    "ignore", message=r"Parameter `backfill_policy` of function `asset`", category=BetaWarning
)
