"""The local instance `seer demo` writes: run limits like production, a pool that always holds."""

from __future__ import annotations

import threading
import time
from datetime import date
from pathlib import Path

import pytest
import yaml
from dagster import DagsterInstance, materialize

from seer_pipelines.cli import main as seer
from seer_pipelines.defs.resources.evaluator import EvaluatorResource
from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.demo.instance import (
    LOCAL_INSTANCE_HEADER,
    default_max_concurrent_runs,
    local_instance_yaml,
    write_local_instance,
)
from tests.default_location import DEFAULT_ASSETS

ROOT = Path(__file__).resolve().parents[3]
DAY = date(2026, 11, 29)
JUDGING_POOL = "seer_evaluator"


def _instance_config(home: Path) -> dict:
    from dagster._core.instance.config import dagster_instance_config

    config, _ = dagster_instance_config(str(home))
    return config


@pytest.mark.parametrize(("cores", "runs"), [(1, 1), (2, 2), (8, 4), (64, 4)])
def test_run_limit_follows_the_cores_within_bounds(cores: int, runs: int) -> None:
    assert default_max_concurrent_runs(cores) == runs


def test_local_instance_is_valid_and_limits_like_production(tmp_path) -> None:
    write_local_instance(tmp_path, max_concurrent_runs=2)
    local = _instance_config(tmp_path)
    production = yaml.safe_load((ROOT / "dagster.yaml").read_text())
    assert "storage" not in local  # SQLite files under the instance directory
    assert local["run_coordinator"]["class"] == "QueuedRunCoordinator"
    assert local["concurrency"]["runs"]["max_concurrent_runs"] == 2
    assert (
        local["concurrency"]["runs"]["tag_concurrency_limits"]
        == production["concurrency"]["runs"]["tag_concurrency_limits"]
    )
    assert local["concurrency"]["pools"] == production["concurrency"]["pools"]
    assert local["run_monitoring"] == production["run_monitoring"]
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        assert instance.run_coordinator.__class__.__name__ == "QueuedRunCoordinator"
        assert instance.event_log_storage.supports_global_concurrency_limits


def test_a_users_own_instance_file_is_kept_and_an_old_demo_file_is_upgraded(tmp_path) -> None:
    own, old = tmp_path / "own", tmp_path / "old"
    own.mkdir()
    old.mkdir()
    (own / "dagster.yaml").write_text("telemetry:\n  enabled: true\n")
    (old / "dagster.yaml").write_text(
        "# Local Seer instance: runs, events and schedules in SQLite files here.\n"
    )
    write_local_instance(own)
    write_local_instance(old, max_concurrent_runs=3)
    assert (own / "dagster.yaml").read_text() == "telemetry:\n  enabled: true\n"
    assert (old / "dagster.yaml").read_text() == local_instance_yaml(3)
    assert local_instance_yaml(3).startswith(LOCAL_INSTANCE_HEADER)
    with pytest.raises(ValueError, match="max_concurrent_runs"):
        local_instance_yaml(0)


def test_the_judging_pool_holds_a_run_started_from_an_asset_selection(tmp_path) -> None:
    """An asset-selection run carries no job tag; the pool still makes its judging step wait."""
    url = f"sqlite:///{tmp_path / 'warehouse.sqlite'}"
    assert seer(["seed", "--days", "1", "--end-day", DAY.isoformat(), "--url", url,
                 "--events-per-day", "20", "--regression-days", "0"]) == 0  # fmt: skip
    home = tmp_path / "home"
    write_local_instance(home, max_concurrent_runs=2)
    assets = [
        asset
        for asset in DEFAULT_ASSETS
        if asset.key.to_user_string() in {"retrieval_events", "event_judgments"}
    ]
    assert len(assets) == 2
    outcome: dict = {}

    with DagsterInstance.from_config(str(home)) as instance:
        storage = instance.event_log_storage
        # Another run holds the pool's only slot.
        storage.initialize_concurrency_limit_to_default(JUDGING_POOL)
        assert storage.get_concurrency_info(JUDGING_POOL).slot_count == 1
        storage.claim_concurrency_slot(JUDGING_POOL, "other-run", "event_judgments")

        def run_selection() -> None:
            outcome["result"] = materialize(
                assets,
                selection="event_judgments",
                partition_key=DAY.isoformat(),
                instance=instance,
                resources={
                    "warehouse": WarehouseResource(url=url),
                    "evaluator": EvaluatorResource(kind="lexical"),
                },
            )

        worker = threading.Thread(target=run_selection)
        worker.start()
        deadline = time.monotonic() + 60
        while storage.get_concurrency_info(JUDGING_POOL).pending_step_count == 0:
            assert worker.is_alive(), "the run ended without waiting for the pool"
            assert time.monotonic() < deadline, "the judging step never asked for a slot"
            time.sleep(0.2)
        time.sleep(2)
        assert worker.is_alive(), "the judging step ran while the pool was full"
        storage.free_concurrency_slots_for_run("other-run")
        worker.join(timeout=120)
        assert not worker.is_alive()

    result = outcome["result"]
    assert result.success
    assert result.dagster_run.tags.get("seer/evaluator") is None
    assert result.asset_materializations_for_node("event_judgments")
