"""How well an evaluator's label-free scores agree with gold retrieval labels.

Each labeled example becomes an event whose context is the top passages of a BM25
ranking (which never sees gold); the evaluator judges it, and we print citation
precision/recall against gold, the share of events whose "recall < 1" flag matches "a gold
passage is missing from the context", each next to a baseline that needs no evaluator,
and the judging speed.

    .venv/bin/python benchmarks/judge_agreement.py                      # bundled dev samples
    .venv/bin/python benchmarks/judge_agreement.py --file data.jsonl.gz  # any labeled file

The lexical heuristic is tuned on the bundled dev samples only; held-out files are for
reporting (docs/agreement.md), never for tuning.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

from seer_metrics.agreement import (
    DEFAULT_CONTEXT_SIZE,
    format_report,
    load_examples,
    measure_agreement,
)
from seer_metrics.evaluators import build_evaluator
from seer_pipelines.demo import DATA_DIR

BUNDLED = sorted(DATA_DIR.glob("*.jsonl"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--file",
        action="append",
        type=Path,
        help="labeled .jsonl or .jsonl.gz (repeatable; default: the bundled dev samples)",
    )
    parser.add_argument("--evaluator", default="lexical", help="lexical or openai")
    parser.add_argument("--model", help="evaluator model")
    parser.add_argument("--context-size", type=int, default=DEFAULT_CONTEXT_SIZE)
    parser.add_argument("--limit", type=int, help="first N examples of each file")
    args = parser.parse_args(argv)
    files = args.file or BUNDLED
    if not files:
        print("no labeled file given and no bundled sample found", file=sys.stderr)
        return 2
    try:
        evaluator = build_evaluator(args.evaluator, model=args.model, environ=os.environ)
    except ValueError as error:
        print(f"error: --evaluator {args.evaluator}: {error}", file=sys.stderr)
        return 2
    for path in files:
        if not path.is_file():
            print(f"error: --file {path}: no such file", file=sys.stderr)
            return 2
        loaded = load_examples(path, limit=args.limit)
        for problem in loaded.problems:
            print(f"{path}: {problem} (skipped)", file=sys.stderr)
        started = time.perf_counter()
        report = asyncio.run(
            measure_agreement(loaded.examples, evaluator, context_size=args.context_size)
        )
        elapsed = time.perf_counter() - started
        title = (
            f"== {path.name}: evaluator {evaluator.name} (model {evaluator.model}), "
            f"top {args.context_size} of a BM25 ranking"
        )
        print(format_report(report, title=title))
        rate = report.examples / elapsed if elapsed > 0 else float("inf")
        print(f"speed: {rate:.0f} examples/s (ranking + judging + scoring)\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
