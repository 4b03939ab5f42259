"""Renderers of a Diagnosis: text (people at a terminal, plain-text chats), markdown (chat),
slack (a Slack message: mrkdwn text and section blocks), lark (a Feishu / Lark post, zh_cn and
en_us), json (bots), html (one self-contained report file). The chat formats share
engine/render/chat.py: the same parts, a length cap met at hypothesis boundaries, a closing
link to the full report."""
from __future__ import annotations

from typing import Sequence

from engine.diagnosis import Diagnosis
from engine.vocabulary import REPORT_FORMATS as FORMATS  # noqa: F401 (declared there)

# formats whose output is meant to be posted as a chat message (capped, with a report link)
CHAT_FORMATS = ("text", "markdown", "slack", "lark")


def render(diag: Diagnosis, fmt: str, *, translations: Sequence[Diagnosis] = (), **kw) -> str:
    """`translations`: the same diagnosis in other languages (a Lark post carries one locale
    per language). Keyword arguments go to the format's renderer: verbose (text), series (html),
    max_hypotheses, max_length and report_url (the chat formats)."""
    if fmt == "json":
        return diag.model_dump_json(indent=2)
    if fmt == "markdown":
        from engine.render.markdown import render_markdown
        return render_markdown(diag, **kw)
    if fmt == "slack":
        from engine.render.slack import render_slack
        return render_slack(diag, **kw)
    if fmt == "lark":
        from engine.render.lark import render_lark
        return render_lark([diag, *(t for t in translations if t.lang != diag.lang)], **kw)
    if fmt == "html":
        from engine.render.html import render_html
        return render_html(diag, **kw)
    from engine.render.text import render_text
    return render_text(diag, **kw)
