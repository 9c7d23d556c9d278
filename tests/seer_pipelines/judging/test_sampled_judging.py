"""Sampling and budgets of the judging step, and the rules on sampled slices."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from datetime import date, timedelta

import pandas as pd
import pytest
import sqlalchemy as sa
from dagster import AssetCheckSeverity, instance_for_test, materialize

from seer_metrics.evaluators.lexical import LexicalEvaluator
from seer_metrics.events import RetrievalEvent
from seer_metrics.judgment_store import JudgmentRecord, JudgmentStore, judgment_key
from seer_metrics.rules import DEFAULT_RULES, evaluate_rules
from seer_metrics.slices import DEFAULT_SLICE_KEYS, event_stratum
from seer_metrics.slices import slice_metrics as slice_metrics_frame
from seer_metrics.spend.budget import Budget, BudgetTracker
from seer_pipelines.defs.checks.accounting import account_for_day
from seer_pipelines.defs.checks.budget import budget_result
from seer_pipelines.defs.resources.evaluator import EvaluatorResource
from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.demo.source_table import write_events
from seer_pipelines.demo.synthetic import generate_events
from seer_pipelines.judging.budget_days import first_judged_at
from seer_pipelines.judging.day_plan import BudgetGate
from seer_testing.slice_rows import healthy_slice_row
from tests.default_location import event_judgments, event_metrics, retrieval_events, slice_metrics

DAY = date(2026, 11, 29)


@pytest.fixture
def warehouse(tmp_path):
    resource = WarehouseResource(url=f"sqlite:///{tmp_path / 'warehouse.sqlite'}")
    records = list(generate_events(1, end_day=DAY, events_per_day=400, seed=5))
    write_events(resource.get_engine(), records, table_name=resource.resolved_events_table())
    yield resource
    resource.dispose()


def _run(warehouse: WarehouseResource, instance, **evaluator):
    result = materialize(
        [retrieval_events, event_judgments, event_metrics, slice_metrics],
        selection=[event_judgments, event_metrics, slice_metrics],
        instance=instance,
        partition_key=DAY.isoformat(),
        resources={"warehouse": warehouse, "evaluator": EvaluatorResource(**evaluator)},
    )
    metadata = result.asset_materializations_for_node("event_judgments")[0].metadata
    return {key: value.value for key, value in metadata.items()}


def _event_rows(warehouse: WarehouseResource) -> pd.DataFrame:
    return pd.read_sql(
        "select event_id, status, stratum, recall from seer_event_metrics", warehouse.get_engine()
    )


def test_a_sampled_day_stores_its_sample_counts_the_rest_and_reruns_from_the_cache(warehouse):
    settings = {"kind": "lexical", "sample_size": 80, "sample_minimum_per_slice": 12}
    with instance_for_test() as instance:
        first = _run(warehouse, instance, **settings)
        rows = _event_rows(warehouse)
        again = _run(warehouse, instance, **settings)
        rows_again = _event_rows(warehouse)
    strata = pd.read_sql("select * from seer_day_strata", warehouse.get_engine())
    total = int(
        pd.read_sql("select count(*) from retrieval_events", warehouse.get_engine()).iloc[0, 0]
    )
    # only the sample is stored (judged or invalid); the rest is counted per stratum
    assert len(rows) == first["events"] == first["sample_size"] == rows["event_id"].nunique()
    assert set(rows["status"]) <= {"ok", "invalid", "error"}
    assert strata["population"].sum() == first["sample_population"] == total
    assert strata["sampled"].sum() == len(rows)
    assert first["not_sampled"] == total - len(rows) and first["day_rows"] == total
    assert dict(Counter(rows["stratum"])) == dict(
        zip(strata["stratum"], strata["sampled"], strict=True)
    )
    judged = set(rows.loc[rows["status"] == "ok", "event_id"])
    # same events on the re-run, all of them cache hits
    assert set(rows_again["event_id"]) == set(rows["event_id"])
    assert again["cache_hits"] == len(judged) and again["judged"] == again["model_calls"] == 0
    # the per-slice minimum: every stratum has min(its events, 12) sampled events
    for stratum in strata.itertuples():
        assert stratum.sampled >= min(stratum.population, 12), stratum.stratum
    slices = pd.read_sql("select * from seer_slice_metrics", warehouse.get_engine())
    all_row = slices.set_index("slice").loc["all"]
    assert all_row["events"] == total and all_row["evaluated"] == len(judged)
    assert all_row["not_sampled"] == total - len(rows) and all_row["se_recall"] > 0


def test_every_source_row_of_a_sampled_day_is_accounted_for(warehouse):
    settings = {"kind": "lexical", "sample_size": 60, "sample_minimum_per_slice": 5}
    engine = warehouse.get_engine()
    with instance_for_test() as instance:
        judged = _run(warehouse, instance, **settings)
    result = account_for_day(warehouse, DAY, judged)
    assert result.passed, result.description
    figures = {key: value.value for key, value in result.metadata.items()}
    assert figures["rows_read"] == figures["strata_rows"] == judged["day_rows"]
    assert figures["rows_stored"] == figures["rows_sampled"] == judged["events"]
    with engine.begin() as connection:  # the source changes after judging
        connection.execute(
            sa.text(
                "delete from retrieval_events "
                "where rowid in (select min(rowid) from retrieval_events)"
            )
        )
    result = account_for_day(warehouse, DAY, judged)
    assert not result.passed and result.severity == AssetCheckSeverity.ERROR
    assert "re-run the day" in result.description


def test_a_sampled_days_slices_equal_the_estimates_from_stored_unsampled_rows(tmp_path):
    """The populations counted in the warehouse give the slice rows that one row per
    unsampled event (how a sampled day was stored before) gave."""
    resource = WarehouseResource(url=f"sqlite:///{tmp_path / 'warehouse.sqlite'}")
    records = list(generate_events(1, end_day=DAY, events_per_day=600, seed=3, invalid_share=0))
    write_events(resource.get_engine(), records, table_name=resource.resolved_events_table())
    settings = {"kind": "lexical", "sample_size": 90, "sample_minimum_per_slice": 10}
    with instance_for_test() as instance:
        _run(resource, instance, **settings)
    engine = resource.get_engine()
    stored = pd.read_sql("select * from seer_event_metrics", engine)
    new = pd.read_sql("select * from seer_slice_metrics", engine).set_index("slice")
    events = [RetrievalEvent.from_record(record) for record in records]
    unsampled = [event for event in events if event.event_id not in set(stored["event_id"])]
    old_style = pd.DataFrame(
        {
            "event_id": [event.event_id for event in unsampled],
            "status": "not_sampled",
            "metadata": [dict(event.metadata) for event in unsampled],
            "stratum": [event_stratum(event.metadata, DEFAULT_SLICE_KEYS) for event in unsampled],
        }
    )
    frame = pd.concat([stored, old_style], ignore_index=True)
    frame["partition_date"] = DAY
    old = slice_metrics_frame(frame, DEFAULT_SLICE_KEYS).set_index("slice")
    columns = ["events", "evaluated", "not_sampled", "mean_recall", "se_recall", "mean_f1"]
    columns += ["se_f1", "share_recall_below_1", "p10_recall", "std_recall"]
    assert sorted(old.index) == sorted(new.index)
    pd.testing.assert_frame_equal(
        new.loc[old.index, columns], old[columns], check_dtype=False, check_exact=False
    )
    resource.dispose()


def test_a_fully_judged_day_writes_no_unjudged_rows(warehouse):
    with instance_for_test() as instance:
        figures = _run(warehouse, instance, kind="lexical")
    rows = _event_rows(warehouse)
    assert figures["not_sampled"] == 0 and figures["skipped_budget"] == 0
    assert set(rows["status"]) <= {"ok", "invalid", "error"}
    slices = pd.read_sql("select se_recall, se_f1 from seer_slice_metrics", warehouse.get_engine())
    assert (slices.fillna(0.0) == 0.0).all().all()


def _events(count: int) -> list[RetrievalEvent]:
    records = generate_events(1, end_day=DAY, events_per_day=count, seed=2, invalid_share=0.0)
    return [RetrievalEvent.from_record(record) for record in records]


def test_the_budget_stops_at_the_projected_cap_and_cached_events_stay_free(tmp_path):
    store = JudgmentStore(tmp_path / "cache.sqlite")
    events = _events(40)
    gate = BudgetGate(Budget(tokens=1), store, "gpt-4o-mini", "v1", (0.15, 0.6))
    assert gate.split(events) == ([], events) and gate.tracker.stopped_by == "tokens"
    # A cap of about ten events: the first ones are judged, the rest are over budget.
    probe = BudgetGate(Budget(), store, "gpt-4o-mini", "v1", (0.15, 0.6))
    probe.split(events)
    per_event = probe.tracker.reserved_tokens / len(events)
    gate = BudgetGate(Budget(tokens=int(per_event * 10)), store, "gpt-4o-mini", "v1", (0.15, 0.6))
    judge, over = gate.split(events)
    assert 5 <= len(judge) <= 15 and judge + over == events
    assert judge == events[: len(judge)]
    # Judgments in the cache cost nothing: a re-run judges them again within any cap.
    judgments = asyncio.run(LexicalEvaluator().evaluate(judge))
    store.put_judgments(
        JudgmentRecord(
            judgment_key(e, "gpt-4o-mini", "v1"), e.event_id, "gpt-4o-mini", "v1", o.judgment
        )
        for e, o in zip(judge, judgments, strict=True)
    )
    rerun = BudgetGate(Budget(usd=0.0), store, "gpt-4o-mini", "v1", (0.15, 0.6))
    assert rerun.split(events) == (judge, over)
    # A dollar cap works the same way.
    tracker = BudgetTracker(Budget(usd=0.01))
    assert tracker.admit(0.004, 100) and tracker.admit(0.004, 100)
    assert not tracker.admit(0.004, 100) and tracker.stopped_by == "usd"
    assert tracker.admit(0.0, 0)  # free events still pass


def test_the_budget_check_fails_with_warn_when_events_were_skipped():
    failed = budget_result("2026-11-29", {"skipped_budget": 12, "budget": "$1.00"})
    assert not failed.passed and failed.severity == AssetCheckSeverity.WARN
    assert "12 events" in (failed.description or "")
    assert budget_result("2026-11-29", {"skipped_budget": 0}).passed


def _history(days: int = 7) -> pd.DataFrame:
    return pd.DataFrame(
        [
            healthy_slice_row(DAY - timedelta(days=offset), "env=prod", n=4_000, std_recall=0.45)
            for offset in range(1, days + 1)
        ]
    )


def _outcome(today: dict) -> str:
    outcomes = evaluate_rules(DEFAULT_RULES, pd.DataFrame([today]), _history(), DAY)
    return next(o for o in outcomes if o.rule == "recall_drop" and o.slice == "env=prod").status


def test_forty_judged_events_do_not_page_like_four_thousand():
    """Recall fell 0.11 (threshold 0.10) on a slice of 4,000 events: fully judged, the
    drop is far beyond noise; estimated from 40 judged events it is not."""
    full = healthy_slice_row(DAY, "env=prod", n=4_000, mean_recall=0.84, std_recall=0.45)
    assert _outcome(full) == "fail"
    sampled = healthy_slice_row(
        DAY,
        "env=prod",
        n=4_000,
        evaluated=40,
        not_sampled=3_960,
        count_recall=40,
        mean_recall=0.84,
        std_recall=0.45,
        se_recall=0.45 / 40**0.5 * (1 - 40 / 4_000) ** 0.5,
    )
    assert _outcome(sampled) == "pass"
    # and below the minimum sample the judged events count, not the slice's 4,000
    assert _outcome({**sampled, "evaluated": 20, "count_recall": 20}) == "not_enough_data"


def test_a_rerun_of_a_capped_day_draws_the_same_line(tmp_path):
    """Events the first run paid for are cache hits on a re-run; read as of the day's first
    budgeted run they still count, so the re-run cannot spend another whole cap."""
    store = JudgmentStore(tmp_path / "cache.sqlite")
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'warehouse.sqlite'}")
    events = _events(40)
    probe = BudgetGate(Budget(), store, "gpt-4o-mini", "v1", (0.15, 0.6))
    probe.split(events)
    budget = Budget(tokens=int(probe.tracker.reserved_tokens / len(events) * 10))
    started = first_judged_at(engine, None, DAY)
    assert first_judged_at(engine, None, DAY) == started  # recorded once per day
    assert first_judged_at(engine, None, DAY + timedelta(days=1)) >= started
    time.sleep(0.01)
    first = BudgetGate(budget, store, "gpt-4o-mini", "v1", (0.15, 0.6), as_of=started)
    judge, over = first.split(events)
    assert 5 <= len(judge) <= 15
    judgments = asyncio.run(LexicalEvaluator().evaluate(judge))
    store.put_judgments(
        JudgmentRecord(
            judgment_key(e, "gpt-4o-mini", "v1"), e.event_id, "gpt-4o-mini", "v1", o.judgment
        )
        for e, o in zip(judge, judgments, strict=True)
    )
    # Without the day's line the paid events look free and a fresh cap goes further.
    unlined, _ = BudgetGate(budget, store, "gpt-4o-mini", "v1", (0.15, 0.6)).split(events)
    assert len(unlined) > len(judge)
    rerun = BudgetGate(
        budget, store, "gpt-4o-mini", "v1", (0.15, 0.6), as_of=first_judged_at(engine, None, DAY)
    )
    assert rerun.split(events) == (judge, over)
