"""Production topology on one host: a served code location, PostgreSQL, the daemon's queue.

The code location runs as `dagster code-server start` (gRPC); the daemon and the
webserver read a workspace that points at it (deploy/workspace.yaml with this host's
port); the instance is the top-level dagster.yaml on PostgreSQL. One partition of
`seer_daily_job` is submitted to the run queue and must finish within the time limit.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path

import pytest
import sqlalchemy as sa
import yaml
from dagster import DagsterEventType, DagsterInstance, DagsterRunStatus, RunsFilter

from seer_pipelines.cli import main as seer
from tests.webserver_graphql import graphql

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
DAY = "2026-11-29"
# The whole topology, from the first process started to the run's success.
TIME_LIMIT_SECONDS = 420

# A queued run's life: queued by the launch, started by the daemon, run by a worker.
RUN_STATUS_EVENTS = (
    DagsterEventType.RUN_ENQUEUED,
    DagsterEventType.RUN_STARTING,
    DagsterEventType.RUN_START,
    DagsterEventType.RUN_SUCCESS,
)

pytestmark = pytest.mark.postgres


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def started(command: list[str], env: dict[str, str], cwd: Path, log: Path) -> Iterator:
    """A process in its own process group, stopped with everything it spawned afterwards."""
    with log.open("w") as output:
        process = subprocess.Popen(
            command, cwd=cwd, env=env, stdout=output, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        try:
            yield process
        finally:
            for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
                if process.poll() is not None:
                    break
                os.killpg(process.pid, sig)
                try:
                    process.wait(timeout=wait)
                except subprocess.TimeoutExpired:
                    continue
            # Run workers the code server spawned share its process group.
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)


def wait_for(what: str, ready, deadline: float, processes, logs: list[Path]) -> None:
    while not ready():
        for process in processes:
            if process.poll() is not None:
                pytest.fail(f"a process exited while waiting for {what}:\n{tails(logs)}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}:\n{tails(logs)}")
        time.sleep(1)


def tails(logs: list[Path]) -> str:
    return "\n".join(
        f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        for log in logs
        if log.exists()
    )


@pytest.fixture
def instance_database(postgres_url: str) -> Iterator[str]:
    """An empty PostgreSQL database for the Dagster instance, dropped afterwards."""
    name = f"seer_topology_{uuid.uuid4().hex[:10]}"
    engine = sa.create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(sa.text(f'create database "{name}"'))
    try:
        yield name
    finally:
        with engine.connect() as connection:
            connection.execute(sa.text(f'drop database if exists "{name}" with (force)'))
        engine.dispose()


@pytest.mark.slow
def test_a_partition_runs_through_the_daemons_queue_on_a_served_code_location(
    tmp_path, postgres_url, postgres_schema, instance_database, monkeypatch
) -> None:
    deadline = time.monotonic() + TIME_LIMIT_SECONDS
    server = sa.engine.make_url(postgres_url)
    instance_env = {
        "DAGSTER_PG_HOST": server.host or "127.0.0.1",
        "DAGSTER_PG_PORT": str(server.port or 5432),
        "DAGSTER_PG_USER": server.username or "postgres",
        "DAGSTER_PG_PASSWORD": server.password or "",
        "DAGSTER_PG_DB": instance_database,
    }
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(ROOT / "dagster.yaml", home / "dagster.yaml")
    code_port, web_port = free_port(), free_port()
    workspace = yaml.safe_load((ROOT / "deploy" / "workspace.yaml").read_text())
    workspace["load_from"][0]["grpc_server"].update(host="127.0.0.1", port=code_port)
    (home / "workspace.yaml").write_text(yaml.safe_dump(workspace))
    location = workspace["load_from"][0]["grpc_server"]["location_name"]

    assert seer(["seed", "--days", "1", "--end-day", DAY, "--events-per-day", "40",
                 "--regression-days", "0", "--url", postgres_url,
                 "--schema", postgres_schema]) == 0  # fmt: skip
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("SEER_", "DAGSTER_", "SLACK_", "OPENAI_"))
    }
    # Every process (and the run workers) imports this checkout's code.
    env.update(instance_env, DAGSTER_HOME=str(home), PYTHONPATH=str(ROOT))
    code_env = {
        **env,
        "SEER_WAREHOUSE_URL": postgres_url,
        "SEER_WAREHOUSE_SCHEMA": postgres_schema,
        "SEER_EVALUATOR": "lexical",
    }
    logs = [tmp_path / name for name in ("code-server.log", "daemon.log", "webserver.log")]

    with ExitStack() as stack:
        code_server = stack.enter_context(
            started(
                [str(BIN / "dagster"), "code-server", "start", "-h", "127.0.0.1",
                 "-p", str(code_port), "-m", "seer_pipelines.definitions",
                 "--location-name", location],
                code_env, ROOT, logs[0],
            )
        )  # fmt: skip

        def code_server_answers() -> bool:
            check = subprocess.run(
                [str(BIN / "dagster"), "api", "grpc-health-check", "-p", str(code_port)],
                env=env, capture_output=True, timeout=30,
            )  # fmt: skip
            return check.returncode == 0

        wait_for("the code server", code_server_answers, deadline, [code_server], logs)
        daemon = stack.enter_context(
            started(
                [str(BIN / "dagster-daemon"), "run", "-w", "workspace.yaml"], env, home, logs[1]
            )
        )
        webserver = stack.enter_context(
            started(
                [str(BIN / "dagster-webserver"), "-h", "127.0.0.1", "-p", str(web_port),
                 "-w", "workspace.yaml"],
                env, home, logs[2],
            )
        )  # fmt: skip
        processes = [code_server, daemon, webserver]

        def webserver_loaded_the_location() -> bool:
            try:
                answer = graphql(
                    web_port,
                    "{ workspaceOrError { ... on Workspace { locationEntries "
                    "{ name loadStatus locationOrLoadError { __typename } } } } }",
                    timeout=10,
                )
            except OSError:
                return False
            entries = answer["data"]["workspaceOrError"]["locationEntries"]
            return [
                (entry["name"], entry["loadStatus"], entry["locationOrLoadError"]["__typename"])
                for entry in entries
            ] == [(location, "LOADED", "RepositoryLocation")]

        wait_for("the webserver", webserver_loaded_the_location, deadline, processes, logs)

        launch = subprocess.run(
            [str(BIN / "dagster"), "job", "launch", "-w", "workspace.yaml",
             "-j", "seer_daily_job", "--tags", json.dumps({"dagster/partition": DAY})],
            cwd=home, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert launch.returncode == 0, launch.stdout + launch.stderr
        launched_at = time.monotonic()

        for name, value in instance_env.items():
            monkeypatch.setenv(name, value)
        with DagsterInstance.from_config(str(home)) as instance:
            assert type(instance.run_storage).__name__ == "PostgresRunStorage"
            # Sensors may start runs of their own; the one launched here is the day's job run.
            [run] = instance.get_runs(
                RunsFilter(job_name="seer_daily_job", tags={"dagster/partition": DAY})
            )

            def run_finished() -> bool:
                status = instance.get_run_by_id(run.run_id).status
                return status in (DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE)

            wait_for("the run", run_finished, deadline, processes, logs)
            finished = instance.get_run_by_id(run.run_id)
            assert finished.status == DagsterRunStatus.SUCCESS, tails(logs)
            print(f"run finished {time.monotonic() - launched_at:.0f} s after its launch")
            assert finished.tags["dagster/partition"] == DAY
            assert finished.tags["seer/evaluator"] == "lexical"
            # Queued by the launch, started by the daemon when the queue's limits allowed.
            run_events = [
                entry.dagster_event.event_type
                for entry in instance.all_logs(run.run_id)
                if entry.dagster_event is not None
                and entry.dagster_event.event_type in RUN_STATUS_EVENTS
            ]
            assert run_events == list(RUN_STATUS_EVENTS)
            # Launched from the served location, not from an in-process import.
            origin = finished.remote_job_origin.repository_origin.code_location_origin
            assert (origin.host, origin.port) == ("127.0.0.1", code_port)
            materialized = instance.get_materialized_partitions(
                next(key for key in instance.get_asset_keys() if key.path == ["slice_metrics"])
            )
            assert materialized == {DAY}

    engine = sa.create_engine(postgres_url)
    with engine.connect() as connection:
        rows = connection.execute(
            sa.text(
                f'select count(*) from "{postgres_schema}".seer_slice_metrics '
                "where partition_date = :day"
            ),
            {"day": DAY},
        ).scalar_one()
    engine.dispose()
    assert rows > 0
