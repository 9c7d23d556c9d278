"""`seer calibrate LABELED.jsonl`: check a judge against gold labels before trusting it.

Each labeled example (question, candidate passages, gold supporting ids) becomes an event
whose context is the top `--context-size` passages of a BM25 ranking that never sees
gold; the evaluator judges it as production traffic, and the report says how often its
citations and its "recall < 1" flag agree with gold (see `seer_metrics.agreement`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from tqdm import tqdm

from seer_metrics.agreement import (
    DEFAULT_CONTEXT_SIZE,
    format_report,
    load_examples,
    measure_agreement,
    write_events_jsonl,
)
from seer_pipelines.cli import UsageError
from seer_pipelines.cli.evaluate import check_input_file
from seer_pipelines.cli.judge_options import add_evaluator_arguments, build_command_evaluator

PROGRESS_MIN_EXAMPLES = 200


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "labeled", metavar="LABELED.jsonl", help="labeled examples (.jsonl or .jsonl.gz)"
    )
    add_evaluator_arguments(parser)
    parser.add_argument(
        "--context-size",
        type=int,
        default=DEFAULT_CONTEXT_SIZE,
        help=f"passages kept from the lexical ranking (default {DEFAULT_CONTEXT_SIZE})",
    )
    parser.add_argument("--limit", type=int, help="use only the first N examples")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--events-out",
        metavar="EVENTS.jsonl",
        help="also write the examples as retrieval events (the input of `seer evaluate`)",
    )


def run(args: argparse.Namespace) -> int:
    path = check_input_file(args.labeled, "LABELED.jsonl")
    if args.context_size < 1:
        raise UsageError(f"--context-size must be at least 1, got {args.context_size}")
    if args.limit is not None and args.limit < 1:
        raise UsageError(f"--limit must be at least 1, got {args.limit}")
    evaluator = build_command_evaluator(args)
    loaded = load_examples(path, limit=args.limit)
    for problem in loaded.problems:
        print(f"{path}: {problem} (skipped)", file=sys.stderr)
    if not loaded.examples:
        raise UsageError(f"LABELED.jsonl {args.labeled!r}: no usable labeled example")
    if args.events_out:
        try:
            written = write_events_jsonl(
                loaded.examples, args.events_out, context_size=args.context_size
            )
        except OSError as error:
            raise UsageError(f"--events-out {args.events_out!r}: {error.strerror}") from None
        print(f"wrote {written} events to {args.events_out}", file=sys.stderr)
    progress = tqdm(
        total=len(loaded.examples),
        unit="example",
        desc="judging",
        file=sys.stderr,
        disable=len(loaded.examples) < PROGRESS_MIN_EXAMPLES,
    )
    try:
        report = asyncio.run(
            measure_agreement(
                loaded.examples,
                evaluator,
                context_size=args.context_size,
                on_batch=progress.update,
            )
        )
    finally:
        progress.close()
    if args.json:
        summary = report.as_dict()
        summary.update(
            file=str(path),
            evaluator=evaluator.name,
            model=evaluator.model,
            context_size=args.context_size,
            skipped_lines=len(loaded.problems),
        )
        print(json.dumps(summary, indent=2))
    else:
        title = (
            f"{path}: evaluator {evaluator.name} (model {evaluator.model}), "
            f"top {args.context_size} of a BM25 ranking"
        )
        print(format_report(report, title=title))
        if loaded.problems:
            print(f"skipped lines: {len(loaded.problems)}")
    return 0
