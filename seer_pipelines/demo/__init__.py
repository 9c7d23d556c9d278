"""Events for `seer demo` and `seer seed`, the labeled QA samples they come from, and the
demo's local Dagster instance (`instance`)."""

from pathlib import Path

DATA_DIR = Path(__file__).parent / "data"
