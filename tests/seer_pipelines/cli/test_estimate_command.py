"""`seer estimate`: calls, tokens and cost of a file of events, on demand, in batch, sampled."""

from __future__ import annotations

import json

import pytest

from seer_metrics.events import RetrievalEvent
from seer_metrics.spend.cost_estimate import (
    REQUIREMENTS_COMPLETION_TOKENS,
    SUPPORT_COMPLETION_TOKENS,
    estimate_cost,
)
from seer_pipelines.cli import main


def _event(index: int, query: str, passage: str = "Christopher Nolan directed Inception.") -> dict:
    return {
        "event_id": f"e{index}",
        "task": query,
        "context": [{"id": "p1", "text": passage}, {"id": "p2", "text": "Nolan is British."}],
        "metadata": {"env": "prod" if index % 4 else "staging", "feature_flag": "v1"},
    }


def _write(path, records, extra_lines=()):
    lines = [json.dumps(record) for record in records] + list(extra_lines)
    path.write_text("\n".join(lines) + "\n")
    return path


def _estimate(capsys, *argv):
    assert main(["estimate", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_calls_tokens_and_cost_of_a_file(tmp_path, capsys):
    queries = ["Who directed Inception?", "  who DIRECTED inception? ", "Where was Nolan born?"]
    records = [_event(i, queries[i % 3]) for i in range(30)]
    path = _write(tmp_path / "events.jsonl", records, ['{"task": ""}', "not json"])
    result = _estimate(capsys, str(path), "--model", "gpt-4o-mini")
    assert result["events"] == 30
    assert result["invalid_lines"] == 2
    assert result["distinct_queries"] == 2  # whitespace and case do not make a new query
    assert result["calls"] == {"online": 32, "batch": 32}
    assert result["completion_tokens"]["online"] == (
        2 * REQUIREMENTS_COMPLETION_TOKENS + 30 * SUPPORT_COMPLETION_TOKENS
    )
    prompt = result["prompt_tokens"]["online"]
    assert prompt > 30 * 100  # the system prompts alone are hundreds of tokens a call
    expected = (prompt * 0.15 + result["completion_tokens"]["online"] * 0.60) / 1_000_000
    assert result["cost_usd"]["online"] == pytest.approx(expected)
    assert result["cost_usd"]["batch"] == pytest.approx(expected / 2)


def test_longer_passages_cost_more():
    short = [RetrievalEvent.from_record(_event(1, "Who directed Inception?"))]
    long = [RetrievalEvent.from_record(_event(1, "Who directed Inception?", "word " * 400))]
    price = (0.15, 0.60)
    assert (
        estimate_cost(long, "gpt-4o-mini", price).online.prompt_tokens
        > estimate_cost(short, "gpt-4o-mini", price).online.prompt_tokens + 300
    )


def test_sampling_lowers_the_spend_but_keeps_every_slice(tmp_path, capsys):
    records = [_event(i, f"Question number {i}?") for i in range(400)]
    path = _write(tmp_path / "events.jsonl", records)
    result = _estimate(capsys, str(path), "--sample-size", "100", "--sample-min-per-slice", "30")
    sampled = result["sampled"]
    # prod 300 events, staging 100: in proportion staging would get 25, the minimum gives 30.
    assert sampled["events"] == 100
    assert sampled["calls"]["online"] == 200  # 100 distinct queries + 100 events
    small = _estimate(capsys, str(path), "--sample-size", "10", "--sample-min-per-slice", "30")
    assert small["sampled"]["events"] == 60  # the minimums win over a smaller target
    assert sampled["cost_usd"]["online"] < result["cost_usd"]["online"] / 4
    assert result["events"] == 400


def test_unknown_model_has_no_cost_rather_than_zero(tmp_path, capsys):
    path = _write(tmp_path / "events.jsonl", [_event(1, "Who directed Inception?")])
    result = _estimate(capsys, str(path), "--model", "my-local-llama")
    assert result["cost_usd"] == {"online": None, "batch": None}
    priced = _estimate(
        capsys, str(path), "--model", "my-local-llama", "--prices", '{"my-local-llama": [1, 2]}'
    )
    assert priced["cost_usd"]["online"] > 0


def test_bad_input_is_a_clear_error(tmp_path, capsys):
    empty = _write(tmp_path / "bad.jsonl", [], ['{"task": ""}'])
    assert main(["estimate", str(empty)]) == 2
    assert "no valid event" in capsys.readouterr().err
    assert main(["estimate", str(tmp_path / "missing.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err
    good = _write(tmp_path / "good.jsonl", [_event(1, "Who?")])
    assert main(["estimate", str(good), "--sample-rate", "2"]) == 2
    assert "sample rate" in capsys.readouterr().err


def test_plain_output_names_method_and_both_prices(tmp_path, capsys):
    path = _write(tmp_path / "events.jsonl", [_event(i, "Who?") for i in range(3)])
    assert main(["estimate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "tokens counted by" in out and "on demand $" in out and "batch $" in out
