"""Renderers of a Diagnosis: text (people at a terminal, plain-text chats), markdown (chat),
slack (a Slack message: mrkdwn text and section blocks), lark (a Feishu / Lark post, zh_cn and
en_us), json (bots), html (one self-contained report file). The chat formats share
engine/render/chat.py: the same parts, a length cap met at hypothesis boundaries, a closing
link to the full report."""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from precdx.diagnosis import Diagnosis
from precdx.vocabulary import REPORT_FORMATS as FORMATS  # noqa: F401 (declared there)

if TYPE_CHECKING:
    from precdx.render.chat import Reply

# formats whose output is meant to be posted as a chat message (capped, with a report link)
CHAT_FORMATS = ("text", "markdown", "slack", "lark")
# the cap a chat reply gets when none is asked for (the service; the CLI caps slack and lark only):
# characters, bytes of the JSON body for lark
DEFAULT_LENGTH = {"markdown": 16_000, "text": 16_000, "slack": 12_000, "lark": 20_000}


def render(diag: Diagnosis, fmt: str, *, translations: Sequence[Diagnosis] = (), **kw) -> str:
    """`translations`: the same diagnosis in other languages (a Lark post carries one locale
    per language). Keyword arguments go to the format's renderer: verbose (text), series (html),
    max_hypotheses, max_length and report_url (the chat formats)."""
    if fmt == "json":
        return diag.model_dump_json(indent=2)
    if fmt == "markdown":
        from precdx.render.markdown import render_markdown
        return render_markdown(diag, **kw)
    if fmt == "slack":
        from precdx.render.slack import render_slack
        return render_slack(diag, **kw)
    if fmt == "lark":
        from precdx.render.lark import render_lark
        return render_lark([diag, *(t for t in translations if t.lang != diag.lang)], **kw)
    if fmt == "html":
        from precdx.render.html import render_html
        return render_html(diag, **kw)
    from precdx.render.text import render_text
    return render_text(diag, **kw)


def render_chat(fmt: str, replies: Sequence["Reply"], *, max_length: int | None = None,
                report_url: str | None = None) -> str:
    """Chat replies (engine/render/chat.py; one per language, the first is the main one) as a
    message in `fmt`, capped at `max_length` (the format's default when None)."""
    import json

    length = max_length or DEFAULT_LENGTH[fmt]
    if fmt == "lark":
        from precdx.render.lark import lark_message
        return json.dumps(lark_message(replies, max_length=length, report_url=report_url), ensure_ascii=False,
                          separators=(",", ":"))
    if fmt == "slack":
        from precdx.render.slack import slack_message
        return json.dumps(slack_message(replies[0], max_length=length, report_url=report_url), ensure_ascii=False)
    if fmt == "markdown":
        from precdx.render.markdown import render_reply
        return render_reply(replies[0], max_length=length, report_url=report_url)
    from precdx.render.text import render_reply as render_text_reply
    return render_text_reply(replies[0], max_length=length, report_url=report_url)
