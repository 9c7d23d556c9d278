"""Configured secrets never leave the process in clear, whatever their shape.

An endpoint that quotes the API key in its 401 body (an Azure key: 32 hex digits, no
`sk-`) fails the day; the key must then be in neither the Dagster event log, the
run-failure Slack message nor `seer_alerts`. The real `openai` and `slack_sdk` clients talk
to the fake judge and the fake Slack.
"""

from __future__ import annotations

import json
import secrets
from datetime import date

import pytest
from dagster import DagsterInstance, build_run_status_sensor_context, materialize

from seer_metrics.text.redaction import redact_secrets, redact_url
from seer_pipelines.alerts import KIND_RUN_FAILURE, AlertOutbox, SlackAlertResource
from seer_pipelines.defs.resources.evaluator import EvaluatorResource
from seer_pipelines.defs.resources.warehouse import WarehouseResource
from seer_pipelines.defs.sensors.alerts import seer_run_failure_sensor
from seer_pipelines.settings import load_settings
from seer_testing.fake_judge import FakeJudgeServer
from seer_testing.fake_slack import FakeSlack
from tests.default_location import event_judgments, retrieval_events

DAY = date(2026, 11, 29)


def test_an_api_key_echoed_by_the_endpoint_reaches_no_log_alert_or_table(
    one_day_warehouse,
) -> None:
    key = secrets.token_hex(16)  # an Azure OpenAI key: 32 hex digits
    warehouse: WarehouseResource = one_day_warehouse(DAY, events_per_day=12, invalid_share=0.0)
    instance = DagsterInstance.ephemeral()
    with FakeJudgeServer() as judge:
        judge.inject("unauthorized_echo", times=None)
        evaluator = EvaluatorResource(
            kind="openai", api_key=key, base_url=judge.base_url, max_retries=0
        )
        result = materialize(
            [retrieval_events, event_judgments],
            selection=[event_judgments],
            partition_key=DAY.isoformat(),
            resources={"warehouse": warehouse, "evaluator": evaluator},
            instance=instance,
            raise_on_error=False,
        )
        assert judge.count(status=401) > 0
    assert not result.success
    with FakeSlack() as fake:
        slack = SlackAlertResource(
            token="xoxb-test", channel="#ops", api_url=fake.base_url, dagster_url="https://d"
        )
        with build_run_status_sensor_context(
            sensor_name="seer_run_failure_sensor",
            dagster_instance=instance,
            dagster_run=result.dagster_run,
            dagster_event=result.get_run_failure_event(),
            resources={"warehouse": warehouse, "slack": slack},
        ).for_run_failure() as context:
            seer_run_failure_sensor(context)
        posted = json.dumps(fake.messages)
    (row,) = AlertOutbox(warehouse.get_engine()).rows(DAY, KIND_RUN_FAILURE)
    event_log = "\n".join(str(entry) for entry in instance.all_logs(result.run_id))
    for where, text in (
        ("Slack", posted),
        ("seer_alerts", json.dumps(row.payload)),
        ("event log", event_log),
    ):
        assert key not in text, f"the API key is in the {where}"
    # The error did get there (the test would pass vacuously otherwise), without the key.
    assert "HTTP 401" in posted and "Incorrect API key provided: ***" in posted
    assert "HTTP 401" in event_log


def test_loading_the_settings_registers_every_secret_value() -> None:
    """The sensor daemon loads the code location but never builds the judge: its
    redaction knows the key from the settings alone."""
    key, token, password, query_secret = (secrets.token_hex(12) for _ in range(4))
    load_settings(
        {
            "OPENAI_API_KEY": key,
            "SLACK_BOT_TOKEN": token,
            "SEER_WAREHOUSE_URL": f"postgresql://seer:{password}@db/w?sslpassword={query_secret}",
        }
    )
    text = f"401 for {key}; slack said {token}; db said {password} and {query_secret}"
    assert redact_secrets(text) == "401 for ***; slack said ***; db said *** and ***"


@pytest.mark.parametrize(
    "parameter", ["password", "pass", "pwd", "token", "key", "secret", "api_key", "sslpassword"]
)
def test_a_warehouse_url_hides_secret_query_parameters(parameter: str) -> None:
    url = f"postgresql://seer@db.internal:5432/w?sslmode=require&{parameter}=hunter2hunter2"
    shown = redact_url(url)
    assert "hunter2" not in shown
    assert f"{parameter}=***" in shown and "sslmode=require" in shown
    assert "hunter2" not in WarehouseResource(url=url).describe()
    assert "hunter2" not in redact_secrets(f"could not connect to {url}")
