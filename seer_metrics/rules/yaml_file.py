"""Reading a rules file: bounded in size and nesting, YAML without anchors and aliases.

A rules file is input a user may get wrong or craft: the "billion laughs" (a few hundred
bytes of nested aliases) expanded to gigabytes once validated, and deep nesting exhausts
the stack of YAML's recursive composer. Each is a `RulesConfigError` here instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from seer_metrics.rules.field_types import cut
from seer_metrics.rules.model import RulesConfigError

# What a rules file may hold. The packaged file is about 10 KB; a file this size already
# holds thousands of overrides.
MAX_RULES_FILE_BYTES = 256 * 1024
# Mappings and lists inside each other: a rules file needs 6 (the file, rules, a rule,
# overrides, an override, its slices); deeper is refused before YAML's recursive composer
# can exhaust Python's stack.
MAX_NESTING = 20


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


def read_yaml(text: str, source: str) -> Any:
    """The parsed YAML of `text`; anything YAML cannot read is a `RulesConfigError`."""
    try:
        return yaml.load(text, Loader=_RulesLoader)  # safe: SafeLoader, aliases refused
    except (yaml.YAMLError, ValueError) as error:
        # ValueError: a value YAML cannot build, e.g. an integer of 5,000 digits, 2026-13-45
        raise RulesConfigError(f"{source}: not valid YAML: {cut(str(error))}") from None


def read_rules_file(path: Path) -> str:
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
