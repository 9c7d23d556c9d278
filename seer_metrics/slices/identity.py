"""What a slice is: the (key, value) pairs it fixes, and the one codec of its label.

A slice fixes no key (`all`), one metadata key (`env=prod`) or two
(`env=prod,feature_flag=retrieval-v2`). Keys and values are any text an event's metadata
holds, so the label must not be read by looking for commas and equals signs: a tenant
`acme,env=prod` is one value of one key, not an intersection with `env=prod`. Everything
that needs a slice's keys, values, arity or parents decodes its label here, with the one
reversible decoder, and never splits it itself.

The label: the pairs in order, each `key=value`, joined by `,`; in a key `\\`, `,` and
`=` are escaped with a backslash, in a value `\\` and `,` (the first unescaped `=` of a
pair ends its key, so a value's `=` needs none, and `q=a=b` keeps its label). Keys and
values without those characters are written as they are: `env=prod,feature_flag=v2` is
the label it always was. `all` is the identity fixing no key; it cannot collide with a
pair, whose label always holds an unescaped `=` (a key or value `all` gives `all=x`,
`k=all`). `decode(encode(pairs)) == pairs` for any Unicode keys and values, empty ones
included.

`display` is for people (Slack, the console): a key or value that holds a separator (`,`
`=` `×`), a quote, a backslash or an unprintable character, starts or ends with a space,
or is empty, is shown JSON-quoted (`tenant="acme,env=prod"`). It is never parsed back.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

ALL_SLICE = "all"
# Joins the pairs of an intersection: `env=prod,feature_flag=retrieval-v2`.
PAIR_SEPARATOR = ","
KEY_VALUE_SEPARATOR = "="
ESCAPE = "\\"
_ESCAPED_IN_KEYS = (ESCAPE, PAIR_SEPARATOR, KEY_VALUE_SEPARATOR)
_ESCAPED_IN_VALUES = (ESCAPE, PAIR_SEPARATOR)
# Shown quoted by `display` (besides edge whitespace and unprintable characters).
_QUOTED_IN_DISPLAY = frozenset(',="\\×')


def _escape(text: str, special: tuple[str, ...]) -> str:
    if not any(character in text for character in special):
        return text
    return "".join(ESCAPE + c if c in special else c for c in text)


class SliceLabelError(ValueError):
    """A text that is no slice label (or slice pattern) this codec writes."""


@dataclass(frozen=True)
class SliceIdentity:
    """The (key, value) pairs a slice fixes, in order; no pair is the `all` slice."""

    pairs: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        pairs = tuple((key, value) for key, value in self.pairs)
        for key, value in pairs:
            if not isinstance(key, str) or not isinstance(value, str):
                raise TypeError(f"slice keys and values must be text, got {(key, value)!r}")
        keys = [key for key, _ in pairs]
        if len(set(keys)) != len(keys):
            raise SliceLabelError(f"a slice fixes each key once, got keys {keys!r}")
        object.__setattr__(self, "pairs", pairs)

    @classmethod
    def of(cls, *pairs: tuple[str, str]) -> SliceIdentity:
        """`SliceIdentity.of(("env", "prod"), ("feature_flag", "v2"))`."""
        return cls(tuple(pairs))

    @classmethod
    def decode(cls, label: str) -> SliceIdentity:
        """The identity a label stands for (the inverse of `label`); `SliceLabelError` for
        a text the codec cannot have written (a pair without `=`, a dangling `\\`)."""
        return _decoded(label)

    @property
    def label(self) -> str:
        """The label of the slice table, the checks and the alerts (see the module doc)."""
        if not self.pairs:
            return ALL_SLICE
        return PAIR_SEPARATOR.join(
            f"{_escape(key, _ESCAPED_IN_KEYS)}{KEY_VALUE_SEPARATOR}"
            f"{_escape(value, _ESCAPED_IN_VALUES)}"
            for key, value in self.pairs
        )

    @property
    def key_column(self) -> str:
        """The slice table's `slice_key`: `all`; a one-key slice's key as it is; the keys of
        an intersection each with `\\` and `,` escaped, joined by `,` (`env,feature_flag`)."""
        return _column(self.keys)

    @property
    def value_column(self) -> str:
        """The slice table's `slice_value`, like `key_column` (`prod,retrieval-v2`)."""
        return _column(self.values)

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(key for key, _ in self.pairs)

    @property
    def values(self) -> tuple[str, ...]:
        return tuple(value for _, value in self.pairs)

    @property
    def arity(self) -> int:
        """How many keys the slice fixes: 0 for `all`, 2 for a pair slice."""
        return len(self.pairs)

    @property
    def is_all(self) -> bool:
        return not self.pairs

    @property
    def is_intersection(self) -> bool:
        """Whether the slice fixes several keys (the levels skip such slices by default)."""
        return len(self.pairs) > 1

    @property
    def components(self) -> tuple[SliceIdentity, ...]:
        """The one-key slices it is made of (none for `all`, itself for a one-key slice)."""
        return tuple(SliceIdentity((pair,)) for pair in self.pairs)

    @property
    def parents(self) -> tuple[SliceIdentity, ...]:
        """The slices one key wider: for a pair its two one-key slices (in its order), for
        a one-key slice `all`, for `all` none."""
        count = len(self.pairs)
        return tuple(
            SliceIdentity(self.pairs[:index] + self.pairs[index + 1 :])
            for index in reversed(range(count))
        )

    def may_overlap(self, other: SliceIdentity) -> bool:
        """Whether the two slices can share events: no key fixed to different values."""
        mine = dict(self.pairs)
        return all(mine.get(key, value) == value for key, value in other.pairs)

    def crosses(self, other: SliceIdentity) -> bool:
        """Whether the two share events with neither inside the other (`env=prod` and
        `tenant=acme`)."""
        return (
            self != other
            and self.may_overlap(other)
            and not self.is_narrower_than(other)
            and not other.is_narrower_than(self)
        )

    def is_narrower_than(self, parent: SliceIdentity) -> bool:
        """Whether every event of this slice is in `parent` and it fixes more keys."""
        return set(parent.pairs) < set(self.pairs)

    def display(self, separator: str = PAIR_SEPARATOR) -> str:
        """The slice for people: the label itself for ordinary keys and values, a key or
        value with special characters JSON-quoted; never parsed back."""
        if not self.pairs:
            return ALL_SLICE
        return separator.join(
            f"{_display_part(key)}{KEY_VALUE_SEPARATOR}{_display_part(value)}"
            for key, value in self.pairs
        )


def _column(parts: tuple[str, ...]) -> str:
    if not parts:
        return ALL_SLICE
    if len(parts) == 1:
        return parts[0]
    return PAIR_SEPARATOR.join(_escape(part, _ESCAPED_IN_VALUES) for part in parts)


def is_narrower(child: str, parent: str) -> bool:
    """Whether every event of slice `child` is in slice `parent` and `child` fixes more
    keys (`SliceIdentity.is_narrower_than` of two labels)."""
    return SliceIdentity.decode(child).is_narrower_than(SliceIdentity.decode(parent))


def display_label(label: str, separator: str = PAIR_SEPARATOR) -> str:
    """`SliceIdentity.display` of a label; a text that is no label is shown as it is (the
    message must go out even for a row the codec did not write)."""
    try:
        return SliceIdentity.decode(label).display(separator)
    except SliceLabelError:
        return label


def _display_part(text: str) -> str:
    plain = (
        text
        and text == text.strip()
        and text.isprintable()
        and not any(character in _QUOTED_IN_DISPLAY for character in text)
    )
    return text if plain else json.dumps(text, ensure_ascii=False)


@lru_cache(maxsize=65536)
def _decoded(label: str) -> SliceIdentity:
    """Decoded once per label: the rules decode each slice's label for every rule."""
    if label == ALL_SLICE:
        return SliceIdentity()
    return SliceIdentity(tuple(_decode_pairs(label)))


def _decode_pairs(label: str) -> Iterable[tuple[str, str]]:
    """Split a label into its pairs, unescaping; see `SliceIdentity.decode`."""
    key: list[str] | None = None  # the key, once its `=` was read
    part: list[str] = []
    characters = iter(label)
    for character in characters:
        if character == ESCAPE:
            escaped = next(characters, None)
            if escaped not in _ESCAPED_IN_KEYS:
                raise SliceLabelError(
                    f"slice label {label!r}: a backslash must escape \\, ',' or '=', "
                    f"got {ESCAPE + (escaped or '')!r}"
                )
            part.append(escaped)
        elif character == PAIR_SEPARATOR:
            yield _pair(label, key, part)
            key, part = None, []
        elif character == KEY_VALUE_SEPARATOR and key is None:
            key, part = part, []
        else:
            part.append(character)
    yield _pair(label, key, part)


def _pair(label: str, key: list[str] | None, value: list[str]) -> tuple[str, str]:
    if key is None:
        raise SliceLabelError(
            f"slice label {label!r} is not 'all' nor key=value pairs joined by ',' "
            f"(the part {''.join(value)!r} has no '='; a ',' or '=' in a key or value is "
            "escaped with a backslash)"
        )
    return "".join(key), "".join(value)
