"""Every shell block of README.md and docs/*.md, run as written in a fresh clone, each
command's effect checked.

This checkout's HEAD is cloned into a temporary directory (uncommitted changes are not
in it: commit before running this test). Its `.venv` links to the
virtualenv running the tests, with its own install stamp, so `make` installs nothing, and
PYTHONPATH points at the clone, so every process imports the clone's code. The docs are
read in `WALKTHROUGH_DOCS` order, each in a new shell session in the same clone (a user
opening another terminal in the checkout): within a doc, `source`, `export`, `unset` and
plain assignments carry over to the next command, and a long-running server (`make dev`,
`dagster dev`) is started on a free port and left running for the commands after it, as
in a second terminal.

Every command must be known here: one that is not fails the test, so a new doc command
comes with a check of what it does. The blocks that cannot run on this machine are listed
in `NOT_RUN_BLOCKS` with the reason, and so are the few commands of runnable blocks that
are not run (`Step.not_run`). The production instance's commands run against a scratch
PostgreSQL database that the test drops afterwards. A line of any command's output (or
server log) that says `warning` must be one of `DAGSTER_WARNINGS`, each explained in the
doc it names. The `seer` command lines of every doc are parsed by the real `seer` parser,
so a doc never names an option that does not exist.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

import pytest

from seer_pipelines.cli import build_parser
from tests.webserver_graphql import graphql

ROOT = Path(__file__).resolve().parents[1]
VENV = Path(sys.prefix)
# The docs with shell blocks, in the order a user runs them on the demo: the README first
# (`make demo`), then the pipelines on the demo's instance, then the rest.
WALKTHROUGH_DOCS = (
    "README.md",
    "docs/pipelines.md",
    "docs/agreement.md",
    "docs/llm-evaluator.md",
    "docs/deployment.md",
)
# The blocks that cannot run on this machine, by their doc and first command, and why.
NOT_RUN_BLOCKS = {
    ("docs/llm-evaluator.md", "export OPENAI_API_KEY=sk-..."): "needs a real OpenAI key",
    ("docs/llm-evaluator.md", "export OPENAI_BASE_URL=https://RESOURCE.openai.azure.com/openai/v1/"):
        "needs an Azure OpenAI resource and its key",
    ("docs/llm-evaluator.md", "vllm serve Qwen/Qwen2.5-7B-Instruct --port 8000"):
        "needs vLLM on a GPU and the model's weights",
    ("docs/llm-evaluator.md", "ollama pull qwen2.5:7b"): "needs Ollama and a 4.7 GB model",
    ("docs/llm-evaluator.md", "llama-server --model model.gguf --ctx-size 8192 --port 8080"):
        "needs llama.cpp (or llama-cpp-python) and a GGUF model",
    ("docs/llm-evaluator.md", "export CMAKE_BUILD_PARALLEL_LEVEL=2"):
        "builds llama-cpp-python (11 to 22 minutes) to record a fixture again by hand",
    ("docs/deployment.md", "export DAGSTER_HOME=/srv/seer/dagster_home"):
        "three servers on fixed public ports with a placeholder warehouse URL; "
        "tests/test_topology.py starts these three processes the same way on free ports",
    ("docs/deployment.md", "docker compose -f deploy/docker-compose.yml up --build"):
        "needs a Docker daemon",
}  # fmt: skip
DEMO_DAYS = 14
PAIR_SLICE = "env=prod,feature_flag=retrieval-v2"
SERVER_START_SECONDS = 180
BACKFILL_SECONDS = 300
COMMAND_SECONDS = 300

pytestmark = pytest.mark.walkthrough


# -- reading the docs ---------------------------------------------------------------------


@dataclass(frozen=True)
class DocCommand:
    doc: str
    line: int
    text: str  # as written, comment included, continuation lines joined

    @property
    def command(self) -> str:
        """The command without its trailing comment."""
        return strip_comment(self.text).strip()

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}: {self.command}"


@dataclass(frozen=True)
class ShellBlock:
    doc: str
    line: int
    commands: tuple[DocCommand, ...]

    @property
    def key(self) -> tuple[str, str]:
        return (self.doc, self.commands[0].command)


def strip_comment(text: str) -> str:
    """`text` up to a `#` that starts a shell comment (outside quotes, after a blank)."""
    quote = None
    for index, character in enumerate(text):
        if quote:
            if character == quote:
                quote = None
        elif character in "'\"":
            quote = character
        elif character == "#" and (index == 0 or text[index - 1].isspace()):
            return text[:index]
    return text


def shell_blocks(doc: Path, relative: str) -> list[ShellBlock]:
    """The doc's ```bash blocks (indented ones in a list item too), command by command."""
    blocks: list[ShellBlock] = []
    commands: list[DocCommand] = []
    in_block = False
    block_start = 0
    pending: list[str] = []
    start = 0
    for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), start=1):
        if line.lstrip().startswith("```"):
            if in_block and commands:
                blocks.append(ShellBlock(relative, block_start, tuple(commands)))
            in_block = not in_block and line.strip() in ("```bash", "```sh", "```shell")
            commands, pending, block_start = [], [], number
            continue
        if not in_block:
            continue
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending.append(line.rstrip()[:-1])
            continue
        pending.append(line)
        text = " ".join(part.strip() for part in pending)
        pending = []
        if strip_comment(text).strip():
            commands.append(DocCommand(relative, start, text))
    return blocks


def shell_commands(doc: Path, relative: str) -> list[DocCommand]:
    """The commands of the doc's shell blocks, in order."""
    return [command for block in shell_blocks(doc, relative) for command in block.commands]


def doc_paths() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_walkthrough_reads_every_doc_with_a_shell_block() -> None:
    """A new doc's commands are run too, and every block not run is one that exists."""
    with_blocks = {str(doc.relative_to(ROOT)) for doc in doc_paths() if shell_blocks(doc, doc.name)}
    assert with_blocks == set(WALKTHROUGH_DOCS)
    keys = {block.key for doc in WALKTHROUGH_DOCS for block in shell_blocks(ROOT / doc, doc)}
    assert set(NOT_RUN_BLOCKS) <= keys, set(NOT_RUN_BLOCKS) - keys
    # The indented blocks of a list item are read too.
    assert any(
        command.command.startswith("dagster job backfill")
        for command in shell_commands(ROOT / "docs/pipelines.md", "docs/pipelines.md")
    )


def all_doc_commands() -> list[DocCommand]:
    return [
        command
        for doc in doc_paths()
        for command in shell_commands(doc, str(doc.relative_to(ROOT)))
    ]


def test_every_seer_command_line_in_the_docs_parses() -> None:
    """Options named in any doc exist (placeholders like EVENTS.jsonl are just arguments)."""
    seen = 0
    for doc_command in all_doc_commands():
        # A placeholder like `<deployment name>` is one argument.
        words = shlex.split(re.sub(r"<[^>]*>", "PLACEHOLDER", doc_command.command))
        if not words or words[0] != "seer":
            continue
        seen += 1
        try:
            build_parser(words[1:]).parse_args(words[1:])
        except SystemExit:
            pytest.fail(f"{doc_command} is refused by the seer command line")
    assert seen, "no `seer` command found in the docs' shell blocks"


# -- the clone and its shell session ------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def clone_checkout(target: Path) -> Path:
    """A fresh clone of HEAD whose `.venv` is the running virtualenv, already installed."""
    if shutil.which("git") is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("git is needed to clone the repository (CI=true)")
        pytest.skip("git is not installed")
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(target)], check=True)
    venv = target / ".venv"
    venv.mkdir()
    for entry in VENV.iterdir():
        if entry.name != ".installed":
            (venv / entry.name).symlink_to(entry)
    # Newer than the clone's pyproject.toml, so the Makefile's install step is done.
    (venv / ".installed").touch()
    return target


@dataclass
class Finished:
    command: DocCommand
    returncode: int
    output: str


@dataclass
class Server:
    command: DocCommand
    process: subprocess.Popen
    port: int
    log: Path

    def stop(self) -> None:
        for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
            if self.process.poll() is not None:
                break
            with suppress(ProcessLookupError):
                os.killpg(self.process.pid, sig)
            with suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=wait)
        # What dagster dev spawned (code server, daemon, run workers) shares its group.
        with suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])


@dataclass
class Session:
    """One user's shell in the clone: the environment carries over from command to command."""

    root: Path
    env: dict[str, str]
    logs: Path
    servers: list[Server] = field(default_factory=list)
    done: dict[str, Finished] = field(default_factory=dict)
    fresh_env: dict[str, str] = field(default_factory=dict)
    stopped: list[Server] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.fresh_env = dict(self.env)

    def new_shell(self) -> None:
        """Another terminal in the same clone: the environment it started with."""
        self.env = dict(self.fresh_env)

    def run(self, command: DocCommand) -> Finished:
        environment_file = self.logs / "environment"
        # allexport: `DAY=...` reaches the next command as it would in an interactive shell.
        script = f"set -a\n{command.text}\nstatus=$?\nenv -0 > {environment_file}\nexit $status\n"
        completed = subprocess.run(
            ["bash", "-c", script], cwd=self.root, env=self.env, capture_output=True,
            text=True, timeout=COMMAND_SECONDS,
        )  # fmt: skip
        if environment_file.exists():
            pairs = environment_file.read_text().split("\0")
            self.env = dict(pair.split("=", 1) for pair in pairs if "=" in pair)
            for name in ("_", "OLDPWD", "SHLVL", "status"):
                self.env.pop(name, None)
            environment_file.unlink()
        finished = Finished(command, completed.returncode, completed.stdout + completed.stderr)
        self.done[command.command] = finished
        return finished

    def words(self, command: DocCommand) -> list[str]:
        """The command's arguments as the shell expands them in this session."""
        script = f'eval "set -- "{shlex.quote(command.command)}; printf "%s\\0" "$@"'
        expanded = subprocess.run(
            ["bash", "-c", script], cwd=self.root, env=self.env, capture_output=True,
            text=True, check=True,
        )  # fmt: skip
        return expanded.stdout.split("\0")[:-1]

    def start(self, command: DocCommand) -> Server:
        """A server in its own process group, on a free port, answering before it returns."""
        self.stop_servers()  # one UI and daemon at a time
        port = free_port()
        log = self.logs / f"server-{len(self.done)}.log"
        env = {**self.env, "DAGSTER_CLI_DEV_PORT": str(port)}
        with log.open("w") as output:
            process = subprocess.Popen(
                ["bash", "-c", f"exec {command.text}"], cwd=self.root, env=env,
                stdout=output, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        server = Server(command, process, port, log)
        self.servers.append(server)
        deadline = time.monotonic() + SERVER_START_SECONDS
        while not webserver_answers(port):
            if process.poll() is not None:
                pytest.fail(f"{command} exited with {process.returncode}:\n{server.tail()}")
            if time.monotonic() > deadline:
                pytest.fail(f"{command}: no webserver on port {port}:\n{server.tail()}")
            time.sleep(1)
        self.done[command.command] = Finished(command, 0, "")
        return server

    def stop_servers(self) -> None:
        for server in self.servers:
            server.stop()
            self.stopped.append(server)
        self.servers.clear()


def webserver_answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=5):
            return True
    except OSError:
        return False


# -- what each command must do ------------------------------------------------------------


@dataclass
class Walkthrough:
    session: Session
    # The database the production instance's commands use instead of `dagster`, created by
    # the doc's `createdb` and dropped afterwards; None when no PostgreSQL is reachable.
    instance_database: str | None
    postgres_unreachable: str | None = None

    @property
    def root(self) -> Path:
        return self.session.root

    @property
    def home(self) -> Path:
        return self.root / ".dagster_home"

    def demo_days(self) -> list[date]:
        first = date.fromisoformat((self.home / "seer_demo_start_date").read_text().strip())
        return [first + timedelta(days=offset) for offset in range(DEMO_DAYS)]

    def warehouse(self, query: str) -> list[tuple]:
        with sqlite3.connect(self.root / ".seer" / "warehouse.sqlite") as connection:
            return connection.execute(query).fetchall()

    def instance(self):
        from dagster import DagsterInstance

        return DagsterInstance.from_config(str(self.home))


def check_succeeded(walkthrough: Walkthrough, finished: Finished) -> None:
    assert finished.returncode == 0, f"{finished.command} failed:\n{finished.output[-3000:]}"


def check_demo(walkthrough: Walkthrough, finished: Finished) -> None:
    check_succeeded(walkthrough, finished)
    days = walkthrough.demo_days()
    counted = walkthrough.warehouse(
        "select count(distinct partition_date), min(partition_date), max(partition_date) "
        "from seer_slice_metrics"
    )[0]
    assert counted == (DEMO_DAYS, days[0].isoformat(), days[-1].isoformat()), counted
    rows = walkthrough.warehouse(
        "select count(distinct partition_date), count(*) from seer_event_metrics"
    )[0]
    assert rows[0] == DEMO_DAYS and rows[1] > 100 * DEMO_DAYS, rows
    # What alerting did, counted as the outbox holds it: the days that paged apart from the
    # days with failing checks (an open incident is carried without a page).
    states = walkthrough.warehouse(
        "select partition_date, group_concat(distinct state) from seer_alerts "
        "where kind = 'check' and state != 'resolved' group by partition_date"
    )
    paged = sum(1 for _, day_states in states if {"sent", "pending"} & set(day_states.split(",")))
    header = (
        f"Alerts: {paged} of {DEMO_DAYS} days paged; {len(states)} of {DEMO_DAYS} days have "
        "failing checks"
    )
    assert header in finished.output, finished.output[-3000:]
    # The injected release pages on its first day, led by the pair slice where it happened;
    # its second day fails too, carried or paged.
    release = days[-2].isoformat()
    heading = f"alert for {release}"
    assert heading in finished.output, f"no alert for {release}:\n{finished.output[-3000:]}"
    alert = finished.output.split(heading, 1)[1].split("Seer: ", 1)[0]
    first_slice = alert.split("-" * 60 + "\n", 1)[1].splitlines()[0]
    assert first_slice.startswith(PAIR_SLICE), alert
    assert f"== {days[-1].isoformat()}: " in finished.output
    with walkthrough.instance() as instance:
        from dagster import DagsterRunStatus, RunsFilter

        runs = instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.SUCCESS]))
        partitions = {run.tags.get("dagster/partition") for run in runs}
    assert {day.isoformat() for day in days} <= partitions


def partition_keys(server: Server) -> list[str]:
    answer = graphql(
        server.port,
        '{ assetNodeOrError(assetKey: {path: ["slice_metrics"]}) '
        "{ ... on AssetNode { partitionKeys } } }",
    )
    return answer["data"]["assetNodeOrError"]["partitionKeys"]


def check_demo_server(walkthrough: Walkthrough, server: Server) -> None:
    """The UI serves the demo's instance with the demo's days as partitions."""
    keys = partition_keys(server)
    assert keys == [day.isoformat() for day in walkthrough.demo_days()], keys


def check_production_server(walkthrough: Walkthrough, server: Server) -> None:
    """A bare `dagster dev`: the production instance, its storage in the database the doc
    created, and the code location with its default first partition."""
    import sqlalchemy as sa

    env = walkthrough.session.env
    assert "DAGSTER_HOME" not in env
    assert env["DAGSTER_PG_DB"] == walkthrough.instance_database
    engine = sa.create_engine(postgres_server_url(walkthrough.instance_database))
    try:
        with engine.connect() as connection:
            tables = set(sa.inspect(connection).get_table_names())
    finally:
        engine.dispose()
    assert {"runs", "event_logs"} <= tables, tables  # the instance's storage is there
    keys = partition_keys(server)
    assert keys[0] == "2025-01-01" and keys[-1] == walkthrough.demo_days()[-1].isoformat()


def check_activate(walkthrough: Walkthrough, finished: Finished) -> None:
    check_succeeded(walkthrough, finished)
    found = shutil.which("dagster", path=walkthrough.session.env["PATH"])
    # The clone's .venv links to the test's virtualenv, whose activate script names itself.
    venv_bin = (walkthrough.root / ".venv" / "bin").resolve()
    assert found and Path(found).resolve().parent == venv_bin, found


PRODUCTION_INSTANCE_ENV = {
    "DAGSTER_PG_HOST": "127.0.0.1",
    "DAGSTER_PG_PORT": "5432",
    "DAGSTER_PG_USER": "postgres",
    "DAGSTER_PG_PASSWORD": "",
    "DAGSTER_PG_DB": "dagster",
}


def check_environment(walkthrough: Walkthrough, finished: Finished) -> None:
    """`export NAME=...` and `NAME=...` lines: the demo's instance and days, and the
    production instance's database."""
    check_succeeded(walkthrough, finished)
    env = walkthrough.session.env
    expected = {
        "DAGSTER_HOME": str(walkthrough.home),
        "SEER_START_DATE": walkthrough.demo_days()[0].isoformat(),
        "DAY": walkthrough.demo_days()[-1].isoformat(),
        **PRODUCTION_INSTANCE_ENV,
    }
    names = re.findall(r"(?:^|\s)([A-Z_][A-Z0-9_]*)=", finished.command.command)
    assert names, finished.command
    for name in names:
        assert name in expected, f"{finished.command}: no check for {name}"
        assert env.get(name) == expected[name], (name, env.get(name), expected[name])
    if "DAGSTER_PG_DB" in names:
        # The doc's database name, `dagster`, may be another instance's on this server:
        # the commands after this one use a scratch database in its place.
        env["DAGSTER_PG_DB"] = walkthrough.instance_database or ""


def check_database_created(walkthrough: Walkthrough, finished: Finished) -> None:
    """`createdb` made the instance's (scratch) database."""
    import sqlalchemy as sa

    check_succeeded(walkthrough, finished)
    name = walkthrough.session.env["DAGSTER_PG_DB"]
    assert name == walkthrough.instance_database
    engine = sa.create_engine(postgres_server_url("postgres"))
    try:
        with engine.connect() as connection:
            found = connection.execute(
                sa.text("select 1 from pg_database where datname = :name"), {"name": name}
            ).all()
    finally:
        engine.dispose()
    assert found, f"{finished.command} did not create {name}"


def check_unset(walkthrough: Walkthrough, finished: Finished) -> None:
    check_succeeded(walkthrough, finished)
    for name in shlex.split(finished.command.command)[1:]:
        assert name not in walkthrough.session.env, name


def _partition_runs(walkthrough: Walkthrough, tags: dict[str, str]) -> list:
    from dagster import RunsFilter

    with walkthrough.instance() as instance:
        return list(instance.get_runs(RunsFilter(tags=tags)))


def check_materialize(walkthrough: Walkthrough, finished: Finished) -> None:
    check_succeeded(walkthrough, finished)
    from dagster import AssetKey, DagsterRunStatus, RunsFilter

    words = walkthrough.session.words(finished.command)
    partition = words[words.index("--partition") + 1]
    assert partition in {day.isoformat() for day in walkthrough.demo_days()}, partition
    with walkthrough.instance() as instance:
        records = instance.get_run_records(RunsFilter(tags={"dagster/partition": partition}))
        latest = max(records, key=lambda record: record.create_timestamp).dagster_run
        assert latest.status == DagsterRunStatus.SUCCESS, latest.status
        record = instance.get_latest_materialization_event(AssetKey("slice_metrics"))
        assert record is not None and record.run_id == latest.run_id
        materialization = record.asset_materialization
        assert materialization is not None and materialization.partition == partition


def check_backfill(walkthrough: Walkthrough, finished: Finished) -> None:
    """One run per day of the range, each run to success by the daemon of the server."""
    check_succeeded(walkthrough, finished)
    from dagster import DagsterRunStatus

    assert walkthrough.session.servers, f"{finished.command} needs the daemon of `make dev`"
    backfill = re.search(r"Launched backfill job `([^`]+)`", finished.output)
    assert backfill, finished.output[-2000:]
    words = walkthrough.session.words(finished.command)
    first, last = (
        date.fromisoformat(words[words.index(option) + 1]) for option in ("--from", "--to")
    )
    expected = {(first + timedelta(days=n)).isoformat() for n in range((last - first).days + 1)}
    assert expected <= {day.isoformat() for day in walkthrough.demo_days()}
    deadline = time.monotonic() + BACKFILL_SECONDS
    while True:
        runs = _partition_runs(walkthrough, {"dagster/backfill": backfill.group(1)})
        if len(runs) == len(expected) and all(run.is_finished for run in runs):
            break
        if time.monotonic() > deadline:
            statuses = {run.tags.get("dagster/partition"): run.status.value for run in runs}
            pytest.fail(
                f"backfill not done in {BACKFILL_SECONDS} s: {statuses}\n"
                f"{walkthrough.session.servers[0].tail()}"
            )
        time.sleep(2)
    assert {run.tags.get("dagster/partition") for run in runs} == expected
    failed = [
        run.tags.get("dagster/partition") for run in runs if run.status != DagsterRunStatus.SUCCESS
    ]
    assert not failed, f"runs failed for {failed}"


def check_calibrate(walkthrough: Walkthrough, finished: Finished) -> None:
    """The agreement report, and the examples written as events for `seer evaluate`."""
    check_succeeded(walkthrough, finished)
    assert "citation precision vs gold" in finished.output, finished.output[-2000:]
    words = walkthrough.session.words(finished.command)
    if "--events-out" in words:
        events = walkthrough.root / words[words.index("--events-out") + 1]
        records = [json.loads(line) for line in events.read_text().splitlines()]
        assert len(records) == 100 and all(record["context"] for record in records)


def check_agreement_benchmark(walkthrough: Walkthrough, finished: Finished) -> None:
    """The dev rows of the README's agreement table, as the benchmark prints them."""
    check_succeeded(walkthrough, finished)
    readme = (walkthrough.root / "README.md").read_text(encoding="utf-8")
    for sample, file in (("HotpotQA", "hotpotqa"), ("MuSiQue", "musique")):
        row = next(
            line for line in readme.splitlines() if line.lstrip().startswith(f"| dev {sample}")
        )
        precision, recall, flag = re.findall(r"\| (0\.\d{3})", row)[:3]
        section = finished.output.split(f"== {file}", 1)[1].split("\n== ", 1)[0]
        assert f"citation precision vs gold (in context): {precision}" in section, section
        assert f"citation recall vs gold (in context):    {recall}" in section, section
        assert f"'gold missing from context': {flag}" in section, section


def check_evaluate(walkthrough: Walkthrough, finished: Finished) -> None:
    """The summary, one score line per event, and the judgments in the default cache."""
    check_succeeded(walkthrough, finished)
    assert re.search(r"events: 100  ok: 100  invalid: 0  errors: 0", finished.output)
    assert re.search(r"mean recall 0\.\d+  precision 0\.\d+", finished.output)
    assert (walkthrough.root / ".seer" / "judgments.sqlite").is_file()
    words = walkthrough.session.words(finished.command)
    if "--out" in words:
        scores = (walkthrough.root / words[words.index("--out") + 1]).read_text().splitlines()
        assert len(scores) == 100 and all(json.loads(line)["status"] == "ok" for line in scores)


def check_estimate(walkthrough: Walkthrough, finished: Finished) -> None:
    """Every key the README's row for `seer estimate` names is in its JSON."""
    check_succeeded(walkthrough, finished)
    result = json.loads(finished.output[finished.output.index("{") :])
    readme = (walkthrough.root / "README.md").read_text(encoding="utf-8")
    row = next(line for line in readme.splitlines() if line.startswith("| `seer estimate"))
    described = row.split("--json` prints one object:", 1)[1]
    keys = set(re.findall(r"`([a-z_0-9]+)`", described))
    assert keys, row
    nested = {"online", "batch"}
    assert keys - nested <= set(result), keys - set(result)
    assert set(result["calls"]) == nested and result["events"] == 100


@dataclass(frozen=True)
class Step:
    pattern: str
    check: Callable[[Walkthrough, Finished], None] | None = None
    server_check: Callable[[Walkthrough, Server], None] | None = None
    not_run: str = ""  # why the test does not run it
    needs_postgres: bool = False
    # Sets the shell's state (`source`, `export`, `unset`): run again in every new shell.
    shell_state: bool = False


STEPS = (
    Step(r"make demo", check_demo),
    Step(r"make test", not_run="it is the test suite this test belongs to"),
    Step(r"\.ci/run", not_run="it runs `make test`, this suite"),
    Step(r"make bench", not_run="the benchmarks take minutes; each prints its own target"),
    Step(
        r"make test-real-judge",
        not_run="builds llama.cpp's llama-server (about 15 minutes) and judges on it for more",
    ),
    Step(r"make dev", server_check=check_demo_server),
    Step(r"dagster dev -w workspace\.yaml", server_check=check_demo_server),
    Step(r"dagster dev", server_check=check_production_server, needs_postgres=True),
    Step(r"source \.venv/bin/activate", check_activate, shell_state=True),
    Step(r"(\.venv/bin/)?seer calibrate \S+( --events-out \S+)?", check_calibrate),
    Step(r"seer evaluate \S+( --out \S+)?", check_evaluate),
    Step(r"seer estimate \S+ --json", check_estimate),
    Step(r"\.venv/bin/python benchmarks/judge_agreement\.py", check_agreement_benchmark),
    Step(
        r"\.venv/bin/python benchmarks/judge_agreement\.py --file \.\./shared/.*",
        not_run="the held-out files are not in the repository",
    ),
    Step(r"(export )?[A-Z_][A-Z0-9_]*=.*", check_environment, shell_state=True),
    Step(r"createdb .*\$DAGSTER_PG_DB", check_database_created, needs_postgres=True),
    Step(r"unset [A-Z_ ]+", check_unset, shell_state=True),
    Step(r"dagster asset materialize .* --partition \S+", check_materialize),
    Step(r"dg launch --job \S+ --partition \S+", check_materialize),
    Step(r"dagster job backfill .*--from .+ --to .+", check_backfill),
)

# Dagster's own warnings on the documented path, each explained in a doc: a regex of the
# output line, the doc, and the words of the doc that explain it.
DAGSTER_WARNINGS = (
    (
        r"SupersessionWarning: Function `(dev_command|asset_materialize_command)` is "
        r"superseded",
        "docs/deployment.md",
        "Dagster 1.13 recommends its `dg` CLI, and these `dagster` commands keep working",
    ),
    (
        r"BetaWarning: Parameter `include_sources` of function `AssetSelection.all`",
        "docs/deployment.md",
        "Dagster's selection parser calls its own beta parameter for `*`",
    ),
    (
        r"Found a dagster instance configuration value \(dagster.yaml\) in the current "
        r"folder, but your DAGSTER_HOME environment variable is set",
        "docs/deployment.md",
        "Dagster logs one warning, `Found a dagster instance configuration value "
        "(dagster.yaml) in the current folder, but your DAGSTER_HOME environment variable "
        "is set to ...`: that is expected",
    ),
    (
        r"project_and_activated_venv_mismatch",
        "docs/deployment.md",
        "`dg` still runs the project's code location",
    ),
    (
        r"Code server process has exited with code 0\. Restarting the code server process",
        "docs/deployment.md",
        "heartbeat came late, and Dagster restarted it",
    ),
)
WARNING_LINE = re.compile(r"warning", re.IGNORECASE)


def step_for(command: DocCommand) -> Step:
    for step in STEPS:
        if re.fullmatch(step.pattern, command.command):
            return step
    pytest.fail(f"{command}: this test does not know the command; add a Step that checks it")


def postgres_server_url(database: str) -> str:
    from tests.conftest import POSTGRES_URL

    url = sa_url(POSTGRES_URL).set(database=database)
    return url.render_as_string(hide_password=False)


def sa_url(text: str):
    import sqlalchemy as sa

    return sa.engine.make_url(text)


def drop_database(name: str) -> None:
    import sqlalchemy as sa

    engine = sa.create_engine(postgres_server_url("postgres"), isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            connection.execute(sa.text(f'drop database if exists "{name}" with (force)'))
    finally:
        engine.dispose()


@pytest.fixture
def walkthrough(tmp_path: Path) -> Iterator[Walkthrough]:
    from tests.conftest import _postgres_unreachable_reason

    root = clone_checkout(tmp_path / "seer")
    logs = tmp_path / "logs"
    logs.mkdir()
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("SEER_", "DAGSTER_", "SLACK_", "OPENAI_", "VIRTUAL_ENV"))
    }
    # The clone's code, not the checkout the virtualenv was installed from.
    env["PYTHONPATH"] = str(root)
    session = Session(root, env, logs)
    unreachable = _postgres_unreachable_reason()
    if unreachable and os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{unreachable} (CI=true: the production instance's commands must run)")
    database = None if unreachable else f"seer_walkthrough_{uuid.uuid4().hex[:10]}"
    try:
        yield Walkthrough(session, database, unreachable)
    finally:
        session.stop_servers()
        if database is not None:
            drop_database(database)


def warnings_in(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if WARNING_LINE.search(line)]


def check_warnings(walkthrough: Walkthrough) -> None:
    """Seer prints no warning on the documented path; Dagster's are each explained."""
    session = walkthrough.session
    outputs = [(str(f.command), f.output) for f in session.done.values()]
    outputs += [(str(server.command), server.log.read_text(errors="replace"))
                for server in session.stopped]  # fmt: skip
    unexplained = []
    for command, output in outputs:
        for line in warnings_in(output):
            known = [entry for entry in DAGSTER_WARNINGS if re.search(entry[0], line)]
            if not known:
                unexplained.append(f"{command}\n    {line}")
    assert not unexplained, "warnings no doc explains:\n" + "\n".join(unexplained)
    for pattern, doc, explanation in DAGSTER_WARNINGS:
        text = " ".join((walkthrough.root / doc).read_text(encoding="utf-8").split())
        assert explanation in text, f"{doc} does not explain {pattern!r}"


@pytest.mark.slow
def test_the_walkthrough_works_as_written_in_a_fresh_clone(walkthrough: Walkthrough) -> None:
    blocks = [
        block for doc in WALKTHROUGH_DOCS for block in shell_blocks(walkthrough.root / doc, doc)
    ]
    assert any(c.command == "make demo" for block in blocks for c in block.commands)
    # Unknown commands fail first, before minutes of running.
    steps = {
        command: step_for(command)
        for block in blocks
        if block.key not in NOT_RUN_BLOCKS
        for command in block.commands
    }
    session = walkthrough.session
    checked, not_run = [], []
    doc = None
    for block in blocks:
        if block.key in NOT_RUN_BLOCKS:
            not_run.append(f"{block.doc}:{block.line}: block: {NOT_RUN_BLOCKS[block.key]}")
            continue
        if block.doc != doc:
            session.new_shell()
            doc = block.doc
        for command in block.commands:
            step = steps[command]
            reason = step.not_run
            if step.needs_postgres and walkthrough.postgres_unreachable:
                reason = walkthrough.postgres_unreachable
            if reason:
                not_run.append(f"{command}: {reason}")
                continue
            if command.command in session.done and not step.shell_state:
                # A later doc repeating a command in the same environment (its `export`s
                # and assignments are run and checked again): already run and checked.
                continue
            started = time.monotonic()
            if step.server_check is not None:
                step.server_check(walkthrough, session.start(command))
            else:
                assert step.check is not None
                step.check(walkthrough, session.run(command))
            checked.append(command.command)
            # Shown with `pytest -s`: where the walkthrough's time goes on this machine.
            print(f"{time.monotonic() - started:6.1f} s  {command}")
    session.stop_servers()
    print("not run:\n  " + "\n  ".join(not_run))
    assert "make demo" in checked
    check_warnings(walkthrough)
