"""Markdown for chat (GitHub-flavoured: GitHub, GitLab, Mattermost, Teams, Discord): compact,
pasteable, with the top hypotheses and their next steps. Optionally capped in length, ending
with a link to the full report (engine/render/chat.py)."""
from __future__ import annotations

from precdx.diagnosis import Diagnosis
from precdx.render.chat import Cap, Markup, Part, Reply, Span, diagnosis_reply, fit


class MarkdownMarkup(Markup):
    name = "markdown"

    def span(self, s: Span) -> str:
        text = s.text
        if s.style == "li":
            return self.bullet
        if s.style == "link":
            return f"[{text}]({s.href})"
        if not text.strip():
            return text
        if s.style == "b":
            return f"**{text}**"
        if s.style == "i":
            return f"*{text}*"
        if s.style == "code":
            fence = "``" if "`" in text else "`"
            pad = " " if fence == "``" else ""
            return f"{fence}{pad}{text}{pad}{fence}"
        return text


MARKDOWN = MarkdownMarkup()


def render_reply(reply: Reply, *, max_length: int | None = None, report_url: str | None = None) -> str:
    parts: list[Part] = fit(reply, MARKDOWN, Cap(max_length) if max_length else None, report_url)
    return MARKDOWN.join(parts).rstrip() + "\n"


def render_markdown(diag: Diagnosis, *, max_hypotheses: int = 3, max_length: int | None = None,
                    report_url: str | None = None) -> str:
    """The diagnosis as a markdown message; `max_length` caps it (characters), `report_url`
    ends it with a link to the full report."""
    return render_reply(diagnosis_reply(diag, max_hypotheses=max_hypotheses), max_length=max_length,
                        report_url=report_url)
