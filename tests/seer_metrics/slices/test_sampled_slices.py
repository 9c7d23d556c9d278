"""Slice rows of a sampled day: population, judged sample, estimates and their errors."""

from __future__ import annotations

from datetime import date

import numpy as np
import pandas as pd
import pytest

from seer_metrics.slices import SLICE_COLUMNS, SliceAccumulator, slice_metrics
from seer_metrics.slices.groups import PairSliceBounds
from seer_metrics.spend.sampling import SamplingSettings, estimate_mean, plan_sample, stratum_label

KEYS = ("env", "feature_flag")
DAY = date(2026, 11, 1)


def _population(seed: int = 5, events: int = 3_000) -> pd.DataFrame:
    """A fully judged day: prod is better than dev, the v2 flag worse, some NULL metrics."""
    rng = np.random.default_rng(seed)
    env = rng.choice(["prod", "dev"], size=events, p=[0.8, 0.2])
    flag = rng.choice(["v1", "v2"], size=events, p=[0.9, 0.1])
    level = np.where(env == "prod", 0.8, 0.6) - np.where(flag == "v2", 0.2, 0.0)
    recall = np.clip(level + rng.normal(0, 0.2, events), 0, 1).round(2)
    precision = np.where(rng.random(events) < 0.05, np.nan, rng.random(events))
    frame = pd.DataFrame(
        {
            "partition_date": DAY,
            "event_id": [f"e{i}" for i in range(events)],
            "status": "ok",
            "recall": recall,
            "precision": precision,
            "f1": recall * 0.9,
            "ndcg": recall,
            "k": rng.integers(1, 4, events).astype(float),
            "n": rng.integers(0, 6, events).astype(float),
            "metadata": [{"env": e, "feature_flag": f} for e, f in zip(env, flag, strict=True)],
        }
    )
    frame["stratum"] = [
        stratum_label([("env", e), ("feature_flag", f)]) for e, f in zip(env, flag, strict=True)
    ]
    frame.loc[:9, "status"] = "invalid"
    frame.loc[:9, ["recall", "precision", "f1", "ndcg", "k", "n"]] = np.nan
    return frame


def _sampled(frame: pd.DataFrame, target: int, minimum: int = 30) -> pd.DataFrame:
    """The same day judged on a stratified sample: the rest is `not_sampled`, no metrics."""
    valid = frame[frame["status"] == "ok"]
    plan = plan_sample(
        list(valid["event_id"]), list(valid["stratum"]), SamplingSettings(target, None, minimum)
    )
    chosen = plan.selected(list(valid["event_id"]), list(valid["stratum"]))
    unjudged = valid.index[~chosen]
    sampled = frame.copy()
    sampled.loc[unjudged, "status"] = "not_sampled"
    sampled.loc[unjudged, ["recall", "precision", "f1", "ndcg", "k", "n"]] = np.nan
    return sampled


def _row(table: pd.DataFrame, label: str) -> pd.Series:
    return table.set_index("slice").loc[label]


def test_a_fully_judged_day_gives_the_plain_figures_with_no_sampling_error():
    frame = _population()
    with_strata = slice_metrics(frame, KEYS)
    without = slice_metrics(frame.drop(columns=["stratum"]), KEYS)
    pd.testing.assert_frame_equal(with_strata, without, check_exact=True)
    all_row = _row(with_strata, "all")
    assert all_row["mean_recall"] == frame.loc[frame["status"] == "ok", "recall"].mean()
    assert all_row["not_sampled"] == 0 and all_row["skipped_budget"] == 0
    for column in [c for c in SLICE_COLUMNS if c.startswith("se_")]:
        assert (with_strata[column] == 0.0).all(), column


def test_a_sampled_day_reports_population_sample_and_honest_errors():
    frame = _population()
    full = slice_metrics(frame, KEYS)
    sampled = slice_metrics(_sampled(frame, target=400), KEYS)
    ok = frame[frame["status"] == "ok"]
    strata_codes = {label: code for code, label in enumerate(sorted(set(ok["stratum"])))}
    for label in ("all", "env=prod", "env=dev", "feature_flag=v2"):
        row, truth = _row(sampled, label), _row(full, label)
        assert row["events"] == truth["events"]  # the population
        assert row["evaluated"] + row["not_sampled"] + row["invalid"] == row["events"]
        assert row["evaluated"] < truth["evaluated"]
        assert row["count_recall"] == row["evaluated"]  # judged events behind the mean
        assert row["se_recall"] > 0
        # within four standard errors of the fully judged figure
        assert abs(row["mean_recall"] - truth["mean_recall"]) < 4 * row["se_recall"]
    for label in ("all", "env=prod"):
        row, truth = _row(sampled, label), _row(full, label)
        error = row["se_share_recall_below_1"]
        assert error > 0 and abs(row["share_recall_below_1"] - truth["share_recall_below_1"]) < (
            4 * error
        )
    # The `all` estimate is exactly the stratified ratio estimator of the judged events.
    judged = _sampled(frame, target=400).query("status == 'ok'")
    population = np.bincount(ok["stratum"].map(strata_codes), minlength=len(strata_codes))
    estimate = estimate_mean(
        judged["recall"].to_numpy(), judged["stratum"].map(strata_codes).to_numpy(), population
    )
    assert _row(sampled, "all")["mean_recall"] == pytest.approx(estimate.mean)
    assert _row(sampled, "all")["se_recall"] == pytest.approx(estimate.standard_error)


def test_the_small_slice_keeps_its_minimum_and_weights_undo_oversampling():
    """v2 is 10% of the day but gets at least 30 judged events per stratum: unweighted, the
    judged events would pull the day's mean towards v2; weighted they do not."""
    frame = _population(seed=9)
    sampled_frame = _sampled(frame, target=150, minimum=30)
    sampled = slice_metrics(sampled_frame, KEYS)
    full = slice_metrics(frame, KEYS)
    assert _row(sampled, "feature_flag=v2")["evaluated"] >= 60  # two strata of v2, 30 each
    judged = sampled_frame[sampled_frame["status"] == "ok"]
    unweighted = judged["recall"].mean()
    truth = _row(full, "all")["mean_recall"]
    weighted = _row(sampled, "all")["mean_recall"]
    assert abs(weighted - truth) < abs(unweighted - truth)


def test_skipped_budget_events_count_as_unjudged_and_never_go_missing():
    frame = _sampled(_population(), target=600)
    judged = frame.index[frame["status"] == "ok"]
    over = judged[-50:]
    frame.loc[over, "status"] = "skipped_budget"
    frame.loc[over, ["recall", "precision", "f1", "ndcg", "k"]] = np.nan
    row = _row(slice_metrics(frame, KEYS), "all")
    assert row["skipped_budget"] == 50
    assert row["events"] == row["evaluated"] + row["not_sampled"] + row["skipped_budget"] + 10
    assert row["se_recall"] > 0


@pytest.mark.parametrize("chunk_size", [7, 1_000])
def test_chunks_of_a_sampled_day_give_exactly_the_whole_day(chunk_size):
    frame = _sampled(_population(), target=500)
    bounds = PairSliceBounds(minimum_events=50, max_slices=3)
    expected = slice_metrics(frame, KEYS, pair_bounds=bounds)
    accumulator = SliceAccumulator(KEYS, pair_bounds=bounds)
    columns = frame.drop(columns=["partition_date", "event_id"])
    for start in range(0, len(columns), chunk_size):
        accumulator.add(columns.iloc[start : start + chunk_size])
    pd.testing.assert_frame_equal(accumulator.result(DAY), expected, check_exact=True)
