"""Per-(day, slice) aggregates.

A slice is `all`, one value of one metadata key (`env=prod`), or one value of each of two
keys (`env=prod,feature_flag=retrieval-v2`), bounded by volume (`seer_metrics.slices.groups`
forms the groups and says why). What a slice is, its (key, value) pairs, and the one
reversible codec of its label are `seer_metrics.slices.identity`: nothing splits a label.

Means, shares and quantiles are taken over defined values only (NULL metrics are left
out), and the counts and standard deviations behind each mean are kept so that rules can
judge drops against noise.

A sampled day (events with status `not_sampled` or `skipped_budget`) is estimated from its
judged events: each stands for its stratum (`stratum`: the event's values of the slice keys
the day was sampled by) with the weight N / n, the means and shares are ratio estimators
and `se_*` their standard errors from the sampling (`seer_metrics.spend.sampling`); `count_*`
stays the number of judged events behind each figure. A fully judged day gives exactly
the plain means, with sampling errors of 0. The statistics of one slice are computed in
`seer_metrics.slices.statistics`; this module forms the rows of a day.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from seer_metrics.events import NOT_SAMPLED, SKIPPED_BUDGET
from seer_metrics.scoring import METRICS
from seer_metrics.slices.coded_columns import CodedNumbers, CodedTexts, GrowingArray
from seer_metrics.slices.groups import (
    ALL_SLICE,
    DEFAULT_MAX_PAIR_SLICES,
    DEFAULT_PAIR_MINIMUM_EVENTS,
    PAIR_SEPARATOR,
    KeyGroups,
    PairSliceBounds,
    key_groups,
    pair_groups,
    pair_label,
    positions_by_code,
    slice_label,
)
from seer_metrics.slices.identity import SliceIdentity, SliceLabelError, display_label
from seer_metrics.slices.statistics import (
    NUMERIC_COLUMNS,
    DayArrays,
    slice_statistics,
    status_classes,
)
from seer_metrics.spend.sampling import stratum_label

DEFAULT_SLICE_KEYS = ("env", "feature_flag")
DEFAULT_BLOAT_LINE = 0.35
SHARES = ("share_recall_below_1", "share_precision_below_bloat")
# Events of the slice by status: all of them, judged, and each way of not being judged.
COUNT_COLUMNS = ("events", "evaluated", "invalid", "errors", NOT_SAMPLED, SKIPPED_BUDGET)

SLICE_COLUMNS = (
    "partition_date",
    "slice",
    "slice_key",
    "slice_value",
    *COUNT_COLUMNS,
    *(f"mean_{m}" for m in METRICS),
    *(f"std_{m}" for m in METRICS),
    *(f"count_{m}" for m in METRICS),
    *(f"se_{m}" for m in METRICS),
    *SHARES,
    *(f"se_{share}" for share in SHARES),
    "p10_recall",
    "p10_precision",
    "mean_k",
    # The context: its size (passages an event), the share of empty ones, and the share
    # of events that could not be judged (invalid rows and judge errors).
    "mean_n",
    "std_n",
    "count_n",
    "se_n",
    "share_empty_context",
    "se_share_empty_context",
    "attempted",
    "share_failed",
    # Who judged the day (evaluator:model:prompt version of most judged events): a day
    # judged by another judge starts a new baseline instead of paging as a drop.
    "judge",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
)


JUDGE_COLUMNS = ("evaluator", "model", "prompt_version")


def judge_identity(parts: Sequence[Any]) -> str | None:
    """`evaluator:model:prompt_version` of `JUDGE_COLUMNS`' values; None when one is NULL."""
    return None if None in parts else ":".join(str(part) for part in parts)


def judges_of(scores: pd.DataFrame) -> Counter[str]:
    """How many judged events each judge (`evaluator:model:prompt_version`) judged."""
    if not set(JUDGE_COLUMNS) <= set(scores.columns):
        return Counter()
    judged = scores[scores["status"] == "ok"]
    names = zip(*(judged[column].tolist() for column in JUDGE_COLUMNS), strict=True)
    identities = (judge_identity(name) for name in names)
    return Counter(identity for identity in identities if identity is not None)


def _with_judge(rows: list[dict[str, Any]], judges: Counter[str]) -> list[dict[str, Any]]:
    judge = judges.most_common(1)[0][0] if judges else None
    for row in rows:
        row["judge"] = judge
    return rows


def metadata_value(metadata: Any, key: str) -> str | None:
    """The slice value of one event for `key`, as text; None when absent."""
    if isinstance(metadata, str):
        try:
            metadata = json.loads(metadata) if metadata else {}
        except json.JSONDecodeError:
            return None
    if not isinstance(metadata, Mapping):
        return None
    value = metadata.get(key)
    if value is None or isinstance(value, Mapping | list):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def event_stratum(metadata: Any, keys: Sequence[str]) -> str:
    """The sampling stratum of one event: its values of the slice `keys` (`env=prod|...`)."""
    return stratum_label([(key, metadata_value(metadata, key)) for key in keys])


_REQUIRED_COLUMNS = ("status", "k", "metadata", *METRICS)


def _day_rows(
    day: Any,
    arrays: DayArrays,
    groups: Sequence[KeyGroups],
    bloat_line: float,
    pair_bounds: PairSliceBounds,
) -> list[dict[str, Any]]:
    """The `all` row, one row per (key, value), then the kept pair slices of one day."""
    rows: list[dict[str, Any]] = [
        {
            "partition_date": day,
            **_identity_columns(SliceIdentity()),
            **slice_statistics(arrays, bloat_line),
        }
    ]
    for group in groups:
        positions = positions_by_code(group.codes, len(group.values))
        for value, rows_of_value in zip(group.values, positions, strict=True):
            rows.append(
                {
                    "partition_date": day,
                    **_identity_columns(SliceIdentity.of((group.key, value))),
                    **slice_statistics(arrays, bloat_line, rows_of_value),
                }
            )
    counted = None if arrays.counted is None else arrays.counted.multiplicity
    for identity, positions in pair_groups(groups, pair_bounds, counted):
        rows.append(
            {
                "partition_date": day,
                **_identity_columns(identity),
                **slice_statistics(arrays, bloat_line, positions),
            }
        )
    return rows


def _identity_columns(identity: SliceIdentity) -> dict[str, str]:
    """The columns that name a slice; its label is the one the rules decode."""
    return {
        "slice": identity.label,
        "slice_key": identity.key_column,
        "slice_value": identity.value_column,
    }


def _slice_values(metadata: pd.Series, key: str) -> pd.Series:
    return metadata.map(lambda meta: metadata_value(meta, key))


def _check_columns(scores: pd.DataFrame, required: set[str]) -> None:
    missing = sorted(required - set(scores.columns))
    if missing:
        raise KeyError(f"slice_metrics needs columns {missing}")


def slice_metrics(
    scores: pd.DataFrame,
    slice_keys: Sequence[str] = DEFAULT_SLICE_KEYS,
    bloat_line: float = DEFAULT_BLOAT_LINE,
    pair_bounds: PairSliceBounds | None = None,
) -> pd.DataFrame:
    """Aggregate event-level scores into one row per (partition_date, slice).

    `scores` needs `partition_date`, `status`, the four metrics, `k` and `metadata`
    (a dict or its JSON text); token and cost columns are summed when present, and
    `stratum` weighs a sampled day's judged events (see the module docstring). Pair
    slices follow `pair_bounds` (default: at least 30 events, the 50 largest). For one
    day read in chunks, `SliceAccumulator` gives the same rows in far less memory.
    """
    _check_columns(scores, {"partition_date", *_REQUIRED_COLUMNS})
    keys = list(dict.fromkeys(slice_keys))
    bounds = pair_bounds or PairSliceBounds()
    rows: list[dict[str, Any]] = []
    for day, day_frame in scores.groupby("partition_date", sort=True):
        groups = [key_groups(key, _slice_values(day_frame["metadata"], key)) for key in keys]
        day_rows = _day_rows(day, DayArrays.of(day_frame), groups, bloat_line, bounds)
        rows.extend(_with_judge(day_rows, judges_of(day_frame)))
    return pd.DataFrame(rows, columns=list(SLICE_COLUMNS))


class SliceAccumulator:
    """The slice rows of one day, built from its event scores chunk by chunk.

    The p10 quantiles need every value of the day, so the day cannot be reduced chunk by
    chunk without approximating; instead only what the aggregates read is kept per event,
    losslessly and small: the metrics, K, tokens and cost as codes into each column's
    distinct values (`CodedNumbers`: one byte while a column has at most 256 of them), the
    status as one byte and the stratum and each slice key's value as codes (`CodedTexts`:
    one byte while at most 128 values), each column in one growing buffer: about 12 bytes
    an event with two keys (14 MB for a day of a million events), never the rows or their
    metadata objects. `result` aggregates straight from these codes (no frame is built),
    one slice and one column at a time, so its transient arrays are a few of one slice's
    size; pair slices are formed from the keys' codes then, one key pair at a time.
    Distinct values are kept once each (the code tables). `result` returns exactly what
    `slice_metrics` returns for the concatenated chunks.
    """

    def __init__(
        self,
        slice_keys: Sequence[str] = DEFAULT_SLICE_KEYS,
        bloat_line: float = DEFAULT_BLOAT_LINE,
        pair_bounds: PairSliceBounds | None = None,
    ) -> None:
        self.slice_keys = list(dict.fromkeys(slice_keys))
        self.bloat_line = bloat_line
        self.pair_bounds = pair_bounds or PairSliceBounds()
        self.events = 0
        self._numbers: dict[str, CodedNumbers] = {}
        self._status = GrowingArray(np.uint8)  # `status_classes` of every event
        self._strata = CodedTexts()
        self._values = {key: CodedTexts() for key in self.slice_keys}
        self._judges: Counter[str] = Counter()
        self._counted: list[tuple[int, int]] = []  # (row, events it stands for)

    def add(self, scores: pd.DataFrame) -> None:
        """One chunk of event scores (the columns `slice_metrics` needs, no partition_date)."""
        _check_columns(scores, set(_REQUIRED_COLUMNS))
        if scores.empty:
            return
        for column in NUMERIC_COLUMNS:
            if column in scores:
                self._numbers.setdefault(column, CodedNumbers()).add(_numbers(scores[column]))
        # Lists, not the Series: iterating a pandas string column is several times slower.
        self._status.append(status_classes(scores["status"].tolist()))
        self._strata.add(
            scores["stratum"].tolist() if "stratum" in scores else [None] * len(scores)
        )
        metadata = [_parsed_metadata(meta) for meta in scores["metadata"].tolist()]
        for key, codes in self._values.items():
            codes.add(_key_values(metadata, key))
        self._judges.update(judges_of(scores))
        self.events += len(scores)

    def add_counted(self, strata: Sequence[tuple[str, Mapping[str, Any], int]]) -> None:
        """A sampled day's events counted in the warehouse but never read: per stratum
        (label, slice values, events), one `not_sampled` row standing for them all."""
        strata = [(label, values, int(count)) for label, values, count in strata if count > 0]
        if not strata:
            return
        frame = pd.DataFrame(
            {
                "status": [NOT_SAMPLED] * len(strata),
                **{column: [np.nan] * len(strata) for column in NUMERIC_COLUMNS},
                "metadata": [
                    {key: value for key, value in values.items() if value is not None}
                    for _, values, _ in strata
                ],
                "stratum": [label for label, _, _ in strata],
            }
        )
        first = self.events
        self.add(frame)
        self._counted.extend((first + i, count) for i, (_, _, count) in enumerate(strata))

    def count_judges(self, judges: Mapping[str, int]) -> None:
        """Judged events per judge, when the scores do not carry the judge columns."""
        self._judges.update(judges)

    def result(self, day: Any) -> pd.DataFrame:
        """One row per slice of `day` (no row at all for a day without events)."""
        if not self.events:
            return pd.DataFrame([], columns=list(SLICE_COLUMNS))
        numbers = {name: column.join() for name, column in self._numbers.items()}
        counted = None
        if self._counted:
            counted = np.ones(self.events, dtype=np.int64)
            rows, events = zip(*self._counted, strict=True)
            counted[list(rows)] = events
        arrays = DayArrays.of_status(self._status.values(), numbers, self._strata.codes, counted)
        groups = [codes.key_groups(key) for key, codes in self._values.items()]
        rows = _day_rows(day, arrays, groups, self.bloat_line, self.pair_bounds)
        return pd.DataFrame(_with_judge(rows, self._judges), columns=list(SLICE_COLUMNS))


def _numbers(column: pd.Series) -> np.ndarray:
    """A column as float64, anything that is not a number as NaN (`pd.to_numeric`); a
    column numpy already holds as numbers is only converted."""
    if isinstance(column.dtype, np.dtype) and column.dtype.kind in "fiu":
        return column.to_numpy(dtype=float)
    return pd.to_numeric(column, errors="coerce").to_numpy(dtype=float)


def _key_values(metadata: list[Any], key: str) -> list[str | None]:
    """`metadata_value` of each parsed metadata for `key`; a dict holding text (nearly
    every event) is read directly, the rest goes through `metadata_value`."""
    values: list[str | None] = []
    for meta in metadata:
        if type(meta) is dict:
            value = meta.get(key)
            if type(value) is str:
                values.append(value)
                continue
        values.append(metadata_value(meta, key))
    return values


def _parsed_metadata(metadata: Any) -> Any:
    """Metadata JSON text parsed once for every slice key (None when it does not parse,
    which `metadata_value` reads as no value)."""
    if isinstance(metadata, str):
        try:
            return json.loads(metadata) if metadata else {}
        except json.JSONDecodeError:
            return None
    return metadata


__all__ = [
    "ALL_SLICE",
    "COUNT_COLUMNS",
    "DEFAULT_BLOAT_LINE",
    "DEFAULT_MAX_PAIR_SLICES",
    "DEFAULT_PAIR_MINIMUM_EVENTS",
    "DEFAULT_SLICE_KEYS",
    "METRICS",
    "NOT_SAMPLED",
    "PAIR_SEPARATOR",
    "SHARES",
    "SKIPPED_BUDGET",
    "SLICE_COLUMNS",
    "PairSliceBounds",
    "SliceAccumulator",
    "SliceIdentity",
    "SliceLabelError",
    "display_label",
    "metadata_value",
    "pair_label",
    "slice_label",
    "slice_metrics",
]
