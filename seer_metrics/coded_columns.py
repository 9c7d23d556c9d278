"""Columns of a day kept as small codes, so a large day fits in little memory.

`SliceAccumulator` keeps each event's status and slice-key values as int32 codes into
their distinct values, and each numeric column as two-byte codes into its distinct values
(float64 past 65,536 of them): lossless either way.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from seer_metrics.slice_groups import KeyGroups


class CodedTexts:
    """One text column as int32 codes (None and NaN are -1): four bytes an event, not a string."""

    def __init__(self) -> None:
        self._code_of: dict[Any, int] = {}
        self._chunks: list[np.ndarray] = []

    def add(self, values: Iterable[Any]) -> None:
        code_of = self._code_of
        self._chunks.append(
            np.fromiter(
                (
                    -1
                    if value is None or value != value
                    else code_of.setdefault(value, len(code_of))
                    for value in values
                ),
                dtype=np.int32,
            )
        )

    def codes(self) -> np.ndarray:
        """The raw codes (in order of first appearance; -1 for missing)."""
        if len(self._chunks) != 1:
            joined = np.concatenate(self._chunks) if self._chunks else np.empty(0, np.int32)
            self._chunks = [joined]
        return self._chunks[0]

    def code_of(self, value: Any) -> int | None:
        """The code of `value`, None when no event had it."""
        return self._code_of.get(value)

    def key_groups(self, key: str) -> KeyGroups:
        """What `key_groups` gives for the same values: codes renumbered so the values are
        sorted by their text (the order of the slices), as int32. The raw codes are
        dropped: only the sorted ones are needed from here on."""
        codes = self.codes()
        ordered = sorted(self._code_of)
        renumber = np.empty(len(ordered) + 1, dtype=np.int32)
        renumber[[self._code_of[value] for value in ordered]] = np.arange(len(ordered))
        renumber[-1] = -1  # code -1 (missing) stays missing
        self._chunks = []
        return KeyGroups(key, renumber[codes], [str(value) for value in ordered])


# Distinct values a numeric column may have and still be kept as two-byte codes.
MAX_CODED_VALUES = int(np.iinfo(np.uint16).max) + 1


class CodedNumbers:
    """One numeric column kept losslessly in little memory: each event's value as a
    two-byte code into the column's distinct values (scores are ratios of small counts, K
    and tokens small integers), or as float64 once the column has more distinct values
    than two bytes can number. Indexing gives float64 values, as the plain array would.
    """

    def __init__(self) -> None:
        self._code_of: dict[float, int] = {}  # NaN (NULL) is the key None
        self._chunks: list[np.ndarray] = []
        self._table: np.ndarray | None = None  # value of each code, once joined
        self._plain = False  # too many distinct values: the chunks hold float64

    def add(self, values: np.ndarray) -> None:
        if self._plain:
            self._chunks.append(values)
            return
        distinct, inverse = np.unique(values, return_inverse=True)
        code_of = self._code_of
        mapping = np.fromiter(
            (
                code_of.setdefault(None if value != value else value, len(code_of))
                for value in distinct.tolist()
            ),
            dtype=np.int64,
            count=len(distinct),
        )
        if len(code_of) > MAX_CODED_VALUES:
            table = self._values_by_code()
            self._chunks = [table[chunk] for chunk in self._chunks]
            self._chunks.append(values)
            self._plain = True
            return
        self._chunks.append(mapping[inverse.reshape(-1)].astype(np.uint16))

    def _values_by_code(self) -> np.ndarray:
        table = np.empty(len(self._code_of), dtype=float)
        for value, code in self._code_of.items():
            table[code] = np.nan if value is None else value
        return table

    def join(self) -> CodedNumbers:
        """Concatenate the chunks (once, before aggregating)."""
        if len(self._chunks) != 1:
            empty = np.empty(0, dtype=float if self._plain else np.uint16)
            self._chunks = [np.concatenate(self._chunks) if self._chunks else empty]
        if not self._plain and self._table is None:
            self._table = self._values_by_code()
        return self

    def __len__(self) -> int:
        return sum(len(chunk) for chunk in self._chunks)

    def __getitem__(self, rows: Any) -> np.ndarray:
        joined = self.join()._chunks[0]
        return joined[rows] if self._table is None else self._table[joined[rows]]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        values = self[slice(None)]
        return values if dtype is None else values.astype(dtype)
