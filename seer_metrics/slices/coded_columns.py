"""Columns of a day kept as small codes, so a large day fits in little memory.

`SliceAccumulator` keeps each event's slice-key values (and sampling stratum) as codes
into their distinct values, one byte each while there are at most 128 of them, and each
numeric column as codes into its distinct values, one byte while at most 256 (two up to
65,536, then float64): lossless either way. The codes of a column live in one buffer that
doubles when full, not in a list of per-chunk arrays joined at the end: a day read 500
events at a time would leave thousands of small freed arrays the allocator seldom returns
to the system, as much again as the codes themselves.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from seer_metrics.slices.groups import KeyGroups

# The first buffer's capacity, in events; each later one doubles it.
_FIRST_CAPACITY = 4_096


class GrowingArray:
    """A one-dimensional array appended to chunk by chunk: one buffer of twice the room it
    needs at most (the room never written stays virtual), widened to a larger dtype when
    the values outgrow it."""

    def __init__(self, dtype: Any) -> None:
        self._buffer = np.empty(0, dtype=dtype)
        self._length = 0

    @property
    def dtype(self) -> np.dtype:
        return self._buffer.dtype

    def __len__(self) -> int:
        return self._length

    def append(self, values: np.ndarray) -> None:
        """`values` must fit the dtype (they are cast without a check)."""
        end = self._length + len(values)
        if end > len(self._buffer):
            self._reserve(max(end, 2 * len(self._buffer), _FIRST_CAPACITY), self.dtype)
        self._buffer[self._length : end] = values
        self._length = end

    def widen(self, dtype: Any) -> None:
        """Keep the values in `dtype` from now on (lossless: a larger integer type)."""
        self._reserve(len(self._buffer), dtype)

    def replace(self, values: np.ndarray) -> None:
        """The same number of values, in another dtype (e.g. codes turned into values)."""
        self._buffer = np.empty(len(self._buffer), dtype=values.dtype)
        self._buffer[: self._length] = values

    def values(self) -> np.ndarray:
        """The values so far (a view of the buffer)."""
        return self._buffer[: self._length]

    def _reserve(self, capacity: int, dtype: Any) -> None:
        grown = np.empty(capacity, dtype=dtype)
        grown[: self._length] = self._buffer[: self._length]
        self._buffer = grown


def _signed_codes_for(count: int) -> type[np.signedinteger]:
    """The smallest signed dtype numbering `count` values (and -1 for missing)."""
    for dtype in (np.int8, np.int16, np.int32):
        if count <= np.iinfo(dtype).max + 1:
            return dtype
    return np.int64


class CodedTexts:
    """One text column as codes (None and NaN are -1): a byte an event, not a string."""

    def __init__(self) -> None:
        self._code_of: dict[Any, int] = {}
        self._codes = GrowingArray(np.int8)

    def add(self, values: Iterable[Any]) -> None:
        code_of = self._code_of
        codes = np.fromiter(
            (
                -1 if value is None or value != value else code_of.setdefault(value, len(code_of))
                for value in values
            ),
            dtype=np.int32,
        )
        needed = _signed_codes_for(len(code_of))
        if np.dtype(needed).itemsize > self._codes.dtype.itemsize:
            self._codes.widen(needed)
        self._codes.append(codes)

    def codes(self) -> np.ndarray:
        """The raw codes (in order of first appearance; -1 for missing)."""
        return self._codes.values()

    def code_of(self, value: Any) -> int | None:
        """The code of `value`, None when no event had it."""
        return self._code_of.get(value)

    def key_groups(self, key: str) -> KeyGroups:
        """What `key_groups` gives for the same values: codes renumbered so the values are
        sorted by their text (the order of the slices), in the same small dtype. The raw
        codes are dropped: only the sorted ones are needed from here on."""
        codes = self.codes()
        ordered = sorted(self._code_of)
        renumber = np.empty(len(ordered) + 1, dtype=codes.dtype)
        renumber[[self._code_of[value] for value in ordered]] = np.arange(len(ordered))
        renumber[-1] = -1  # code -1 (missing) stays missing
        self._codes = GrowingArray(np.int8)
        return KeyGroups(key, renumber[codes], [str(value) for value in ordered])


# Distinct values a numeric column may have and still be kept as codes (two bytes).
MAX_CODED_VALUES = int(np.iinfo(np.uint16).max) + 1


class CodedNumbers:
    """One numeric column kept losslessly in little memory: each event's value as a code
    into the column's distinct values (scores are ratios of small counts, K and tokens
    small integers), one byte while there are at most 256 of them, two up to 65,536, and
    as float64 once the column has more distinct values than that. Indexing gives float64
    values, as the plain array would.
    """

    def __init__(self) -> None:
        self._code_of: dict[float, int] = {}  # NaN (NULL) is the key None
        self._codes = GrowingArray(np.uint8)  # float64 values once plain
        self._table: np.ndarray | None = None  # value of each code, made when indexed
        self._plain = False  # too many distinct values: the buffer holds float64

    def add(self, values: np.ndarray) -> None:
        if self._plain:
            self._codes.append(values)
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
        self._table = None
        if len(code_of) > MAX_CODED_VALUES:
            self._codes.replace(self._values_by_code()[self._codes.values()])
            self._codes.append(values)
            self._plain = True
            return
        if len(code_of) > np.iinfo(self._codes.dtype).max + 1:
            self._codes.widen(np.uint16)
        self._codes.append(mapping[inverse.reshape(-1)])

    def _values_by_code(self) -> np.ndarray:
        table = np.empty(len(self._code_of), dtype=float)
        for value, code in self._code_of.items():
            table[code] = np.nan if value is None else value
        return table

    def join(self) -> CodedNumbers:
        """Ready to be indexed (the table of values by code, made once)."""
        if not self._plain and self._table is None:
            self._table = self._values_by_code()
        return self

    def __len__(self) -> int:
        return len(self._codes)

    def __getitem__(self, rows: Any) -> np.ndarray:
        codes = self.join()._codes.values()
        return codes[rows] if self._table is None else self._table[codes[rows]]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        values = self[slice(None)]
        return values if dtype is None else values.astype(dtype)
