"""Examples for an alert: the most frequent missing requirements of a slice's events."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

import pandas as pd

from seer_metrics.slices import SliceIdentity, metadata_value

EXAMPLES_PER_SLICE = 3


def _as_list(value: Any) -> list[str]:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return [value]
    if isinstance(value, list | tuple):
        return [str(v) for v in value if v is not None and str(v).strip()]
    return []


def top_missing_requirements(
    event_frames: Iterable[pd.DataFrame],
    slices: Iterable[str],
    limit: int = EXAMPLES_PER_SLICE,
) -> dict[str, list[tuple[str, int]]]:
    """For each slice label, the `limit` most frequent missing requirement texts.

    `event_frames` are chunks of `seer_event_metrics` rows (`status`, `missing_requirements`,
    `metadata`); a requirement counts once per event. A slice counts the events having
    each of its (key, value) pairs (`all`: every event), decoded from its label.
    """
    wanted = sorted(set(slices))
    counters: dict[str, Counter[str]] = {label: Counter() for label in wanted}
    keyed = [(label, SliceIdentity.decode(label).pairs) for label in wanted]
    for chunk in event_frames:
        if chunk.empty:
            continue
        ok = chunk[chunk["status"] == "ok"] if "status" in chunk else chunk
        for missing, metadata in zip(ok["missing_requirements"], ok["metadata"], strict=True):
            texts = set(_as_list(missing))
            if not texts:
                continue
            for label, pairs in keyed:
                if all(metadata_value(metadata, key) == value for key, value in pairs):
                    counters[label].update(texts)
    return {
        label: sorted(counter.items(), key=lambda item: (-item[1], item[0]))[:limit]
        for label, counter in counters.items()
        if counter
    }
