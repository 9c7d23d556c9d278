"""Python code run in a fresh interpreter from the repository root.

Settings are read when the code location loads, so a test of what an environment
variable changes needs a process of its own.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_python(code: str, environment: Mapping[str, str]) -> subprocess.CompletedProcess:
    """Runs `code` with exactly `environment` (warnings off); its output as text."""
    return subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code],
        cwd=ROOT,
        env=dict(environment),
        capture_output=True,
        text=True,
        timeout=120,
    )
