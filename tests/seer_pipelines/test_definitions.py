"""The whole code location loads, and its job, schedule, policies and instance config hold."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from dagster import AssetKey, BackfillPolicy, DagsterInstance

from seer_pipelines.definitions import build_definitions, defs
from seer_pipelines.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]
PARTITIONED_ASSETS = ("event_judgments", "event_metrics", "passage_judgments", "slice_metrics")
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
KINDS = ("asset", "asset check", "job", "schedule", "sensor")


def loaded_names() -> dict[str, set[str]]:
    """The names of everything the loaded code location holds, by kind."""
    repository = defs.get_repository_def()
    graph = defs.resolve_asset_graph()
    return {
        "asset": {key.to_user_string() for key in graph.get_all_asset_keys()},
        "asset check": {key.name for key in graph.asset_check_keys},
        "job": {job.name for job in repository.get_all_jobs() if not job.name.startswith("__")},
        "schedule": {schedule.name for schedule in repository.schedule_defs},
        "sensor": {sensor.name for sensor in repository.sensor_defs},
    }


def documented_names() -> dict[str, set[str]]:
    """The table under "What the code location holds" in docs/pipelines.md, by kind."""
    text = (ROOT / "docs" / "pipelines.md").read_text()
    section = text.split("## What the code location holds", 1)[1].split("\n## ", 1)[0]
    names: dict[str, set[str]] = {kind: set() for kind in KINDS}
    for kind, name in re.findall(r"^\| ([a-z ]+) \| `([a-z0-9_]+)` \|", section, flags=re.M):
        assert kind in names, f"unknown kind {kind!r} in docs/pipelines.md"
        names[kind].add(name)
    return names


def test_the_docs_list_every_kind_of_definition() -> None:
    documented = documented_names()
    for kind in KINDS:
        assert documented[kind], f"docs/pipelines.md lists no {kind}"
    assert len(documented["sensor"]) >= 3


def test_everything_the_docs_name_is_loaded() -> None:
    """Removing an asset, a check, the job, the schedule or a sensor fails here."""
    loaded = loaded_names()
    for kind, names in documented_names().items():
        assert names <= loaded[kind], f"documented {kind}(s) not loaded: {names - loaded[kind]}"


def test_jobs_schedules_and_sensors_named_anywhere_in_the_docs_are_loaded() -> None:
    loaded = loaded_names()
    pattern = re.compile(r"`(seer_[a-z0-9_]+_(job|schedule|sensor))`")
    for document in DOCUMENTS:
        for name, kind in pattern.findall(document.read_text()):
            assert name in loaded[kind], f"{document.name} names {kind} {name}, not loaded"


def test_checks_named_in_the_rule_tables_are_loaded() -> None:
    loaded = loaded_names()["asset check"]
    text = (ROOT / "docs" / "metrics.md").read_text().split("## Rules", 1)[1]
    named = set(re.findall(r"^\| `([a-z0-9_]+)` \|", text, flags=re.M))
    assert named
    assert named <= loaded


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
    """The tag the run queue limits comes from SEER_EVALUATOR when the location is built."""
    built = build_definitions(load_settings({"SEER_EVALUATOR": kind}))
    assert built.resolve_job_def("seer_daily_job").tags["seer/evaluator"] == kind


def test_two_code_locations_from_two_settings_in_one_process(tmp_path) -> None:
    """Everything comes from the settings object: nothing of one leaks into the other."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "rules:\n  - name: only_rule\n    kind: threshold\n    statistic: mean_recall\n"
        "    comparison: below\n    threshold: 0.5\n    severity: WARN\n"
    )
    first = build_definitions(load_settings({}))
    second = build_definitions(
        load_settings(
            {
                "SEER_START_DATE": "2026-11-16",
                "SEER_SLICE_KEYS": "env,tenant",
                "SEER_RULES_FILE": str(rules),
                "SEER_SCHEDULE_HOUR_UTC": "5",
                "SEER_FRESHNESS_DEADLINE": "09:30",
            }
        )
    )

    def first_partition(built) -> str:
        return (
            built.resolve_asset_graph()
            .get(AssetKey("slice_metrics"))
            .partitions_def.get_first_partition_key()
        )

    def checks(built) -> set[str]:
        return {key.name for key in built.resolve_asset_graph().asset_check_keys}

    def stratified_by(built) -> list[str]:
        return built.resources["evaluator"].sample_slice_keys

    assert (first_partition(first), first_partition(second)) == ("2025-01-01", "2026-11-16")
    assert {"f1_drop", "recall_drop"} <= checks(first)
    assert "only_rule" not in checks(first)
    assert "only_rule" in checks(second) and "f1_drop" not in checks(second)
    assert (stratified_by(first), stratified_by(second)) == (
        ["env", "feature_flag"],
        ["env", "tenant"],
    )
    schedules = [built.resolve_schedule_def("seer_daily_schedule") for built in (first, second)]
    assert [schedule.cron_schedule for schedule in schedules] == ["0 2 * * *", "0 5 * * *"]
    freshness = [
        spec.metadata["dagster/freshness_params"].value["deadline_cron"]
        for built in (first, second)
        for checks_def in built.asset_checks
        for spec in checks_def.check_specs
        if spec.name == "freshness_check"
    ]
    assert freshness == ["0 6 * * *", "30 9 * * *"]


def test_the_slice_keys_of_the_settings_reach_the_slice_table(tmp_path) -> None:
    """Two code locations in one process slice one day two ways."""
    from dagster import materialize

    from seer_pipelines.alerts import SlackAlertResource
    from seer_pipelines.defs.resources.evaluator import EvaluatorResource
    from seer_pipelines.defs.resources.warehouse import WarehouseResource
    from tests.seer_pipelines.defs.assets.test_pipelines import LAST_DAY, seed_warehouse

    tables = {}
    for keys in ("env,feature_flag", "env,tenant"):
        warehouse = WarehouseResource(url=f"sqlite:///{tmp_path / keys}.sqlite")
        seed_warehouse(warehouse, days=1)
        built = build_definitions(load_settings({"SEER_SLICE_KEYS": keys}))
        assets = [built.get_assets_def(name) for name in PARTITIONED_ASSETS] + [
            built.get_assets_def("retrieval_events")
        ]
        result = materialize(
            assets,
            partition_key=LAST_DAY.isoformat(),
            resources={
                "warehouse": warehouse,
                "evaluator": EvaluatorResource(kind="lexical"),
                "slack": SlackAlertResource(),
            },
        )
        assert result.success
        [materialization] = result.asset_materializations_for_node("slice_metrics")
        tables[keys] = materialization.metadata["slice_keys"].value
        warehouse.dispose()
    assert tables == {"env,feature_flag": "env, feature_flag", "env,tenant": "env, tenant"}


def test_the_compose_deployment_wires_the_served_code_location() -> None:
    """deploy/: PostgreSQL, the code server, the webserver and the daemon, consistently."""
    import yaml

    deploy = ROOT / "deploy"
    services = yaml.safe_load((deploy / "docker-compose.yml").read_text())["services"]
    assert set(services) == {"seer_postgresql", "seer_code", "seer_webserver", "seer_daemon"}
    build = services["seer_code"]["build"]
    assert (deploy / build["context"]).resolve() == ROOT
    dockerfile = (ROOT / build["dockerfile"]).read_text()
    [server] = yaml.safe_load((deploy / "workspace.yaml").read_text())["load_from"]
    grpc = server["grpc_server"]
    assert grpc["host"] == "seer_code"
    command = re.search(r"^CMD (\[.*?\])$", dockerfile, flags=re.M | re.S).group(1)
    command = json.loads(command.replace("\\\n", ""))
    assert command[:3] == ["dagster", "code-server", "start"]
    assert command[command.index("-p") + 1] == str(grpc["port"])
    assert command[command.index("-m") + 1] == "seer_pipelines.definitions"
    assert command[command.index("--location-name") + 1] == grpc["location_name"]
    for line in re.findall(r"^COPY (.+)$", dockerfile, flags=re.M):
        for source in line.split()[:-1]:
            assert (ROOT / source).exists(), f"Dockerfile copies {source}, which is missing"
    # Every process reads the instance from the environment dagster.yaml names.
    needed = set(re.findall(r"env: (DAGSTER_PG_\w+)", (ROOT / "dagster.yaml").read_text()))
    assert len(needed) == 5
    for name in ("seer_code", "seer_webserver", "seer_daemon"):
        assert needed <= set(services[name]["environment"]), name
    for name in ("seer_webserver", "seer_daemon"):
        assert "workspace.yaml" in services[name]["entrypoint"]


def test_the_dg_project_serves_the_module_workspace_yaml_loads() -> None:
    """`dg check defs` / `dg dev` (pyproject's [tool.dg]) and `dagster dev -w workspace.yaml`
    load one code location: `defs` of seer_pipelines.definitions, not an autoloaded defs/."""
    import tomllib

    import yaml

    dg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["dg"]
    assert dg["directory_type"] == "project"
    [entry] = yaml.safe_load((ROOT / "workspace.yaml").read_text())["load_from"]
    module = entry["python_module"]
    assert dg["project"]["code_location_target_module"] == module["module_name"]
    assert dg["project"]["code_location_name"] == module["location_name"]
    assert dg["project"]["root_module"] == module["module_name"].split(".")[0]
