"""Kinds of trouble through the real daily job: the realistic stream (BM25 top 4 over
multi-hop questions, the lexical judge the job runs), one day a week with most events
missing upstream, then a quarter of prod's contexts empty for the last three days.

What a person on call needs: the volume loss said in words on its day (not "not enough
data"), the empty contexts caught on their first day and named as what they are, and no
"Recovered" in prod while its contexts are still empty.
"""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from dagster import DagsterInstance

from seer_pipelines.alerts.outbox import AlertOutbox
from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.demo.realistic import generate_stream
from seer_pipelines.demo.source_table import write_events
from seer_pipelines.demo.trouble import EmptyContexts, VolumeLoss
from seer_testing.fake_slack import FakeSlack

END_DAY = date(2026, 11, 27)  # fixed: a day's events depend on its date
DAYS = [END_DAY - timedelta(days=offset) for offset in range(11, -1, -1)]
LOSS_DAY = DAYS[-5]
EMPTY_DAYS = DAYS[-3:]


@pytest.mark.slow
def test_a_volume_loss_and_empty_contexts_through_the_daily_job(tmp_path, monkeypatch) -> None:
    from seer_pipelines.definitions import defs

    url = f"sqlite:///{tmp_path / 'warehouse.sqlite'}"
    stream = generate_stream(
        len(DAYS),
        end_day=END_DAY,
        seed=11,
        troubles=(
            VolumeLoss(where={}, start=LOSS_DAY, length=1, share=0.9),
            EmptyContexts(where={"env": "prod"}, start=EMPTY_DAYS[0], share=0.25),
        ),
    )
    warehouse = WarehouseResource(url=url)
    write_events(warehouse.get_engine(), [event.record for event in stream])
    job = defs.resolve_job_def("seer_daily_job")
    instance = DagsterInstance.ephemeral()
    failing: dict[date, dict[tuple[str, str], str]] = {}
    with FakeSlack() as slack:
        monkeypatch.setenv("SEER_WAREHOUSE_URL", url)
        monkeypatch.setenv("SEER_EVALUATOR", "lexical")
        monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test")
        monkeypatch.setenv("SEER_SLACK_CHANNEL", "#seer")
        monkeypatch.setenv("SEER_SLACK_API_URL", slack.base_url)
        top_level_by_day = {}
        for day in DAYS:
            result = job.execute_in_process(partition_key=day.isoformat(), instance=instance)
            assert result.success
            failing[day] = {
                (e.check_name, outcome["slice"]): outcome["message"]
                for e in result.get_asset_check_evaluations()
                if not e.passed
                for outcome in e.metadata["failing_slices"].value
            }
            top_level_by_day[day] = len(slack.top_level_messages)
        replies = [m for m in slack.messages if m.get("thread_ts")]

    # The volume loss, said in words on its day, ERROR on `all`; the next day is normal.
    loss = failing[LOSS_DAY].get(("volume_drop", "all"))
    assert loss is not None and "events may be missing upstream" in loss, failing[LOSS_DAY]
    assert ("volume_drop", "all") not in failing[DAYS[-4]]
    outbox = AlertOutbox(warehouse.get_engine())
    volume_rows = [a for a in outbox.rows(LOSS_DAY, "check") if a.rule == "volume_drop"]
    assert any(a.slice == "all" and a.severity == "ERROR" for a in volume_rows), volume_rows

    # The empty contexts: caught on their first day in env=prod, named as what they are.
    first = EMPTY_DAYS[0]
    empty = failing[first].get(("empty_context_rise", "env=prod"))
    assert empty is not None, sorted(failing[first])
    assert top_level_by_day[first] > top_level_by_day[DAYS[-4]]  # it paged that day
    posted = [m for m in slack.top_level_messages if first.isoformat() in str(m["blocks"][0])]
    assert posted and "of contexts are empty (was" in str(posted[0]["blocks"])

    # No "Recovered" for prod (or what contains it) while its contexts are still empty; the
    # volume loss recovers (its incident closes after three normal days) and may say so.
    recovered_during = [
        line
        for reply in replies
        for day in EMPTY_DAYS
        if f"Recovered* on {day}" in (text := reply["blocks"][0]["text"]["text"])
        for line in text.splitlines()[1:]
    ]
    for line in recovered_during:
        if not line.startswith("• `volume_drop`"):
            assert "*env=prod" not in line and "*all*" not in line, line
