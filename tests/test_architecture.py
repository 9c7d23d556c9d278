"""The dependency rules of the layout: seer_metrics stays pure, `seer evaluate` stays light."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import seer_metrics


def _modules_loaded_after(code: str) -> set[str]:
    completed = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print('\\n'.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(completed.stdout.split())


def test_seer_metrics_never_imports_dagster():
    names = [
        module.name
        for module in pkgutil.walk_packages(seer_metrics.__path__, prefix="seer_metrics.")
    ]
    assert "seer_metrics.evaluators.llm" in names
    loaded = _modules_loaded_after("\n".join(f"import {name}" for name in names))
    assert not {name for name in loaded if name.split(".")[0] in {"dagster", "seer_pipelines"}}


def test_seer_evaluate_does_not_load_dagster(tmp_path):
    events = tmp_path / "events.jsonl"
    events.write_text('{"task": "Who directed Inception?", "context": ["Nolan did."]}\n')
    loaded = _modules_loaded_after(
        f"from seer_pipelines.cli import main\nassert main(['evaluate', {str(events)!r}]) == 0"
    )
    assert "seer_pipelines.commands.evaluate" in loaded
    assert "dagster" not in loaded
