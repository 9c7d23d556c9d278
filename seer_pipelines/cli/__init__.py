"""The `seer` command line: argument parsing here, each command in a module of this package
(`add_arguments(parser)` and `run(args) -> int`)."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence


class UsageError(Exception):
    """Unusable input or option: `seer` prints `error: ...` and exits with code 2."""


# command name -> module with `add_arguments(parser)` and `run(args) -> int`
COMMANDS = {
    "evaluate": ("seer_pipelines.cli.evaluate", "score a JSONL file of retrieval events"),
    "calibrate": (
        "seer_pipelines.cli.calibrate",
        "measure an evaluator's agreement with gold labels",
    ),
    "demo": ("seer_pipelines.cli.demo", "run the whole pipeline on synthetic events"),
    "seed": ("seer_pipelines.cli.seed", "write synthetic events into a warehouse table"),
    "estimate": (
        "seer_pipelines.cli.estimate",
        "predict the LLM judge's calls, tokens and cost for a file of events",
    ),
}


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The parser, with only the chosen command's module imported.

    `seer evaluate` should not pay for importing Dagster, which `seer demo` needs.
    """
    parser = argparse.ArgumentParser(
        prog="seer", description="Label-free retrieval quality monitoring for RAG systems."
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    chosen = next((argument for argument in argv if not argument.startswith("-")), None)
    for name, (module_name, help_text) in COMMANDS.items():
        command_parser = subparsers.add_parser(name, help=help_text, description=help_text)
        if name == chosen:
            module = importlib.import_module(module_name)
            module.add_arguments(command_parser)
            command_parser.set_defaults(run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(arguments).parse_args(arguments)
    try:
        return int(args.run(args) or 0)
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
