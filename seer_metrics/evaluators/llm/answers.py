"""The replies the LLM judge accepts, as pydantic models: one definition for validating a
reply and for the JSON schema sent with the request (`strict_json_schema`).

OpenAI's strict structured outputs accept a subset of JSON Schema: every object lists all
its properties as required and forbids any other (`additionalProperties: false`).
`strict_json_schema` turns a model's schema into that form, with references inlined and
pydantic's titles dropped, so what the model is told and what is checked cannot drift.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class _StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class RequirementItem(_StrictModel):
    id: str
    text: str


class RequirementsAnswer(_StrictModel):
    """Phase-1 reply (`seer_requirements`)."""

    requirements: list[RequirementItem]


class Evidence(_StrictModel):
    passage: str
    quote: str


class SupportItem(_StrictModel):
    id: str
    supported_by: list[str]
    evidence: list[Evidence]


class SupportAnswer(_StrictModel):
    """Phase-2 reply (`seer_support`)."""

    requirements: list[SupportItem]


_DROPPED_KEYS = frozenset({"title", "description", "$defs"})


def strict_json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of `model` in the form strict structured outputs require."""
    schema = model.model_json_schema()
    definitions = schema.get("$defs", {})

    def convert(node: Any) -> Any:
        if isinstance(node, list):
            return [convert(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            return convert(definitions[node["$ref"].rsplit("/", 1)[-1]])
        kept = sorted(node, key=lambda key: key != "type")  # "type" first, as people write it
        converted = {key: convert(node[key]) for key in kept if key not in _DROPPED_KEYS}
        if converted.get("type") == "object":
            converted.pop("required", None)
            converted.pop("additionalProperties", None)
            converted["required"] = list(converted.get("properties", {}))
            converted["additionalProperties"] = False
        return converted

    return convert(schema)
