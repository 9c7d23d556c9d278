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
from seer_pipelines.defs.checks.accounting import account_for_day
from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.warehouse.schema import (
    DAY_STRATA_TABLE,
    EVENT_METRICS_TABLE,
    SLICE_METRICS_TABLE,
)
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


def _stratified_mean(rows: pd.DataFrame, strata: pd.DataFrame, metric: str) -> float:
    """The ratio estimate of a metric's mean computed here from the stored sample and the
    counted strata: each judged event of a stratum weighs (its stratum's valid population,
    the unread events scaled by the sample's valid share) / (its judged events)."""
    counted = strata.set_index("stratum")
    stored = rows.groupby("stratum").size()
    ok = rows[rows["status"] == "ok"].groupby("stratum").size()
    unread = counted["population"] - counted["sampled"]
    population = ok.add(unread * (ok / stored), fill_value=0)
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

    strata = warehouse.read_partition_frame(DAY_STRATA_TABLE, LAST_DAY)
    # Only the sample is stored (judged or invalid); every other event is counted.
    statuses = Counter(rows["status"])
    assert set(statuses) <= {"ok", "invalid"} and statuses["ok"] > 0
    assert len(rows) == judging["sample_size"] == strata["sampled"].sum() < len(records)
    assert strata["population"].sum() == len(records) == judging["day_rows"]
    assert judging["not_sampled"] == len(records) - len(rows)
    assert set(rows["event_id"]) <= {record["event_id"] for record in records}
    assert rows.loc[rows["status"] == "ok", "recall"].notna().all()
    accounted = account_for_day(warehouse, LAST_DAY, judging)
    assert accounted.passed, accounted.description
    # Only the sample reached the judge; every stratum has its minimum.
    judged_ids = set(rows.loc[rows["status"] == "ok", "event_id"])
    assert set(CountingEvaluator.calls) == judged_ids
    for stratum in strata.itertuples():
        assert stratum.sampled >= min(stratum.population, SAMPLING["sample_minimum_per_slice"])

    slices = warehouse.read_partition_frame(SLICE_METRICS_TABLE, LAST_DAY).set_index("slice")
    everything = slices.loc["all"]
    assert everything["events"] == len(records)
    assert everything["evaluated"] == statuses["ok"]
    assert everything["not_sampled"] == judging["not_sampled"]
    assert everything["invalid"] == statuses["invalid"] and everything["skipped_budget"] == 0
    for slice_name, row in slices.iterrows():
        accounted = row["evaluated"] + row["not_sampled"] + row["invalid"] + row["errors"]
        assert accounted == row["events"], slice_name
    # The day's figures are weighted estimates with sampling errors, not plain means of
    # the judged events.
    for metric in ("recall", "precision", "f1"):
        assert everything[f"mean_{metric}"] == pytest.approx(_stratified_mean(rows, strata, metric))
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
