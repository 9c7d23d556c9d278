"""The field types of the rules file: what each key accepts, and the one wording of each
check's error, which quotes at most `QUOTE_LIMIT` characters of a value (a crafted value
must not make a huge error).

Every number is finite and in its key's range (`DAY_RANGE`, `SAMPLE_RANGE`, and
`threshold_range` for a threshold, which depends on what its statistic is); docs/alerts.md
lists the bounds.
"""

from __future__ import annotations

import math
import re
import reprlib
from collections.abc import Callable, Sequence
from typing import Annotated, Any

from pydantic import BeforeValidator

from seer_metrics.rules.model import (
    SEVERITIES,
    STATISTICS,
    VOLUME_STATISTIC,
    RuleKind,
    Severity,
)
from seer_metrics.rules.scope import pattern_pairs
from seer_metrics.slices.groups import ALL_SLICE
from seer_metrics.slices.identity import SliceIdentity

RULE_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# Characters of a given value (or of YAML's own message) an error quotes.
QUOTE_LIMIT = 200

# The allowed range of each number (docs/alerts.md lists them): inclusive bounds.
DAY_RANGE = (1, 365)  # trailing_days, baseline_lookback_days, close_after_passes (days)
SKIPPED_DAY_RANGE = (0, 365)  # skip_recent_days: 0 skips none
SAMPLE_RANGE = (1, 1_000_000)  # minimum_sample (events)
# The largest value of a statistic that is not a share or a mean metric in [0, 1].
STATISTIC_MAXIMUM = {"mean_n": 10_000.0, "events": 1_000_000_000.0}


class KeyedError(ValueError):
    """A check across fields of one section that blames one of its keys (or none); `key`
    may be a path inside the section, e.g. ('overrides', 0, 'threshold')."""

    def __init__(self, key: str | tuple[str | int, ...] | None, message: str) -> None:
        super().__init__(message)
        self.key = (key,) if isinstance(key, str) else key


class _ShortRepr(reprlib.Repr):
    """reprlib's abridged repr, for integers too long for Python to print too."""

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 10_000:
            return f"{'-' if x < 0 else ''}<an integer of {x.bit_length() * 0.30103:,.0f} digits>"
        return super().repr_int(x, level)


_SHORT_REPR = _ShortRepr()
_SHORT_REPR.maxlevel = 3
_SHORT_REPR.maxdict = _SHORT_REPR.maxlist = _SHORT_REPR.maxtuple = 8
_SHORT_REPR.maxlong = 40
_SHORT_REPR.maxstring = _SHORT_REPR.maxother = QUOTE_LIMIT


def quoted(value: Any) -> str:
    """The value as an error quotes it: its repr, abridged (reprlib) and cut to
    `QUOTE_LIMIT` characters, so an error about a crafted value stays short."""
    return cut(_SHORT_REPR.repr(value))


def cut(text: str, limit: int = QUOTE_LIMIT) -> str:
    """`text` cut to `limit` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else f"{text[: limit - 1]}…"


def number(value: Any) -> float:
    """A number; an infinity passes here to fail its key's range check, which names the
    range (every `Number` key has one, see `RuleModel._consistent`)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"expected a number, got {quoted(value)}")
    try:
        converted = float(value)
    except OverflowError:
        raise ValueError(f"expected a finite number, got {quoted(value)}") from None
    if math.isnan(converted):
        raise ValueError(f"expected a number, got {quoted(value)}")
    return converted


def whole_number(bounds: tuple[int, int], unit: str) -> Callable[[Any], int]:
    """The check of an integer key inside `bounds` (inclusive), counted in `unit`."""
    low, high = bounds

    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(
                f"expected an integer in [{low:,}, {high:,}] ({unit}), got {quoted(value)}"
            )
        return value

    return check


def threshold_range(kind: RuleKind, statistic: str) -> tuple[float, float, str]:
    """(lowest, highest, what it is) for a rule's threshold: a share or a mean metric and
    their changes lie in [0, 1], a count or a passage count up to `STATISTIC_MAXIMUM`; a
    volume drop is the share of the normal count lost."""
    if kind == "drop" and statistic == VOLUME_STATISTIC:
        return 0.0, 1.0, "the share of the normal count lost"
    return statistic_range(statistic)


def statistic_range(statistic: str) -> tuple[float, float, str]:
    """(lowest, highest, what it is) for a value or a move of `statistic` (`worsen_by`)."""
    if statistic in STATISTIC_MAXIMUM:
        return 0.0, STATISTIC_MAXIMUM[statistic], STATISTICS[statistic][1]
    return 0.0, 1.0, "a share or a metric"


def figure(bound: float) -> str:
    """1000000000.0 -> '1,000,000,000', 0.5 -> '0.5': a bound as the docs write it."""
    return f"{int(bound):,}" if bound.is_integer() else f"{bound:g}"


def check_range(
    key: str | tuple[str | int, ...], value: float, bounds: tuple[float, float, str]
) -> None:
    """Blame `key` (a `KeyedError`) when `value` lies outside `bounds` (inclusive)."""
    low, high, what = bounds
    if not low <= value <= high:
        raise KeyedError(
            key, f"expected a number in [{figure(low)}, {figure(high)}] ({what}), got {value:g}"
        )


def choice(choices: Sequence[str], fold_case: bool = False) -> Callable[[Any], str]:
    """The check of a key that takes one of `choices` (any case with `fold_case`)."""

    def check(value: Any) -> str:
        if fold_case and isinstance(value, str) and value.upper() in choices:
            return value.upper()
        if value not in choices:
            raise ValueError(f"expected one of {list(choices)}, got {quoted(value)}")
        return value

    return check


def probability(low: float, high: float, closed_low: bool) -> Callable[[Any], float]:
    """The check of a probability below `high`, above `low` (or at it: `closed_low`)."""

    def check(value: Any) -> float:
        given = number(value)
        inside = (low <= given if closed_low else low < given) and given < high
        if not inside:
            opening = "[" if closed_low else "("
            raise ValueError(
                f"expected a probability in {opening}{low:g}, {high:g}), got {quoted(value)}"
            )
        return given

    return check


def patterns(value: Any) -> tuple[str, ...]:
    """Slice patterns: one or a list of `all`, `*` or `key=value` (globs on the value)."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"expected a list of slice patterns, got {quoted(value)}")
    for pattern in value:
        if pattern not in ("*", ALL_SLICE) and "=" not in pattern:
            raise ValueError(
                f"slice pattern {quoted(pattern)} must be 'all', '*' or 'key=value' "
                "(the value may use * and ? wildcards)"
            )
        if pattern not in ("*", ALL_SLICE):
            pattern_pairs(pattern)  # a ValueError naming the pattern when it is no pairs
    return tuple(value)


def one_slice(value: Any) -> str:
    """A pattern that names exactly one slice (no wildcard)."""
    (label,) = patterns([value])
    if any(ch in label for ch in "*?[") or label == "*":
        raise ValueError(f"must name one slice, got {quoted(label)}")
    return SliceIdentity.decode(label).label  # as the slice table spells it


def rule_name(value: Any) -> str:
    """An identifier: a rule's name is its asset check's name."""
    if not isinstance(value, str) or not RULE_NAME_PATTERN.match(value):
        raise ValueError(f"expected an identifier (letters, digits, _), got {quoted(value)}")
    return value


def text_value(value: Any) -> str:
    """Text, e.g. a description."""
    if not isinstance(value, str):
        raise ValueError("expected text")
    return value


def flag(value: Any) -> bool:
    """true or false, never a truthy value (`"no"` must not mean yes)."""
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {quoted(value)}")
    return value


Number = Annotated[float, BeforeValidator(number)]
Days = Annotated[int, BeforeValidator(whole_number(DAY_RANGE, "days"))]
SkippedDays = Annotated[int, BeforeValidator(whole_number(SKIPPED_DAY_RANGE, "days"))]
Passes = Annotated[int, BeforeValidator(whole_number(DAY_RANGE, "passes"))]
SampleSize = Annotated[int, BeforeValidator(whole_number(SAMPLE_RANGE, "events"))]
SeverityName = Annotated[Severity, BeforeValidator(choice(SEVERITIES, fold_case=True))]
Confidence = Annotated[float, BeforeValidator(probability(0.5, 1.0, closed_low=True))]
Rate = Annotated[float, BeforeValidator(probability(0.0, 1.0, closed_low=False))]
Patterns = Annotated[tuple[str, ...], BeforeValidator(patterns)]
