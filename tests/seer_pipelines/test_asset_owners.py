"""Owners and tags from $SEER_ASSET_OWNERS and $SEER_ASSET_TAGS reach every asset."""

from __future__ import annotations

import pytest
from dagster import AssetSpec

from seer_pipelines.definitions import build_definitions, with_owners_and_tags
from seer_pipelines.settings import load_settings

ASSETS = {
    "retrieval_events",
    "event_judgments",
    "event_metrics",
    "passage_judgments",
    "slice_metrics",
}


def owners_and_tags(**environment: str) -> dict[str, dict]:
    """Each asset's owners and tags in the code location built from `environment`."""
    graph = build_definitions(load_settings(environment)).resolve_asset_graph()
    return {
        key.to_user_string(): {"owners": list(graph.get(key).owners), "tags": graph.get(key).tags}
        for key in graph.get_all_asset_keys()
    }


def test_parsing_owners_and_tags() -> None:
    settings = load_settings(
        {
            "SEER_ASSET_OWNERS": " team:rag-quality, alice@example.com,,alice@example.com ",
            "SEER_ASSET_TAGS": "domain=search, tier = 1 ,pii,",
        }
    )
    assert settings.asset_owners == ("team:rag-quality", "alice@example.com")
    assert settings.asset_tags == {"domain": "search", "tier": "1", "pii": ""}
    assert load_settings({}).asset_owners == ()
    assert load_settings({"SEER_ASSET_TAGS": ""}).asset_tags == {}


def test_every_asset_gets_the_configured_owners_and_tags() -> None:
    assets = owners_and_tags(
        SEER_ASSET_OWNERS="team:rag-quality,alice@example.com", SEER_ASSET_TAGS="domain=search,pii"
    )
    assert set(assets) >= ASSETS
    for name in ASSETS:
        assert assets[name]["owners"] == ["team:rag-quality", "alice@example.com"], name
        assert assets[name]["tags"]["domain"] == "search", name
        assert assets[name]["tags"]["pii"] == "", name
        # The kinds Dagster keeps as tags survive.
        assert any(tag.startswith("dagster/kind/") for tag in assets[name]["tags"]), name


def test_without_configuration_no_owner_is_invented() -> None:
    assets = owners_and_tags()
    assert all(not assets[name]["owners"] for name in ASSETS)


def test_a_bad_owner_fails_the_load_naming_the_variable() -> None:
    with pytest.raises(ValueError, match="SEER_ASSET_OWNERS"):
        with_owners_and_tags([AssetSpec("x")], ["bob"], {})
    with pytest.raises(ValueError, match="SEER_ASSET_OWNERS"):
        owners_and_tags(SEER_ASSET_OWNERS="bob")
