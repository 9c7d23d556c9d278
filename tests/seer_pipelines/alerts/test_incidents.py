"""Incidents: a service level pages once when it breaks, is carried while it stays broken,
and closes on a pass with one reply in the thread of the alert that announced it."""

from __future__ import annotations

import random
from datetime import date, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from seer_metrics.rules import CheckOutcome, Incident, advance_incidents
from seer_pipelines.alerts import (
    CARRIED,
    KIND_CHECK,
    KIND_RECOVERED,
    PENDING,
    SENT,
    AlertDispatcher,
    AlertOutbox,
    IncidentStore,
    SlackAlertResource,
    alerts_report,
)
from seer_testing.fake_slack import FakeSlack

START = date(2026, 11, 1)
DAYS = [START + timedelta(days=i) for i in range(10)]


def outcome(day: date, status: str, rule: str = "recall_other_slices", slice_label="env=dev"):
    drop = rule.endswith("_drop")
    return CheckOutcome(
        rule=rule,
        slice=slice_label,
        status=status,  # type: ignore[arg-type]
        severity="ERROR" if drop else "WARN",
        statistic="mean_f1" if drop else "mean_recall",
        observed=0.6,
        threshold=0.15 if drop else 0.85,
        sample_size=120,
        message=f"{slice_label}: {rule} {status} on {day}",
        partition_date=day,
        baseline=0.8 if drop else None,
        baseline_label="the trailing 7 days" if drop else None,
        baseline_sample_size=800 if drop else None,
        delta=0.2 if drop else None,
        noise=0.05 if drop else None,
        kind="drop" if drop else "threshold",
    )


@pytest.fixture
def engine(tmp_path: Path) -> sa.Engine:
    return sa.create_engine(f"sqlite:///{tmp_path / 'warehouse.sqlite'}")


def dispatcher_for(
    engine: sa.Engine, slack: FakeSlack, close_after_passes: int = 1
) -> AlertDispatcher:
    """One clear pass closes an incident here, so each test reads in a few days; the
    default hysteresis (three clear passes) has its own tests below."""
    resource = SlackAlertResource(token="xoxb-test", channel="#seer", api_url=slack.base_url)
    store = IncidentStore(engine, close_after_passes=close_after_passes)
    return AlertDispatcher(AlertOutbox(engine), resource, incidents=store)


def test_a_slice_hovering_at_its_line_is_one_incident_closed_by_three_clear_passes(
    engine,
) -> None:
    """Failing and passing on alternate days: one page on the first failure, carried
    after that, and one recovered reply on the third clear pass in a row."""
    marks = "FPFPFPPP"
    with FakeSlack() as slack:
        dispatcher = dispatcher_for(engine, slack, close_after_passes=3)
        for day, mark in zip(DAYS, marks, strict=False):
            dispatcher.alert_on_day(day, [outcome(day, "fail" if mark == "F" else "pass")], "r")
            if day == DAYS[len(marks) - 2]:
                assert AlertOutbox(engine).rows(kind=KIND_RECOVERED) == []
        assert len(slack.top_level_messages) == 1
        root = next(r.ts for r in slack.requests if r.accepted)
        [reply] = slack.replies(root)
        assert f"recovered on {DAYS[len(marks) - 1]}" in reply["text"]
    [run] = IncidentStore(engine).runs()
    assert (run.incident.opened_on, run.incident.last_failed_on, run.failed_days) == (
        DAYS[0],
        DAYS[4],
        3,
    )
    assert run.incident.closed_on == DAYS[len(marks) - 1]


@pytest.mark.parametrize("seed", range(6))
def test_the_warehouse_follows_the_same_transitions_as_the_pure_replay(engine, seed) -> None:
    """The stored day sequence, evaluated in any order (a backfill), gives the incidents
    that `advance_incidents` gives day after day: one rule, one implementation. Marks:
    fail, clear pass, inconclusive pass (within noise of the line), no verdict."""
    rng = random.Random(seed)
    days = [START + timedelta(days=i) for i in range(14)]
    slices = ("env=dev", "env=staging")
    marks = {(d, s): rng.choice("FFP?-P") for d in days for s in slices}

    def outcomes_of(day: date) -> list[CheckOutcome]:
        status = {"F": "fail", "P": "pass", "?": "pass", "-": "not_enough_data"}
        return [
            outcome(day, status[marks[(day, s)]], slice_label=s).replace(
                inconclusive=marks[(day, s)] == "?"
            )
            for s in slices
        ]

    expected: list[tuple] = []
    open_incidents: tuple[Incident, ...] = ()
    for day in days:
        changes = advance_incidents(open_incidents, outcomes_of(day), close_after_passes=3)
        open_incidents = changes.still_open
        expected += [(i.slice, i.opened_on, i.last_failed_on, i.closed_on) for i in changes.closed]
    expected += [(i.slice, i.opened_on, i.last_failed_on, None) for i in open_incidents]
    store = IncidentStore(engine, close_after_passes=3)
    for day in rng.sample(days, len(days)):
        store.advance(day, outcomes_of(day))
    stored = [
        (r.incident.slice, r.incident.opened_on, r.incident.last_failed_on, r.incident.closed_on)
        for r in store.runs()
    ]
    assert sorted(stored) == sorted(expected)


def test_a_chronic_breach_pages_once_and_recovers_once_in_its_thread(engine) -> None:
    with FakeSlack() as slack:
        dispatcher = dispatcher_for(engine, slack)
        for day in DAYS[:4]:  # failing four days in a row
            dispatcher.alert_on_day(day, [outcome(day, "fail")], "run")
        assert len(slack.messages) == 1  # the day the incident opened, only
        root = slack.requests[-1].ts if len(slack.requests) == 1 else None
        assert root is not None
        states = {a.partition_date: a.state for a in AlertOutbox(engine).rows(kind=KIND_CHECK)}
        assert states == {DAYS[0]: SENT, DAYS[1]: CARRIED, DAYS[2]: CARRIED, DAYS[3]: CARRIED}
        # a drop on day 5 pages; the open incident rides along as one "still open" line
        day = DAYS[4]
        alerts = dispatcher.alert_on_day(
            day, [outcome(day, "fail"), outcome(day, "fail", "f1_drop", "env=prod")], "run"
        )
        assert alerts.paged == {("f1_drop", "env=prod")}
        texts = [
            block.get("elements", [{}])[0].get("text", "") for block in slack.messages[-1]["blocks"]
        ]
        assert (
            f"Still open (no new page): `recall_other_slices` on env=dev since {DAYS[0]}" in texts
        )
        # the pass closes it: one reply in the thread of the first alert, never twice
        for _ in range(2):
            dispatcher.alert_on_day(DAYS[5], [outcome(DAYS[5], "pass")], "run")
        [reply] = slack.replies(root)
        assert reply["text"] == f"Seer: recovered on {DAYS[5]}: recall_other_slices on env=dev"
        assert f"failing {DAYS[0]} to {DAYS[4]}" in reply["blocks"][0]["text"]["text"]
    [run] = IncidentStore(engine).runs("recall_other_slices")
    assert (run.incident.opened_on, run.incident.closed_on, run.failed_days) == (
        DAYS[0],
        DAYS[5],
        5,
    )


@pytest.mark.parametrize("status", ["not_enough_data", "no_baseline"])
def test_only_a_pass_closes_an_incident(engine, status) -> None:
    with FakeSlack() as slack:
        dispatcher = dispatcher_for(engine, slack)
        dispatcher.alert_on_day(DAYS[0], [outcome(DAYS[0], "fail")], "run")
        dispatcher.alert_on_day(DAYS[1], [outcome(DAYS[1], status)], "run")  # a judge outage
        dispatcher.alert_on_day(DAYS[2], [], "run")  # the slice had no rows at all
        assert [r.incident.closed_on for r in IncidentStore(engine).runs()] == [None]
        assert AlertOutbox(engine).rows(kind=KIND_RECOVERED) == []
        day = DAYS[3]
        changes = dispatcher.alert_on_day(day, [outcome(day, "fail")], "run").incidents
        assert [i.opened_on for i in changes.levels.carried] == [DAYS[0]]  # no new page
        dispatcher.alert_on_day(DAYS[4], [outcome(DAYS[4], "pass")], "run")
        assert len(slack.top_level_messages) == 1
        assert len(slack.messages) == 2


def test_a_drop_pages_when_it_opens_and_replies_once_when_it_recovers(engine) -> None:
    with FakeSlack() as slack:
        dispatcher = dispatcher_for(engine, slack)
        for day in DAYS[:2]:
            dispatcher.alert_on_day(day, [outcome(day, "fail", "f1_drop", "env=prod")], "r")
        assert len(slack.messages) == 1  # the second failing day is carried, no new page
        first = next(r.ts for r in slack.requests if r.accepted)
        # inside the incident the day's baseline is the longer pre-incident window's
        recovering = outcome(DAYS[2], "pass", "f1_drop", "env=prod").replace(
            observed=0.79, baseline=0.78
        )
        dispatcher.alert_on_day(DAYS[2], [recovering], "r")
        [reply] = slack.replies(first)
        assert reply["thread_ts"] == first
        assert "mean f1 back to 0.790 (0.780 before the incident; 0.600 when it opened)" in str(
            reply["blocks"]
        )
        assert len(slack.messages) == 2


def test_a_drop_not_yet_back_within_noise_stays_open(engine) -> None:
    with FakeSlack() as slack:
        dispatcher = dispatcher_for(engine, slack)
        dispatcher.alert_on_day(DAYS[0], [outcome(DAYS[0], "fail", "f1_drop", "env=prod")], "r")
        still_low = outcome(DAYS[1], "pass", "f1_drop", "env=prod").replace(inconclusive=True)
        changes = dispatcher.alert_on_day(DAYS[1], [still_low], "r").incidents
        assert [i.opened_on for i in changes.drops.carried] == [DAYS[0]]
        assert AlertOutbox(engine).rows(kind=KIND_RECOVERED) == []
        assert len(slack.messages) == 1


def test_no_reply_while_a_slice_sharing_the_events_is_not_back(engine) -> None:
    """tenant=acme passes clearly while env=prod,tenant=acme, open too, is not back from
    its drop: acme's pass is held (paused: the pair does not fail) and stored so (the
    folded history agrees); the next day both are back: acme recovers, the pair's low
    reading is still in its pooled window, and it recovers the day after."""
    pair = "env=prod,tenant=acme"
    with FakeSlack() as slack:
        dispatcher = dispatcher_for(engine, slack)
        opening = [outcome(DAYS[0], "fail", "f1_drop", s) for s in ("tenant=acme", pair)]
        dispatcher.alert_on_day(DAYS[0], opening, "r")
        back = outcome(DAYS[1], "pass", "f1_drop", "tenant=acme").replace(observed=0.79)
        not_back = outcome(DAYS[1], "pass", "f1_drop", pair).replace(inconclusive=True)
        changes = dispatcher.alert_on_day(DAYS[1], [back, not_back], "r").incidents
        assert {i.slice for i in changes.drops.carried} == {"tenant=acme", pair}
        assert AlertOutbox(engine).rows(kind=KIND_RECOVERED) == []
        closed_on = {}
        for day in DAYS[2:4]:
            later = [
                outcome(day, "pass", "f1_drop", s).replace(observed=0.79)
                for s in ("tenant=acme", pair)
            ]
            for incident in dispatcher.alert_on_day(day, later, "r").incidents.drops.closed:
                closed_on[incident.slice] = day
        assert closed_on == {"tenant=acme": DAYS[2], pair: DAYS[3]}
        root = next(r.ts for r in slack.requests if r.accepted)
        first, second = slack.replies(root)
        assert "tenant=acme" in str(first["blocks"]) and pair not in str(first["blocks"])
        assert "env=prod,tenant=acme" in str(second["blocks"])
    store = IncidentStore(engine)
    with engine.connect() as connection:
        rows = connection.execute(sa.select(store.verdicts)).all()
    held = {(r.slice, str(r.partition_date)[:10]): r.figures for r in rows}
    acme = held[("tenant=acme", DAYS[1].isoformat())]
    assert (acme["held"], acme["paused"]) == (True, True)
    assert held[(pair, DAYS[1].isoformat())]["held"] is False
    runs = store.runs()
    assert {(r.incident.slice, r.incident.closed_on) for r in runs} == {
        ("tenant=acme", DAYS[2]),
        (pair, DAYS[3]),
    }


def test_no_reply_while_the_same_trouble_fails_another_change_rule(engine) -> None:
    """env=prod's recall drop fails every day; env=prod,tenant=initech's f1 drop (opened
    the same day) passes: held, stored so, no reply; the day env=prod passes too, the
    pair recovers, in one reply with env=prod's."""
    pair = "env=prod,tenant=initech"

    def recall(day: date, status: str) -> CheckOutcome:
        return outcome(day, status, "recall_drop", "env=prod").replace(statistic="mean_recall")

    with FakeSlack() as slack:
        dispatcher = dispatcher_for(engine, slack)
        opening = [recall(DAYS[0], "fail"), outcome(DAYS[0], "fail", "f1_drop", pair)]
        dispatcher.alert_on_day(DAYS[0], opening, "r")
        back = outcome(DAYS[1], "pass", "f1_drop", pair).replace(observed=0.79)
        changes = dispatcher.alert_on_day(DAYS[1], [recall(DAYS[1], "fail"), back], "r")
        assert {(i.rule, i.slice) for i in changes.incidents.drops.carried} == {
            ("recall_drop", "env=prod"),
            ("f1_drop", pair),
        }
        assert AlertOutbox(engine).rows(kind=KIND_RECOVERED) == []
        fixed = [
            recall(DAYS[2], "pass").replace(observed=0.79),
            outcome(DAYS[2], "pass", "f1_drop", pair).replace(observed=0.79),
        ]
        closed = dispatcher.alert_on_day(DAYS[2], fixed, "r").incidents.drops.closed
        assert {(i.rule, i.slice) for i in closed} == {
            ("recall_drop", "env=prod"),
            ("f1_drop", pair),
        }
        root = next(r.ts for r in slack.requests if r.accepted)
        [reply] = slack.replies(root)
        assert pair in str(reply["blocks"]) and "recall_drop" in str(reply["blocks"])
    runs = IncidentStore(engine).runs()
    assert {(r.incident.slice, r.incident.closed_on) for r in runs} == {
        ("env=prod", DAYS[2]),
        (pair, DAYS[2]),
    }


def test_an_open_incident_pages_again_once_when_it_gets_much_worse(engine) -> None:
    def failing(day: date, observed: float) -> CheckOutcome:
        return outcome(day, "fail", "f1_drop", "env=prod").replace(
            observed=observed, escalation_step=0.15, noise=0.05
        )

    with FakeSlack() as slack:
        dispatcher = dispatcher_for(engine, slack)
        dispatcher.alert_on_day(DAYS[0], [failing(DAYS[0], 0.6)], "r")
        # 0.18 worse: the step, but not the step beyond the day's noise of 0.05
        dispatcher.alert_on_day(DAYS[1], [failing(DAYS[1], 0.42)], "r")
        assert len(slack.top_level_messages) == 1
        dispatcher.alert_on_day(DAYS[2], [failing(DAYS[2], 0.2)], "r")  # much worse
        assert len(slack.top_level_messages) == 2
        assert (
            f"still open since {DAYS[0]}, now much worse: mean f1 0.200, was 0.600 when it "
            "opened" in str(slack.top_level_messages[-1]["blocks"])
        )
        dispatcher.alert_on_day(DAYS[3], [failing(DAYS[3], 0.0)], "r")  # once per incident
        assert len(slack.top_level_messages) == 2


def back(day: date, rule: str, slice_label: str) -> CheckOutcome:
    """A drop rule's pass back at the level before the incident."""
    return outcome(day, "pass", rule, slice_label).replace(observed=0.79, baseline=0.78)


def recover_after_two_failing_days(dispatcher: AlertDispatcher, engine: sa.Engine) -> None:
    """env=prod's f1 drop fails on DAYS[0] and DAYS[1] and recovers on DAYS[2]: failing on
    two days, it may close on its first clear pass (the dispatcher closes on one)."""
    for day in DAYS[:2]:
        dispatcher.alert_on_day(day, [outcome(day, "fail", "f1_drop", "env=prod")], "r")
    dispatcher.alert_on_day(DAYS[2], [back(DAYS[2], "f1_drop", "env=prod")], "r")
    assert [a.slice for a in AlertOutbox(engine).rows(kind=KIND_RECOVERED)] == ["env=prod"]


def test_a_slice_paging_within_two_weeks_of_its_recovered_reply_says_it_fails_again(
    engine,
) -> None:
    """A "Recovered" said early (a drift's first days close a chance dip within noise)
    is corrected in the page that follows, whichever of the slice's checks pages."""
    with FakeSlack() as slack:
        dispatcher = dispatcher_for(engine, slack)
        recover_after_two_failing_days(dispatcher, engine)
        again = [
            outcome(DAYS[4], "fail", "recall_drop", "env=prod"),
            outcome(DAYS[4], "fail", "recall_drop", "env=staging"),
        ]
        dispatcher.alert_on_day(DAYS[4], again, "r")
        page = str(slack.top_level_messages[-1]["blocks"])
        note = f"failing again 2 days after Seer said it recovered on {DAYS[2]} (`f1_drop`)"
        assert note in page
        assert page.count("failing again") == 1  # env=staging recovered from nothing


def test_a_page_more_than_two_weeks_after_a_recovery_is_a_new_story(engine) -> None:
    later = DAYS[2] + timedelta(days=15)
    with FakeSlack() as slack:
        dispatcher = dispatcher_for(engine, slack)
        recover_after_two_failing_days(dispatcher, engine)
        dispatcher.alert_on_day(later, [outcome(later, "fail", "f1_drop", "env=prod")], "r")
        assert len(slack.top_level_messages) == 2
        assert "failing again" not in str(slack.top_level_messages[-1]["blocks"])


def test_recovered_reply_waits_out_a_slack_outage_and_is_posted_once(engine) -> None:
    with FakeSlack() as slack:
        dispatcher = dispatcher_for(engine, slack)
        dispatcher.alert_on_day(DAYS[0], [outcome(DAYS[0], "fail")], "run")
        root = slack.requests[-1].ts
        slack.start_outage("server_error")
        alerts = dispatcher.alert_on_day(DAYS[1], [outcome(DAYS[1], "pass")], "run")
        assert not alerts.recoveries.delivered
        [row] = AlertOutbox(engine).rows(kind=KIND_RECOVERED)
        assert (row.state, row.attempts) == (PENDING, 1)
        slack.end_outage()
        dispatcher.deliver_due()
        dispatcher.deliver_due()
        assert len(slack.replies(root)) == 1
        assert AlertOutbox(engine).rows(kind=KIND_RECOVERED)[0].state == SENT


def test_an_alert_resolved_before_it_was_posted_gets_no_reply(engine) -> None:
    with FakeSlack() as slack:
        dispatcher = dispatcher_for(engine, slack)
        slack.start_outage("server_error")
        dispatcher.alert_on_day(DAYS[0], [outcome(DAYS[0], "fail")], "run")
        slack.end_outage()
        # the re-run of the same day passes before Slack came back: nothing was announced
        dispatcher.alert_on_day(DAYS[0], [outcome(DAYS[0], "pass")], "run")
        dispatcher.alert_on_day(DAYS[1], [outcome(DAYS[1], "pass")], "run")
        assert slack.messages == []


def test_backfilled_days_follow_the_day_sequence_not_the_evaluation_order(engine) -> None:
    """Days 3, 1, 2 evaluated in that order, all failing: one incident from day 1; day 2
    sits inside it (carried, no page). A pass on day 4 then closes it."""
    with FakeSlack() as slack:
        dispatcher = dispatcher_for(engine, slack)
        for day in (DAYS[2], DAYS[0], DAYS[1]):
            dispatcher.alert_on_day(day, [outcome(day, "fail")], "run")
        states = {a.partition_date: a.state for a in AlertOutbox(engine).rows(kind=KIND_CHECK)}
        assert states[DAYS[1]] == CARRIED
        [run] = IncidentStore(engine).runs()
        assert (run.incident.opened_on, run.incident.last_failed_on, run.failed_days) == (
            DAYS[0],
            DAYS[2],
            3,
        )
        # a pass evaluated later for a day in the middle splits the run in two
        dispatcher.alert_on_day(DAYS[1], [outcome(DAYS[1], "pass")], "run")
        runs = IncidentStore(engine).runs()
        assert [(r.incident.opened_on, r.incident.closed_on) for r in runs] == [
            (DAYS[0], DAYS[1]),
            (DAYS[2], None),
        ]
        dispatcher.alert_on_day(DAYS[3], [outcome(DAYS[3], "pass")], "run")
        assert [r.incident.closed_on for r in IncidentStore(engine).runs()] == [DAYS[1], DAYS[3]]


def test_the_alert_leads_with_the_narrowest_slice_that_explains_the_drop(engine) -> None:
    def drop(label: str, observed: float, events: int, baseline_events: int) -> CheckOutcome:
        return outcome(DAYS[0], "fail", "f1_drop", label).replace(
            observed=observed,
            sample_size=events,
            baseline=0.73,
            baseline_sample_size=baseline_events,
            delta=0.73 - observed,
            threshold=0.1,
        )

    pair = "env=prod,feature_flag=retrieval-v2"
    outcomes = [
        drop("env=prod", (0.40 * 140 + 0.73 * 180) / 320, 320, 2300),
        drop("feature_flag=retrieval-v2", (0.40 * 140 + 0.73 * 60) / 200, 200, 1400),
        drop(pair, 0.40, 140, 1000),
    ]
    with FakeSlack() as slack:
        dispatcher_for(engine, slack).alert_on_day(DAYS[0], outcomes, "run")
        [message] = slack.messages
    summary = message["blocks"][1]["text"]["text"]
    assert summary.startswith(
        "*env=prod × feature_flag=retrieval-v2 explains 100% of env=prod's f1 drop: f1 −0.33, "
        "140 events; the rest of env=prod unchanged*"
    )
    assert message["blocks"][3]["text"]["text"].startswith(f"*{pair}*")


def passing_drop(day: date, label: str, events: int) -> CheckOutcome:
    return outcome(day, "pass", "f1_drop", label).replace(
        observed=0.72, sample_size=events, baseline=0.73, delta=0.01, threshold=0.1
    )


def test_a_new_page_explained_by_an_open_incident_is_headed_by_that_incident(engine) -> None:
    """The pair's f1 drop opened on day 1 and is carried on day 2; day 2 pages env=prod,
    whose drop is the pair's: the headline tells the open incident's story, not
    env=prod's, and the pair stays on the "still open" line."""
    pair = "env=prod,feature_flag=retrieval-v2"

    def drop(day: date, label: str, observed: float, events: int) -> CheckOutcome:
        return outcome(day, "fail", "f1_drop", label).replace(
            observed=observed,
            sample_size=events,
            baseline=0.73,
            baseline_sample_size=events * 7,
            delta=0.73 - observed,
            threshold=0.1,
        )

    prod_day_2 = (0.30 * 140 + 0.73 * 180) / 320
    with FakeSlack() as slack:
        dispatcher = dispatcher_for(engine, slack)
        dispatcher.alert_on_day(
            DAYS[0],
            [drop(DAYS[0], pair, 0.55, 140), passing_drop(DAYS[0], "env=prod", 320)],
            "r1",
        )
        dispatcher.alert_on_day(
            DAYS[1],
            [drop(DAYS[1], pair, 0.30, 140), drop(DAYS[1], "env=prod", prod_day_2, 320)],
            "r2",
        )
        first, second = slack.messages
    assert first["blocks"][1]["text"]["text"].startswith(
        "*env=prod × feature_flag=retrieval-v2: f1 −0.18, 140 events*"
    )
    summary = second["blocks"][1]["text"]["text"]
    assert summary.startswith(
        "*env=prod × feature_flag=retrieval-v2 explains 100% of env=prod's f1 drop: f1 −0.43, "
        "140 events; the rest of env=prod unchanged; its incident open since 2026-11-01*"
    ), summary
    assert second["blocks"][3]["text"]["text"].startswith("*env=prod*")
    assert (
        "Still open (no new page): `f1_drop` on env=prod,feature_flag=retrieval-v2 since 2026-11-01"
        in str(second["blocks"])
    )


def test_without_a_lead_or_an_open_story_the_message_has_no_headline(engine) -> None:
    """A level opening alone (no change explains anything): the message starts with its
    count of failing checks, as before."""
    with FakeSlack() as slack:
        dispatcher_for(engine, slack).alert_on_day(DAYS[0], [outcome(DAYS[0], "fail")], "r1")
        [message] = slack.messages
    assert message["blocks"][1]["text"]["text"].startswith("*1 failing check* (1 WARN)")


def test_the_report_counts_the_days_that_paged_apart_from_the_days_with_failing_checks(
    engine,
) -> None:
    """A chronic breach fails every day but pages once; the report says both, in those
    words, and names each day whose failures were all carried."""
    with FakeSlack() as slack:
        dispatcher = dispatcher_for(engine, slack)
        for day in DAYS[:4]:
            dispatcher.alert_on_day(day, [outcome(day, "fail")], "run")
        day = DAYS[4]
        dispatcher.alert_on_day(
            day, [outcome(day, "fail"), outcome(day, "fail", "f1_drop", "env=prod")], "run"
        )
        dispatcher.alert_on_day(DAYS[5], [outcome(DAYS[5], "pass")], "run")
        report = alerts_report(dispatcher, DAYS[:6])
    header, *lines = report.splitlines()
    assert header.startswith("Alerts: 2 of 6 days paged; 5 of 6 days have failing checks")
    for carried_day in DAYS[1:4]:
        assert (
            f"== {carried_day}: 1 failing check, no page: each is an incident opened "
            "earlier, still open"
        ) in lines
    assert f"== {DAYS[0]}: 1 sent; delivered to slack:#seer" in lines
    assert f"== {DAYS[4]}: 1 sent, 1 carried; delivered to slack:#seer" in lines
    assert not any(line.startswith(f"== {DAYS[5]}") for line in lines)


def test_the_report_of_days_without_a_failing_check() -> None:
    with FakeSlack() as slack:
        engine = sa.create_engine("sqlite://")
        dispatcher = dispatcher_for(engine, slack)
        dispatcher.alert_on_day(DAYS[0], [outcome(DAYS[0], "pass")], "run")
        assert alerts_report(dispatcher, DAYS[:1]).startswith(
            "Alerts: none, every check passed on all 1 days"
        )
