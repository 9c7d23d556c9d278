"""Which slices a rule looks at: slice patterns, priorities and intersection slices.

A slice label is `all`, `key=value` (one metadata key), or an intersection of several
keys, its components joined by commas: `env=prod,feature_flag=retrieval-v2`. A pattern
(`*`, `all`, `env=prod`, `env=*`, `tenant=acme-*`) matches a label when it matches the
whole label or one of its components, so an intersection inside `env=prod` is as high a
priority as `env=prod` itself.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable

from seer_metrics.rules.model import Rule
from seer_metrics.slices.groups import ALL_SLICE

# a comma starts a new component only when a `key=` follows it, so values may hold commas
_COMPONENT_SPLIT = re.compile(r",(?=[A-Za-z_][A-Za-z0-9_.\-]*=)")


def slice_components(label: str) -> tuple[str, ...]:
    """The one-key slices an intersection slice is made of (a one-key slice: itself)."""
    if label == ALL_SLICE:
        return (ALL_SLICE,)
    return tuple(_COMPONENT_SPLIT.split(label))


def slice_matches(label: str, patterns: Iterable[str]) -> bool:
    """`*` matches every slice; `env=*` every value of env; `tenant=acme-*` a glob on values;
    a pattern matching one component of an intersection slice matches the intersection."""
    patterns = tuple(patterns)
    candidates = (label, *slice_components(label)) if "," in label else (label,)
    return any(
        fnmatch.fnmatchcase(candidate, pattern) for candidate in candidates for pattern in patterns
    )


def in_scope(rule: Rule, label: str, high_priority: bool) -> bool:
    """Whether `rule` runs on the slice `label` (its priority, slices and exclusions)."""
    if rule.priority == "high" and not high_priority:
        return False
    if rule.priority == "other" and high_priority:
        return False
    if rule.baseline is not None and label == rule.baseline.slice:
        return False
    if not rule.intersections and len(slice_components(label)) > 1:
        return False
    return slice_matches(label, rule.slices) and not slice_matches(label, rule.exclude_slices)
