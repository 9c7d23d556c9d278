"""Delivery: `SlackAlertResource` posts a message with `slack_sdk`, or to the console."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from dagster import ConfigurableResource
from pydantic import Field

from seer_metrics.text.redaction import redact_secrets, register_secret
from seer_pipelines.alerts.blocks import SlackMessage
from seer_pipelines.alerts.message import DEFAULT_DAGSTER_URL, render_console
from seer_pipelines.settings import setting

logger = logging.getLogger("seer.alerts")

DEFAULT_SLACK_API_URL = "https://slack.com/api/"


class AlertDeliveryError(RuntimeError):
    """Slack did not take the message; `retry_after_seconds` when it said so."""

    def __init__(self, message: str, retry_after_seconds: float | None = None) -> None:
        super().__init__(redact_secrets(message))  # Slack's answer may echo the token
        self.retry_after_seconds = retry_after_seconds


@dataclass(frozen=True)
class DeliveryReceipt:
    """Where a message went; `slack_ts` is its Slack timestamp (the id of its thread)."""

    destination: str
    slack_ts: str | None = None


class SlackAlertResource(ConfigurableResource):
    """Posts alerts with `slack_sdk.WebClient`; without token and channel, to the console.

    Every field falls back to its environment variable; the token is never logged.
    """

    token: str | None = Field(
        default=None, repr=False, description="Bot token; default $SLACK_BOT_TOKEN. Never logged."
    )
    channel: str | None = Field(
        default=None, description="Channel id or #name; default $SEER_SLACK_CHANNEL."
    )
    api_url: str | None = Field(
        default=None,
        description="Base URL of the Slack Web API; default $SEER_SLACK_API_URL, else "
        "https://slack.com/api/ (set it for proxies and tests).",
    )
    dagster_url: str | None = Field(
        default=None,
        description="Base URL of the Dagster UI for links; default $SEER_DAGSTER_URL, else "
        "http://localhost:3000.",
    )
    timeout_seconds: int = Field(default=10, description="HTTP timeout of one Slack call.")

    def resolved_token(self) -> str | None:
        return self.token or setting("SLACK_BOT_TOKEN")

    def resolved_channel(self) -> str | None:
        return self.channel or setting("SEER_SLACK_CHANNEL")

    def resolved_api_url(self) -> str:
        url = self.api_url or setting("SEER_SLACK_API_URL") or DEFAULT_SLACK_API_URL
        return url if url.endswith("/") else url + "/"

    def resolved_dagster_url(self) -> str:
        return self.dagster_url or setting("SEER_DAGSTER_URL") or DEFAULT_DAGSTER_URL

    def is_configured(self) -> bool:
        return bool(self.resolved_token() and self.resolved_channel())

    def describe(self) -> str:
        """Where alerts go, without the token."""
        if self.is_configured():
            return f"Slack channel {self.resolved_channel()} via {self.resolved_api_url()}"
        if self.resolved_token():
            return "console (SLACK_BOT_TOKEN is set but SEER_SLACK_CHANNEL is not)"
        return "console (set SLACK_BOT_TOKEN and SEER_SLACK_CHANNEL to post to Slack)"

    def client(self) -> Any:
        from slack_sdk import WebClient

        register_secret(self.resolved_token())  # hidden in every error text from now on
        return WebClient(
            token=self.resolved_token(),
            base_url=self.resolved_api_url(),
            timeout=self.timeout_seconds,
        )

    def send(
        self, message: SlackMessage, log: Any = None, thread_ts: str | None = None
    ) -> DeliveryReceipt:
        """Post one message (a reply in the thread `thread_ts` when given); raises
        `AlertDeliveryError` (never with the token) on failure.

        Without token and channel the message is written to `log` (the Dagster run log when
        called from a check or sensor, else the `seer.alerts` logger on the console).
        """
        if not self.is_configured():
            (log or logger).warning(f"Seer alert ({self.describe()}):\n{render_console(message)}")
            return DeliveryReceipt(destination="console")
        from slack_sdk.errors import SlackApiError

        channel = self.resolved_channel()
        extra = {"thread_ts": thread_ts} if thread_ts else {}
        try:
            response = self.client().chat_postMessage(
                channel=channel,
                text=message.text,
                blocks=message.blocks,
                unfurl_links=False,
                unfurl_media=False,
                **extra,
            )
        except SlackApiError as error:
            response = error.response
            code = response.get("error") if isinstance(response.data, dict) else None
            status = response.status_code
            retry_after = response.headers.get("Retry-After") or response.headers.get("retry-after")
            seconds = float(retry_after) if retry_after and retry_after.isdigit() else None
            detail = f"Slack answered {code or 'an error'} (HTTP {status})"
            if seconds is not None:
                detail += f", retry after {seconds:.0f} s"
            raise AlertDeliveryError(detail, seconds) from None
        except Exception as error:  # network down, timeout, DNS: keep the alert pending
            raise AlertDeliveryError(
                f"Slack unreachable: {type(error).__name__}: {error}"
            ) from None
        return DeliveryReceipt(destination=f"slack:{channel}", slack_ts=response.get("ts"))
