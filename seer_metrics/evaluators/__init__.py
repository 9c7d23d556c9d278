"""Evaluators and the one factory that turns a configured kind into an instance.

Commands, Dagster resources and benchmarks all build evaluators through
`build_evaluator`, so adding a kind means adding one branch here.
"""

from __future__ import annotations

from typing import Any

from seer_metrics.evaluators.base import EvaluationOutcome, Evaluator, TokenUsage

# Kinds `build_evaluator` understands, in the order shown to users.
EVALUATOR_KINDS: tuple[str, ...] = ("lexical",)


def build_evaluator(kind: str, *, model: str | None = None, **settings: Any) -> Evaluator:
    """Build the evaluator named by `kind`; `model` overrides its default model.

    Raises `ValueError` naming the kind or setting at fault.
    """
    normalised = kind.strip().lower() if isinstance(kind, str) else kind
    if normalised == "lexical":
        from seer_metrics.evaluators.lexical import LexicalEvaluator

        if model:
            settings["model"] = model
        try:
            return LexicalEvaluator(**settings)
        except TypeError as error:
            raise ValueError(f"evaluator 'lexical': bad setting ({error})") from None
    raise ValueError(f"unknown evaluator {kind!r}: choose one of {', '.join(EVALUATOR_KINDS)}")


__all__ = ["EVALUATOR_KINDS", "EvaluationOutcome", "Evaluator", "TokenUsage", "build_evaluator"]
