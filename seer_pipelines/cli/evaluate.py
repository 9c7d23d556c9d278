"""`seer evaluate EVENTS.jsonl`: ad-hoc scoring of a file of retrieval events.

One event object a line, the shape of a warehouse row (`event_id`, `event_ts`, `task`,
`context`, `metadata`); `.jsonl.gz` works too. A bad line (not JSON, not a valid event)
never stops the run: it becomes an `invalid` row whose reason names its line number.
Events are judged in batches, so memory stays bounded on large files, and `--out` gets
one flat JSON line per input line, in the input's order, each written and flushed as soon
as it and the lines before it are scored: a run killed half-way keeps what it scored.

Judgments are cached by default in `.seer/judgments.sqlite` (next to the demo's
warehouse; `--cache PATH` elsewhere, `--no-cache` for none), so a re-run of the same file
makes no model call. Exit codes: 0 when at least one event was scored, 1 when none was
(every line invalid or failed, or no line at all), 2 when the input or an option is
unusable (missing file, bad option).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from tqdm import tqdm

from seer_metrics.evaluators.base import EvaluationOutcome, Evaluator, OutcomeCallback
from seer_metrics.evaluators.caching import accepts_outcome_callback
from seer_metrics.events import InvalidEventError, RetrievalEvent
from seer_metrics.rows import event_metric_rows, invalid_row, judged_row, score_line_row
from seer_metrics.text.jsonl import numbered_lines, open_binary, parse_json_line
from seer_metrics.text.redaction import redact_url
from seer_metrics.totals import ScoreTotals
from seer_pipelines.cli import UsageError
from seer_pipelines.cli.judge_options import (
    DEFAULT_CACHE,
    add_evaluator_arguments,
    build_command_evaluator,
)

DEFAULT_BATCH_SIZE = 256
# Exit code when the file was read but no event in it could be scored.
EXIT_NOTHING_SCORED = 1
PROGRESS_MIN_LINES = 500  # shorter files finish before a bar would tell anything
PROBLEMS_SHOWN = 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = (
        f"Judgments are cached in {DEFAULT_CACHE} unless --cache or --no-cache says otherwise. "
        f"Exit codes: 0 when at least one event was scored, {EXIT_NOTHING_SCORED} when none "
        "was (every line invalid or failed), 2 for an unusable file or option."
    )
    parser.add_argument("events", metavar="EVENTS.jsonl", help="events file (.jsonl or .jsonl.gz)")
    add_evaluator_arguments(parser)
    parser.add_argument(
        "--out", metavar="SCORES.jsonl", help="write one JSON line of scores per input line"
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=DEFAULT_BATCH_SIZE,
        help=f"events judged per batch (default {DEFAULT_BATCH_SIZE})",
    )


@dataclass
class ScoreSummary:
    totals: ScoreTotals = field(default_factory=ScoreTotals)
    problems: list[str] = field(default_factory=list)  # the first few, for the console
    unsent_requests: int = 0  # connections that failed before a request went out

    def add(self, row: dict[str, Any]) -> None:
        self.totals.add(row)
        status = row["status"]
        if status != "ok" and len(self.problems) < PROBLEMS_SHOWN:
            who = f" (event {row['event_id']})" if row["event_id"] is not None else ""
            reason = str(row["reason"]).removeprefix(f"line {row['line']}: ")
            self.problems.append(f"line {row['line']}{who}: {status}: {reason}")

    def format(self) -> str:
        def show(value: float | None) -> str:
            return "n/a" if value is None else f"{value:.3f}"

        totals = self.totals
        means = "  ".join(f"{metric} {show(mean)}" for metric, mean in totals.means().items())
        lines = [
            f"events: {totals.events}  ok: {totals.evaluated}  invalid: {totals.invalid}  "
            f"errors: {totals.errors}",
            f"mean {means}",
            f"model calls: {totals.model_calls}  cache hits: {totals.cache_hits}  "
            f"tokens: {totals.tokens} "
            f"(prompt {totals.prompt_tokens}, completion {totals.completion_tokens})  "
            f"estimated cost: ${totals.cost_usd:.4f}",
        ]
        if self.unsent_requests:
            lines.append(
                f"connections that failed before sending (not model calls): {self.unsent_requests}"
            )
        return "\n".join(lines)


async def _judge(
    evaluator: Evaluator, events: list[RetrievalEvent], on_outcome: OutcomeCallback | None = None
) -> list[dict[str, Any]]:
    """Judge one batch into `seer_judgments` rows; an evaluator that raises turns the
    batch into error rows (and never stops the file). `on_outcome` is passed to an
    evaluator that reports each outcome as it completes."""
    try:
        if on_outcome is not None and accepts_outcome_callback(evaluator):
            outcomes = await evaluator.evaluate(events, on_outcome=on_outcome)  # type: ignore[call-arg]
        else:
            outcomes = await evaluator.evaluate(events)
        if len(outcomes) != len(events):
            raise RuntimeError(f"returned {len(outcomes)} outcomes for {len(events)} events")
    except Exception as error:
        reason = f"evaluator_failure: {type(error).__name__}: {error}"
        outcomes = [EvaluationOutcome(e.event_id, "error", reason=reason) for e in events]
    return [
        judged_row(event, outcome, evaluator)
        for event, outcome in zip(events, outcomes, strict=True)
    ]


def parse_line(line_number: int, text: str) -> RetrievalEvent | dict[str, Any]:
    """A valid event, or the `invalid` row that says why (naming the line)."""
    record, problem = parse_json_line(text)
    if problem is not None:
        return invalid_row(None, f"line {line_number}: {problem}")
    try:
        return RetrievalEvent.from_record(record)
    except InvalidEventError as error:
        return invalid_row(record, f"line {line_number}: {error.reason}")


async def score_file(
    path: Path,
    evaluator: Evaluator,
    *,
    out: TextIO | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: tqdm | None = None,
) -> ScoreSummary:
    """Score every line of `path`, writing rows to `out` in input order.

    Each line is written and flushed as soon as it and every line before it are scored
    (an evaluator that reports outcomes one by one lets this happen within a batch), so a
    run killed half-way leaves every line up to the first event still being judged.
    """
    summary = ScoreSummary()
    pending: list[RetrievalEvent | dict[str, Any]] = []
    pending_lines: list[int] = []

    def emit(judgment_rows: list[dict[str, Any]], lines: list[int]) -> None:
        summary.unsent_requests += sum(row.get("unsent_requests", 0) for row in judgment_rows)
        for line, metric_row in zip(lines, event_metric_rows(judgment_rows), strict=True):
            row = score_line_row(line, metric_row)
            summary.add(row)
            if out is not None:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
        if out is not None:
            out.flush()
        if progress is not None:
            progress.update(len(lines))

    async def flush() -> None:
        items, lines = list(pending), list(pending_lines)
        pending.clear()
        pending_lines.clear()
        rows: list[dict[str, Any] | None] = [
            None if isinstance(item, RetrievalEvent) else item for item in items
        ]
        at = [index for index, item in enumerate(items) if isinstance(item, RetrievalEvent)]
        written = 0

        def write_ready() -> None:
            nonlocal written
            end = written
            while end < len(rows) and rows[end] is not None:
                end += 1
            if end > written:
                emit(rows[written:end], lines[written:end])  # type: ignore[arg-type]
                written = end

        def scored(position: int, outcome: EvaluationOutcome) -> None:
            index = at[position]
            rows[index] = judged_row(items[index], outcome, evaluator)  # type: ignore[arg-type]
            write_ready()

        write_ready()  # the invalid lines before the first event
        to_judge = [items[index] for index in at]
        judged = await _judge(evaluator, to_judge, scored) if to_judge else []  # type: ignore[arg-type]
        for index, row in zip(at, judged, strict=True):
            if rows[index] is None:  # not reported one by one
                rows[index] = row
        write_ready()

    for line_number, text, error in numbered_lines(path):
        if error is not None:
            item = invalid_row(None, f"line {line_number}: {error}")
        else:
            item = parse_line(line_number, text)
        pending.append(item)
        pending_lines.append(line_number)
        if len(pending) >= batch_size:
            await flush()
    if pending:
        await flush()
    return summary


def _count_lines(path: Path) -> int:
    return sum(1 for _ in numbered_lines(path))


def check_input_file(path_text: str, what: str) -> Path:
    path = Path(path_text)
    if not path.is_file():
        raise UsageError(f"{what} {path_text!r}: no such file")
    try:
        with open_binary(path) as handle:
            handle.read(1)
    except OSError as error:
        raise UsageError(f"{what} {path_text!r}: cannot be read ({error})") from None
    return path


def run(args: argparse.Namespace) -> int:
    path = check_input_file(args.events, "EVENTS.jsonl")
    if args.batch_size < 1:
        raise UsageError(f"--batch-size must be at least 1, got {args.batch_size}")
    evaluator = build_command_evaluator(args)
    out: TextIO | None = None
    if args.out:
        try:
            out = Path(args.out).open("w", encoding="utf-8")  # noqa: SIM115 (closed below)
        except OSError as error:
            raise UsageError(f"--out {args.out}: cannot write ({error.strerror})") from None
    total = _count_lines(path)
    progress = tqdm(
        total=total,
        unit="event",
        desc="scoring",
        file=sys.stderr,
        disable=total < PROGRESS_MIN_LINES,
    )
    try:
        summary = asyncio.run(
            score_file(path, evaluator, out=out, batch_size=args.batch_size, progress=progress)
        )
    finally:
        progress.close()
        if out is not None:
            out.close()
    for problem in summary.problems:
        print(problem, file=sys.stderr)
    hidden = summary.totals.invalid + summary.totals.errors - len(summary.problems)
    if hidden > 0:
        where = f" (all are in {args.out})" if args.out else " (use --out to see all)"
        print(f"... and {hidden} more invalid or failed lines{where}", file=sys.stderr)
    print(f"{path}: evaluator {evaluator.name} (model {evaluator.model})")
    print(summary.format())
    if args.cache:
        where = redact_url(args.cache) if "://" in args.cache else args.cache
        print(f"judgments cached in {where} (--no-cache to judge again)")
    if args.out:
        print(f"scores written to {args.out}")
    totals = summary.totals
    if totals.evaluated == 0:
        what = (
            "the file has no events"
            if totals.events == 0
            else f"none of its {totals.events} lines could be scored (see the lines above)"
        )
        print(f"error: {path}: {what}", file=sys.stderr)
        return EXIT_NOTHING_SCORED
    return 0
