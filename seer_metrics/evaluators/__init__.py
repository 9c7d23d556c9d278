"""Evaluators and the one factory that turns a configured kind into an instance.

Commands, Dagster resources and benchmarks all build evaluators through
`build_evaluator`, so adding a kind means adding one branch here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from seer_metrics.evaluators.base import EvaluationOutcome, Evaluator, TokenUsage

if TYPE_CHECKING:
    from seer_metrics.judgment_store import JudgmentStore

# Kinds `build_evaluator` understands, in the order shown to users.
EVALUATOR_KINDS: tuple[str, ...] = ("lexical", "openai")


def build_evaluator(
    kind: str,
    *,
    model: str | None = None,
    store: JudgmentStore | None = None,
    environ: Mapping[str, str] | None = None,
    **settings: Any,
) -> Evaluator:
    """Build the evaluator named by `kind`; `model` overrides its default model.

    `store` keeps the LLM judge's phase-1 requirement lists (so K is stable across runs);
    wrap the result in `caching.CachingEvaluator` to re-use whole judgments. `environ` is where
    the LLM judge reads its `OPENAI_*` and `SEER_LLM_*` settings (the caller's environment;
    the library never reads the process's own). Raises `ValueError` naming the kind or setting
    at fault.
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
    if normalised == "openai":
        from seer_metrics.evaluators.llm import LLMEvaluator, LLMSettings

        llm_settings = LLMSettings.from_env(environ, model=model, **settings)
        return LLMEvaluator(llm_settings, requirement_store=store)
    raise ValueError(f"unknown evaluator {kind!r}: choose one of {', '.join(EVALUATOR_KINDS)}")


__all__ = ["EVALUATOR_KINDS", "EvaluationOutcome", "Evaluator", "TokenUsage", "build_evaluator"]
