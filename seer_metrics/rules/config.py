"""The rules file: YAML -> pydantic models -> the rule model, errors naming the key at fault.

The default rules ship inside the package (`default_rules.yaml`, the file `DEFAULT_RULES`
is loaded from); a rules file given by path replaces them, and a file without a `rules`
list keeps the default rules with its own settings.

A rules file is input a user may get wrong or craft: it is read only up to
`MAX_RULES_FILE_BYTES`, YAML anchors and aliases are refused (a few hundred bytes of
nested aliases expand to gigabytes), every number must be finite and inside its key's
range (`DAY_RANGE`, `SAMPLE_RANGE`, `threshold_range`, ...), and an error quotes at most
`QUOTE_LIMIT` characters of what it was given.
"""

from __future__ import annotations

import math
import os
import re
import reprlib
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, model_validator

from seer_metrics.rules.model import (
    DEFAULT_BASELINE_LOOKBACK_DAYS,
    DEFAULT_CLOSE_AFTER_PASSES,
    DEFAULT_CONFIDENCE,
    DEFAULT_FALSE_DISCOVERY_RATE,
    DEFAULT_HIGH_PRIORITY_SLICES,
    DEFAULT_MINIMUM_SAMPLE,
    DEFAULT_TRAILING_DAYS,
    DROP_STATISTICS,
    RULE_KINDS,
    SEVERITIES,
    SHARE_STATISTICS,
    STATISTICS,
    VOLUME_STATISTIC,
    Baseline,
    Comparison,
    Priority,
    Rule,
    RuleKind,
    RulesConfig,
    RulesConfigError,
    Severity,
    SliceOverride,
)
from seer_metrics.slices.groups import ALL_SLICE

RULES_FILE_ENV = "SEER_RULES_FILE"
DEFAULT_RULES_RESOURCE = "default_rules.yaml"
RULE_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# What a rules file may hold. The packaged file is about 10 KB; a file this size already
# holds thousands of overrides.
MAX_RULES_FILE_BYTES = 256 * 1024
# Mappings and lists inside each other: a rules file needs 6 (the file, rules, a rule,
# overrides, an override, its slices); deeper is refused before YAML's recursive composer
# can exhaust Python's stack.
MAX_NESTING = 20
# Characters of a given value (or of YAML's own message) an error quotes; an error lists
# at most MAX_ERROR_LINES problems.
QUOTE_LIMIT = 200
MAX_ERROR_LINES = 20

# The allowed range of each number (docs/alerts.md lists them): inclusive bounds.
DAY_RANGE = (1, 365)  # trailing_days, baseline_lookback_days, close_after_passes (days)
SAMPLE_RANGE = (1, 1_000_000)  # minimum_sample (events)
# The largest value of a statistic that is not a share or a mean metric in [0, 1].
STATISTIC_MAXIMUM = {"mean_n": 10_000.0, "events": 1_000_000_000.0}


class _KeyError(ValueError):
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


# ---------------------------------------------------------------------------------------
# Field types: each check words its error the same way everywhere.


def _number(value: Any) -> float:
    """A number; an infinity passes here to fail its key's range check, which names the
    range (every `Number` key has one, see `RuleModel._consistent`)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"expected a number, got {quoted(value)}")
    try:
        number = float(value)
    except OverflowError:
        raise ValueError(f"expected a finite number, got {quoted(value)}") from None
    if math.isnan(number):
        raise ValueError(f"expected a number, got {quoted(value)}")
    return number


def _whole_number(bounds: tuple[int, int], unit: str):
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


def _figure(number: float) -> str:
    """1000000000.0 -> '1,000,000,000', 0.5 -> '0.5': a bound as the docs write it."""
    return f"{int(number):,}" if number.is_integer() else f"{number:g}"


def _check_range(
    key: str | tuple[str | int, ...], value: float, bounds: tuple[float, float, str]
) -> None:
    low, high, what = bounds
    if not low <= value <= high:
        raise _KeyError(
            key, f"expected a number in [{_figure(low)}, {_figure(high)}] ({what}), got {value:g}"
        )


def _choice(choices: Sequence[str], fold_case: bool = False):
    def check(value: Any) -> str:
        if fold_case and isinstance(value, str) and value.upper() in choices:
            return value.upper()
        if value not in choices:
            raise ValueError(f"expected one of {list(choices)}, got {quoted(value)}")
        return value

    return check


def _probability(low: float, high: float, closed_low: bool):
    def check(value: Any) -> float:
        number = _number(value)
        inside = (low <= number if closed_low else low < number) and number < high
        if not inside:
            opening = "[" if closed_low else "("
            raise ValueError(
                f"expected a probability in {opening}{low:g}, {high:g}), got {quoted(value)}"
            )
        return number

    return check


def _patterns(value: Any) -> tuple[str, ...]:
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
    return tuple(value)


def _one_slice(value: Any) -> str:
    (label,) = _patterns([value])
    if any(ch in label for ch in "*?[") or label == "*":
        raise ValueError(f"must name one slice, got {quoted(label)}")
    return label


def _rule_name(value: Any) -> str:
    if not isinstance(value, str) or not RULE_NAME_PATTERN.match(value):
        raise ValueError(f"expected an identifier (letters, digits, _), got {quoted(value)}")
    return value


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("expected text")
    return value


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {quoted(value)}")
    return value


Number = Annotated[float, BeforeValidator(_number)]
Days = Annotated[int, BeforeValidator(_whole_number(DAY_RANGE, "days"))]
Passes = Annotated[int, BeforeValidator(_whole_number(DAY_RANGE, "passes"))]
SampleSize = Annotated[int, BeforeValidator(_whole_number(SAMPLE_RANGE, "events"))]
SeverityName = Annotated[Severity, BeforeValidator(_choice(SEVERITIES, fold_case=True))]
Confidence = Annotated[float, BeforeValidator(_probability(0.5, 1.0, closed_low=True))]
Rate = Annotated[float, BeforeValidator(_probability(0.0, 1.0, closed_low=False))]
Patterns = Annotated[tuple[str, ...], BeforeValidator(_patterns)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class OverrideModel(_Section):
    slices: Patterns
    threshold: Number | None = None
    severity: SeverityName | None = None
    enabled: Annotated[bool, BeforeValidator(_flag)] | None = None
    minimum_sample: SampleSize | None = None


class BaselineModel(_Section):
    trailing_days: Days = DEFAULT_TRAILING_DAYS
    slice: Annotated[str, BeforeValidator(_one_slice)] | None = None

    @model_validator(mode="after")
    def _one_kind_of_baseline(self) -> BaselineModel:
        if self.slice is not None and "trailing_days" in self.model_fields_set:
            raise _KeyError(None, "give either trailing_days or slice, not both")
        return self


class RuleModel(_Section):
    name: Annotated[str, BeforeValidator(_rule_name)]
    kind: Annotated[RuleKind, BeforeValidator(_choice(RULE_KINDS))]
    statistic: Annotated[str, BeforeValidator(_choice(tuple(STATISTICS)))]
    threshold: Number
    severity: SeverityName
    comparison: Annotated[Comparison, BeforeValidator(_choice(("below", "above")))] = "below"
    priority: Annotated[Priority, BeforeValidator(_choice(("high", "other", "any")))] = "any"
    slices: Patterns = ("*",)
    exclude_slices: Annotated[tuple[str, ...], BeforeValidator(lambda v: _patterns(v or []))] = ()
    baseline: BaselineModel | None = None
    confidence: Confidence | None = None
    minimum_sample: SampleSize | None = None
    overrides: tuple[OverrideModel, ...] = ()
    description: Annotated[str, BeforeValidator(_text)] = ""
    intersections: Annotated[bool, BeforeValidator(_flag)] | None = None
    worsen_by: Number | None = None

    @model_validator(mode="after")
    def _consistent(self) -> RuleModel:
        if self.kind == "drop":
            if self.statistic not in DROP_STATISTICS:
                raise _KeyError(
                    "statistic",
                    f"expected one of {list(DROP_STATISTICS)}, got {quoted(self.statistic)}",
                )
        elif self.baseline is not None:
            if self.statistic not in SHARE_STATISTICS:
                raise _KeyError(
                    "baseline",
                    "only for drop rules, or for a threshold rule on a share "
                    f"({list(SHARE_STATISTICS)}) compared with the slice's normal share",
                )
            if self.baseline.slice is not None:
                raise _KeyError("baseline", "a threshold rule compares with trailing days only")
        if self.statistic.startswith("p10_") and self.confidence is not None:
            raise _KeyError("confidence", "not available for a p10 statistic")
        thresholds = threshold_range(self.kind, self.statistic)
        _check_range("threshold", self.threshold, thresholds)
        for index, override in enumerate(self.overrides):
            if override.threshold is not None:
                _check_range(("overrides", index, "threshold"), override.threshold, thresholds)
        if self.worsen_by is not None:
            _check_range("worsen_by", self.worsen_by, statistic_range(self.statistic))
        return self

    def to_rule(self) -> Rule:
        tested = self.kind == "drop" or self.baseline is not None
        confidence = self.confidence
        if "confidence" not in self.model_fields_set and tested:
            confidence = DEFAULT_CONFIDENCE
        baseline = self.baseline
        if self.kind == "drop" and baseline is None:
            baseline = BaselineModel()
        return Rule(
            name=self.name,
            kind=self.kind,
            statistic=self.statistic,
            threshold=self.threshold,
            severity=self.severity,
            comparison=self.comparison,
            priority=self.priority,
            slices=self.slices,
            exclude_slices=self.exclude_slices,
            baseline=None
            if baseline is None
            else Baseline(trailing_days=baseline.trailing_days, slice=baseline.slice),
            confidence=confidence,
            minimum_sample=self.minimum_sample,
            overrides=tuple(
                SliceOverride(
                    slices=o.slices,
                    threshold=o.threshold,
                    severity=o.severity,
                    enabled=o.enabled,
                    minimum_sample=o.minimum_sample,
                )
                for o in self.overrides
            ),
            description=self.description,
            intersections=self.intersections,
            worsen_by=self.worsen_by,
        )


class RulesFileModel(_Section):
    high_priority_slices: Annotated[
        tuple[str, ...], BeforeValidator(lambda v: _patterns(v) if v else ())
    ] = DEFAULT_HIGH_PRIORITY_SLICES
    minimum_sample: SampleSize = DEFAULT_MINIMUM_SAMPLE
    false_discovery_rate: Rate | None = DEFAULT_FALSE_DISCOVERY_RATE
    close_after_passes: Passes = DEFAULT_CLOSE_AFTER_PASSES
    baseline_lookback_days: Days = DEFAULT_BASELINE_LOOKBACK_DAYS
    rules: tuple[RuleModel, ...] | None = None


# ---------------------------------------------------------------------------------------
# Errors: pydantic's locations and messages -> one line per error naming the key at fault.

_SECTION_KEYS = {
    "file": tuple(RulesFileModel.model_fields),
    "rule": tuple(RuleModel.model_fields),
    "override": tuple(OverrideModel.model_fields),
    "baseline": tuple(BaselineModel.model_fields),
}


def _section_of(loc: Sequence[str | int]) -> str:
    if len(loc) <= 1:
        return "file"
    if len(loc) == 2:
        return "rule"
    return "override" if loc[2] == "overrides" else "baseline"


def _place(loc: Sequence[str | int], raw: Any) -> str:
    """`rules[2] (precision_tail).threshold` for the location ('rules', 2, 'threshold')."""
    parts: list[str] = []
    node: Any = raw
    for index, step in enumerate(loc):
        if isinstance(step, int):
            parts[-1] = f"{parts[-1]}[{step}]"
            node = node[step] if isinstance(node, list | tuple) and step < len(node) else None
            if index == 1 and isinstance(node, Mapping):
                name = node.get("name")
                later = loc[2:3]
                if isinstance(name, str) and RULE_NAME_PATTERN.match(name) and later != ("name",):
                    parts[-1] = f"{parts[-1]} ({name})"
        else:
            parts.append(step if not parts else f".{step}")
            node = node.get(step) if isinstance(node, Mapping) else None
    return "".join(parts)


def _error_lines(error: ValidationError, raw: Any, source: str) -> list[str]:
    lines: list[str] = []
    unknown: dict[tuple[str | int, ...], list[str]] = {}
    for item in error.errors():
        loc = tuple(item["loc"])
        kind = item["type"]
        if kind == "extra_forbidden":
            unknown.setdefault(loc[:-1], []).append(str(loc[-1]))
            continue
        cause = (item.get("ctx") or {}).get("error")
        if isinstance(cause, _KeyError) and cause.key is not None:
            loc = (*loc, *cause.key)
        if kind == "missing":
            message = "required"
        elif isinstance(cause, ValueError):
            message = str(cause)
        elif kind in ("model_type", "model_attributes_type", "dict_type"):
            message = f"expected a mapping, got {type(item['input']).__name__}"
        elif kind in ("tuple_type", "list_type") and loc == ("rules",):
            message = "expected a list of rules"
        elif kind in ("tuple_type", "list_type"):
            message = "expected a list"
        else:
            message = item["msg"]
        place = _place(loc, raw)
        lines.append(f"{source}: {place}: {message}" if place else f"{source}: {message}")
    for loc, keys in unknown.items():
        allowed = sorted(_SECTION_KEYS[_section_of(loc)])
        place = _place(loc, raw)
        text = f"unknown key(s) {quoted(sorted(keys))}; allowed: {allowed}"
        lines.append(f"{source}: {place}: {text}" if place else f"{source}: {text}")
    return lines


def _error_text(lines: Sequence[str]) -> str:
    """The lines of one error, each cut to a line's length, at most `MAX_ERROR_LINES`."""
    shown = [cut(line, 2 * QUOTE_LIMIT) for line in lines[:MAX_ERROR_LINES]]
    if len(lines) > MAX_ERROR_LINES:
        shown.append(f"... and {len(lines) - MAX_ERROR_LINES} more error(s)")
    return "\n".join(shown)


# ---------------------------------------------------------------------------------------
# Parsing and loading.


def parse_rules_config(raw: Any, source: str = "rules") -> RulesConfig:
    """Validate a mapping (the parsed YAML) into a `RulesConfig`.

    Without a `rules` list the default rules are kept; every error names its key, e.g.
    `my_rules.yaml: rules[2] (precision_tail).threshold: expected a number, got 'high'`.
    """
    raw = {} if raw is None else raw
    if not isinstance(raw, Mapping):
        raise RulesConfigError(f"{source}: expected a mapping, got {type(raw).__name__}")
    try:
        parsed = RulesFileModel.model_validate(raw)
    except ValidationError as error:
        raise RulesConfigError(_error_text(_error_lines(error, raw, source))) from None
    if parsed.rules is None:
        rules = default_rules().rules
    else:
        rules = tuple(model.to_rule() for model in parsed.rules)
    names = [rule.name for rule in rules]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise RulesConfigError(f"{source}: rules: duplicate rule name(s) {quoted(duplicates)}")
    return RulesConfig(
        rules=rules,
        high_priority_slices=parsed.high_priority_slices,
        minimum_sample=parsed.minimum_sample,
        false_discovery_rate=parsed.false_discovery_rate,
        close_after_passes=parsed.close_after_passes,
        baseline_lookback_days=parsed.baseline_lookback_days,
    )


class _RulesLoader(yaml.SafeLoader):
    """YAML's safe loader without anchors and aliases, and with a bound on nesting.

    A rules file has no use for `&name`/`*name` (or `<<` merges, built on them), and nested
    aliases are the "billion laughs": 400 bytes that expand to gigabytes once validated.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise yaml.composer.ComposerError(
                None,
                None,
                "YAML anchors and aliases (&name, *name, <<) are not allowed in a rules file",
                event.start_mark,
            )
        if self._depth >= MAX_NESTING:
            raise yaml.composer.ComposerError(
                None, None, f"nested more than {MAX_NESTING} levels deep", event.start_mark
            )
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _read_yaml(text: str, source: str) -> Any:
    try:
        return yaml.load(text, Loader=_RulesLoader)  # safe: SafeLoader, aliases refused
    except (yaml.YAMLError, ValueError) as error:
        # ValueError: a value YAML cannot build, e.g. an integer of 5,000 digits, 2026-13-45
        raise RulesConfigError(f"{source}: not valid YAML: {cut(str(error))}") from None


def _read_rules_file(path: Path) -> str:
    """The file's text, refused past `MAX_RULES_FILE_BYTES` (read no further than that)."""
    with path.open("rb") as stream:
        data = stream.read(MAX_RULES_FILE_BYTES + 1)
    if len(data) > MAX_RULES_FILE_BYTES:
        raise RulesConfigError(
            f"rules file {path} is larger than {MAX_RULES_FILE_BYTES // 1024} KiB, "
            "the most a rules file may be"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise RulesConfigError(f"rules file {path} is not UTF-8 text: {error.reason}") from None


def default_rules_text() -> str:
    """The packaged rules file, commented: the starting point of a custom rules file."""
    return resources.files(__package__).joinpath(DEFAULT_RULES_RESOURCE).read_text("utf-8")


@cache
def default_rules() -> RulesConfig:
    """The rules Seer runs when no rules file is given (the packaged `default_rules.yaml`)."""
    raw = _read_yaml(default_rules_text(), DEFAULT_RULES_RESOURCE)
    if not isinstance(raw, Mapping) or "rules" not in raw:
        raise RulesConfigError(f"{DEFAULT_RULES_RESOURCE}: the packaged file must list rules")
    return parse_rules_config(raw, source=DEFAULT_RULES_RESOURCE)


def rules_file_path(path: str | os.PathLike[str] | None = None) -> Path | None:
    """The rules file given (the pipelines pass $SEER_RULES_FILE); None means the defaults."""
    if path is not None and str(path):
        return Path(path)
    return None


def load_rules_config(path: str | os.PathLike[str] | None = None) -> RulesConfig:
    """Load the rules file in effect (see `rules_file_path`); the packaged defaults when none."""
    resolved = rules_file_path(path)
    if resolved is None:
        return default_rules()
    if not resolved.is_file():
        raise RulesConfigError(
            f"rules file {resolved} does not exist (from {RULES_FILE_ENV} or the path given)"
        )
    raw = _read_yaml(_read_rules_file(resolved), str(resolved))
    return parse_rules_config(raw, source=str(resolved))
