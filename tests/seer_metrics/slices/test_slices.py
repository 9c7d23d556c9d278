"""Per-(day, slice) aggregates."""

from __future__ import annotations

import json
import math
import random
from datetime import date

import pandas as pd
import pytest

from seer_metrics.slices import SLICE_COLUMNS, SliceAccumulator, slice_metrics
from seer_metrics.slices.groups import PairSliceBounds


def _scores() -> pd.DataFrame:
    rows = [
        # day 1: prod v1 good, prod v2 bad, one invalid, one error
        ("2026-11-01", "ok", 1.0, 0.5, 2 / 3, 1.0, 2, {"env": "prod", "feature_flag": "v1"}),
        ("2026-11-01", "ok", 0.5, 0.2, 2 / 7, 0.5, 2, {"env": "prod", "feature_flag": "v2"}),
        ("2026-11-01", "ok", None, 0.0, None, None, 0, {"env": "dev", "feature_flag": "v2"}),
        ("2026-11-01", "invalid", None, None, None, None, None, {"env": "prod"}),
        ("2026-11-01", "error", None, None, None, None, None, '{"env": "dev"}'),
        ("2026-11-02", "ok", 1.0, 1.0, 1.0, 1.0, 3, {"tenant": "acme"}),
    ]
    frame = pd.DataFrame(
        rows,
        columns=["partition_date", "status", "recall", "precision", "f1", "ndcg", "k", "metadata"],
    )
    frame["prompt_tokens"] = [10, 20, 30, 0, 5, 1]
    frame["completion_tokens"] = [1, 2, 3, 0, 0, 1]
    frame["cost_usd"] = [0.1, 0.2, 0.3, 0.0, 0.0, 0.01]
    return frame


def _row(table: pd.DataFrame, day: str, label: str) -> pd.Series:
    match = table[(table["partition_date"] == day) & (table["slice"] == label)]
    assert len(match) == 1, (day, label)
    return match.iloc[0]


def test_columns_and_slices():
    table = slice_metrics(_scores())
    assert list(table.columns) == list(SLICE_COLUMNS)
    day1 = set(table[table["partition_date"] == "2026-11-01"]["slice"])
    assert day1 == {
        "all",
        "env=prod",
        "env=dev",
        "feature_flag=v1",
        "feature_flag=v2",
    }
    assert set(table[table["partition_date"] == "2026-11-02"]["slice"]) == {"all"}


def test_all_slice_counts_and_means_over_defined_values():
    row = _row(slice_metrics(_scores()), "2026-11-01", "all")
    assert (row["events"], row["evaluated"], row["invalid"], row["errors"]) == (5, 3, 1, 1)
    assert row["mean_recall"] == pytest.approx(0.75)
    assert row["count_recall"] == 2
    assert row["mean_precision"] == pytest.approx(0.7 / 3)
    assert row["mean_ndcg"] == pytest.approx(0.75)
    assert row["share_recall_below_1"] == pytest.approx(0.5)
    assert row["share_precision_below_bloat"] == pytest.approx(2 / 3)
    assert row["p10_recall"] == pytest.approx(0.55)
    assert row["mean_k"] == pytest.approx(4 / 3)
    assert row["prompt_tokens"] == 65
    assert row["cost_usd"] == pytest.approx(0.6)


def test_metadata_slices_and_bloat_line():
    table = slice_metrics(_scores(), slice_keys=["env"], bloat_line=0.1)
    prod = _row(table, "2026-11-01", "env=prod")
    assert (prod["events"], prod["invalid"]) == (3, 1)
    assert prod["mean_recall"] == pytest.approx(0.75)
    assert prod["share_precision_below_bloat"] == 0.0
    dev = _row(table, "2026-11-01", "env=dev")
    assert dev["errors"] == 1
    assert math.isnan(dev["mean_recall"])
    assert dev["share_precision_below_bloat"] == 1.0


def test_any_metadata_key_can_slice():
    table = slice_metrics(_scores(), slice_keys=["tenant"])
    assert _row(table, "2026-11-02", "tenant=acme")["mean_f1"] == 1.0


def test_missing_columns_are_named():
    with pytest.raises(KeyError, match="metadata"):
        slice_metrics(_scores().drop(columns=["metadata"]))


def _random_day(seed: int, events: int) -> pd.DataFrame:
    """A day of scores as `seer_event_metrics` chunks hold them: NULLs, odd metadata."""
    rng = random.Random(seed)
    rows = []
    for _ in range(events):
        status = rng.choices(["ok", "invalid", "error"], weights=[0.9, 0.05, 0.05])[0]
        ok = status == "ok"
        metadata: object = {
            "env": rng.choice(["prod", "staging", "dev", None]),
            "feature_flag": rng.choice(["v1", "v2", True, 3]),
        }
        if rng.random() < 0.05:
            metadata = json.dumps(metadata)
        elif rng.random() < 0.03:
            metadata = {}
        rows.append(
            {
                "status": status,
                "recall": rng.choice([0.0, 0.5, 1.0, 2 / 3, None]) if ok else None,
                "precision": rng.random() if ok and rng.random() < 0.95 else None,
                "f1": rng.random() if ok else None,
                "ndcg": rng.random() if ok and rng.random() < 0.8 else None,
                "k": rng.randint(0, 3) if ok else None,
                "metadata": metadata,
                "prompt_tokens": rng.randint(0, 500),
                "completion_tokens": rng.randint(0, 50),
                "cost_usd": rng.random() / 1000,
            }
        )
    return pd.DataFrame(rows)


@pytest.mark.parametrize("chunk_size", [1, 7, 500])
def test_accumulated_chunks_give_exactly_the_slice_metrics_of_the_whole_day(chunk_size) -> None:
    day = date(2026, 11, 1)
    scores = _random_day(seed=chunk_size, events=400)
    # An all-NULL chunk (object columns) must not change anything either.
    scores.loc[:9, ["recall", "precision", "f1", "ndcg", "k"]] = None
    keys = ["env", "feature_flag", "tenant"]
    # small enough bounds that some pairs are kept and some are cut by the cap
    bounds = PairSliceBounds(minimum_events=20, max_slices=5)
    expected = slice_metrics(scores.assign(partition_date=day), keys, 0.4, bounds)
    assert expected["slice_key"].str.contains(",").sum() == 5
    accumulator = SliceAccumulator(keys, bloat_line=0.4, pair_bounds=bounds)
    for start in range(0, len(scores), chunk_size):
        accumulator.add(scores.iloc[start : start + chunk_size].astype(object))
    pd.testing.assert_frame_equal(accumulator.result(day), expected, check_exact=True)


def test_accumulator_keeps_columns_with_more_distinct_values_than_its_codes_exactly() -> None:
    """Past 65,536 distinct values a column leaves its two-byte codes for plain numbers,
    half-way through the day; the rows stay exactly those of the whole day."""
    day = date(2026, 11, 1)
    generator = random.Random(3)
    events = 70_000
    scores = pd.DataFrame(
        {
            "status": ["ok"] * (events - 2) + ["invalid", "error"],
            "recall": [generator.choice((0.0, 0.5, 1.0, None)) for _ in range(events)],
            "precision": [generator.random() for _ in range(events)],  # all distinct
            "f1": [None] * events,
            "ndcg": [1.0] * events,
            "k": [generator.randint(1, 4) for _ in range(events)],
            "metadata": [{"env": generator.choice(("prod", "dev"))} for _ in range(events)],
            "cost_usd": [-0.0 if index == 5 else index * 1e-7 for index in range(events)],
        }
    )
    expected = slice_metrics(scores.assign(partition_date=day), ["env"], 0.4)
    accumulator = SliceAccumulator(["env"], bloat_line=0.4)
    for start in range(0, events, 5_000):
        accumulator.add(scores.iloc[start : start + 5_000])
    pd.testing.assert_frame_equal(accumulator.result(day), expected, check_exact=True)


def test_accumulator_codes_widen_mid_day_and_stay_exact() -> None:
    """Codes start at one byte and widen as a column's distinct values grow, after many
    chunks were stored narrow: numbers to two bytes and then to plain float64, a key's
    values past 128 to two bytes; the rows stay exactly those of the whole day."""
    day = date(2026, 11, 1)
    events = 70_000
    index = range(events)
    scores = pd.DataFrame(
        {
            "status": ["ok" if i % 50 else ("invalid", "error", None, "odd")[i % 4] for i in index],
            # 200 distinct values for 4 chunks, then past 256 and near the end past 65,536
            "precision": [round(i % 200 / 200, 3) if i < 4_000 else i / 100_000 for i in index],
            "recall": [(0.0, 0.5, 1.0, None)[i % 4] for i in index],
            "f1": [None] * events,
            "ndcg": [i // 100 % 300 / 300 for i in index],  # past 256 values in chunk 26
            "k": [i % 4 for i in index],
            "metadata": [{"env": ("prod", "dev")[i % 2], "tenant": f"t{i // 200}"} for i in index],
            "completion_tokens": [i % 7 for i in index],
        }
    )
    bounds = PairSliceBounds(minimum_events=100, max_slices=20)
    expected = slice_metrics(scores.assign(partition_date=day), ["tenant", "env"], 0.4, bounds)
    assert len(expected) == 1 + 350 + 2 + 20
    accumulator = SliceAccumulator(["tenant", "env"], bloat_line=0.4, pair_bounds=bounds)
    for start in range(0, events, 1_000):
        accumulator.add(scores.iloc[start : start + 1_000])
    pd.testing.assert_frame_equal(accumulator.result(day), expected, check_exact=True)


class _Text(str):
    """A str subclass: read through `metadata_value`, not the plain-text fast path."""


def test_accumulator_reads_every_kind_of_metadata_value_like_slice_metrics() -> None:
    day = date(2026, 11, 1)
    metadata = [
        {"env": "prod"},
        {"env": "pr\x00od"},
        {"env": "\ud800"},
        {"env": "prød ✓"},
        {"env": _Text("prod")},
        {"env": True},
        {"env": False},
        {"env": 3},
        {"env": 2.5},
        {"env": float("nan")},
        {"env": None},
        {"env": {"nested": 1}},
        {"env": ["prod"]},
        '{"env": "dev"}',
        '{"env": {"a": 1}}',
        "not json",
        "",
        None,
        {},
        pd.Series({"env": "mapping"}).to_dict(),
    ]
    scores = pd.DataFrame(
        {
            "status": ["ok"] * len(metadata),
            "recall": [1.0] * len(metadata),
            "precision": [0.5] * len(metadata),
            "f1": [0.5] * len(metadata),
            "ndcg": [None] * len(metadata),
            "k": [1] * len(metadata),
            "metadata": metadata,
        }
    )
    expected = slice_metrics(scores.assign(partition_date=day), ["env"], 0.4)
    accumulator = SliceAccumulator(["env"], bloat_line=0.4)
    for start in range(0, len(scores), 3):
        accumulator.add(scores.iloc[start : start + 3])
    pd.testing.assert_frame_equal(accumulator.result(day), expected, check_exact=True)


def test_accumulator_without_events_has_no_rows() -> None:
    table = SliceAccumulator().result(date(2026, 11, 1))
    assert table.empty and list(table.columns) == list(SLICE_COLUMNS)


def _pair_day(volumes: dict[tuple[str, str, str], int]) -> pd.DataFrame:
    """One day with `volumes[(env, flag, tenant)]` events each; f1 encodes the env."""
    rows = []
    for (env, flag, tenant), count in volumes.items():
        for index in range(count):
            f1 = (0.9 if env == "prod" else 0.5) - (0.3 if flag == "v2" else 0.0)
            rows.append(
                {
                    "partition_date": "2026-11-01",
                    "status": "ok",
                    "recall": 1.0 if index % 2 else 0.5,
                    "precision": 0.5,
                    "f1": f1,
                    "ndcg": 1.0,
                    "k": 2,
                    "metadata": {"env": env, "feature_flag": flag, "tenant": tenant},
                }
            )
    return pd.DataFrame(rows)


def test_pair_slices_are_labelled_in_the_configured_key_order() -> None:
    scores = _pair_day({("prod", "v2", "acme"): 120, ("prod", "v1", "acme"): 29})
    table = slice_metrics(scores, ["feature_flag", "env"])
    pair = _row(table, "2026-11-01", "feature_flag=v2,env=prod")
    assert (pair["slice_key"], pair["slice_value"]) == ("feature_flag,env", "v2,prod")
    assert pair["events"] == 120
    assert pair["mean_f1"] == pytest.approx(0.6)
    assert pair["mean_recall"] == pytest.approx(0.75)
    assert pair["count_f1"] == 120
    # below the default minimum of 30 events (the rules' minimum sample): no pair slice
    assert "feature_flag=v1,env=prod" not in set(table["slice"])
    assert "feature_flag=v1" in set(table["slice"])


def test_pair_slices_need_the_minimum_volume_and_the_largest_are_kept() -> None:
    volumes = {
        ("prod", "v1", "acme"): 50,
        ("prod", "v2", "acme"): 30,
        ("staging", "v1", "globex"): 20,
        ("staging", "v2", "globex"): 9,
    }
    scores = _pair_day(volumes)
    keys = ["env", "feature_flag", "tenant"]
    every = slice_metrics(scores, keys, pair_bounds=PairSliceBounds(minimum_events=10))
    pairs = every[every["slice_key"].str.contains(",")]
    # key pairs in configured order, values sorted within each pair of keys
    assert list(pairs["slice"]) == [
        "env=prod,feature_flag=v1",
        "env=prod,feature_flag=v2",
        "env=staging,feature_flag=v1",
        "env=prod,tenant=acme",
        "env=staging,tenant=globex",
        "feature_flag=v1,tenant=acme",
        "feature_flag=v1,tenant=globex",
        "feature_flag=v2,tenant=acme",
    ]
    assert dict(zip(pairs["slice"], pairs["events"], strict=True))["env=prod,tenant=acme"] == 80
    capped = slice_metrics(
        scores, keys, pair_bounds=PairSliceBounds(minimum_events=10, max_slices=3)
    )
    kept = capped[capped["slice_key"].str.contains(",")]
    # the three largest (80, 50, 50): ties go to the earlier key pair
    assert list(kept["slice"]) == [
        "env=prod,feature_flag=v1",
        "env=prod,tenant=acme",
        "feature_flag=v1,tenant=acme",
    ]
    off = slice_metrics(scores, keys, pair_bounds=PairSliceBounds(max_slices=0))
    assert not off["slice_key"].str.contains(",").any()
    # the single-key slices never change with the pair settings
    singles = every[~every["slice_key"].str.contains(",")].reset_index(drop=True)
    pd.testing.assert_frame_equal(singles, off.reset_index(drop=True))


def test_pair_slices_skip_events_missing_either_key() -> None:
    scores = _pair_day({("prod", "v2", "acme"): 12})
    scores.loc[:3, "metadata"] = [{"env": "prod"}] * 4
    table = slice_metrics(scores, pair_bounds=PairSliceBounds(minimum_events=5))
    assert _row(table, "2026-11-01", "env=prod,feature_flag=v2")["events"] == 8
    assert _row(table, "2026-11-01", "env=prod")["events"] == 12


def test_pair_bounds_are_validated() -> None:
    with pytest.raises(ValueError, match="minimum_events"):
        PairSliceBounds(minimum_events=0)
    with pytest.raises(ValueError, match="max pair slices"):
        PairSliceBounds(max_slices=-1)


def test_pair_slices_exist_down_to_the_rules_minimum_sample(tmp_path) -> None:
    """A smaller pair could never get a verdict; one as large as the minimum can."""
    from seer_metrics.rules import DEFAULT_MINIMUM_SAMPLE, load_rules_config
    from seer_pipelines.defs.assets.metrics import SliceDefaults, SliceMetricsConfig
    from seer_pipelines.settings import load_settings

    def defaults(env: dict[str, str]) -> SliceDefaults:
        settings = load_settings(env)
        return SliceDefaults.of(settings, load_rules_config(settings.rules_file))

    assert PairSliceBounds().minimum_events == DEFAULT_MINIMUM_SAMPLE
    assert SliceMetricsConfig().pair_bounds(defaults({})) == PairSliceBounds(
        DEFAULT_MINIMUM_SAMPLE, 50
    )
    rules = tmp_path / "rules.yaml"
    rules.write_text("minimum_sample: 45\nrules: []\n", encoding="utf-8")
    from_file = defaults({"SEER_RULES_FILE": str(rules)})
    assert SliceMetricsConfig().pair_bounds(from_file).minimum_events == 45
    assert SliceMetricsConfig(pair_minimum_events=100).pair_bounds(from_file).minimum_events == 100
