"""The whole code location loads, and its job, schedule, policies and instance config hold."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from dagster import AssetKey, BackfillPolicy, DagsterInstance

from seer_pipelines.definitions import defs

ROOT = Path(__file__).resolve().parents[1]
PARTITIONED_ASSETS = ("event_judgments", "event_metrics", "passage_judgments", "slice_metrics")


def test_workspace_loads_with_the_dagster_cli(tmp_path) -> None:
    """`dagster definitions validate -w workspace.yaml`, as a user runs it."""
    dagster = Path(sys.executable).with_name("dagster")
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path)}
    completed = subprocess.run(
        [str(dagster), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "Validation successful" in completed.stdout + completed.stderr


def test_definitions_resolve_every_asset_job_and_schedule() -> None:
    defs.validate_loadable(defs)
    repository = defs.get_repository_def()
    repository.load_all_definitions()
    graph = defs.resolve_asset_graph()
    keys = {key.to_user_string() for key in graph.get_all_asset_keys()}
    assert {"retrieval_events", *PARTITIONED_ASSETS} <= keys
    assert not graph.get(AssetKey("retrieval_events")).is_materializable
    for name in PARTITIONED_ASSETS:
        node = graph.get(AssetKey(name))
        assert node.partitions_def is not None
        # One partition per run keeps per-day metadata and per-day check results.
        assert node.backfill_policy == BackfillPolicy.multi_run(1)
    job = defs.resolve_job_def("seer_daily_job")
    assert job.tags["seer/evaluator"] in ("lexical", "openai")
    assert {key.to_user_string() for key in job.asset_layer.executable_asset_keys} >= set(
        PARTITIONED_ASSETS
    )
    schedule = defs.resolve_schedule_def("seer_daily_schedule")
    assert schedule.job_name == "seer_daily_job"
    assert schedule.cron_schedule.endswith("* * *")


def test_schedule_requests_yesterdays_partition() -> None:
    from datetime import UTC, datetime

    from dagster import build_schedule_context

    schedule = defs.resolve_schedule_def("seer_daily_schedule")
    with DagsterInstance.ephemeral() as instance:
        context = build_schedule_context(
            instance=instance,
            scheduled_execution_time=datetime(2026, 11, 30, 2, 0, tzinfo=UTC),
        )
        [request] = schedule.evaluate_tick(context).run_requests
    assert request.partition_key == "2026-11-29"


def test_production_dagster_yaml_is_a_valid_postgres_instance(tmp_path, monkeypatch) -> None:
    from dagster._core.instance.config import dagster_instance_config

    shutil.copy(ROOT / "dagster.yaml", tmp_path / "dagster.yaml")
    for name, value in {
        "DAGSTER_PG_HOST": "db.internal",
        "DAGSTER_PG_PORT": "5432",
        "DAGSTER_PG_USER": "dagster",
        "DAGSTER_PG_PASSWORD": "secret",
        "DAGSTER_PG_DB": "dagster",
    }.items():
        monkeypatch.setenv(name, value)
    config, _ = dagster_instance_config(str(tmp_path))
    postgres = config["storage"]["postgres"]["postgres_db"]
    assert postgres["scheme"] == "postgresql+psycopg2"
    # Values come from the environment, never written in the file.
    assert postgres["password"] == {"env": "DAGSTER_PG_PASSWORD"}
    assert config["run_coordinator"]["class"] == "QueuedRunCoordinator"
    limits = config["concurrency"]["runs"]["tag_concurrency_limits"]
    # Each run paces itself to the whole LLM budget: one paid run at a time.
    assert {"key": "seer/evaluator", "value": "openai", "limit": 1} in limits
    assert config["concurrency"]["pools"]["default_limit"] == 1


@pytest.mark.parametrize("kind", ["lexical", "openai"])
def test_job_is_tagged_with_the_configured_evaluator(kind) -> None:
    """The tag the run queue limits is read from SEER_EVALUATOR when the location loads."""
    code = "from seer_pipelines.definitions import seer_daily_job; print(seer_daily_job.tags)"
    env = {**os.environ, "SEER_EVALUATOR": kind}
    completed = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    assert f"'seer/evaluator': '{kind}'" in completed.stdout
