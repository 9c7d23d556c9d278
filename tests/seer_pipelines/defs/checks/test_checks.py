"""Partitioned asset checks on slice_metrics: per-day results, metadata and alerts.

A stand-in `slice_metrics` asset writes crafted slice rows for each day into the real
`seer_slice_metrics` table, so every rule's outcome is known in advance.
"""

import itertools
import json
from datetime import date, timedelta
from pathlib import Path

import pytest
from dagster import AssetCheckSeverity, AssetExecutionContext, DagsterInstance, asset, materialize

from seer_metrics.rules import DEFAULT_RULES, parse_rules_config
from seer_pipelines.alerts import CARRIED, SENT, AlertOutbox, SlackAlertResource
from seer_pipelines.defs.checks.slice_rules import build_slice_checks
from seer_pipelines.defs.partitions import partition_day
from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.warehouse.schema import SLICE_METRICS_TABLE
from seer_testing.fake_slack import FakeSlack
from seer_testing.slice_rows import healthy_slice_row
from tests.default_location import DAILY_PARTITIONS

DAY = "2026-11-29"
WEEK = [(date(2026, 11, 29) - timedelta(days=i)).isoformat() for i in range(7, 0, -1)]


def slice_row(day: str, label: str, n: int = 100, **values: float) -> dict:
    return healthy_slice_row(date.fromisoformat(day), label, n, **values)


def healthy_day(day: str) -> list[dict]:
    return [
        slice_row(day, "all", n=300),
        slice_row(day, "env=prod", n=200),
        slice_row(day, "env=dev", n=100),
        slice_row(day, "feature_flag=retrieval-v2", n=150),
        slice_row(day, "tenant=<!channel>", n=10, mean_recall=0.1),
    ]


def regressed_day(day: str) -> list[dict]:
    return [
        slice_row(day, "all", n=300),
        slice_row(day, "env=prod", n=200, share_recall_below_1=0.3),
        slice_row(day, "env=dev", n=100),
        slice_row(day, "feature_flag=retrieval-v2", n=150, mean_f1=0.5, mean_ndcg=0.7),
        slice_row(day, "tenant=<!channel>", n=10, mean_recall=0.1),
    ]


def stand_in_asset(rows_by_day: dict[str, list[dict]]):
    @asset(name="slice_metrics", partitions_def=DAILY_PARTITIONS)
    def slice_metrics(context: AssetExecutionContext, warehouse: WarehouseResource) -> None:
        day = partition_day(context.partition_key)
        with warehouse.partition_writer(SLICE_METRICS_TABLE, day) as writer:
            writer.write(rows_by_day[context.partition_key])
            writer.commit()

    return slice_metrics


@pytest.fixture
def warehouse(tmp_path: Path) -> WarehouseResource:
    return WarehouseResource(url=f"sqlite:///{tmp_path / 'warehouse.sqlite'}")


def run_day(day, rows_by_day, warehouse, slack, instance, checks=None):
    result = materialize(
        [
            stand_in_asset(rows_by_day),
            checks or build_slice_checks(DEFAULT_RULES, DAILY_PARTITIONS),
        ],
        partition_key=day,
        resources={"warehouse": warehouse, "slack": slack},
        instance=instance,
    )
    assert result.success
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def slack_for(fake: FakeSlack) -> SlackAlertResource:
    return SlackAlertResource(token="xoxb-test", channel="#seer", api_url=fake.base_url)


def fake_posts(fake: FakeSlack):
    """(request, ts) of every accepted chat.postMessage, in order."""
    return [(r, r.ts) for r in fake.requests if r.method == "chat.postMessage" and r.accepted]


def test_checks_per_partition_with_metadata_and_one_alert(warehouse) -> None:
    rows = {day: healthy_day(day) for day in WEEK} | {DAY: regressed_day(DAY)}
    instance = DagsterInstance.ephemeral()
    with FakeSlack() as fake:
        slack = slack_for(fake)
        for day in WEEK:
            evaluations = run_day(day, rows, warehouse, slack, instance)
            assert set(evaluations) == {rule.name for rule in DEFAULT_RULES.rules}
            assert all(e.passed for e in evaluations.values()), day
            assert all(e.partition == day for e in evaluations.values())
        assert fake.messages == []  # no false alarm on the healthy week

        evaluations = run_day(DAY, rows, warehouse, slack, instance)
        assert {name for name, e in evaluations.items() if not e.passed} == {
            "recall_high_priority",
            "f1_drop",
            "ndcg_drop",
        }
        high = evaluations["recall_high_priority"]
        assert high.severity == AssetCheckSeverity.ERROR
        assert high.partition == DAY
        assert evaluations["ndcg_drop"].severity == AssetCheckSeverity.WARN
        f1 = evaluations["f1_drop"]
        metadata = f1.metadata
        failing = metadata["failing_slices"].value
        assert [o["slice"] for o in failing] == ["feature_flag=retrieval-v2"]
        assert failing[0]["delta"] == pytest.approx(0.3)
        assert failing[0]["baseline_sample_size"] == 7 * 150
        assert metadata["delta/feature_flag=retrieval-v2"].value == pytest.approx(0.3)
        assert metadata["observed/all"].value == pytest.approx(0.8)
        assert metadata["slices_failing"].value == 1
        assert metadata["slices_not_enough_data"].value == 1  # the 10-event tenant
        table = metadata["slices"].value
        assert table.splitlines()[2].startswith("| feature_flag=retrieval-v2 | fail | ERROR |")
        assert "tenant=&lt;!channel&gt; | not_enough_data" in table
        # each check says what it did itself, not what the day's message did
        assert metadata["alerts"].value == (
            "alerted: 1 slice(s) (feature_flag=retrieval-v2) in the 2026-11-29 alert, "
            "sent to slack:#seer"
        )
        assert evaluations["precision_tail"].metadata["alerts"].value == "nothing to alert"
        assert high.metadata["alerts"].value.startswith("alerted: 1 slice(s) (env=prod)")
        assert high.metadata["incidents_open"].value == [{"slice": "env=prod", "opened_on": DAY}]

        # ONE message for the partition, carrying all three failing checks
        assert len(fake.messages) == 1
        assert "3 failing checks" in fake.messages[0]["text"]

        # re-running the partition: same results, no second message
        again = run_day(DAY, rows, warehouse, slack, instance)
        assert not again["f1_drop"].passed
        assert again["f1_drop"].metadata["alerts"].value.startswith("already alerted: 1 slice(s)")
        assert len(fake.messages) == 1

    outbox = AlertOutbox(warehouse.get_engine())
    rows_sent = outbox.rows(date.fromisoformat(DAY))
    assert {(a.rule, a.slice, a.state) for a in rows_sent} == {
        ("recall_high_priority", "env=prod", SENT),
        ("f1_drop", "feature_flag=retrieval-v2", SENT),
        ("ndcg_drop", "feature_flag=retrieval-v2", SENT),
    }


def test_slack_down_never_fails_the_checks_and_next_run_delivers(warehouse) -> None:
    rows = {day: healthy_day(day) for day in WEEK} | {DAY: regressed_day(DAY)}
    instance = DagsterInstance.ephemeral()
    with FakeSlack() as fake:
        slack = slack_for(fake)
        for day in WEEK:
            run_day(day, rows, warehouse, slack, instance)
        fake.start_outage("server_error")
        evaluations = run_day(DAY, rows, warehouse, slack, instance)
        assert not evaluations["f1_drop"].passed
        assert "pending: Slack answered internal_error (HTTP 500)" in (
            evaluations["f1_drop"].metadata["alerts"].value
        )
        assert fake.messages == []
        fake.end_outage()
        # any later run (here another day's) delivers the pending alert of 2026-11-29
        evaluations = run_day(WEEK[-1], rows, warehouse, slack, instance)
        assert evaluations["f1_drop"].metadata["alerts"].value == "nothing to alert"
        assert len(fake.messages) == 1
        outbox = AlertOutbox(warehouse.get_engine())
        assert {a.state for a in outbox.rows(date.fromisoformat(DAY))} == {SENT}
        assert fake.messages[0]["blocks"][0]["text"]["text"].endswith(DAY)


def test_release_over_release_check_from_config(warehouse) -> None:
    config = parse_rules_config(
        {
            "rules": [
                {
                    "name": "v2_vs_v1",
                    "kind": "drop",
                    "statistic": "mean_f1",
                    "threshold": 0.2,
                    "severity": "ERROR",
                    "slices": ["feature_flag=retrieval-v2"],
                    "baseline": {"slice": "feature_flag=retrieval-v1"},
                }
            ]
        }
    )
    rows = {
        DAY: [
            slice_row(DAY, "feature_flag=retrieval-v1", mean_f1=0.85),
            slice_row(DAY, "feature_flag=retrieval-v2", mean_f1=0.55),
        ]
    }
    with FakeSlack() as fake:
        evaluations = run_day(
            DAY,
            rows,
            warehouse,
            slack_for(fake),
            DagsterInstance.ephemeral(),
            checks=build_slice_checks(config, DAILY_PARTITIONS),
        )
        assert set(evaluations) == {"v2_vs_v1"}
        result = evaluations["v2_vs_v1"]
        assert not result.passed
        [failing] = result.metadata["failing_slices"].value
        assert failing["baseline_label"] == "feature_flag=retrieval-v1 on the same day"
        assert len(fake.messages) == 1
        assert "feature_flag=retrieval-v1 on the same day" in json.dumps(fake.messages[0])


def test_demo_stream_is_quiet_on_clean_days_and_catches_the_release_on_its_first_day(
    tmp_path, monkeypatch
) -> None:
    """The real daily job on the demo's stream (realistic retriever, lexical judge, the
    release on the last two days): the chronic breaches of a real retriever open their
    incidents in the first week (the drop rules' trailing window), then no clean day
    pages (levels are carried, and a slice hovering at its line does not reopen); the
    release pages on its first day, led by the pair slice where it happened; a pass
    replies in the thread of the alert it closes."""
    from seer_pipelines.cli.seed import seed_warehouse
    from seer_pipelines.definitions import defs

    url = f"sqlite:///{tmp_path / 'warehouse.sqlite'}"
    end_day = date(2026, 11, 27)  # fixed: the stream of a day depends on its date
    days = [end_day - timedelta(days=offset) for offset in range(11, -1, -1)]
    warm_up = 7
    seed_warehouse(
        WarehouseResource(url=url),
        days=len(days),
        end_day=end_day,
        events_per_day=300,
        seed=7,
        regression_days=2,
        show_progress=False,
    )
    job = defs.resolve_job_def("seer_daily_job")
    instance = DagsterInstance.ephemeral()
    with FakeSlack() as fake:
        monkeypatch.setenv("SEER_WAREHOUSE_URL", url)
        monkeypatch.setenv("SEER_EVALUATOR", "lexical")
        monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-demo")
        monkeypatch.setenv("SEER_SLACK_CHANNEL", "#seer-demo")
        monkeypatch.setenv("SEER_SLACK_API_URL", fake.base_url)
        posted_by_day = {}
        failing_by_day = {}
        for day in days:
            result = job.execute_in_process(partition_key=day.isoformat(), instance=instance)
            assert result.success
            failing_by_day[day] = {
                (e.check_name, slice_outcome["slice"])
                for e in result.get_asset_check_evaluations()
                if not e.passed
                for slice_outcome in e.metadata["failing_slices"].value
            }
            posted_by_day[day] = len([m for m in fake.messages if not m.get("thread_ts")])
        posted = [r.body | {"ts": ts} for r, ts in fake_posts(fake)]
    clean, regressed = days[warm_up:-2], days[-2:]
    outbox = AlertOutbox(WarehouseResource(url=url).get_engine())
    rows = {(a.partition_date, a.rule, a.slice): a for a in outbox.rows(kind="check")}
    levels = {"recall_high_priority", "recall_other_slices", "precision_tail"}
    carried = 0
    for earlier, later in itertools.pairwise(days):
        for rule, label in failing_by_day[earlier] & failing_by_day[later]:
            if rule not in levels:
                continue
            row = rows[(later, rule, label)]
            if row.payload["incident"]["state"] == "escalated":
                # much worse than where it opened: pages again, once, and only for the release
                assert (row.state, later) == (SENT, regressed[0]), (later, rule, label)
            else:  # still failing the next day: no new page
                assert row.state == CARRIED, (later, rule, label)
                carried += 1
    assert carried > 0
    # no clean day after the warm-up pages, though levels keep failing on them
    assert all(failing_by_day[day] for day in clean)
    before = posted_by_day[days[warm_up - 1]]
    assert [posted_by_day[day] for day in clean] == [before] * len(clean)
    pages = [m for m in fake.messages if not m.get("thread_ts")]
    days_paged = [date.fromisoformat(m["blocks"][0]["text"]["text"][-10:]) for m in pages]
    assert len(days_paged) == len(set(days_paged))  # at most one message per day
    assert set(days_paged) & set(clean) == set()
    # the release is caught on its first day, in the pair slice where it happened
    pair = "env=prod,feature_flag=retrieval-v2"
    first_bad = pages[days_paged.index(regressed[0])]
    assert ("recall_drop", pair) in failing_by_day[regressed[0]]
    assert rows[(regressed[0], "recall_drop", pair)].state == SENT
    summary = first_bad["blocks"][1]["text"]["text"]
    assert f"*{pair}*" in summary, summary
    assert "fell by" in json.dumps(first_bad["blocks"])
    replies = [m for m in fake.messages if m.get("thread_ts")]
    for reply in replies:
        assert reply["thread_ts"] in {m["ts"] for m in posted}
        assert "Recovered" in reply["blocks"][0]["text"]["text"]
    # no "Recovered" while the release is live (on its second day it had said "Recovered"
    # for f1_drop on the pair and recall_drop on all)
    texts = [reply["blocks"][0]["text"]["text"] for reply in replies]
    live = [text for text in texts for day in regressed if f"*Recovered* on {day}" in text]
    assert live == []
