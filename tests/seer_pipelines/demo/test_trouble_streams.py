"""The kinds of trouble of the realistic stream: each changes what it should, in its slice
and on its days, and nothing else."""

from __future__ import annotations

from datetime import date, timedelta

import pandas as pd
import pytest

from seer_metrics.slices import slice_metrics
from seer_pipelines.demo.judges import stream_judge, with_judge_column
from seer_pipelines.demo.realistic import (
    TENANT_SHARES,
    StreamEvent,
    generate_stream,
    ideal_scores,
    load_pool,
)
from seer_pipelines.demo.trouble import (
    ContextBloat,
    EmptyContexts,
    JudgeChange,
    NewTenant,
    Release,
    SlowDrift,
    Trouble,
    VolumeLoss,
    WrongIndex,
    tenant_shares,
)

END = date(2026, 11, 27)
DAYS = 4
PER_DAY = 150
PROD_V2 = {"env": "prod", "feature_flag": "retrieval-v2"}


def stream(*troubles: Trouble, **options) -> list[StreamEvent]:
    return list(
        generate_stream(
            DAYS, end_day=END, events_per_day=PER_DAY, seed=5, troubles=troubles, **options
        )
    )


def trouble_days(trouble: Trouble) -> set[date]:
    first = END - timedelta(days=DAYS - 1)
    return {first + timedelta(days=i) for i in trouble.day_indices(DAYS, first)}


def split(
    clean: list[StreamEvent], troubled: list[StreamEvent], trouble: Trouble
) -> list[tuple[StreamEvent, StreamEvent]]:
    """The (clean, troubled) pairs of the trouble's slice and days; every other event is
    asserted identical in both streams."""
    days = trouble_days(trouble)
    by_id = {event.record["event_id"]: event for event in troubled}
    inside = []
    for before in clean:
        after = by_id.get(before.record["event_id"])
        if before.day in days and trouble.matches(before.metadata):
            inside.append((before, after))
            continue
        assert after is not None and after.record == before.record
        assert after.judgment == before.judgment and not after.troubles
    return inside


def test_bloat_grows_the_slice_contexts_from_4_to_8_only_on_its_days() -> None:
    bloat = ContextBloat(PROD_V2, start=-2)
    clean, bloated = stream(), stream(bloat)
    inside = split(clean, bloated, bloat)
    assert len(inside) > 100
    pool = {p.example.id: p for examples in load_pool().values() for p in examples}
    for before, after in inside:
        ranking = [passage.id for passage, _ in pool[after.example_id].ranked]
        assert list(before.context_ids) == ranking[:4]
        assert list(after.context_ids) == ranking[:8]  # fewer when it has fewer candidates
        assert after.troubles == ("context_bloat",)
    scores = ideal_scores(bloated)
    assert set(scores["n"]) <= {4, 5, 6, 7, 8} and (scores["n"] == 8).mean() > 0.2
    before = ideal_scores([before for before, _ in inside])
    after = ideal_scores([after for _, after in inside])
    assert after["precision"].mean() < before["precision"].mean() - 0.1
    assert after["recall"].mean() > before["recall"].mean()


def test_empty_contexts_hit_their_share_of_the_slice() -> None:
    empty = EmptyContexts({"env": "prod"}, start=-3, length=2, share=0.25)
    clean, troubled = stream(), stream(empty)
    inside = split(clean, troubled, empty)
    emptied = [after for _, after in inside if not after.context_ids]
    assert 0.17 < len(emptied) / len(inside) < 0.33
    for before, after in inside:
        assert after.context_ids in ((), before.context_ids)
    scores = ideal_scores(emptied)
    assert (scores["n"] == 0).all() and (scores["recall"] == 0).all()
    assert scores["precision"].isna().all()  # nothing retrieved: precision is undefined


def test_a_tenant_on_a_wrong_index_has_recall_zero() -> None:
    wrong = WrongIndex({"tenant": "t3"}, start=-2)
    clean, troubled = stream(tenants=20), stream(wrong, tenants=20)
    inside = split(clean, troubled, wrong)
    assert len(inside) > 10
    recall = ideal_scores([after for _, after in inside])["recall"]
    assert recall.max() == 0.0
    assert ideal_scores([before for before, _ in inside])["recall"].mean() > 0.6
    for before, after in inside:
        assert after.record["task"] == before.record["task"]  # the question, another index
        assert after.context_ids and not set(after.context_ids) & set(before.context_ids)


def test_tenants_option() -> None:
    events = stream(tenants=20)
    tenants = {event.metadata["tenant"] for event in events}
    assert tenants <= set(tenant_shares(20)) and len(tenants) >= 15
    assert {event.metadata["tenant"] for event in stream()} == set(TENANT_SHARES)
    shares = tenant_shares(20)
    assert sum(shares.values()) == pytest.approx(1.0) and shares["t1"] > 0.15 > shares["t7"]


def test_volume_loss_keeps_a_tenth_of_the_day_and_a_slice_can_vanish() -> None:
    loss = VolumeLoss()  # the last day, 90% lost
    clean, troubled = stream(), stream(loss)
    inside = split(clean, troubled, loss)
    kept = [after for _, after in inside if after is not None]
    assert 0.05 < len(kept) / len(inside) < 0.15
    clean_ids = {e.record["event_id"]: e.record for e in clean}
    assert all(clean_ids[event.record["event_id"]] == event.record for event in kept)

    vanish = VolumeLoss({"tenant": "globex"}, start=1, length=2, share=1.0)
    gone = stream(vanish)
    inside = split(clean, gone, vanish)
    assert inside and all(after is None for _, after in inside)
    table = slice_metrics(ideal_scores(gone), ["tenant"])
    days_with_globex = set(table.loc[table["slice"] == "tenant=globex", "partition_date"])
    assert days_with_globex == {END - timedelta(days=3), END}


def test_slow_drift_loses_the_top_hit_of_a_growing_share() -> None:
    drift = SlowDrift(PROD_V2, start=0, step=0.25)
    clean, drifted = stream(), stream(drift)
    pool = {p.example.id: p for examples in load_pool().values() for p in examples}
    share_by_day = {}
    for day in sorted(trouble_days(drift)):
        pairs = [(b, a) for b, a in split(clean, drifted, drift) if b.day == day]
        for _, after in pairs:
            ranking = [passage.id for passage, _ in pool[after.example_id].ranked]
            assert list(after.context_ids) in (ranking[:4], ranking[1:5])
        share_by_day[day] = sum(bool(a.troubles) for _, a in pairs) / len(pairs)
    shares = [share_by_day[day] for day in sorted(share_by_day)]
    assert shares == sorted(shares) and shares[0] < 0.4 and shares[-1] > 0.8


@pytest.mark.parametrize(
    "trouble",
    [Release(PROD_V2, start=0, length=2), ContextBloat(PROD_V2, start=0, length=2)],
    ids=["release", "bloat"],
)
def test_a_trouble_then_its_fix_is_clean_again(trouble: Trouble) -> None:
    clean, troubled = stream(), stream(trouble)
    assert split(clean, troubled, trouble)  # the other days are the clean ones
    assert {event.day for event in troubled if event.troubles} == trouble_days(trouble)


def test_a_judge_change_moves_the_judge_and_its_identity_from_its_day() -> None:
    change = JudgeChange(start=-2, judge="lexical")
    clean, troubled = stream(), stream(change)
    inside = split(clean, troubled, change)
    lexical = stream_judge("lexical").identity
    assert lexical.startswith("lexical:lexical-v1:")
    assert {after.judge for _, after in inside} == {lexical}
    assert {before.judge for before, _ in inside} == {"ideal:gold:v1"}
    assert all(after.record == before.record for before, after in inside)
    assert any(after.judgment != before.judgment for before, after in inside)
    scores = ideal_scores(troubled)
    table = with_judge_column(slice_metrics(scores, ["env"]), scores)
    by_day = table.groupby("partition_date")["judge"].agg(lambda judges: sorted(set(judges)))
    assert list(by_day) == [["ideal:gold:v1"]] * 2 + [[lexical]] * 2
    assert table["judge"].notna().all()
    relabelled = stream(JudgeChange(start=-1, judge="ideal-v2"))
    assert {e.judge for e in relabelled if e.day == END} == {"ideal:gold:v2"}


def test_a_new_tenant_appears_from_its_day_on() -> None:
    new = NewTenant(start=2, share=0.1)
    clean, troubled = stream(), stream(new)
    inside = split(clean, troubled, new)
    moved = [(b, a) for b, a in inside if a.metadata["tenant"] == "newco"]
    assert 0.05 < len(moved) / len(inside) < 0.15
    for before, after in inside:
        assert after.context_ids == before.context_ids
        assert {**after.metadata, "tenant": before.metadata["tenant"]} == dict(before.metadata)
    assert {e.day for e in troubled if e.metadata["tenant"] == "newco"} == trouble_days(new)


def test_troubles_combine_and_their_draws_do_not_depend_on_each_other() -> None:
    bloat = ContextBloat(PROD_V2, start=-2)
    both = stream(bloat, EmptyContexts({"env": "staging"}, start=-2))
    alone = stream(bloat)
    for with_both, with_bloat in zip(both, alone, strict=True):
        if with_both.metadata["env"] == "prod":
            assert with_both.record == with_bloat.record


def test_trouble_bounds() -> None:
    assert list(Release().day_indices(21)) == [19, 20]
    assert ContextBloat(PROD_V2).slice_label == "env=prod,feature_flag=retrieval-v2"
    assert VolumeLoss().slice_label == "all"
    first = END - timedelta(days=9)
    assert list(JudgeChange(start=END - timedelta(days=2)).day_indices(10, first)) == [7, 8, 9]
    with pytest.raises(ValueError, match="needs a slice"):
        ContextBloat({})
    with pytest.raises(ValueError, match="share"):
        EmptyContexts(PROD_V2, share=0.0)
    with pytest.raises(ValueError, match="outside"):
        WrongIndex(start=30).day_indices(21)
    with pytest.raises(ValueError, match="unknown judge"):
        list(generate_stream(1, end_day=END, events_per_day=5, judge="oracle"))


def test_scores_carry_the_context_size_and_the_judge() -> None:
    scores = ideal_scores(stream(invalid_share=0.05))
    assert set(scores["n"].dropna()) == {4}
    assert scores.loc[scores["status"] == "invalid", "n"].isna().all()
    assert set(scores["judge"]) == {"ideal:gold:v1"}
    assert isinstance(scores, pd.DataFrame)
