"""The README's library example runs and says what it claims."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_library_example_reproduces_the_worked_example():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert blocks, "README has no python example"
    namespace: dict = {}
    exec(blocks[0], namespace)
    score = namespace["score_event"](namespace["event"], namespace["judgment"])
    assert (score.recall, round(score.precision, 3), score.k, score.n) == (1.0, 0.667, 2, 3)
    assert score.f1 == pytest.approx(0.8)
    assert score.ndcg == pytest.approx(1.0)


def test_readme_and_docs_explain_themselves_without_an_outside_document():
    """A user of the repository has no product specification: nothing may point to one."""
    pages = [README, *sorted((README.parent / "docs").glob("*.md"))]
    for page in pages:
        text = page.read_text()
        assert not re.search(r"\bSPEC\b", text), f"{page.name} refers to the SPEC"


def _readme_section(heading: str) -> str:
    return README.read_text().split(heading, 1)[1].split("\n## ", 1)[0]


def test_the_configuration_table_lists_every_setting_and_nothing_else():
    from seer_pipelines.settings import VARIABLES

    table = [line for line in _readme_section("## Configuration").splitlines() if line[:3] == "| `"]
    listed = {
        name for line in table for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", line.split("|")[1])
    }
    instance = set(
        re.findall(r"env: (DAGSTER_PG_\w+)", (README.parent / "dagster.yaml").read_text())
    )
    assert listed == set(VARIABLES) | instance


def test_the_architecture_section_names_every_module_of_the_packages():
    block = re.findall(r"```\n(.*?)```", _readme_section("## Architecture"), flags=re.DOTALL)[0]
    sections = re.split(r"^(seer_metrics/|seer_pipelines/)", block, flags=re.M)
    for package, text in zip(sections[1::2], sections[2::2], strict=True):
        text = text.split("\nseer_", 1)[0]
        named = set(re.findall(r"\b([a-z_]+\.py|[a-z_]+/)", text))
        on_disk = {
            path.name + ("/" if path.is_dir() else "")
            for path in (README.parent / package).iterdir()
            if (path.suffix == ".py" and path.name != "__init__.py")
            or (path.is_dir() and (path / "__init__.py").exists())
        }
        assert named == on_disk, f"{package}: missing {on_disk - named}, stale {named - on_disk}"


REPOSITORY_PATH = re.compile(
    r"\b((?:seer_metrics|seer_pipelines|seer_testing|tests|benchmarks|deploy)/[\w./-]*[\w/])"
)
DOTTED_NAME = re.compile(r"`((?:seer_metrics|seer_pipelines)(?:\.\w+)+)")


def test_every_path_and_module_the_docs_name_exists():
    """The layout moves left no stale path or dotted name in the README or docs/."""
    import importlib

    root = README.parent
    stale = []
    for page in [README, *sorted((root / "docs").glob("*.md"))]:
        for number, line in enumerate(page.read_text().splitlines(), start=1):
            for path in REPOSITORY_PATH.findall(line):
                if not (root / path).exists():
                    stale.append(f"{page.name}:{number}: {path}")
            for dotted in DOTTED_NAME.findall(line):
                module, _, name = dotted.rpartition(".")
                try:
                    found = hasattr(importlib.import_module(module), name)
                except ImportError:
                    found = False
                if not found:
                    try:
                        importlib.import_module(dotted)
                    except ImportError:
                        stale.append(f"{page.name}:{number}: {dotted}")
    assert not stale, "\n".join(stale)


def _threshold_as_written(threshold: float) -> set[str]:
    """The ways the README's rule table writes a threshold: a number, a share in percent
    or points, a count of passages, half."""
    percent = f"{threshold * 100:g}"
    written = {f"{threshold:.2f}", f"{percent}%", f"{percent} points", f"{threshold:g} passage"}
    if threshold == 0.5:
        written.add("half")
    return written


def test_the_rule_table_is_the_packaged_default_rules():
    """A user reads the README's rule table as the defaults: every packaged rule, its
    severity and its threshold, and nothing else."""
    from seer_metrics.rules import default_rules

    rules = default_rules().rules
    section = _readme_section("## Alert rules on a real retriever")
    rows = [line.split("|")[1:3] for line in section.splitlines() if line.startswith("| `")]
    documented = {
        re.match(r"\s*`(\w+)`", check).group(1): (check, fails_when) for check, fails_when in rows
    }
    assert set(documented) == {rule.name for rule in rules}
    for rule in rules:
        check, fails_when = documented[rule.name]
        assert re.search(rf"\({rule.severity}\b", check), (rule.name, check)
        written = _threshold_as_written(rule.threshold)
        assert any(form in fails_when for form in written), (rule.name, fails_when, written)
