"""Owners and tags from $SEER_ASSET_OWNERS and $SEER_ASSET_TAGS reach every asset."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from dagster import AssetSpec

from seer_pipelines.definitions import configured_owners, configured_tags, with_owners_and_tags
from tests.fresh_process import run_python

ASSETS = {
    "retrieval_events",
    "event_judgments",
    "event_metrics",
    "passage_judgments",
    "slice_metrics",
}

SHOW_ASSETS = """
import json
from seer_pipelines.definitions import defs
graph = defs.resolve_asset_graph()
print(json.dumps({
    key.to_user_string(): {"owners": list(graph.get(key).owners), "tags": dict(graph.get(key).tags)}
    for key in graph.get_all_asset_keys()
}))
"""


def load_code_location(**environment: str) -> subprocess.CompletedProcess:
    return run_python(SHOW_ASSETS, {**os.environ, **environment})


def test_parsing_owners_and_tags() -> None:
    assert configured_owners(" team:rag-quality, alice@example.com,,alice@example.com ") == [
        "team:rag-quality",
        "alice@example.com",
    ]
    assert configured_owners(None) == []
    assert configured_tags("domain=search, tier = 1 ,pii,") == {
        "domain": "search",
        "tier": "1",
        "pii": "",
    }
    assert configured_tags("") == {}


def test_every_asset_gets_the_configured_owners_and_tags() -> None:
    completed = load_code_location(
        SEER_ASSET_OWNERS="team:rag-quality,alice@example.com", SEER_ASSET_TAGS="domain=search,pii"
    )
    assert completed.returncode == 0, completed.stderr
    assets = json.loads(completed.stdout.strip().splitlines()[-1])
    assert set(assets) >= ASSETS
    for name in ASSETS:
        assert assets[name]["owners"] == ["team:rag-quality", "alice@example.com"], name
        assert assets[name]["tags"]["domain"] == "search", name
        assert assets[name]["tags"]["pii"] == "", name
        # The kinds Dagster keeps as tags survive.
        assert any(tag.startswith("dagster/kind/") for tag in assets[name]["tags"]), name


def test_without_configuration_no_owner_is_invented() -> None:
    environment = {
        key: value for key, value in os.environ.items() if not key.startswith("SEER_ASSET_")
    }
    completed = run_python(SHOW_ASSETS, environment)
    assert completed.returncode == 0, completed.stderr
    assets = json.loads(completed.stdout.strip().splitlines()[-1])
    assert all(not assets[name]["owners"] for name in ASSETS)


def test_a_bad_owner_fails_the_load_naming_the_variable() -> None:
    with pytest.raises(ValueError, match="SEER_ASSET_OWNERS"):
        with_owners_and_tags([AssetSpec("x")], ["bob"], {})
    completed = load_code_location(SEER_ASSET_OWNERS="bob")
    assert completed.returncode != 0
    assert "SEER_ASSET_OWNERS" in completed.stderr
