"""The rules file: YAML -> pydantic models -> the rule model, errors naming the key at fault.

The default rules ship inside the package (`default_rules.yaml`, the file `DEFAULT_RULES`
is loaded from); a rules file given by path replaces them, and a file without a `rules`
list keeps the default rules with its own settings.

A rules file is input a user may get wrong or craft: `yaml_file` reads it (bounded in
size and nesting, no YAML aliases), `field_types` checks each key (every number finite and
in its range, a value quoted briefly), and an error lists at most `MAX_ERROR_LINES`
problems.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, model_validator

from seer_metrics.rules.field_types import (
    QUOTE_LIMIT,
    RULE_NAME_PATTERN,
    Confidence,
    Days,
    KeyedError,
    Number,
    Passes,
    Patterns,
    Rate,
    SampleSize,
    SeverityName,
    SkippedDays,
    check_range,
    choice,
    cut,
    flag,
    one_slice,
    patterns,
    quoted,
    rule_name,
    statistic_range,
    text_value,
    threshold_range,
)
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
    SHARE_STATISTICS,
    STATISTICS,
    Baseline,
    Comparison,
    Priority,
    Rule,
    RuleKind,
    RulesConfig,
    RulesConfigError,
    SliceOverride,
)
from seer_metrics.rules.yaml_file import read_rules_file, read_yaml

RULES_FILE_ENV = "SEER_RULES_FILE"
DEFAULT_RULES_RESOURCE = "default_rules.yaml"
MAX_ERROR_LINES = 20  # problems one error lists


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class OverrideModel(_Section):
    slices: Patterns
    threshold: Number | None = None
    severity: SeverityName | None = None
    enabled: Annotated[bool, BeforeValidator(flag)] | None = None
    minimum_sample: SampleSize | None = None


class BaselineModel(_Section):
    trailing_days: Days = DEFAULT_TRAILING_DAYS
    slice: Annotated[str, BeforeValidator(one_slice)] | None = None
    skip_recent_days: SkippedDays | None = None

    @model_validator(mode="after")
    def _one_kind_of_baseline(self) -> BaselineModel:
        if self.slice is not None and self.model_fields_set & {"trailing_days", "skip_recent_days"}:
            raise KeyedError(None, "give either trailing_days (and skip_recent_days) or slice")
        return self


class RuleModel(_Section):
    name: Annotated[str, BeforeValidator(rule_name)]
    kind: Annotated[RuleKind, BeforeValidator(choice(RULE_KINDS))]
    statistic: Annotated[str, BeforeValidator(choice(tuple(STATISTICS)))]
    threshold: Number
    severity: SeverityName
    comparison: Annotated[Comparison, BeforeValidator(choice(("below", "above")))] = "below"
    priority: Annotated[Priority, BeforeValidator(choice(("high", "other", "any")))] = "any"
    slices: Patterns = ("*",)
    exclude_slices: Annotated[tuple[str, ...], BeforeValidator(lambda v: patterns(v or []))] = ()
    baseline: BaselineModel | None = None
    confidence: Confidence | None = None
    minimum_sample: SampleSize | None = None
    overrides: tuple[OverrideModel, ...] = ()
    description: Annotated[str, BeforeValidator(text_value)] = ""
    intersections: Annotated[bool, BeforeValidator(flag)] | None = None
    worsen_by: Number | None = None

    @model_validator(mode="after")
    def _consistent(self) -> RuleModel:
        if self.kind == "drop":
            if self.statistic not in DROP_STATISTICS:
                raise KeyedError(
                    "statistic",
                    f"expected one of {list(DROP_STATISTICS)}, got {quoted(self.statistic)}",
                )
        elif self.baseline is not None:
            if self.statistic not in SHARE_STATISTICS:
                raise KeyedError(
                    "baseline",
                    "only for drop rules, or for a threshold rule on a share "
                    f"({list(SHARE_STATISTICS)}) compared with the slice's normal share",
                )
            if self.baseline.slice is not None:
                raise KeyedError("baseline", "a threshold rule compares with trailing days only")
        if self.statistic.startswith("p10_") and self.confidence is not None:
            raise KeyedError("confidence", "not available for a p10 statistic")
        thresholds = threshold_range(self.kind, self.statistic)
        check_range("threshold", self.threshold, thresholds)
        for index, override in enumerate(self.overrides):
            if override.threshold is not None:
                check_range(("overrides", index, "threshold"), override.threshold, thresholds)
        if self.worsen_by is not None:
            check_range("worsen_by", self.worsen_by, statistic_range(self.statistic))
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
            else Baseline(
                trailing_days=baseline.trailing_days,
                slice=baseline.slice,
                skip_recent_days=baseline.skip_recent_days or 0,
            ),
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
        tuple[str, ...], BeforeValidator(lambda v: patterns(v) if v else ())
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
        if isinstance(cause, KeyedError) and cause.key is not None:
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


def default_rules_text() -> str:
    """The packaged rules file, commented: the starting point of a custom rules file."""
    return resources.files(__package__).joinpath(DEFAULT_RULES_RESOURCE).read_text("utf-8")


@cache
def default_rules() -> RulesConfig:
    """The rules Seer runs when no rules file is given (the packaged `default_rules.yaml`)."""
    raw = read_yaml(default_rules_text(), DEFAULT_RULES_RESOURCE)
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
    raw = read_yaml(read_rules_file(resolved), str(resolved))
    return parse_rules_config(raw, source=str(resolved))
