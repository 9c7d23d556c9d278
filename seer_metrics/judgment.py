"""Judgments: the evaluator's requirement list and which passages support each one.

Citations of ids the context does not contain are never trusted: they are dropped and
counted as `hallucinated_citations`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


class InvalidJudgmentError(ValueError):
    """A judgment whose shape does not match the contract."""


@dataclass(frozen=True)
class Requirement:
    id: str
    text: str
    supported_by: tuple[str, ...] = ()

    @property
    def supported(self) -> bool:
        return bool(self.supported_by)


@dataclass(frozen=True)
class Judgment:
    requirements: tuple[Requirement, ...]
    hallucinated_citations: int = 0
    unverified_citations: int = 0
    # How the LLM judge's reply was constrained (`json_schema`, `json_object` or
    # `instructions`, see `evaluators.llm.structured_output`); None for other judges.
    output_mode: str | None = None

    @property
    def k(self) -> int:
        return len(self.requirements)

    @property
    def cited_ids(self) -> frozenset[str]:
        return frozenset(pid for req in self.requirements for pid in req.supported_by)

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], context_ids: Iterable[str] | None = None
    ) -> Judgment:
        """Parse `{"requirements": [{"id", "text", "supported_by"}]}`.

        With `context_ids`, citations of unknown passages are dropped and counted.
        """
        if not isinstance(data, Mapping):
            raise InvalidJudgmentError("judgment must be an object with 'requirements'")
        raw_requirements = data.get("requirements")
        if not isinstance(raw_requirements, list):
            raise InvalidJudgmentError("'requirements' must be a list")
        requirements = []
        seen_ids: set[str] = set()
        for index, raw in enumerate(raw_requirements, start=1):
            if not isinstance(raw, Mapping):
                raise InvalidJudgmentError(f"requirement {index} must be an object")
            req_id = str(raw.get("id") or f"r{index}")
            if req_id in seen_ids:
                raise InvalidJudgmentError(f"requirement id {req_id!r} appears twice")
            seen_ids.add(req_id)
            text = raw.get("text", "")
            if not isinstance(text, str):
                raise InvalidJudgmentError(f"requirement {req_id}: 'text' must be a string")
            support = raw.get("supported_by", [])
            if not isinstance(support, list) or not all(
                isinstance(pid, str | int) and not isinstance(pid, bool) for pid in support
            ):
                raise InvalidJudgmentError(
                    f"requirement {req_id}: 'supported_by' must be a list of ids"
                )
            ordered = tuple(dict.fromkeys(str(pid) for pid in support))
            requirements.append(Requirement(req_id, text, ordered))
        output_mode = data.get("output_mode")
        judgment = cls(
            tuple(requirements),
            hallucinated_citations=int(data.get("hallucinated_citations", 0) or 0),
            unverified_citations=int(data.get("unverified_citations", 0) or 0),
            output_mode=output_mode if isinstance(output_mode, str) else None,
        )
        if context_ids is not None:
            judgment = judgment.restricted_to(context_ids)
        return judgment

    def restricted_to(self, context_ids: Iterable[str]) -> Judgment:
        """Drop citations of ids outside the context, counting them as hallucinated."""
        known = set(context_ids)
        if type(self.hallucinated_citations) is int and all(
            type(req.supported_by) is tuple and known.issuperset(req.supported_by)
            for req in self.requirements
        ):
            return self  # nothing to drop (the usual case): the same, immutable judgment
        dropped = 0
        requirements = []
        for req in self.requirements:
            kept = tuple(pid for pid in req.supported_by if pid in known)
            dropped += len(req.supported_by) - len(kept)
            requirements.append(Requirement(req.id, req.text, kept))
        return Judgment(
            tuple(requirements),
            hallucinated_citations=self.hallucinated_citations + dropped,
            unverified_citations=self.unverified_citations,
            output_mode=self.output_mode,
        )

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "requirements": [
                {"id": r.id, "text": r.text, "supported_by": list(r.supported_by)}
                for r in self.requirements
            ],
            "hallucinated_citations": self.hallucinated_citations,
            "unverified_citations": self.unverified_citations,
        }
        if self.output_mode is not None:
            data["output_mode"] = self.output_mode
        return data


# The parts of a stored judgment that the row builders read: requirement ids, texts and
# supporting passage ids (in requirement order), hallucinated and unverified citations.
JudgmentParts = tuple[list[str], list[str], list[list[str]], int, int]


def judgment_parts(data: Any) -> JudgmentParts:
    """What `Judgment.from_dict(data)` holds, read without building its objects (the
    metric and passage rows of a day read one judgment per event).

    A judgment as `to_dict` stores it (dicts, lists and strings, every key present) is
    read directly; anything else goes through `from_dict`, so the values and errors are
    the same. A requirement's supporting ids may repeat on the direct path (`from_dict`
    drops repeats).
    """
    raw_requirements = data.get("requirements") if type(data) is dict else None
    if type(raw_requirements) is not list:
        return _parts_of(Judgment.from_dict(data))
    ids: list[str] = []
    texts: list[str] = []
    supports: list[list[str]] = []
    for raw in raw_requirements:
        if type(raw) is not dict or "id" not in raw or "text" not in raw:
            return _parts_of(Judgment.from_dict(data))
        req_id = raw["id"]
        text = raw["text"]
        support = raw.get("supported_by")
        if type(req_id) is not str or not req_id or type(text) is not str:
            return _parts_of(Judgment.from_dict(data))
        if type(support) is not list:
            return _parts_of(Judgment.from_dict(data))
        for passage_id in support:
            if type(passage_id) is not str:
                return _parts_of(Judgment.from_dict(data))
        ids.append(req_id)
        texts.append(text)
        supports.append(support)
    if len(ids) > 1 and len(set(ids)) != len(ids):
        return _parts_of(Judgment.from_dict(data))  # raises: an id appears twice
    hallucinated = data.get("hallucinated_citations", 0)
    unverified = data.get("unverified_citations", 0)
    return (
        ids,
        texts,
        supports,
        hallucinated if type(hallucinated) is int else int(hallucinated or 0),
        unverified if type(unverified) is int else int(unverified or 0),
    )


def _parts_of(judgment: Judgment) -> JudgmentParts:
    requirements = judgment.requirements
    return (
        [req.id for req in requirements],
        [req.text for req in requirements],
        [list(req.supported_by) for req in requirements],
        judgment.hallucinated_citations,
        judgment.unverified_citations,
    )
