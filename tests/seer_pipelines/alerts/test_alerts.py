"""The alert outbox, the one-message-per-partition Slack summary, retries and escaping."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import date, timedelta
from pathlib import Path

import pandas as pd
import pytest
import sqlalchemy as sa

from seer_metrics.rules import CheckOutcome
from seer_metrics.rules.incidents import Incident
from seer_pipelines.alerts import (
    KIND_CHECK,
    PENDING,
    RESOLVED,
    SENT,
    Alert,
    AlertDispatcher,
    AlertOutbox,
    SlackAlertResource,
    SlackMessage,
    build_check_message,
    escape_mrkdwn,
    render_console,
    top_missing_requirements,
)
from seer_pipelines.alerts.message_headline import message_headline
from seer_pipelines.warehouse.writer import utc_now
from seer_testing.fake_slack import FakeSlack

DAY = date(2026, 11, 29)
TOKEN = "xoxb-secret-token-123"


def failing_outcome(
    rule: str = "f1_drop", slice_label: str = "feature_flag=retrieval-v2", **changes
) -> CheckOutcome:
    values = dict(
        rule=rule,
        slice=slice_label,
        status="fail",
        severity="ERROR",
        statistic="mean_f1",
        observed=0.52,
        threshold=0.2,
        sample_size=312,
        message="dropped",
        partition_date=DAY.isoformat(),
        baseline=0.83,
        baseline_label="the trailing 7 days",
        baseline_sample_size=2100,
        delta=0.31,
        noise=0.05,
        high_priority=False,
        kind="drop" if rule.endswith("_drop") else "threshold",
    )
    values.update(changes)
    return CheckOutcome(**values)


def passing(outcome: CheckOutcome) -> CheckOutcome:
    return CheckOutcome(**{**outcome.to_dict(), "status": "pass"})


@pytest.fixture
def outbox(tmp_path: Path) -> AlertOutbox:
    return AlertOutbox(sa.create_engine(f"sqlite:///{tmp_path / 'warehouse.sqlite'}"))


def slack_resource(slack: FakeSlack, token: str = TOKEN) -> SlackAlertResource:
    return SlackAlertResource(
        token=token,
        channel="#seer-alerts",
        api_url=slack.base_url,
        dagster_url="https://dagster.example.com/",
    )


def mrkdwn_texts(blocks: list[dict]) -> list[str]:
    texts = []
    for block in blocks:
        if "text" in block:
            texts.append(block["text"]["text"])
        texts.extend(element["text"] for element in block.get("elements", []))
    return texts


# ---------------------------------------------------------------------------- escaping


def test_escape_mrkdwn() -> None:
    assert escape_mrkdwn("<!channel> & <@U123>") == "&lt;!channel&gt; &amp; &lt;@U123&gt;"
    assert escape_mrkdwn("a & b") == "a &amp; b"


def test_tenant_name_cannot_ping_the_channel() -> None:
    evil = "tenant=<!channel> & <https://evil.example|click>"
    alerts = [
        Alert(
            id=1,
            partition_date=DAY,
            kind="check",
            rule="recall_other_slices",
            slice=evil,
            severity="WARN",
            state=PENDING,
            fingerprint="x",
            payload=failing_outcome(
                "recall_other_slices",
                evil,
                statistic="mean_recall",
                delta=None,
                baseline=None,
                observed=0.5,
                threshold=0.85,
                baseline_label="<!here>",
            ).to_dict(),
            run_id="run-1",
        )
    ]
    examples = {evil: [("<!everyone> what is the refund policy?", 3)]}
    message = build_check_message(DAY, alerts, examples)
    everything = json.dumps(message.blocks) + message.text
    for raw in ("<!channel>", "<!everyone>", "<https://evil", "<!here>"):
        assert raw not in everything
    assert "&lt;!channel&gt; &amp; &lt;https://evil.example|click&gt;" in everything
    assert "&lt;!everyone&gt;" in everything
    # the only real link is ours, to the run
    links = [t for t in mrkdwn_texts(message.blocks) if "<http" in t]
    assert len(links) == 1
    assert "<http://localhost:3000/runs/run-1|Dagster run run-1>" in links[0]
    # the console shows the text as typed
    assert "tenant=<!channel> & <https://evil.example|click>" in render_console(message)


# ---------------------------------------------------------------------------- message


def test_one_message_summarises_every_failing_check_of_the_partition(outbox, tmp_path) -> None:
    outcomes = [
        failing_outcome(),
        failing_outcome(
            "recall_high_priority",
            "env=prod",
            statistic="share_recall_below_1",
            observed=0.25,
            threshold=0.0,
            sample_size=80,
            delta=None,
            baseline=None,
            baseline_label=None,
            high_priority=True,
        ),
        failing_outcome(
            "ndcg_drop", "feature_flag=retrieval-v2", severity="WARN", statistic="mean_ndcg"
        ),
    ]
    outbox.record_check_outcomes(
        DAY, [*outcomes, passing(failing_outcome(slice_label="all"))], "r1"
    )

    def examples(day, slices):
        assert day == DAY
        return {"feature_flag=retrieval-v2": [("The nationality of that director", 41)]}

    with FakeSlack() as slack:
        dispatcher = AlertDispatcher(outbox, slack_resource(slack), examples)
        results = dispatcher.deliver_due()
        assert [(r.partition_date, r.delivered, r.alerts) for r in results] == [(DAY, True, 3)]
        assert len(slack.messages) == 1
        posted = slack.messages[0]
        assert slack.requests[-1].token == TOKEN
    assert posted["channel"] == "#seer-alerts"
    blocks = posted["blocks"]
    assert blocks[0] == {
        "type": "header",
        "text": {"type": "plain_text", "text": "Seer: retrieval quality alert for 2026-11-29"},
    }
    texts = mrkdwn_texts(blocks)
    assert texts[1].startswith(
        "*3 failing checks* (2 ERROR, 1 WARN) on `slice_metrics`, partition *2026-11-29*, in "
        "*env=prod*, *feature_flag=retrieval-v2*."
    )
    assert "<https://dagster.example.com/runs/r1|Dagster run r1>" in texts[1]
    assert blocks[2] == {"type": "divider"}
    # one section per slice, worst first: the high-priority slice leads
    prod = texts[2].splitlines()
    assert prod[0] == "*env=prod* (high priority)"
    assert prod[1] == (
        ":red_circle: *ERROR* `recall_high_priority`: 20 of 80 events have recall &lt; 1.0 "
        "(25.0%); alerts on any"
    )
    flag = texts[3].splitlines()
    assert flag[0] == "*feature_flag=retrieval-v2*"
    assert flag[1].startswith(
        ":red_circle: *ERROR* `f1_drop`: f1 0.520 (was 0.830), 312 events; mean f1 fell by "
        "0.310: 0.520 over 312 events vs 0.830 in the trailing 7 days (2,100 events); alerts "
        "on a drop &gt;= 0.20"
    )
    assert flag[2].startswith(":large_orange_circle: *WARN* `ndcg_drop`: ndcg ")
    assert "mean ndcg fell by" in flag[2]
    assert texts[4] == (
        "Top missing requirements in feature_flag=retrieval-v2: "
        "“The nationality of that director” (41 events)"
    )
    assert "Re-running this partition posts again only if the outcome changes" in texts[-1]
    assert len(blocks) == 7
    assert "feature_flag=retrieval-v2: f1_drop, ndcg_drop" in posted["text"]
    console = render_console(SlackMessage(posted["text"], blocks))
    assert "ERROR recall_high_priority: 20 of 80 events have recall < 1.0" in console.replace(
        "`", ""
    )
    assert "Dagster run r1 (https://dagster.example.com/runs/r1)" in console
    assert {a.state for a in outbox.rows(DAY)} == {SENT}


def recall_drop(label: str, events: int, delta: float, **changes) -> CheckOutcome:
    return failing_outcome(
        "recall_drop",
        label,
        statistic="mean_recall",
        observed=0.81 - delta,
        baseline=0.81,
        baseline_sample_size=events * 7,
        sample_size=events,
        delta=delta,
        threshold=0.1,
        noise=0.03,
        **changes,
    )


PROD_V1, PROD_V2 = "env=prod,feature_flag=retrieval-v1", "env=prod,feature_flag=retrieval-v2"


@pytest.mark.parametrize(
    ("outcomes", "lead", "headline"),
    [
        pytest.param(
            # a quarter of prod's contexts empty, v1 and v2 alike
            [
                recall_drop("all", 2000, 0.15),
                recall_drop("env=prod", 1500, 0.20, high_priority=True),
                passing(recall_drop("env=dev", 500, 0.0)),
                recall_drop("feature_flag=retrieval-v1", 700, 0.15),
                recall_drop("feature_flag=retrieval-v2", 1300, 0.15),
                recall_drop(PROD_V1, 525, 0.20, high_priority=True),
                recall_drop(PROD_V2, 975, 0.20, high_priority=True),
            ],
            "env=prod",
            "env=prod explains 100% of the overall recall drop: recall −0.20, 1,500 events; "
            "the rest of the traffic unchanged; no narrower slice explains it (env=prod × "
            "feature_flag=retrieval-v2 accounts for 65% of it with 65% of its events)",
            id="spread over prod",
        ),
        pytest.param(
            # prod × v2 (74 events) loses its top hit
            [
                recall_drop("all", 300, 0.38 * 74 / 300),
                recall_drop("env=prod", 150, 0.38 * 74 / 150 / 0.93, high_priority=True),
                recall_drop("feature_flag=retrieval-v2", 150, 0.38 * 74 / 150),
                recall_drop(PROD_V2, 74, 0.38, high_priority=True),
            ],
            PROD_V2,
            "env=prod × feature_flag=retrieval-v2 explains 93% of env=prod's recall drop: "
            "recall −0.38, 74 events; the rest of env=prod unchanged",
            id="a release in the pair",
        ),
    ],
)
def test_the_message_is_led_by_the_slice_that_explains_the_most(
    outbox, outcomes, lead, headline
) -> None:
    with FakeSlack() as slack:
        AlertDispatcher(outbox, slack_resource(slack)).alert_on_day(DAY, outcomes, "r1")
        [posted] = slack.messages
    texts = mrkdwn_texts(posted["blocks"])
    assert texts[1].startswith(f"*{headline}*\n")
    assert texts[2].startswith(f"*{lead}*")


def test_a_page_on_a_slice_a_new_judge_reads_says_the_judge_changed(outbox) -> None:
    """A level a stricter judge breaches on its first day pages (it is below the line by
    that judge); the page says the judge changed, so the person on call does not hunt a
    retrieval regression that may not exist."""
    note = (
        "judged by openai:gpt-4o-mini:seer-judge-v1 (was lexical:lexical-v1:heuristic-3 "
        "until 2026-11-28): a new baseline starts, earlier days are not compared"
    )
    level = failing_outcome(
        "recall_other_slices",
        "env=prod",
        statistic="mean_recall",
        observed=0.55,
        threshold=0.85,
        baseline=None,
        baseline_label=None,
        delta=None,
        severity="WARN",
    )
    change = replace(
        failing_outcome("recall_drop", "env=prod"), status="no_baseline", judge_note=note
    )
    with FakeSlack() as slack:
        AlertDispatcher(outbox, slack_resource(slack)).alert_on_day(DAY, [level, change], "r1")
        [posted] = slack.messages
    texts = mrkdwn_texts(posted["blocks"])
    assert any(text.startswith(f":information_source: {note}. Levels are read") for text in texts)
    # without a judge change, no such line
    with FakeSlack() as slack:
        AlertDispatcher(outbox, slack_resource(slack)).alert_on_day(
            DAY + timedelta(days=1), [replace(level, partition_date=DAY + timedelta(days=1))], "r2"
        )
        assert not any(
            ":information_source:" in text
            for message in slack.messages
            for text in mrkdwn_texts(message["blocks"])
        )


def test_a_new_lead_names_the_open_story_that_shares_its_events() -> None:
    """A bloat's second day paged env=prod x tenant=globex's f1 drop while prod x v2's,
    paged the day before, stayed open: the headline says so. An open story on `all`, or
    on another statistic, or one that only carries an explained slice, is not named."""

    def row(label: str, statistic: str = "mean_f1", **payload) -> Alert:
        return Alert(
            id=0,
            partition_date=DAY,
            kind="check",
            rule="f1_drop" if statistic == "mean_f1" else "recall_drop",
            slice=label,
            severity="ERROR",
            state="pending",
            fingerprint="",
            payload={"statistic": statistic, "leads": True, "headline": f"{label} fell"} | payload,
            run_id=None,
        )

    lead = row("env=prod,tenant=globex", alert_rank=0)
    opened = {"incident": {"opened_on": "2026-11-28"}, "alert_rank": 3}
    story = row("env=prod,feature_flag=retrieval-v2", **opened)
    assert message_headline([lead], [story]) == (
        "env=prod,tenant=globex fell; env=prod × feature_flag=retrieval-v2 shares its "
        "events, its `f1_drop` open since 2026-11-28"
    )
    others = [
        row("all", **opened),
        row("env=prod,feature_flag=retrieval-v2", "mean_recall", **opened),
        row("env=staging", **opened),
        row("env=prod,feature_flag=retrieval-v2", **opened, leads=False),
    ]
    assert message_headline([lead], others) == "env=prod,tenant=globex fell"


def test_rerun_does_not_post_again_unless_the_outcome_changed(outbox) -> None:
    with FakeSlack() as slack:
        dispatcher = AlertDispatcher(outbox, slack_resource(slack))
        outbox.record_check_outcomes(DAY, [failing_outcome()], "r1")
        dispatcher.deliver_due()
        assert len(slack.messages) == 1
        # the same verdict (numbers wobble a little): nothing new
        summary = outbox.record_check_outcomes(DAY, [failing_outcome(observed=0.51)], "r2")
        assert (summary.new_or_changed, summary.unchanged) == (0, 1)
        assert dispatcher.deliver_due() == []
        assert len(slack.messages) == 1
        # a new failing slice: one new message carrying both
        outbox.record_check_outcomes(
            DAY, [failing_outcome(), failing_outcome(slice_label="env=prod")], "r3"
        )
        dispatcher.deliver_due()
        assert len(slack.messages) == 2
        assert slack.messages[1]["text"].startswith("Seer 2026-11-29: 2 failing checks")
        # a severity change is a changed outcome too
        outbox.record_check_outcomes(
            DAY, [failing_outcome(severity="WARN"), failing_outcome(slice_label="env=prod")], "r4"
        )
        dispatcher.deliver_due()
        assert len(slack.messages) == 3
        # everything passes: rows resolve, nothing is posted
        summary = outbox.record_check_outcomes(
            DAY,
            [passing(failing_outcome()), passing(failing_outcome(slice_label="env=prod"))],
            "r5",
        )
        assert summary.resolved == 2
        assert dispatcher.deliver_due() == []
        assert len(slack.messages) == 3
        assert {a.state for a in outbox.rows(DAY)} == {RESOLVED}


def test_only_a_pass_resolves_an_alert(outbox) -> None:
    """A judge outage re-run (every slice now not_enough_data, no_baseline or gone) must not
    withdraw the day's undelivered alerts: they stay pending and are delivered later."""
    slices = [f"tenant=t{i}" for i in range(10)]
    outbox.record_check_outcomes(DAY, [failing_outcome(slice_label=s) for s in slices], "r1")
    outage = [
        *(failing_outcome(slice_label=s, status="not_enough_data") for s in slices[:4]),
        *(failing_outcome(slice_label=s, status="no_baseline") for s in slices[4:8]),
    ]  # the last two slices have no rows at all
    summary = outbox.record_check_outcomes(DAY, outage, "r2")
    assert summary.resolved == 0
    assert [a.state for a in outbox.rows(DAY)] == [PENDING] * 10
    with FakeSlack() as slack:
        [result] = AlertDispatcher(outbox, slack_resource(slack)).deliver_due()
        assert (result.delivered, result.alerts) == (True, 10)
    # a pass does resolve, and only its own row
    summary = outbox.record_check_outcomes(
        DAY, [passing(failing_outcome(slice_label="tenant=t0"))], "r3"
    )
    assert summary.resolved == 1
    assert [a.state for a in outbox.rows(DAY)] == [RESOLVED] + [SENT] * 9


def test_pending_alert_survives_slack_outage_and_is_delivered_after_recovery(outbox) -> None:
    with FakeSlack() as slack:
        dispatcher = AlertDispatcher(outbox, slack_resource(slack))
        outbox.record_check_outcomes(DAY, [failing_outcome()], "r1")
        slack.start_outage("server_error")
        for attempt in (1, 2):
            [result] = dispatcher.deliver_due()
            assert not result.delivered
            [row] = outbox.rows(DAY)
            assert row.state == PENDING
            assert row.attempts == attempt
            assert "HTTP 500" in row.last_error
        slack.end_outage()
        [result] = dispatcher.deliver_due()
        assert result.delivered
        [row] = outbox.rows(DAY)
        assert (row.state, row.attempts, row.last_error) == (SENT, 3, None)
        assert row.delivered_to == "slack:#seer-alerts"
        assert len(slack.messages) == 1


def test_rate_limit_waits_for_retry_after(outbox) -> None:
    with FakeSlack(retry_after_seconds=30) as slack:
        dispatcher = AlertDispatcher(outbox, slack_resource(slack))
        outbox.record_check_outcomes(DAY, [failing_outcome()], "r1")
        slack.fail_next("ratelimited")
        [result] = dispatcher.deliver_due()
        assert "ratelimited" in result.error
        assert "retry after 30 s" in result.error
        assert dispatcher.deliver_due() == []  # not yet due
        later = utc_now() + timedelta(seconds=31)
        [result] = dispatcher.deliver_due(now=later)
        assert result.delivered
        assert len(slack.messages) == 1


def test_bad_token_keeps_the_alert_and_never_records_the_token(outbox, caplog) -> None:
    with FakeSlack(valid_tokens=("xoxb-good",)) as slack:
        dispatcher = AlertDispatcher(outbox, slack_resource(slack, token=TOKEN))
        outbox.record_check_outcomes(DAY, [failing_outcome()], "r1")
        [result] = dispatcher.deliver_due()
        assert not result.delivered
        [row] = outbox.rows(DAY)
        assert row.state == PENDING
        assert "invalid_auth" in row.last_error
        fixed = AlertDispatcher(outbox, slack_resource(slack, token="xoxb-good"))
        assert fixed.deliver_due()[0].delivered
        assert TOKEN not in repr(slack_resource(slack))
    assert TOKEN not in caplog.text
    assert TOKEN not in repr(outbox.rows(DAY))


def test_unreachable_slack_keeps_the_alert(outbox) -> None:
    resource = SlackAlertResource(
        token=TOKEN, channel="#a", api_url="http://127.0.0.1:9/api/", timeout_seconds=2
    )
    outbox.record_check_outcomes(DAY, [failing_outcome()], "r1")
    [result] = AlertDispatcher(outbox, resource).deliver_due()
    assert not result.delivered
    assert "Slack unreachable" in result.error
    assert outbox.rows(DAY)[0].state == PENDING


def test_without_token_alerts_go_to_the_console(outbox, caplog, monkeypatch) -> None:
    monkeypatch.delenv("SLACK_BOT_TOKEN", raising=False)
    monkeypatch.delenv("SEER_SLACK_CHANNEL", raising=False)
    resource = SlackAlertResource()
    assert not resource.is_configured()
    outbox.record_check_outcomes(DAY, [failing_outcome(slice_label="tenant=<b>&co")], "r1")
    [result] = AlertDispatcher(outbox, resource).deliver_due()
    assert result.delivered and result.destination == "console"
    printed = caplog.text
    assert "Seer: retrieval quality alert for 2026-11-29" in printed
    assert "tenant=<b>&co\n" in printed
    assert "ERROR `f1_drop`: f1 0.520 (was 0.830), 312 events; mean f1 fell by 0.310" in printed
    assert outbox.rows(DAY)[0].delivered_to == "console"


def test_resource_reads_env(monkeypatch) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", TOKEN)
    monkeypatch.setenv("SEER_SLACK_CHANNEL", "C123")
    monkeypatch.setenv("SEER_SLACK_API_URL", "http://127.0.0.1:1/api")
    monkeypatch.setenv("SEER_DAGSTER_URL", "https://d.example.com")
    resource = SlackAlertResource()
    assert resource.is_configured()
    assert resource.resolved_api_url() == "http://127.0.0.1:1/api/"
    assert resource.resolved_dagster_url() == "https://d.example.com"
    assert TOKEN not in resource.describe()


def test_partitions_get_separate_messages(outbox) -> None:
    with FakeSlack() as slack:
        dispatcher = AlertDispatcher(outbox, slack_resource(slack))
        for day in (DAY, DAY - timedelta(days=1)):
            outbox.record_check_outcomes(
                day, [failing_outcome(), failing_outcome("ndcg_drop")], "r"
            )
        results = dispatcher.deliver_due()
        assert [r.partition_date for r in results] == [DAY - timedelta(days=1), DAY]
        assert len(slack.messages) == 2


# ---------------------------------------------------------------------------- examples


def test_top_missing_requirements_per_slice() -> None:
    chunks = [
        pd.DataFrame(
            {
                "status": ["ok", "ok", "ok", "invalid"],
                "missing_requirements": [
                    json.dumps(["Nationality", "Year"]),
                    ["Nationality"],
                    [],
                    ["ignored"],
                ],
                "metadata": [
                    {"feature_flag": "v2"},
                    json.dumps({"feature_flag": "v2"}),
                    {"feature_flag": "v1"},
                    {"feature_flag": "v2"},
                ],
            }
        ),
        pd.DataFrame({"status": ["ok"], "missing_requirements": [["Year"]], "metadata": [{}]}),
    ]
    top = top_missing_requirements(chunks, ["feature_flag=v2", "all", "feature_flag=v1"], limit=2)
    assert top == {
        "feature_flag=v2": [("Nationality", 2), ("Year", 1)],
        "all": [("Nationality", 2), ("Year", 2)],
    }
    assert top_missing_requirements(chunks, ["all"], limit=1) == {"all": [("Nationality", 2)]}
    chunks[0]["metadata"] = [
        {"feature_flag": "v2", "env": "prod"},
        {"feature_flag": "v2", "env": "dev"},
        {"feature_flag": "v1", "env": "prod"},
        {},
    ]
    assert top_missing_requirements(chunks, ["env=prod,feature_flag=v2"]) == {
        "env=prod,feature_flag=v2": [("Nationality", 1), ("Year", 1)]
    }


# ---------------------------------------------------------------------------- postgres


@pytest.mark.postgres
def test_outbox_on_postgres(postgres_url: str, postgres_schema: str) -> None:
    engine = sa.create_engine(postgres_url)
    try:
        outbox = AlertOutbox(engine, schema=postgres_schema)
        # a "Recovered" reply two days before, and one too long before to matter
        for days_before in (2, 15):
            closed = Incident(
                rule="recall_drop",
                slice="feature_flag=retrieval-v2",
                severity="ERROR",
                opened_on=DAY - timedelta(days=days_before + 3),
                last_failed_on=DAY - timedelta(days=days_before + 2),
                last_message="",
                closed_on=DAY - timedelta(days=days_before),
                kind="drop",
            )
            outbox.record_recoveries(closed.closed_on, [closed], "r0")
        slices = {"feature_flag=retrieval-v2", "env=prod"}
        expected = {"feature_flag=retrieval-v2": (DAY - timedelta(days=2), ["recall_drop"])}
        assert outbox.recoveries_before(DAY, slices) == expected
        outbox.record_check_outcomes(DAY, [failing_outcome()], "r1")
        with FakeSlack() as slack:
            dispatcher = AlertDispatcher(outbox, slack_resource(slack))
            assert dispatcher.deliver_due()[0].delivered
            outbox.record_check_outcomes(DAY, [failing_outcome()], "r2")
            assert dispatcher.deliver_due() == []
            assert len(slack.messages) == 1
        [row] = outbox.rows(DAY, KIND_CHECK)
        assert row.payload["delta"] == pytest.approx(0.31)
        assert row.state == SENT
    finally:
        engine.dispose()
