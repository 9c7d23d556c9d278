"""Stratified, hash-keyed sampling of a day and the intervals of its slice estimates."""

from __future__ import annotations

import asyncio
from collections import Counter

import numpy as np
import pytest

from seer_metrics.evaluators.lexical import LexicalEvaluator
from seer_metrics.events import RetrievalEvent
from seer_metrics.scoring import score_event
from seer_metrics.slices import metadata_value
from seer_metrics.spend.sampling import (
    SamplingConfigError,
    SamplingSettings,
    allocate,
    estimate_mean,
    plan_sample,
    sampling_hash,
    stratum_label,
)
from seer_pipelines.demo.synthetic import generate_events

SLICE_KEYS = ("env", "feature_flag", "tenant")


def test_settings_refuse_what_cannot_be_used():
    with pytest.raises(SamplingConfigError, match="not both"):
        SamplingSettings(target=10, rate=0.5)
    with pytest.raises(SamplingConfigError, match="sample size"):
        SamplingSettings(target=0)
    with pytest.raises(SamplingConfigError, match="sample rate"):
        SamplingSettings(rate=1.5)
    assert not SamplingSettings().enabled
    assert not SamplingSettings(rate=1.0).enabled
    assert SamplingSettings(rate=0.1).wanted(1001) == 101


def test_hash_is_stable_keyed_and_uniform():
    ids = [f"event-{i}" for i in range(20_000)]
    first = sampling_hash(ids, key="k1")
    assert np.array_equal(first, sampling_hash(ids, key="k1"))
    assert not np.array_equal(first, sampling_hash(ids, key="k2"))
    assert first.dtype == np.uint64
    histogram, _ = np.histogram(first / 2.0**64, bins=10, range=(0, 1))
    assert histogram.min() > 1_800 and histogram.max() < 2_200


def test_allocation_meets_target_and_minimum_per_stratum():
    population = {"big": 9_000, "medium": 900, "small": 40, "tiny": 5}
    sizes = allocate(population, SamplingSettings(target=500, minimum_per_stratum=30))
    assert sum(sizes.values()) == 500
    assert sizes["small"] == 30 and sizes["tiny"] == 5  # never more than the stratum
    assert sizes["big"] > sizes["medium"] > sizes["small"]
    # The minimums alone exceed the target: the minimums win, so no slice goes unseen.
    many = {f"tenant-{i}": 100 for i in range(50)}
    assert set(allocate(many, SamplingSettings(target=100, minimum_per_stratum=30)).values()) == {
        30
    }
    # Unset: everything is judged.
    assert allocate(population, SamplingSettings()) == population


def _strata(records):
    return [
        stratum_label([(key, metadata_value(record["metadata"], key)) for key in SLICE_KEYS])
        for record in records
    ]


def test_same_events_on_every_rerun_and_in_any_order():
    records = list(generate_events(days=1, events_per_day=2_000, regression=None, seed=3))
    ids = [record["event_id"] for record in records]
    strata = _strata(records)
    settings = SamplingSettings(target=300, minimum_per_stratum=10)
    plan = plan_sample(ids, strata, settings)
    chosen = {i for i, keep in zip(ids, plan.selected(ids, strata), strict=True) if keep}
    assert len(chosen) == plan.judged >= 300
    reversed_plan = plan_sample(ids[::-1], strata[::-1], settings)
    again = {
        i
        for i, keep in zip(ids[::-1], reversed_plan.selected(ids[::-1], strata[::-1]), strict=True)
        if keep
    }
    assert again == chosen
    per_stratum = Counter(s for i, s in zip(ids, strata, strict=True) if i in chosen)
    for stratum, population in plan.population.items():
        assert per_stratum[stratum] == min(population, max(10, per_stratum[stratum]))
        assert per_stratum[stratum] >= min(population, 10)


def test_fully_judged_day_has_no_sampling_error():
    values = np.array([1.0, 0.5, np.nan, 0.0])
    estimate = estimate_mean(values, np.array([0, 0, 1, 1]), np.array([2, 2]))
    assert estimate.mean == pytest.approx(0.5)
    assert estimate.standard_error == 0.0
    assert estimate.judged == 3


def test_weights_undo_unequal_sampling():
    # Stratum 0: 1,000 events all worth 1.0, 10 judged; stratum 1: 10 events worth 0.0, all
    # judged. An unweighted mean of the judged events would say 0.5; the day's mean is ~0.99.
    values = np.array([1.0] * 10 + [0.0] * 10)
    strata = np.array([0] * 10 + [1] * 10)
    estimate = estimate_mean(values, strata, np.array([1_000, 10]))
    assert estimate.mean == pytest.approx(1_000 / 1_010)


@pytest.fixture(scope="module")
def scored_pool():
    """Events judged once by the lexical judge; simulated days draw from them."""
    records = generate_events(
        days=2, events_per_day=900, regression=None, seed=11, invalid_share=0.0
    )
    valid = [(record, RetrievalEvent.from_record(record)) for record in records]
    outcomes = asyncio.run(LexicalEvaluator().evaluate([event for _, event in valid]))
    f1 = []
    strata = []
    for (record, event), outcome in zip(valid, outcomes, strict=True):
        score = score_event(event, outcome.judgment)
        f1.append(np.nan if score.f1 is None else score.f1)
        strata.append(tuple(metadata_value(record["metadata"], key) or "-" for key in SLICE_KEYS))
    return np.array(f1), strata


def test_interval_coverage_of_sampled_slice_means(scored_pool):
    """Over many seeded days, the 95% intervals of the sampled slice means cover the fully
    judged means in 93-97% of cases."""
    f1, pool_strata = scored_pool
    slices = {
        "all": lambda cell: True,
        "env=prod": lambda cell: cell[0] == "prod",
        "env=staging": lambda cell: cell[0] == "staging",
        "feature_flag=retrieval-v2": lambda cell: cell[1] == "retrieval-v2",
    }
    covered = total = 0
    for seed in range(250):
        rng = np.random.default_rng(seed)
        draw = rng.choice(len(f1), size=1_200, replace=True)
        values = f1[draw]
        cells = [pool_strata[i] for i in draw]
        ids = [f"day{seed}-{i}" for i in range(len(draw))]
        labels = ["|".join(cell) for cell in cells]
        plan = plan_sample(ids, labels, SamplingSettings(target=240, minimum_per_stratum=8))
        judged = plan.selected(ids, labels)
        codes = {label: code for code, label in enumerate(sorted(plan.population))}
        population = np.array([plan.population[label] for label in sorted(plan.population)])
        strata = np.array([codes[label] for label in labels])
        for membership in slices.values():
            in_slice = np.array([membership(cell) for cell in cells])
            full = np.nanmean(np.where(in_slice, values, np.nan))
            estimate = estimate_mean(values[judged], strata[judged], population, in_slice[judged])
            low, high = estimate.interval()
            total += 1
            covered += low <= full <= high
    coverage = covered / total
    assert 0.93 <= coverage <= 0.97, f"coverage {coverage:.3f} over {total} intervals"
