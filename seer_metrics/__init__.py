"""Seer's metric core: pure Python, no Dagster."""

from seer_metrics.events import ContextItem, InvalidEventError, RetrievalEvent
from seer_metrics.judgment import InvalidJudgmentError, Judgment, Requirement
from seer_metrics.scoring import EventScore, score_event, score_events

__all__ = [
    "ContextItem",
    "EventScore",
    "InvalidEventError",
    "InvalidJudgmentError",
    "Judgment",
    "Requirement",
    "RetrievalEvent",
    "score_event",
    "score_events",
]
