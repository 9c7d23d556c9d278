"""docs/pipelines.md says where each thing is in the Dagster 1.13 UI, with 1.13's names."""

from __future__ import annotations

from pathlib import Path

from seer_pipelines.definitions import defs

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SECTION = "## Where things are in the Dagster 1.13 UI"


def ui_section() -> str:
    text = (ROOT / "docs" / "pipelines.md").read_text()
    assert SECTION in text
    return text.split(SECTION, 1)[1].split("\n## ", 1)[0]


def test_the_section_names_the_places_of_the_1_13_ui() -> None:
    section = ui_section()
    for place in (
        "*Catalog",
        "Overview → Metadata",
        "*Plots*",
        "→ Checks*",
        "→ Partitions*",
        "*Runs → Backfills*",
        "*Automation*",
        "*Deployment*",
        "*Columns*",
    ):
        assert place in section, place


def test_every_schedule_and_sensor_is_placed_in_the_ui() -> None:
    repository = defs.get_repository_def()
    section = ui_section()
    for name in [
        *(s.name for s in repository.schedule_defs),
        *(s.name for s in repository.sensor_defs),
    ]:
        assert f"`{name}`" in section, f"{name} is not in the UI section"


def test_no_document_uses_ui_names_dagster_1_13_does_not_have() -> None:
    """Dagster 1.13 calls the asset list *Catalog* and shows backfills under *Runs*."""
    for document in DOCUMENTS:
        text = document.read_text()
        for old in ("*Assets →", "Overview → Backfills", "*Assets*"):
            assert old not in text, f"{document.name} says {old!r}"
