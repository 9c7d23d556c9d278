"""The local Dagster instance `seer demo` writes, with the run limits of the production one.

The top-level `dagster.yaml` is the production instance (PostgreSQL, run queue). A local
instance keeps its storage in SQLite files under its own directory (`.dagster_home` for
`seer demo` and `make dev`), but it must queue runs the same way: without a limit a
29-day backfill starts every run at once on a laptop. Both files limit runs judged by the
paid model with the `seer/evaluator` tag, and every judging step claims a slot in a
Dagster pool, which holds whatever launched the run (a job, an asset selection in the UI,
`dagster asset materialize`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from seer_pipelines.judging import EVALUATOR_TAG

# One run judging with the paid model at a time: each run paces itself to the whole
# requests- and tokens-per-minute budget of the endpoint.
PAID_EVALUATOR_RUN_LIMIT = 1
# Slots of every pool, so one judging step at a time across all runs (`event_judgments`
# is in the `seer_evaluator` pool).
POOL_LIMIT = 1
# Runs stuck starting are failed, and the pool slots of ended runs freed (as in production).
RUN_MONITORING: dict[str, Any] = {
    "enabled": True,
    "start_timeout_seconds": 180,
    "max_resume_run_attempts": 0,
    "free_slots_after_run_end_seconds": 300,
}
# The first line of a file this module wrote: such a file may be rewritten, any other kept.
LOCAL_INSTANCE_HEADER = "# Local Seer instance, written by `seer demo`."


def default_max_concurrent_runs(cpu_count: int | None = None) -> int:
    """One run per core, at most 4 and at least 1: each run starts its own step processes."""
    cores = cpu_count if cpu_count is not None else (os.cpu_count() or 1)
    return max(1, min(4, cores))


def evaluator_tag_limits() -> list[dict[str, Any]]:
    """The queue's limit on paid-model runs, the same in the local and production instance."""
    return [{"key": EVALUATOR_TAG, "value": "openai", "limit": PAID_EVALUATOR_RUN_LIMIT}]


def local_instance_config(max_concurrent_runs: int | None = None) -> dict[str, Any]:
    """The `dagster.yaml` of a local instance: SQLite storage (the default), queued runs."""
    runs = default_max_concurrent_runs() if max_concurrent_runs is None else max_concurrent_runs
    if runs < 1:
        raise ValueError(f"max_concurrent_runs must be at least 1, got {runs}")
    return {
        "run_coordinator": {
            "module": "dagster.core.run_coordinator",
            "class": "QueuedRunCoordinator",
        },
        "concurrency": {
            "runs": {"max_concurrent_runs": runs, "tag_concurrency_limits": evaluator_tag_limits()},
            "pools": {"default_limit": POOL_LIMIT},
        },
        "run_monitoring": RUN_MONITORING,
        "telemetry": {"enabled": False},
    }


def local_instance_yaml(max_concurrent_runs: int | None = None) -> str:
    config = local_instance_config(max_concurrent_runs)
    return (
        f"{LOCAL_INSTANCE_HEADER}\n"
        "# Runs, events and schedules live in SQLite files in this directory. The run limits\n"
        "# match the production instance (dagster.yaml at the repository root).\n"
        + yaml.safe_dump(config, sort_keys=False)
    )


def write_local_instance(home: Path, max_concurrent_runs: int | None = None) -> Path:
    """Write `home/dagster.yaml` unless the user wrote their own there; return its path.

    A file written by an earlier `seer demo` (it starts with the header) is rewritten, so
    an existing `.dagster_home` gains the run limits too.
    """
    home.mkdir(parents=True, exist_ok=True)
    path = home / "dagster.yaml"
    if path.exists() and not _written_by_seer(path):
        return path
    path.write_text(local_instance_yaml(max_concurrent_runs))
    return path


def _written_by_seer(path: Path) -> bool:
    text = path.read_text()
    # Earlier versions wrote a two-line comment and no settings.
    return text.startswith(LOCAL_INSTANCE_HEADER) or text.startswith("# Local Seer instance:")
