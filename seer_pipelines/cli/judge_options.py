"""The judge's options, shared by `seer evaluate` and `seer calibrate`: which evaluator and
model, the judgment cache, and the LLM judge's pacing, completion cap and timeout (flags
that win over `SEER_LLM_*`).
"""

from __future__ import annotations

import argparse
from typing import Any

from seer_metrics.evaluators import build_evaluator
from seer_metrics.evaluators.base import Evaluator
from seer_metrics.evaluators.caching import CachingEvaluator
from seer_metrics.judgment_store import JudgmentStore
from seer_metrics.text.redaction import redact_url
from seer_pipelines.cli import UsageError
from seer_pipelines.settings import environment, setting
from seer_pipelines.warehouse.engine import create_warehouse_engine

DEFAULT_CACHE = ".seer/judgments.sqlite"


def _per_minute(text: str) -> float | None:
    """A per-minute limit: a positive number, or `none` for no client-side pacing."""
    if text.strip().lower() == "none":
        return None
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(
            f"must be a positive number or 'none' (no pacing), got {text!r}"
        )
    return value


def _concurrency(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {text!r}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


# Flag -> the LLM setting it sets (over SEER_LLM_REQUESTS_PER_MINUTE,
# SEER_LLM_TOKENS_PER_MINUTE, SEER_LLM_MAX_CONCURRENCY, SEER_LLM_MAX_TOKENS and
# SEER_LLM_TIMEOUT_SECONDS).
PACING_FLAGS = {
    "--rpm": "requests_per_minute",
    "--tpm": "tokens_per_minute",
    "--concurrency": "max_concurrency",
    "--max-tokens": "max_completion_tokens",
    "--timeout": "timeout_seconds",
}


def add_evaluator_arguments(parser: argparse.ArgumentParser) -> None:
    """`--evaluator`, `--model`, the cache and the LLM judge's pacing: shared with
    `seer calibrate`."""
    parser.add_argument(
        "--evaluator",
        default=setting("SEER_EVALUATOR") or "lexical",
        help="lexical (offline heuristic, the default) or openai (env SEER_EVALUATOR)",
    )
    parser.add_argument(
        "--model",
        default=setting("SEER_EVALUATOR_MODEL"),
        help="evaluator model (env SEER_EVALUATOR_MODEL)",
    )
    cache = parser.add_mutually_exclusive_group()
    cache.add_argument(
        "--cache",
        metavar="PATH",
        default=DEFAULT_CACHE,
        help="SQLite file (or SQLAlchemy URL) of stored judgments, so a repeat makes no "
        f"model call (default {DEFAULT_CACHE})",
    )
    cache.add_argument(
        "--no-cache",
        dest="cache",
        action="store_const",
        const=None,
        help="judge every event again and store nothing",
    )
    pacing = parser.add_argument_group(
        "pacing, cap and timeout of the openai evaluator (default: environment)"
    )
    pacing.add_argument(
        "--rpm",
        type=_per_minute,
        default=argparse.SUPPRESS,
        metavar="N",
        help="requests per minute the endpoint allows, or 'none' for no pacing "
        "(env SEER_LLM_REQUESTS_PER_MINUTE, default 500)",
    )
    pacing.add_argument(
        "--tpm",
        type=_per_minute,
        default=argparse.SUPPRESS,
        metavar="N",
        help="tokens per minute the endpoint allows, or 'none' "
        "(env SEER_LLM_TOKENS_PER_MINUTE, default 200000)",
    )
    pacing.add_argument(
        "--concurrency",
        type=_concurrency,
        default=argparse.SUPPRESS,
        metavar="N",
        help="requests in flight at once (env SEER_LLM_MAX_CONCURRENCY, default 16)",
    )
    pacing.add_argument(
        "--max-tokens",
        type=_concurrency,
        default=argparse.SUPPRESS,
        metavar="N",
        help="completion cap of one reply; on a slow endpoint it must fit the timeout "
        "(env SEER_LLM_MAX_TOKENS, default 1500)",
    )
    pacing.add_argument(
        "--timeout",
        type=_seconds,
        default=argparse.SUPPRESS,
        metavar="S",
        help="seconds one call may take, its whole reply included "
        "(env SEER_LLM_TIMEOUT_SECONDS, default 60)",
    )


def _pacing_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The LLM settings given as flags; they win over the environment."""
    given = {flag: name for flag, name in PACING_FLAGS.items() if hasattr(args, _dest(flag))}
    if given and args.evaluator.strip().lower() != "openai":
        raise UsageError(
            f"{', '.join(given)}: applies to --evaluator openai only "
            f"(this run uses --evaluator {args.evaluator})"
        )
    return {name: getattr(args, _dest(flag)) for flag, name in given.items()}


def _dest(flag: str) -> str:
    return flag[2:].replace("-", "_")


def build_command_evaluator(args: argparse.Namespace) -> Evaluator:
    """The evaluator named on the command line, wrapped in the judgment cache if asked."""
    pacing = _pacing_settings(args)
    store = None
    if args.cache:
        try:
            store = JudgmentStore(create_warehouse_engine(args.cache, setting="--cache"))
        except Exception as error:
            where = redact_url(args.cache) if "://" in args.cache else args.cache
            detail = str(error).replace(args.cache, where)
            raise UsageError(
                f"--cache {where}: cannot open the judgment store ({detail})"
            ) from None
    try:
        # The store also keeps the LLM judge's requirement lists, so K is stable across runs.
        evaluator = build_evaluator(
            args.evaluator, model=args.model, store=store, environ=environment(), **pacing
        )
    except ValueError as error:
        raise UsageError(f"--evaluator {args.evaluator}: {error}") from None
    if store is None:
        return evaluator
    return CachingEvaluator(evaluator, store)
