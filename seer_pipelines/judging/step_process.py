"""The process a heavy step runs in: what is loaded before the step stays out of the
garbage collector's way.

A step process holds a few hundred thousand long-lived objects (Dagster, the code
location, pandas) before its first row, and every full collection walks all of them while
the step allocates millions of short-lived ones: about a fifth of the metric steps' CPU on
a large day (`benchmarks/partition_scale.py`). `gc.freeze` moves what exists now into a
generation the collector never scans; the step's own garbage is collected as before.
"""

from __future__ import annotations

import gc


def freeze_loaded_objects() -> None:
    """Exclude every object alive now from later garbage collections. Nothing is
    collected first (a full collection costs a step on a small day more than it saves):
    reference cycles already unreachable stay until the process ends, which for a step
    process is the end of its step."""
    gc.freeze()
