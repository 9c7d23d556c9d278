"""A sampled day end to end through Dagster, with the warehouse and the instance on PostgreSQL.

Skips with a reason when no server is reachable; fails instead under CI=true.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest
from dagster import DagsterInstance, instance_for_test

from seer_metrics.events import InvalidEventError, RetrievalEvent
from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.warehouse.schema import EVENT_METRICS_TABLE, SLICE_METRICS_TABLE
from tests.seer_pipelines.defs.assets.test_pipelines import (
    LAST_DAY,
    CountingEvaluator,
    metadata_of,
    records_of,
    run_day,
    seed_warehouse,
)

pytestmark = pytest.mark.postgres

SAMPLING = {"sample_size": 60, "sample_minimum_per_slice": 8}


@pytest.fixture(autouse=True)
def _reset_calls() -> None:
    CountingEvaluator.calls.clear()


@pytest.fixture
def warehouse(postgres_url: str, postgres_schema: str) -> Iterator[WarehouseResource]:
    url = postgres_url.replace("postgresql+psycopg2://", "postgresql://")
    resource = WarehouseResource(url=url, db_schema=postgres_schema, chunk_size=32)
    yield resource
    resource.dispose()


@pytest.fixture
def postgres_instance(postgres_url: str) -> Iterator[DagsterInstance]:
    storage = {"postgres": {"postgres_url": postgres_url}}
    with instance_for_test(overrides={"storage": storage}) as instance:
        yield instance


def _stratified_mean(rows: pd.DataFrame, metric: str) -> float:
    """The ratio estimate of a metric's mean computed here from the stored event rows:
    each judged event of a stratum weighs (its stratum's population) / (its judged events)."""
    population = rows[rows["status"] != "invalid"].groupby("stratum").size()
    judged = rows[(rows["status"] == "ok") & rows[metric].notna()]
    weights = (
        population.reindex(judged["stratum"]).to_numpy()
        / judged.groupby("stratum")[metric].transform("size").to_numpy()
    )
    return float(np.sum(weights * judged[metric].to_numpy()) / np.sum(weights))


def test_a_sampled_day_runs_end_to_end_on_postgres(warehouse, postgres_instance) -> None:
    records = records_of(seed_warehouse(warehouse, days=1, events_per_day=240), LAST_DAY)
    valid_ids = set()
    for record in records:
        with contextlib.suppress(InvalidEventError):
            valid_ids.add(RetrievalEvent.from_record(record).event_id)

    first = run_day(warehouse, postgres_instance, LAST_DAY, kind="lexical", **SAMPLING)
    assert first.success
    judging = {key: value.value for key, value in metadata_of(first, "event_judgments").items()}
    rows = warehouse.read_partition_frame(EVENT_METRICS_TABLE, LAST_DAY)

    # Every source row has its one row: judged (ok), invalid, or outside the sample.
    assert sorted(rows["event_id"]) == sorted(record["event_id"] for record in records)
    statuses = Counter(rows["status"])
    assert set(statuses) == {"ok", "invalid", "not_sampled"}
    assert statuses["invalid"] == len(records) - len(valid_ids)
    assert statuses["ok"] == judging["sample_size"] < len(valid_ids)
    assert statuses["not_sampled"] == judging["not_sampled"] == len(valid_ids) - statuses["ok"]
    assert rows.loc[rows["status"] == "not_sampled", "recall"].isna().all()
    assert rows.loc[rows["status"] == "ok", "recall"].notna().all()
    # Only the sample reached the judge; every stratum has its minimum.
    judged_ids = set(rows.loc[rows["status"] == "ok", "event_id"])
    assert set(CountingEvaluator.calls) == judged_ids
    valid = rows[rows["status"] != "invalid"]
    population = Counter(valid["stratum"])
    sampled = Counter(valid.loc[valid["status"] == "ok", "stratum"])
    for stratum, size in population.items():
        assert sampled[stratum] >= min(size, SAMPLING["sample_minimum_per_slice"]), stratum

    slices = warehouse.read_partition_frame(SLICE_METRICS_TABLE, LAST_DAY).set_index("slice")
    everything = slices.loc["all"]
    assert everything["events"] == len(records)
    assert everything["evaluated"] == statuses["ok"]
    assert everything["not_sampled"] == statuses["not_sampled"]
    assert everything["invalid"] == statuses["invalid"] and everything["skipped_budget"] == 0
    for slice_name, row in slices.iterrows():
        accounted = row["evaluated"] + row["not_sampled"] + row["invalid"] + row["errors"]
        assert accounted == row["events"], slice_name
    # The day's figures are weighted estimates with sampling errors, not plain means of
    # the judged events.
    for metric in ("recall", "precision", "f1"):
        assert everything[f"mean_{metric}"] == pytest.approx(_stratified_mean(rows, metric))
        assert 0 < everything[f"se_{metric}"] < everything[f"std_{metric}"]
        assert everything[f"count_{metric}"] <= statuses["ok"]
    # A sampled slice whose judged values vary has a sampling error; one fully judged has none.
    sampled_slices = slices[(slices["not_sampled"] > 0) & (slices["std_recall"] > 0)]
    assert len(sampled_slices) > 1 and (sampled_slices["se_recall"] > 0).all()
    assert (slices.loc[slices["not_sampled"] == 0, "se_recall"].fillna(0.0) == 0.0).all()

    # A re-run judges the same events, every one of them a cache hit.
    CountingEvaluator.calls.clear()
    again = run_day(warehouse, postgres_instance, LAST_DAY, kind="lexical", **SAMPLING)
    rerun = {key: value.value for key, value in metadata_of(again, "event_judgments").items()}
    assert CountingEvaluator.calls == []
    assert rerun["cache_hits"] == len(judged_ids) and rerun["judged"] == 0
    rows_again = warehouse.read_partition_frame(EVENT_METRICS_TABLE, LAST_DAY)
    assert set(rows_again.loc[rows_again["status"] == "ok", "event_id"]) == judged_ids
    slices_again = warehouse.read_partition_frame(SLICE_METRICS_TABLE, LAST_DAY)
    columns = ["slice", "events", "evaluated", "not_sampled", "mean_recall", "se_recall"]
    pd.testing.assert_frame_equal(
        slices_again[columns].sort_values("slice").reset_index(drop=True),
        slices.reset_index()[columns].sort_values("slice").reset_index(drop=True),
    )
