"""The groups of one day's events that become slices: one key's values, and pairs of keys.

A regression often lives where two keys meet (`env=prod` with
`feature_flag=retrieval-v2`), and on either key alone it is diluted by the unaffected
traffic; so besides one key at a time, each pair of configured keys (in the configured
order) gives pair slices, labelled `env=prod,feature_flag=retrieval-v2` with slice_key
`env,feature_flag` and slice_value `prod,retrieval-v2` (labels come from the one codec,
`seer_metrics.slices.identity`; in slice_key and slice_value each part has its `\\` and
`,` escaped). They are bounded so they cannot flood the table or the rules: a pair of
values needs at least `minimum_events` events that day, and only the `max_slices`
largest are kept. Groups are row positions built from each key's integer codes, never
copies of the rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

# ALL_SLICE and PAIR_SEPARATOR are imported from here by the rules and the alerts.
from seer_metrics.slices.identity import ALL_SLICE as ALL_SLICE
from seer_metrics.slices.identity import PAIR_SEPARATOR as PAIR_SEPARATOR
from seer_metrics.slices.identity import SliceIdentity

# The rules' default minimum sample (`seer_metrics.rules.model.DEFAULT_MINIMUM_SAMPLE`,
# not imported: the rules import this package): a pair slice with fewer events could
# never get a verdict, and one with as many can, so a release in an intersection of
# 30-100 events a day is tested where it happened.
DEFAULT_PAIR_MINIMUM_EVENTS = 30
DEFAULT_MAX_PAIR_SLICES = 50


def slice_label(key: str, value: str) -> str:
    """The label of a one-key slice: `env=prod` (a key `all` too: `all=x`, never `all`)."""
    return SliceIdentity.of((key, value)).label


def pair_label(first: tuple[str, str], second: tuple[str, str]) -> str:
    """The label of a pair slice: `env=prod,feature_flag=retrieval-v2`."""
    return SliceIdentity.of(first, second).label


@dataclass(frozen=True)
class PairSliceBounds:
    """How many pair slices a day may have: each needs `minimum_events` events that day,
    and only the `max_slices` largest are kept (0 turns pair slices off)."""

    minimum_events: int = DEFAULT_PAIR_MINIMUM_EVENTS
    max_slices: int = DEFAULT_MAX_PAIR_SLICES

    def __post_init__(self) -> None:
        if self.minimum_events < 1:
            raise ValueError(f"pair minimum_events must be >= 1, got {self.minimum_events}")
        if self.max_slices < 0:
            raise ValueError(f"max pair slices must be >= 0, got {self.max_slices}")


@dataclass(frozen=True)
class KeyGroups:
    """One key's values on one day: a code per event (-1 when missing), values sorted."""

    key: str
    codes: np.ndarray
    values: list[str]


def key_groups(key: str, values: pd.Series) -> KeyGroups:
    codes, uniques = pd.factorize(values, sort=True)
    return KeyGroups(key, np.asarray(codes, dtype=np.int64), [str(v) for v in uniques])


def positions_by_code(codes: np.ndarray, count: int) -> list[np.ndarray]:
    """Row positions (ascending) of each code in 0..count-1; -1 (missing) is left out."""
    order = np.argsort(codes, kind="stable")
    if len(order) < np.iinfo(np.int32).max:
        order = order.astype(np.int32)  # half the memory of the positions it keeps
    bounds = np.searchsorted(codes[order], np.arange(count + 1))
    return [order[bounds[code] : bounds[code + 1]] for code in range(count)]


def _pair_codes(first: KeyGroups, second: KeyGroups) -> np.ndarray:
    """One code per event for the pair of values it has (-1 when either is missing)."""
    both = (first.codes >= 0) & (second.codes >= 0)
    width = len(second.values)
    # Four-byte codes while the pair's code space fits in them, else eight.
    small = len(first.values) * width < np.iinfo(np.int32).max
    codes = first.codes.astype(np.int32 if small else np.int64, copy=False)
    return np.where(both, codes * width + second.codes, -1)


def pair_groups(
    groups: Sequence[KeyGroups], bounds: PairSliceBounds, events: np.ndarray | None = None
) -> list[tuple[SliceIdentity, np.ndarray]]:
    """(identity, positions) of the pair slices kept for the day.

    Candidates are every pair of values of two keys with at least `minimum_events`
    events; the `max_slices` largest are kept (ties: key order, then value order), and
    they come out in key order, then value order, like the single-key slices. The pair
    codes are built one key pair at a time and dropped, so memory stays a few arrays.
    `events`: how many events each row stands for (default one each).
    """
    if bounds.max_slices == 0:
        return []
    pairs = [(a, b) for i, a in enumerate(groups) for b in groups[i + 1 :]]
    candidates: list[tuple[int, int, int]] = []  # (-events, pair index, pair code)
    for pair_index, (first, second) in enumerate(pairs):
        codes = _pair_codes(first, second)
        # np.unique, not bincount: two keys with many values have a huge code space.
        if events is None:
            present, counts = np.unique(codes[codes >= 0], return_counts=True)
        else:
            present, inverse = np.unique(codes[codes >= 0], return_inverse=True)
            counts = np.bincount(inverse, weights=events[codes >= 0]).astype(np.int64)
        large = counts >= bounds.minimum_events
        candidates.extend(
            (-int(count), pair_index, int(code))
            for code, count in zip(present[large], counts[large], strict=True)
        )
    kept = sorted(candidates)[: bounds.max_slices]
    result = []
    for pair_index, (first, second) in enumerate(pairs):
        codes_kept = sorted(code for _, index, code in kept if index == pair_index)
        if not codes_kept:
            continue
        codes = _pair_codes(first, second)
        order = np.argsort(codes, kind="stable")  # positions stay ascending within a code
        starts = np.searchsorted(codes[order], codes_kept, side="left")
        stops = np.searchsorted(codes[order], codes_kept, side="right")
        width = len(second.values)
        for code, begin, stop in zip(codes_kept, starts, stops, strict=True):
            first_value, second_value = first.values[code // width], second.values[code % width]
            identity = SliceIdentity.of((first.key, first_value), (second.key, second_value))
            result.append((identity, order[begin:stop]))
    return result
