"""`seer evaluate` and `seer calibrate` through the real command line entry point."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from seer_metrics.agreement import load_examples, write_events_jsonl
from seer_metrics.evaluators.llm import LLMEvaluator
from seer_pipelines.cli import build_parser, main
from seer_pipelines.cli.judge_options import DEFAULT_CACHE, build_command_evaluator
from seer_pipelines.demo import DATA_DIR
from seer_testing.fake_judge import FakeJudgeServer, GoldOracle, GoldRequirement

DATA = DATA_DIR
HOTPOT = DATA / "hotpotqa_train_distractor_hipporag100.jsonl"

GOOD = {
    "event_id": "good-1",
    "event_ts": "2026-11-29T10:00:00Z",
    "task": "Who directed Inception and when was Christopher Nolan born?",
    "context": [
        {"id": "p1", "text": "Christopher Nolan directed Inception.", "score": 0.95},
        {"id": "p2", "text": "Christopher Nolan was born in London in 1970.", "score": 0.89},
        {"id": "p3", "text": "Risotto is a rice dish.", "score": 0.72},
    ],
    "metadata": {"env": "prod"},
}
UNSUPPORTED = {
    "event_id": "good-2",
    "task": "What is the boiling point of ethanol?",
    "context": ["Basalt is a volcanic rock.", "Tennis is played on a court."],
}


@pytest.fixture(autouse=True)
def in_a_scratch_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default judgment cache (.seer/judgments.sqlite) lands in the test's own directory."""
    monkeypatch.chdir(tmp_path)


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def mixed_file(tmp_path: Path) -> Path:
    return write_lines(
        tmp_path / "events.jsonl",
        [
            json.dumps(GOOD),  # line 1
            "{this is not json",  # line 2
            json.dumps({"event_id": "empty-task", "task": "  ", "context": ["x"]}),  # line 3
            "",  # line 4: blank, not an event
            json.dumps(UNSUPPORTED),  # line 5
            json.dumps({"event_id": "bad-ctx", "task": "q", "context": "{oops"}),  # line 6
            json.dumps(["a list"]),  # line 7
            json.dumps({"event_id": "no-text", "task": "q", "context": [{"id": "a"}]}),  # 8
            json.dumps(GOOD | {"event_id": "good-3"}),  # line 9
        ],
    )


def read_out(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_scores_good_lines_and_reports_bad_ones_with_line_numbers(
    mixed_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "scores.jsonl"
    assert main(["evaluate", str(mixed_file), "--out", str(out)]) == 0
    rows = read_out(out)
    assert [row["line"] for row in rows] == [1, 2, 3, 5, 6, 7, 8, 9]
    assert [row["status"] for row in rows] == [
        "ok",
        "invalid",
        "invalid",
        "ok",
        "invalid",
        "invalid",
        "invalid",
        "ok",
    ]
    assert [row["event_id"] for row in rows] == [
        "good-1",
        None,
        "empty-task",
        "good-2",
        "bad-ctx",
        None,
        "no-text",
        "good-3",
    ]
    reasons = {row["line"]: row["reason"] for row in rows}
    assert reasons[1] is None
    assert reasons[2].startswith("line 2: not valid JSON")
    assert reasons[3] == "line 3: task_empty: 'task' is empty"
    assert reasons[6].startswith("line 6: context_not_json")
    assert reasons[7].startswith("line 7: record_not_object")
    assert reasons[8].startswith("line 8: item_text_missing")

    good = rows[0]
    for key in ("recall", "precision", "f1", "ndcg", "k", "n", "cited_ids"):
        assert key in good
    assert good["recall"] == 1.0
    assert good["precision"] == pytest.approx(2 / 3)
    assert good["cited_ids"] == ["p1", "p2"]
    assert good["missing_requirements"] == []
    assert (good["k"], good["n"]) == (2, 3)

    unsupported = rows[3]
    assert unsupported["recall"] == 0.0
    assert unsupported["ndcg"] is None  # nothing cited, and no ranks or scores
    assert unsupported["missing_requirements"] == ["what is the boiling point of ethanol"]

    for row in rows:
        if row["status"] == "invalid":
            assert row["recall"] is row["precision"] is row["f1"] is row["ndcg"] is None

    captured = capsys.readouterr()
    assert "events: 8  ok: 3  invalid: 5  errors: 0" in captured.out
    assert "model calls: 0" in captured.out
    assert "line 2: invalid: not valid JSON" in captured.err
    assert "line 3 (event empty-task): invalid: task_empty" in captured.err


def test_batches_do_not_change_order_or_scores(mixed_file: Path, tmp_path: Path) -> None:
    whole, batched = tmp_path / "whole.jsonl", tmp_path / "batched.jsonl"
    assert main(["evaluate", str(mixed_file), "--no-cache", "--out", str(whole)]) == 0
    argv = ["evaluate", str(mixed_file), "--no-cache", "--out", str(batched), "--batch-size", "2"]
    assert main(argv) == 0
    assert read_out(whole) == read_out(batched)


def test_reads_gzip_input(mixed_file: Path, tmp_path: Path) -> None:
    packed = tmp_path / "events.jsonl.gz"
    with gzip.open(packed, "wt", encoding="utf-8") as handle:
        handle.write(mixed_file.read_text(encoding="utf-8"))
    plain_out, packed_out = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    assert main(["evaluate", str(mixed_file), "--no-cache", "--out", str(plain_out)]) == 0
    assert main(["evaluate", str(packed), "--no-cache", "--out", str(packed_out)]) == 0
    assert read_out(plain_out) == read_out(packed_out)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["evaluate", "{missing}"], "no such file"),
        (["evaluate", "{events}", "--evaluator", "telepathy"], "unknown evaluator 'telepathy'"),
        (["evaluate", "{events}", "--batch-size", "0"], "--batch-size"),
        (["evaluate", "{events}", "--out", "{tmp}/no/such/dir/out.jsonl"], "--out"),
        (["calibrate", "{missing}"], "no such file"),
        (["calibrate", "{events}", "--context-size", "0"], "--context-size"),
        (["calibrate", "{events}", "--limit", "0"], "--limit"),
        (["calibrate", "{events}"], "no usable labeled example"),
    ],
)
def test_unusable_input_exits_non_zero_and_names_the_fault(
    arguments: list[str],
    message: str,
    mixed_file: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    values = {"missing": str(tmp_path / "absent.jsonl"), "events": str(mixed_file)}
    values["tmp"] = str(tmp_path)
    argv = [argument.format(**values) for argument in arguments]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_scores_a_converted_bundled_hotpotqa_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = tmp_path / "hotpot_events.jsonl"
    assert write_events_jsonl(load_examples(HOTPOT).examples, events) == 100
    out = tmp_path / "scores.jsonl"
    assert main(["evaluate", str(events), "--evaluator", "lexical", "--out", str(out)]) == 0
    rows = read_out(out)
    assert len(rows) == 100
    assert all(row["status"] == "ok" and row["n"] == 4 for row in rows)
    assert all(row["ndcg"] is None or 0.0 <= row["ndcg"] <= 1.0 for row in rows)
    assert any(row["missing_requirements"] for row in rows)
    assert "events: 100  ok: 100  invalid: 0  errors: 0" in capsys.readouterr().out


def test_cache_reuses_judgments_on_a_second_run(
    mixed_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "judgments.sqlite"
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    argv = ["evaluate", str(mixed_file), "--cache", str(cache), "--out"]
    assert main([*argv, str(first)]) == 0
    # good-3 repeats good-1's content: judged once, re-used within the same run
    assert "cache hits: 1" in capsys.readouterr().out
    assert cache.is_file()
    assert main([*argv, str(second)]) == 0
    assert "cache hits: 3" in capsys.readouterr().out
    strip = ("cache_hit",)
    assert [{k: v for k, v in r.items() if k not in strip} for r in read_out(first)] == [
        {k: v for k, v in r.items() if k not in strip} for r in read_out(second)
    ]
    assert [r["cache_hit"] for r in read_out(second) if r["status"] == "ok"] == [True] * 3


def test_calibrate_prints_the_agreement_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    labeled = tmp_path / "labeled.jsonl.gz"
    lines = HOTPOT.read_text(encoding="utf-8").splitlines()[:12]
    with gzip.open(labeled, "wt", encoding="utf-8") as handle:
        handle.write("\n".join([*lines[:6], "{broken", *lines[6:]]) + "\n")
    assert main(["calibrate", str(labeled), "--limit", "10"]) == 0
    captured = capsys.readouterr()
    assert "examples: 10  judged: 10  errors: 0" in captured.out
    assert "citation precision vs gold" in captured.out
    assert "recall<1 flag agrees" in captured.out
    assert "line 7: not valid JSON" in captured.err
    assert main(["calibrate", str(labeled), "--json", "--context-size", "3"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["judged"] == 12
    assert report["context_size"] == 3
    assert report["skipped_lines"] == 1
    assert 0.0 <= report["flag_agreement"] <= 1.0


def test_calibrate_writes_events_that_seer_evaluate_scores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = tmp_path / "events.jsonl"
    argv = ["calibrate", str(HOTPOT), "--limit", "5", "--events-out", str(events)]
    assert main(argv) == 0
    assert "wrote 5 events" in capsys.readouterr().err
    records = [json.loads(line) for line in events.read_text().splitlines()]
    assert len(records) == 5 and all(len(record["context"]) == 4 for record in records)
    assert main(["evaluate", str(events)]) == 0
    assert "events: 5  ok: 5" in capsys.readouterr().out
    unwritable = tmp_path / "no-such-dir" / "events.jsonl"
    assert main(["calibrate", str(HOTPOT), "--limit", "1", "--events-out", str(unwritable)]) == 2
    assert "--events-out" in capsys.readouterr().err


def test_undecodable_and_out_of_range_lines_are_reported_not_fatal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = json.dumps({"event_id": "g", "task": "Who directed Inception?", "context": ["Nolan"]})
    millis = json.dumps({"event_id": "m", "task": "q?", "context": [], "event_ts": 1764460800000})
    lines = [good.encode()] * 300 + [b'{"task": "caf\xe9", "context": []}', millis.encode()]
    events = tmp_path / "events.jsonl"
    events.write_bytes(b"\n".join(lines) + b"\n")
    out = tmp_path / "scores.jsonl"
    assert main(["evaluate", str(events), "--out", str(out)]) == 0
    rows = read_out(out)
    assert len(rows) == 302
    assert rows[300]["status"] == "invalid"
    assert rows[300]["reason"].startswith("line 301: not valid UTF-8")
    assert rows[301]["status"] == "invalid" and "event_ts_invalid" in rows[301]["reason"]
    assert "events: 302  ok: 300  invalid: 2" in capsys.readouterr().out


def test_a_cache_url_password_never_reaches_the_console(
    mixed_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = "postgresql+psycopg2://seer:hunter2-secret@127.0.0.1:1/nowhere"
    assert main(["evaluate", str(mixed_file), "--cache", url]) == 2
    captured = capsys.readouterr()
    assert "hunter2-secret" not in captured.out + captured.err
    assert "--cache postgresql+psycopg2://seer:***@127.0.0.1:1/nowhere" in captured.err


def test_one_line_with_nul_or_a_lone_surrogate_spoils_no_other_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    poison = GOOD | {
        "event_id": "poison",
        "context": [{"id": "p\u0000", "text": "Christopher Nolan directed Inception.\ud800"}],
        "metadata": {"env": "prod\udfff"},
    }
    events = write_lines(
        tmp_path / "events.jsonl",
        [json.dumps(GOOD), json.dumps(poison), json.dumps(UNSUPPORTED)],
    )
    out = tmp_path / "scores.jsonl"
    cache = tmp_path / "judgments.sqlite"
    assert main(["evaluate", str(events), "--cache", str(cache), "--out", str(out)]) == 0
    rows = read_out(out)
    assert [row["status"] for row in rows] == ["ok", "ok", "ok"]
    assert rows[1]["cited_ids"] == ["p\ufffd"]
    assert "events: 3  ok: 3  invalid: 0  errors: 0" in capsys.readouterr().out


def test_a_non_string_event_id_is_kept_as_its_json_text(tmp_path: Path) -> None:
    lines = [
        json.dumps({"event_id": {"a": 1}, "task": "q", "context": ["x"]}),
        json.dumps({"event_id": [1, 2], "task": "q", "context": ["x"]}),
    ]
    out = tmp_path / "scores.jsonl"
    # Both lines are invalid, so nothing is scored: exit code 1, and the rows are written.
    assert main(["evaluate", str(write_lines(tmp_path / "e.jsonl", lines)), "--out", str(out)]) == 1
    assert [row["event_id"] for row in read_out(out)] == ['{"a":1}', "[1,2]"]


def test_a_cache_url_is_opened_with_the_warehouse_engine_factory(
    mixed_file: Path, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # `postgresql://` (no driver) must mean psycopg2, as it does for the warehouse.
    url = postgres_url.replace("postgresql+psycopg2://", "postgresql://")
    try:
        assert main(["evaluate", str(mixed_file), "--cache", url]) == 0
        assert main(["evaluate", str(mixed_file), "--cache", url]) == 0
        assert "cache hits: 3" in capsys.readouterr().out
    finally:
        engine = sa.create_engine(postgres_url)
        with engine.begin() as connection:
            for table in ("seer_judgment_cache", "seer_requirement_cache"):
                connection.execute(sa.text(f"drop table if exists {table}"))
        engine.dispose()


# -- exit codes, reasons, pacing flags and the default cache ------------------------------


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["{broken", json.dumps({"task": "q", "context": "not a list"})], "none of its 2 lines"),
        ([""], "the file has no events"),
    ],
)
def test_a_file_with_nothing_to_score_exits_1(
    lines: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = write_lines(tmp_path / "events.jsonl", lines)
    assert main(["evaluate", str(events)]) == 1
    captured = capsys.readouterr()
    assert "ok: 0" in captured.out  # the summary is still printed
    assert f"error: {events}: {message}" in captured.err


def test_a_truncated_line_is_reported_at_its_own_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    whole = json.dumps(GOOD)
    opening_quote = whole.index('"Christopher Nolan directed')
    cut = whole[: opening_quote + 12]  # inside the first passage's text
    events = write_lines(tmp_path / "events.jsonl", [whole, cut, whole[:40] + "\t" + whole[40:]])
    out = tmp_path / "scores.jsonl"
    assert main(["evaluate", str(events), "--out", str(out)]) == 0
    reasons = [row["reason"] for row in read_out(out)]
    string_start = opening_quote + 1  # columns count from 1
    assert reasons[1] == (
        f"line 2: not valid JSON: Unterminated string starting at column {string_start} "
        "(the line ends before the JSON value does: truncated?)"
    )
    assert reasons[2] == "line 3: not valid JSON: Invalid control character at column 41"
    assert "line 2: invalid: not valid JSON: Unterminated string" in capsys.readouterr().err


def test_a_context_that_is_plain_text_is_reported_as_a_string_not_as_json(
    tmp_path: Path,
) -> None:
    lines = [
        json.dumps({"event_id": "a", "task": "q", "context": "not a list"}),
        json.dumps({"event_id": "b", "task": "q", "context": '[{"text": "cut'}),
    ]
    out = tmp_path / "scores.jsonl"
    assert main(["evaluate", str(write_lines(tmp_path / "e.jsonl", lines)), "--out", str(out)]) == 1
    first, second = (row["reason"] for row in read_out(out))
    assert first == (
        "line 1: context_not_list: 'context' must be a list, got the string 'not a list'"
    )
    assert second.startswith("line 2: context_not_json: 'context' is JSON text that does not")
    assert "at character 11" in second


def _evaluator_for(argv: list[str]) -> LLMEvaluator:
    args = build_parser(argv).parse_args(argv)
    evaluator = build_command_evaluator(args)
    inner = getattr(evaluator, "inner", evaluator)
    assert isinstance(inner, LLMEvaluator)
    return inner


def test_pacing_flags_set_the_llm_judge_over_the_environment(
    mixed_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("SEER_LLM_REQUESTS_PER_MINUTE", "500")
    monkeypatch.setenv("SEER_LLM_MAX_CONCURRENCY", "16")
    base = ["evaluate", str(mixed_file), "--evaluator", "openai", "--no-cache"]
    settings = _evaluator_for([*base, "--rpm", "1200", "--tpm", "none", "--concurrency", "3"])
    settings = settings.settings
    assert settings.requests_per_minute == 1200.0
    assert settings.tokens_per_minute is None
    assert settings.max_concurrency == 3
    # Without the flags the environment (then the default) decides.
    untouched = _evaluator_for(base).settings
    assert (untouched.requests_per_minute, untouched.max_concurrency) == (500.0, 16)
    assert untouched.tokens_per_minute == 200_000.0


def test_cap_and_timeout_flags_set_the_llm_judge_over_the_environment(
    mixed_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """For a slow endpoint: a smaller cap and a longer timeout, from the command line."""
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("SEER_LLM_MAX_TOKENS", "900")
    monkeypatch.setenv("SEER_LLM_TIMEOUT_SECONDS", "30")
    base = ["evaluate", str(mixed_file), "--evaluator", "openai", "--no-cache"]
    flagged = _evaluator_for([*base, "--max-tokens", "400", "--timeout", "240"]).settings
    assert (flagged.max_completion_tokens, flagged.timeout_seconds) == (400, 240.0)
    from_env = _evaluator_for(base).settings
    assert (from_env.max_completion_tokens, from_env.timeout_seconds) == (900, 30.0)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--rpm", "fast"], "argument --rpm: must be a positive number or 'none'"),
        (["--tpm", "-5"], "argument --tpm: must be a positive number or 'none'"),
        (["--concurrency", "0"], "argument --concurrency: must be a whole number of at least 1"),
        (["--max-tokens", "-1"], "argument --max-tokens: must be a whole number of at least 1"),
        (["--timeout", "0"], "argument --timeout: must be a positive number of seconds"),
        (["--cache", "x.sqlite", "--no-cache"], "not allowed with argument --cache"),
    ],
)
def test_a_bad_flag_value_exits_2_naming_the_flag(
    flags: list[str], message: str, mixed_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["evaluate", str(mixed_file), "--evaluator", "openai", *flags])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_pacing_flags_with_the_offline_evaluator_are_refused(
    mixed_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["evaluate", str(mixed_file), "--rpm", "60", "--concurrency", "2"]) == 2
    assert "--rpm, --concurrency: applies to --evaluator openai only" in (capsys.readouterr().err)


QUERY = "Who directed Inception and when was Christopher Nolan born?"


@pytest.fixture
def judge(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeJudgeServer]:
    """The fake OpenAI-compatible judge, reached through the real openai client."""
    gold = {
        QUERY: [
            GoldRequirement("The director of Inception", "Christopher Nolan directed Inception"),
            GoldRequirement("Nolan's year of birth", "born in London in 1970"),
        ],
        UNSUPPORTED["task"]: [GoldRequirement("The boiling point of ethanol", "78 degrees")],
    }
    with FakeJudgeServer(GoldOracle(gold)) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        yield server


def test_judgments_are_cached_by_default_so_a_rerun_makes_no_call(
    judge: FakeJudgeServer, mixed_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["evaluate", str(mixed_file), "--evaluator", "openai", "--rpm", "none"]
    assert main(argv) == 0
    first = capsys.readouterr().out
    calls = judge.count()
    assert calls == 4  # two distinct queries, then three events of which two are the same
    assert "events: 8  ok: 3" in first and f"model calls: {calls}" in first
    assert f"judgments cached in {DEFAULT_CACHE}" in first
    assert (tmp_path / DEFAULT_CACHE).is_file()

    assert main(argv) == 0
    second = capsys.readouterr().out
    assert judge.count() == calls  # nothing sent
    assert "model calls: 0  cache hits: 3" in second and "estimated cost: $0.0000" in second

    assert main([*argv, "--no-cache"]) == 0
    assert judge.count() > calls


def test_a_killed_run_keeps_the_lines_it_scored(judge: FakeJudgeServer, tmp_path: Path) -> None:
    """`--out` is written and flushed line by line, in input order: a run killed while the
    last event is still being judged has the five lines before it on disk (before, the
    file was written once per batch and was empty)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    events = tmp_path / "events.jsonl"
    lines = [{**GOOD, "event_id": f"e{index}"} for index in range(1, 6)]
    lines.append({**UNSUPPORTED, "event_id": "e6"})  # its judge call hangs
    events.write_text("".join(json.dumps(line) + "\n" for line in lines))
    judge.hang_seconds = 120
    judge.inject("hang", query=UNSUPPORTED["task"], times=None)
    out = tmp_path / "scores.jsonl"
    argv = ["evaluate", str(events), "--evaluator", "openai", "--no-cache", "--out", str(out)]
    argv += ["--rpm", "none", "--tpm", "none", "--timeout", "100"]
    code = f"from seer_pipelines.cli import main; raise SystemExit(main({argv!r}))"
    process = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, env=os.environ.copy())
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and process.poll() is None:
            if out.exists() and out.read_text().count("\n") >= 5:
                break
            time.sleep(0.1)
        assert process.poll() is None, "the run ended before it could be killed"
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row["line"] for row in rows] == [1, 2, 3, 4, 5]
    assert [row["status"] for row in rows] == ["ok"] * 5
