"""A rules file crafted to hurt: alias bombs, huge files, deep nesting, huge or infinite
numbers, and values whose quoting would make a huge error (issue 19)."""

from __future__ import annotations

import re
import time
import typing
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from seer_metrics.rules import RulesConfigError, evaluate_rules, load_rules_config
from seer_metrics.rules import parse_rules_config as parse
from seer_metrics.rules.config import (
    MAX_ERROR_LINES,
    BaselineModel,
    OverrideModel,
    RuleModel,
    RulesFileModel,
)
from seer_metrics.rules.yaml_file import MAX_RULES_FILE_BYTES
from seer_metrics.slices import SLICE_COLUMNS
from seer_testing.slice_rows import healthy_slice_row

THRESHOLD_RULE = {
    "name": "level",
    "kind": "threshold",
    "statistic": "mean_recall",
    "threshold": 0.8,
    "severity": "WARN",
}
DROP_RULE = {
    "name": "fall",
    "kind": "drop",
    "statistic": "mean_recall",
    "threshold": 0.1,
    "severity": "ERROR",
}


def alias_bomb(levels: int, key: str = "severity") -> str:
    """The "billion laughs": each level an alias list of nine of the level before."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} [{','.join([f'*a{level - 1}'] * 9)}]")
    lines.append(
        f"rules: [{{name: r, kind: threshold, statistic: mean_recall, threshold: 0.8, "
        f"{key}: *a{levels - 1}}}]"
    )
    return "\n".join(lines) + "\n"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------------- the file itself


def test_yaml_aliases_are_refused_with_a_short_error(tmp_path: Path) -> None:
    """Five levels (59,049 leaves) only: unfixed, nine levels took 65 s and 8.4 GB."""
    path = write(tmp_path, alias_bomb(levels=5))
    started = time.monotonic()
    with pytest.raises(RulesConfigError, match="anchors and aliases") as caught:
        load_rules_config(path)
    assert time.monotonic() - started < 2
    assert str(caught.value).startswith(f"{path}: not valid YAML")
    assert len(str(caught.value)) < 600


@pytest.mark.parametrize(
    "text",
    [
        "minimum_sample: &n 30\n",  # an anchor alone
        "base: &b {severity: WARN}\nrules: [{<<: *b, name: r}]\n",  # a merge key
    ],
)
def test_any_anchor_is_refused(tmp_path: Path, text: str) -> None:
    with pytest.raises(RulesConfigError, match="anchors and aliases"):
        load_rules_config(write(tmp_path, text))


def test_a_nine_level_alias_bomb_is_refused_at_once(tmp_path: Path) -> None:
    path = write(tmp_path, alias_bomb(levels=9))
    assert path.stat().st_size < 600
    started = time.monotonic()
    with pytest.raises(RulesConfigError, match="anchors and aliases"):
        load_rules_config(path)
    assert time.monotonic() - started < 2


def test_a_rules_file_larger_than_the_cap_is_refused(tmp_path: Path) -> None:
    padding = "# a comment line of a harmless but enormous rules file\n"
    text = "minimum_sample: 30\n" + padding * (MAX_RULES_FILE_BYTES // len(padding) + 1)
    with pytest.raises(RulesConfigError, match=r"larger than 256 KiB"):
        load_rules_config(write(tmp_path, text))
    fits = "minimum_sample: 31\n" + padding * ((MAX_RULES_FILE_BYTES - 100) // len(padding))
    assert load_rules_config(write(tmp_path, fits)).minimum_sample == 31


def test_deep_nesting_is_a_clear_error_not_a_crash(tmp_path: Path) -> None:
    depth = 5_000
    text = "high_priority_slices: " + "[" * depth + "]" * depth + "\n"
    with pytest.raises(RulesConfigError, match="nested more than 20 levels"):
        load_rules_config(write(tmp_path, text))


@pytest.mark.parametrize(
    "text",
    [
        "rules: !" + "x" * 100_000 + " []\n",  # YAML's error quotes the whole tag
        "minimum_sample: " + "1" * 5_000 + "\n",  # an integer Python refuses to read
        "when: 2026-13-45\n",  # a date that is not one
    ],
    ids=["long-tag", "5000-digit-integer", "bad-date"],
)
def test_a_yaml_error_is_clear_and_quotes_little_of_the_file(tmp_path: Path, text: str) -> None:
    with pytest.raises(RulesConfigError, match="not valid YAML") as caught:
        load_rules_config(write(tmp_path, text))
    assert len(str(caught.value)) < 600


# ------------------------------------------------------------------ errors that quote input


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("severity", ["lol"] * 100_000),
        ("severity", "PANIC" * 100_000),
        ("statistic", {"nested": [["lol"] * 1_000] * 1_000}),
        ("name", "bad name" * 100_000),
        ("slices", ["prod" * 100_000]),
        ("threshold", 10**5000),
    ],
    ids=["long-list", "long-text", "deep-mapping", "long-name", "long-pattern", "huge-integer"],
)
def test_an_error_quotes_at_most_a_few_hundred_characters(key: str, value: Any) -> None:
    with pytest.raises(RulesConfigError, match=rf"rules\[0\].*{key}") as caught:
        parse({"rules": [{**THRESHOLD_RULE, key: value}]})
    assert len(str(caught.value)) <= 500, len(str(caught.value))


def test_an_error_lists_at_most_a_screenful_of_problems() -> None:
    rules = [{**THRESHOLD_RULE, "name": f"r{i}", "severity": "PANIC" * 50} for i in range(1_000)]
    unknown = {f"key_{i}" * 20: 1 for i in range(1_000)}
    with pytest.raises(RulesConfigError) as caught:
        parse({"rules": rules, **unknown})
    lines = str(caught.value).splitlines()
    assert len(lines) == MAX_ERROR_LINES + 1
    assert lines[-1] == f"... and {1_000 + 1 - MAX_ERROR_LINES} more error(s)"
    assert max(len(line) for line in lines) <= 400


# ------------------------------------------------------------------------------ the numbers

# Every number in the rules file: (the rule around it, its lowest and highest allowed
# values, the range an error states, values just outside). A number key added to a
# section without a row here fails `test_every_numeric_key_has_a_bound`.
NUMBER_CASES: dict[tuple[str, str], tuple[dict, float, float, str, tuple[float, ...]]] = {
    ("file", "minimum_sample"): ({}, 1, 1_000_000, "[1, 1,000,000] (events)", (0, 1_000_001)),
    ("file", "close_after_passes"): ({}, 1, 365, "[1, 365] (passes)", (0, 366)),
    ("file", "baseline_lookback_days"): ({}, 1, 365, "[1, 365] (days)", (0, 366)),
    ("file", "false_discovery_rate"): ({}, 1e-9, 1 - 1e-9, "(0, 1)", (0, 1)),
    ("rule", "threshold"): (THRESHOLD_RULE, 0, 1, "[0, 1] (a share or a metric)", (-0.1, 1.1)),
    ("rule", "confidence"): (THRESHOLD_RULE, 0.5, 1 - 1e-9, "[0.5, 1)", (0.4, 1)),
    ("rule", "minimum_sample"): (THRESHOLD_RULE, 1, 1_000_000, "[1, 1,000,000]", (0, 10**7)),
    ("rule", "worsen_by"): (THRESHOLD_RULE, 0, 1, "[0, 1] (a share or a metric)", (-0.1, 2)),
    ("baseline", "trailing_days"): (DROP_RULE, 1, 365, "[1, 365] (days)", (0, 10**9)),
    ("baseline", "skip_recent_days"): (DROP_RULE, 0, 365, "[0, 365] (days)", (-1, 366)),
    ("override", "threshold"): (DROP_RULE, 0, 1, "[0, 1] (a share or a metric)", (-1, 1.5)),
    ("override", "minimum_sample"): (DROP_RULE, 1, 1_000_000, "[1, 1,000,000]", (-1, 10**30)),
}
SECTIONS = {
    "file": RulesFileModel,
    "rule": RuleModel,
    "override": OverrideModel,
    "baseline": BaselineModel,
}


def _is_numeric(annotation: Any) -> bool:
    if annotation in (int, float):
        return True
    return any(_is_numeric(arg) for arg in typing.get_args(annotation) if arg is not type(None))


def test_every_numeric_key_has_a_bound() -> None:
    numeric = {
        (section, key)
        for section, model in SECTIONS.items()
        for key, field in model.model_fields.items()
        if _is_numeric(field.annotation)
    }
    assert numeric == set(NUMBER_CASES)


def file_with(section: str, key: str, value: Any) -> tuple[dict, str]:
    """A rules mapping with `value` at (section, key), and where an error must say it is."""
    rule = NUMBER_CASES[(section, key)][0]
    if section == "file":
        return {key: value}, rf"^rules: {key}: "
    if section == "rule":
        return {"rules": [{**rule, key: value}]}, rf"rules\[0\] \({rule['name']}\)\.{key}: "
    if section == "baseline":
        raw = {"rules": [{**rule, "baseline": {key: value}}]}
        return raw, rf"rules\[0\] \({rule['name']}\)\.baseline\.{key}: "
    override = {"slices": ["env=dev"], key: value}
    raw = {"rules": [{**rule, "overrides": [{"slices": ["env=prod"]}, override]}]}
    return raw, rf"rules\[0\] \({rule['name']}\)\.overrides\[1\]\.{key}: "


def rejection(section: str, key: str, value: Any) -> str:
    """The error for `value` at (section, key), checked to name the rule and the key."""
    raw, place = file_with(section, key, value)
    with pytest.raises(RulesConfigError) as caught:
        parse(raw)
    message = str(caught.value)
    assert re.search(place, message), (value, message)
    return message


@pytest.mark.parametrize(("section", "key"), list(NUMBER_CASES))
def test_every_number_is_bounded_and_its_error_names_rule_key_and_range(
    section: str, key: str
) -> None:
    _, low, high, allowed, outside = NUMBER_CASES[(section, key)]
    for value in (low, high):
        parse(file_with(section, key, value)[0])
    for value in (*outside, float("inf"), float("-inf"), 1e300):
        message = rejection(section, key, value)
        assert allowed in message, (value, message)
    for value in (float("nan"), 10**400, True, "7"):
        rejection(section, key, value)


@pytest.mark.parametrize(
    ("rule", "allowed"),
    [
        ({"statistic": "mean_n", "threshold": 20_000}, "[0, 10,000] (passages an event)"),
        ({"statistic": "events", "threshold": 2e9}, "[0, 1,000,000,000] (events)"),
        (
            {"kind": "drop", "statistic": "events", "threshold": 1.5},
            "[0, 1] (the share of the normal count lost)",
        ),
        ({"statistic": "share_failed", "comparison": "above", "threshold": 2}, "[0, 1]"),
        ({"kind": "drop", "threshold": -0.1}, "[0, 1] (a share or a metric)"),
        ({"statistic": "mean_n", "worsen_by": 1e5}, "[0, 10,000] (passages an event)"),
    ],
)
def test_a_threshold_is_bounded_by_what_its_statistic_is(rule: dict, allowed: str) -> None:
    with pytest.raises(RulesConfigError, match=re.escape(allowed)):
        parse({"rules": [{**THRESHOLD_RULE, **rule}]})


def test_the_longest_allowed_windows_evaluate() -> None:
    """Unfixed, `trailing_days: 1000000000` loaded, then the check step died of an
    OverflowError; the longest window allowed reads its history and evaluates."""
    config = parse(
        {
            "baseline_lookback_days": 365,
            "rules": [{**DROP_RULE, "baseline": {"trailing_days": 365}}],
        }
    )
    assert config.history_days == 365
    days = pd.date_range("2025-11-29", "2026-11-28").strftime("%Y-%m-%d")
    history = pd.DataFrame(
        [healthy_slice_row(day, "all", 100) for day in days], columns=list(SLICE_COLUMNS)
    )
    today = pd.DataFrame([healthy_slice_row("2026-11-29", "all", 100)], columns=SLICE_COLUMNS)
    (outcome,) = evaluate_rules(config, today, history)
    assert outcome.status == "pass"
    assert "365" in (outcome.baseline_label or "")
