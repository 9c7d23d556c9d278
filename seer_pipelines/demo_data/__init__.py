"""Events for `seer demo` and `seer seed`, and the labeled QA samples they come from."""

from pathlib import Path

DATA_DIR = Path(__file__).parent / "data"
