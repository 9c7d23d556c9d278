"""Messages stay inside Slack's limits whatever the labels (issue 19): the fake Slack server
refuses what Slack refuses (`msg_too_long`, `invalid_blocks`), so an alert built from very
long slice labels and many failing slices must still be taken, with its run link."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
import sqlalchemy as sa

from seer_metrics.rules import CheckOutcome
from seer_pipelines.alerts import (
    PENDING,
    SENT,
    Alert,
    AlertDispatcher,
    AlertOutbox,
    SlackMessage,
    build_recovered_message,
    build_run_failure_message,
    render_console,
)
from seer_pipelines.alerts.blocks import cut_mrkdwn
from seer_testing.fake_slack import SLACK_LIMITS, FakeSlack, block_errors
from tests.seer_pipelines.alerts.test_alerts import (
    DAY,
    failing_outcome,
    mrkdwn_texts,
    slack_resource,
)

RUN_LINK = "<https://dagster.example.com/runs/r1|Dagster run r1>"


@pytest.fixture
def outbox(tmp_path: Path) -> AlertOutbox:
    return AlertOutbox(sa.create_engine(f"sqlite:///{tmp_path / 'warehouse.sqlite'}"))


def long_label(index: int, length: int = 12_000) -> str:
    """A tenant whose name is `length` characters, with a few characters mrkdwn escapes."""
    return f"tenant={'&<' * 5}{'t' * length}-{index}"


def drops_on(label: str) -> list[CheckOutcome]:
    return [
        failing_outcome("recall_drop", label, statistic="mean_recall", baseline_label=label),
        failing_outcome("f1_drop", label, baseline_label=f"{label} on the same day"),
        failing_outcome("ndcg_drop", label, statistic="mean_ndcg", severity="WARN"),
    ]


def assert_within_slacks_limits(posted: dict) -> None:
    assert len(posted["text"]) <= SLACK_LIMITS["text"]
    assert block_errors(posted["blocks"]) == []


def test_many_failing_slices_with_very_long_labels_are_delivered_with_the_run_link(
    outbox: AlertOutbox,
) -> None:
    labels = [long_label(i) for i in range(30)]
    outcomes = [outcome for label in labels for outcome in drops_on(label)]
    examples = {label: [("why " * 400, 12), ("&<" * 300, 3)] for label in labels}
    with FakeSlack() as slack:
        dispatcher = AlertDispatcher(outbox, slack_resource(slack), lambda day, s: examples)
        day = dispatcher.alert_on_day(DAY, outcomes, "r1")
        assert day.delivery.delivered, day.delivery.error
        [posted] = slack.messages
    assert {a.state for a in outbox.rows(DAY)} == {SENT}
    assert_within_slacks_limits(posted)
    summary = mrkdwn_texts(posted["blocks"])[1]
    assert summary.endswith(f"Run: {RUN_LINK}")
    for rule in ("recall_drop", "f1_drop", "ndcg_drop"):
        assert f"`{rule}`" in summary
    # labels are cut with an ellipsis, escaped entities never cut in half
    first_slice = mrkdwn_texts(posted["blocks"])[2].splitlines()[0]
    assert first_slice.startswith("*tenant=&amp;&lt;&amp;&lt;")
    assert first_slice.endswith("…*")
    assert len(first_slice) < 200
    assert len(posted["text"]) < 4_000
    assert "…" in posted["text"]
    console = render_console(SlackMessage(posted["text"], posted["blocks"]))
    assert "Dagster run r1 (https://dagster.example.com/runs/r1)" in console


def test_a_very_long_check_name_and_headline_keep_the_run_link(outbox: AlertOutbox) -> None:
    rule = "r" * 5_000 + "_drop"
    label = long_label(0, 3_000)
    outcomes = [failing_outcome(rule, label), failing_outcome(rule, label + "x")]
    with FakeSlack() as slack:
        day = AlertDispatcher(outbox, slack_resource(slack)).alert_on_day(DAY, outcomes, "r1")
        assert day.delivery.delivered, day.delivery.error
        [posted] = slack.messages
    assert_within_slacks_limits(posted)
    summary = mrkdwn_texts(posted["blocks"])[1]
    assert summary.endswith(f"Run: {RUN_LINK}")
    assert "`rrrr" in summary


def alert(kind: str, rule: str, label: str, payload: dict) -> Alert:
    return Alert(
        id=1,
        partition_date=DAY,
        kind=kind,
        rule=rule,
        slice=label,
        severity="ERROR",
        state=PENDING,
        fingerprint="x",
        payload=payload,
        run_id="r1",
    )


def test_a_recovered_reply_for_many_long_labels_is_taken() -> None:
    recovered = [
        alert(
            "recovered",
            "recall_drop",
            long_label(i),
            {"opened_on": "2026-11-20", "last_failed_on": "2026-11-28", "closed_on": "2026-11-29"},
        )
        for i in range(20)
    ]
    message = build_recovered_message(recovered)
    with FakeSlack() as slack:
        slack_resource(slack).send(message)
        [posted] = slack.messages
    assert_within_slacks_limits(posted)


def test_a_backfill_failing_with_a_hundred_different_errors_is_one_message_slack_takes() -> None:
    failures = [
        alert(
            "run_failure",
            "run_failure",
            f"run-{i}",
            {
                "job": "j" * 500,
                "error": f"error {i}: " + "x" * 5_000,
                "partition": date(2026, 1, 1).isoformat(),
                "run_id": f"run-{i}",
                "backfill": "b" * 300,
            },
        )
        for i in range(100)
    ]
    message = build_run_failure_message(failures, "https://dagster.example.com/")
    with FakeSlack() as slack:
        slack_resource(slack).send(message)
        [posted] = slack.messages
    assert_within_slacks_limits(posted)
    assert "more" in mrkdwn_texts(posted["blocks"])[-1]


@pytest.mark.parametrize(
    ("text", "limit", "cut"),
    [
        ("see <https://x.example/runs/1|run 1> now", 20, "see …"),
        ("a &amp; b &lt;tag&gt;", 14, "a &amp; b …"),
        ("short", 10, "short"),
    ],
)
def test_a_cut_never_splits_a_link_or_an_escaped_character(text: str, limit: int, cut: str) -> None:
    assert cut_mrkdwn(text, limit) == cut
