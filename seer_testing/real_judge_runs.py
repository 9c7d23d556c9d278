"""The `seer` runs recorded against real servers, and the command that records them.

Each run is a `seer evaluate` or `seer calibrate` command line on a few labeled examples
from the repository's own samples (`seer_pipelines/demo/data`), judged with the openai
evaluator, one request at a time, without a cache (so every run negotiates the output
mode from scratch). The recording keeps what the run printed and wrote next to the HTTP
exchanges (`recorded_servers.Recording`), so a replay can be held to the recorded
outcome. Record against a running server (see `make test-real-judge` and
docs/llm-evaluator.md):

    python -m seer_testing.real_judge_runs --upstream http://127.0.0.1:8080 \\
        --server llama-server --model smollm2-135m --out tests/fixtures/real_servers/x.json
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from seer_metrics.agreement import load_examples, write_events_jsonl
from seer_pipelines.cli import main as seer_main
from seer_pipelines.demo import DATA_DIR
from seer_testing.recorded_servers import Recording, RecordingProxy, ReplayServer

MUSIQUE = DATA_DIR / "musique_ans_train_hipporag100.jsonl"
HOTPOT = DATA_DIR / "hotpotqa_train_distractor_hipporag100.jsonl"
CONTEXT_SIZE = 3
# A CPU server answers a few hundred tokens of reply in well under this.
TIMEOUT_SECONDS = "600"


@dataclass(frozen=True)
class RunSpec:
    """One recorded command: `seer <command>` on the first `limit` examples of `source`
    (as an events file for `evaluate`), with `options` after the judge's common ones."""

    command: str
    source: Path
    limit: int
    options: tuple[str, ...] = ()


RUNS: dict[str, RunSpec] = {
    # Four events at a cap that fits a good reply (a small model's loop inside the schema
    # runs to it, and then to twice it, at a few tokens a second on a busy CPU).
    "evaluate": RunSpec("evaluate", MUSIQUE, 4, ("--max-tokens", "200")),
    # A cap the first reply cannot fit: finish_reason "length", then once at twice it.
    "truncated": RunSpec("evaluate", MUSIQUE, 2, ("--max-tokens", "16")),
    # The agreement report on other examples.
    "calibrate": RunSpec("calibrate", HOTPOT, 4, ("--max-tokens", "200", "--json")),
}


def command_line(spec: RunSpec, model: str, directory: Path) -> tuple[list[str], Path | None]:
    """The argv of a run, its input written into `directory`, and where its scores go
    (None for `calibrate`, which prints its report)."""
    judge = ["--evaluator", "openai", "--model", model, "--no-cache", "--rpm", "none"]
    judge += ["--tpm", "none", "--concurrency", "1", "--timeout", TIMEOUT_SECONDS]
    if spec.command == "calibrate":
        limits = ["--limit", str(spec.limit), "--context-size", str(CONTEXT_SIZE)]
        return ["calibrate", str(spec.source), *limits, *judge, *spec.options], None
    events = directory / "events.jsonl"
    examples = load_examples(spec.source, limit=spec.limit).examples
    write_events_jsonl(examples, events, context_size=CONTEXT_SIZE)
    out = directory / "scores.jsonl"
    return ["evaluate", str(events), "--out", str(out), *judge, *spec.options], out


@contextlib.contextmanager
def judge_endpoint(base_url: str) -> Iterator[None]:
    """The openai evaluator pointed at `base_url` for the block (OPENAI_BASE_URL), with the
    environment's other judge settings out of the way."""
    saved = dict(os.environ)
    for name in [name for name in os.environ if name.startswith("SEER_LLM_")]:
        del os.environ[name]
    os.environ.update(OPENAI_BASE_URL=base_url, OPENAI_API_KEY="unused")
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@dataclass(frozen=True)
class RunResult:
    exit_code: int
    stdout: str
    scores: list[dict[str, Any]] | None  # the --out lines of `evaluate`


def run_seer(argv: list[str], out: Path | None) -> RunResult:
    """`seer ARGV` in this process, its standard output captured."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exit_code = seer_main(argv)
    scores = None
    if out is not None and out.exists():
        scores = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    return RunResult(exit_code, printed.getvalue(), scores)


def portable(text: str, directory: Path) -> str:
    """Text that named the run's scratch directory or the repository names neither."""
    return text.replace(str(directory), "{dir}").replace(str(DATA_DIR), "{data}")


def record(upstream: str, server: Mapping[str, Any], out: Path, scratch: Path) -> Recording:
    """Every run of `RUNS` through a recording proxy to `upstream`, saved in `out`."""
    runs: dict[str, dict[str, Any]] = {}
    with RecordingProxy(upstream) as proxy, judge_endpoint(proxy.base_url):
        for name, spec in RUNS.items():
            directory = scratch / name
            directory.mkdir(parents=True, exist_ok=True)
            argv, scores_path = command_line(spec, server["model"], directory)
            print(f"recording {name}: seer {' '.join(argv)}", file=sys.stderr)
            result = run_seer(argv, scores_path)
            runs[name] = {
                "argv": [portable(argument, directory) for argument in argv],
                "exit_code": result.exit_code,
                "stdout": portable(result.stdout, directory),
                "scores": result.scores,
                "exchanges": [exchange.to_dict() for exchange in proxy.take()],
            }
            print(portable(result.stdout, directory), file=sys.stderr)
    recorded_at = datetime.now(UTC).isoformat(timespec="seconds")
    recording = Recording(
        {**server, "recorded_at": recorded_at, "machine": platform.machine()}, runs
    )
    recording.save(out)
    return recording


def replay(recording: Recording, name: str, directory: Path) -> tuple[RunResult, ReplayServer]:
    """Run `name` again, as recorded, against a server answering from the recording; the
    server is stopped (so an unmatched request has failed the caller) when this returns."""
    argv, scores_path = command_line(RUNS[name], recording.server["model"], directory)
    recorded_argv = recording.runs[name]["argv"]
    if [portable(argument, directory) for argument in argv] != recorded_argv:
        raise AssertionError(f"run {name!r} is no longer the recorded one: {recorded_argv}")
    with ReplayServer(recording.exchanges(name)) as server, judge_endpoint(server.base_url):
        result = run_seer(argv, scores_path)
    return result, server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", required=True, help="the server, e.g. http://127.0.0.1:8080")
    parser.add_argument("--server", required=True, help="which server: llama-server, ...")
    parser.add_argument("--model", required=True, help="the model name sent in requests")
    parser.add_argument("--out", required=True, type=Path, help="the fixture file to write")
    parser.add_argument("--scratch", type=Path, default=Path(".real-judge/runs"))
    parser.add_argument(
        "--about",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="what else to note about the server (its version, model file, command line)",
    )
    args = parser.parse_args(argv)
    about = dict(item.split("=", 1) for item in args.about)
    server = {"name": args.server, "model": args.model, **about}
    recording = record(args.upstream, server, args.out, args.scratch)
    calls = sum(len(run["exchanges"]) for run in recording.runs.values())
    print(f"recorded {calls} exchanges in {len(recording.runs)} runs to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
