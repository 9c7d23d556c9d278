"""Which slices a rule looks at: slice patterns, priorities and intersection slices.

A slice is `all`, one value of one metadata key (`env=prod`), or an intersection of
several keys (`env=prod,feature_flag=retrieval-v2`); what it is (its (key, value) pairs)
comes from its label through the one codec, `seer_metrics.slices.identity`, so a tenant
`acme,env=prod` stays one value of one key. A pattern is `*`, `all`, or key=value pairs
written like a label (`env=prod`, `env=*`, `tenant=acme-*`; in a key `,` `=` `\\`, in a
value `,` `\\` escaped with a backslash), its globs matched on the key and on the value
apart. A one-pair pattern matches a slice when it matches one of its pairs, so an
intersection inside `env=prod` is as high a priority as `env=prod` itself; a pattern of
several pairs matches a slice of as many pairs, pair by pair.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from functools import lru_cache

from seer_metrics.rules.model import Rule
from seer_metrics.slices.identity import ALL_SLICE, SliceIdentity, SliceLabelError


def slice_components(label: str) -> tuple[str, ...]:
    """The labels of the one-key slices an intersection slice is made of (a one-key slice:
    itself; `all`: `all`)."""
    identity = SliceIdentity.decode(label)
    if identity.is_all:
        return (ALL_SLICE,)
    return tuple(component.label for component in identity.components)


@lru_cache(maxsize=4096)
def pattern_pairs(pattern: str) -> tuple[tuple[str, str], ...]:
    """The (key glob, value glob) pairs of a `key=value` slice pattern; a ValueError names
    the pattern when it is none."""
    try:
        return SliceIdentity.decode(pattern).pairs
    except SliceLabelError as error:
        raise ValueError(f"slice pattern {pattern!r}: {error}") from None


def _pair_matches(pair: tuple[str, str], wanted: tuple[str, str]) -> bool:
    return fnmatch.fnmatchcase(pair[0], wanted[0]) and fnmatch.fnmatchcase(pair[1], wanted[1])


def _pattern_matches(identity: SliceIdentity, pattern: str) -> bool:
    if pattern == "*":
        return True
    if pattern == ALL_SLICE:
        return identity.is_all
    wanted = pattern_pairs(pattern)
    if len(wanted) == 1:
        return any(_pair_matches(pair, wanted[0]) for pair in identity.pairs)
    return len(wanted) == identity.arity and all(
        _pair_matches(pair, glob) for pair, glob in zip(identity.pairs, wanted, strict=True)
    )


def slice_matches(label: str, patterns: Iterable[str]) -> bool:
    """`*` matches every slice; `env=*` every value of env; `tenant=acme-*` a glob on values;
    a pattern matching one component of an intersection slice matches the intersection."""
    identity = SliceIdentity.decode(label)
    return any(_pattern_matches(identity, pattern) for pattern in patterns)


def in_scope(rule: Rule, label: str, high_priority: bool) -> bool:
    """Whether `rule` runs on the slice `label` (its priority, slices and exclusions)."""
    if rule.priority == "high" and not high_priority:
        return False
    if rule.priority == "other" and high_priority:
        return False
    if rule.baseline is not None and label == rule.baseline.slice:
        return False
    if not rule.intersections and SliceIdentity.decode(label).is_intersection:
        return False
    return slice_matches(label, rule.slices) and not slice_matches(label, rule.exclude_slices)
