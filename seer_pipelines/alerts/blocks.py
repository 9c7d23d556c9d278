"""Block Kit pieces within Slack's limits, and escaping of user text for mrkdwn.

Slack refuses a message over its limits (`msg_too_long` past 40,000 characters of `text`;
`invalid_blocks` past 50 blocks, 3,000 characters of a section's or a context's text, 150
of a header) and the alert would never leave the outbox. So `SlackMessage` cuts whatever
a builder left too long, labels and check names are shown cut to `MAX_LABEL_CHARS`, and a
cut never splits an escaped character or a link.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from seer_metrics.text.redaction import shorten

# Slack's limits are 3,000 characters for a section's or a context's text, 150 for a
# header, 50 blocks a message and 40,000 characters for `text`; the fallback `text` is
# what a notification shows, and Slack advises at most 4,000.
MAX_SECTION_CHARS = 2900
MAX_HEADER_CHARS = 150
MAX_BLOCKS = 50
MAX_FALLBACK_CHARS = 3000
# A slice label or a check name as a message shows it.
MAX_LABEL_CHARS = 100


@dataclass(frozen=True)
class SlackMessage:
    """What is posted: a plain-text fallback (notifications) and Block Kit blocks, cut to
    Slack's limits here whatever the builder made (`fit_blocks`), since Slack refuses a
    message over them (`msg_too_long`, `invalid_blocks`) and the alert would stay pending."""

    text: str
    blocks: list[dict[str, Any]]

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", cut_mrkdwn(self.text, MAX_FALLBACK_CHARS))
        object.__setattr__(self, "blocks", fit_blocks(self.blocks))


def escape_mrkdwn(text: Any) -> str:
    """Escape Slack's control characters so user text can never form a link or mention."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_link(url: str, label: str) -> str:
    """`<url|label>` with the label escaped and the URL unable to break out of the link."""
    safe_url = quote(url, safe=":/?#[]@!$&'()*+,;=%-._~")
    return f"<{safe_url}|{escape_mrkdwn(label).replace('|', '¦')}>"


def cut_mrkdwn(text: str, limit: int = MAX_SECTION_CHARS) -> str:
    """`text` (escaped mrkdwn) cut to `limit` characters with an ellipsis, never inside an
    escaped character (`&amp;`) or a link (`<url|label>`): a half link would show as text."""
    if len(text) <= limit:
        return text
    kept = text[: limit - 1]
    for opening, closing in (("<", ">"), ("&", ";")):
        start = kept.rfind(opening)
        if start != -1 and closing not in kept[start:]:
            kept = kept[:start]
    return kept + "…"


def short_label(text: Any) -> str:
    """A slice label or a check name as a message shows it: one line, cut with an ellipsis
    (escape it after: cutting escaped text could split `&amp;`)."""
    return shorten(str(text), MAX_LABEL_CHARS)


def section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": cut_mrkdwn(text)}}


def context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": cut_mrkdwn(text)}]}


def header(text: str) -> dict[str, Any]:
    return {"type": "header", "text": {"type": "plain_text", "text": shorten(text, 150)}}


def fit_blocks(blocks: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The blocks within Slack's limits: each text cut, at most `MAX_BLOCKS` (the last one
    saying how many were left out)."""
    fitted: list[dict[str, Any]] = []
    for block in blocks:
        block = dict(block)
        text = block.get("text")
        if isinstance(text, dict) and isinstance(text.get("text"), str):
            limit = MAX_HEADER_CHARS if block.get("type") == "header" else MAX_SECTION_CHARS
            cut = shorten if text.get("type") == "plain_text" else cut_mrkdwn
            block["text"] = {**text, "text": cut(text["text"], limit) or "…"}
        if isinstance(block.get("elements"), list):
            block["elements"] = [
                {**e, "text": cut_mrkdwn(e["text"]) or "…"}
                if isinstance(e, dict) and isinstance(e.get("text"), str)
                else e
                for e in block["elements"]
            ]
        fitted.append(block)
    if len(fitted) > MAX_BLOCKS:
        hidden = len(fitted) - (MAX_BLOCKS - 1)
        fitted = fitted[: MAX_BLOCKS - 1]
        fitted.append(section(f"…and {hidden} more not shown here: see Dagster."))
    return fitted


def packed_sections(lines: Sequence[str]) -> list[dict[str, Any]]:
    """Lines packed into as few sections as fit Slack's section limit, in order."""
    blocks: list[dict[str, Any]] = []
    current: list[str] = []
    for line in lines:
        line = cut_mrkdwn(line)
        if current and len("\n".join([*current, line])) > MAX_SECTION_CHARS:
            blocks.append(section("\n".join(current)))
            current = []
        current.append(line)
    if current:
        blocks.append(section("\n".join(current)))
    return blocks
