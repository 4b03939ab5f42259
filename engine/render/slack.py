"""Slack: the message a bot posts as it is — the JSON body of `chat.postMessage` (add
`channel`) or of an incoming webhook: `text` in Slack mrkdwn (*bold*, _italic_, `code`,
<url|label>; never GitHub's `**`), the same content as `blocks` (one mrkdwn section per part:
the verdict, each hypothesis, the splitting step, ...), link unfurling off.

Slack's limits: a section's text holds at most 3,000 characters, a message at most 50 blocks,
and block messages are refused well before the 40,000 characters Slack allows for `text` alone
(msg_blocks_too_long around 13,000), so the default cap is 12,000 characters over all parts,
fitted at hypothesis boundaries and closed by a link to the full report."""
from __future__ import annotations

import json
from typing import Any

from precdx.diagnosis import Diagnosis
from precdx.render.chat import Cap, Markup, Part, Reply, Span, diagnosis_reply, fit

SECTION_CHARS = 3000
MAX_BLOCKS = 50
DEFAULT_CHARS = 12_000
TEXT_LIMIT = 40_000  # Slack truncates a longer `text`


def escape(text: str) -> str:
    """The three characters Slack's mrkdwn reserves for its own markup."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class SlackMarkup(Markup):
    name = "slack"
    bullet = "      • "

    def span(self, s: Span) -> str:
        if s.style == "li":
            return self.bullet
        if s.style == "link":
            label = escape(s.text).replace("|", "¦")
            return f"<{s.href}|{label}>"
        text = escape(s.text)
        if s.style in ("b", "i"):
            core = text.strip()
            if not core:
                return text
            mark = "*" if s.style == "b" else "_"
            # the markup character inside the span would end it early
            core = core.replace(mark, "∗" if mark == "*" else "＿")
            lead, trail = text[: len(text) - len(text.lstrip())], text[len(text.rstrip()):]
            return f"{lead}{mark}{core}{mark}{trail}"
        if s.style == "code":
            return f"`{text.replace('`', 'ʼ')}`" if text else ""
        return text


SLACK = SlackMarkup()


def cap(max_length: int | None = None) -> Cap:
    return Cap(total=min(max_length or DEFAULT_CHARS, TEXT_LIMIT), section=SECTION_CHARS, parts=MAX_BLOCKS)


def slack_message(reply: Reply, *, max_length: int | None = None, report_url: str | None = None) -> dict[str, Any]:
    parts: list[Part] = fit(reply, SLACK, cap(max_length), report_url)
    return {
        "text": SLACK.join(parts),
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": SLACK.part(p)}} for p in parts],
        "unfurl_links": False,
        "unfurl_media": False,
    }


def render_slack(diag: Diagnosis, *, max_hypotheses: int = 5, max_length: int | None = None,
                 report_url: str | None = None) -> str:
    """The Slack message of a diagnosis as JSON (see the module docstring)."""
    message = slack_message(diagnosis_reply(diag, max_hypotheses=max_hypotheses), max_length=max_length,
                            report_url=report_url)
    return json.dumps(message, ensure_ascii=False, indent=2) + "\n"
