"""Answering in the format a client asked for: JSON, the full HTML report, or a chat message
(markdown, text, slack, lark) that fits the platform's length cap and ends with a link to the
full report, stored under the diagnosis id (engine/service/reports.py, GET /v1/reports/{id}.html)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from fastapi import Request
from fastapi.responses import Response

from precdx.service.models import CHAT_FORMATS
from precdx.service.reports import ReportStore
from precdx.service.routes.common import json_response
from precdx.service.settings import Settings

if TYPE_CHECKING:
    from precdx.diagnosis import Diagnosis
    from precdx.render.chat import Reply

MEDIA = {"markdown": "text/markdown; charset=utf-8", "text": "text/plain; charset=utf-8",
         "slack": "application/json", "lark": "application/json", "html": "text/html; charset=utf-8"}
REPORT_PATH = "/v1/reports/{id}.html"


@dataclass
class Answer:
    """What a job hands back for the response: the object for format=json, the replies for a
    chat message (one per language; Lark carries them all), the report page and its id."""

    obj: Any
    replies: list["Reply"] = field(default_factory=list)
    html: str | None = None
    report_id: str | None = None


def wants_report(fmt: str, reports: ReportStore) -> bool:
    """A report page is made for format=html, and for chat formats when reports are kept."""
    return fmt == "html" or (fmt in CHAT_FORMATS and reports.enabled)


def languages(fmt: str, lang: str) -> list[str]:
    """The languages a reply is written in: a Lark post carries zh_cn and en_us."""
    from precdx.vocabulary import LANGS

    return [lang, *(x for x in LANGS if x != lang)] if fmt == "lark" else [lang]


def reply_of(diag: "Diagnosis", fmt: str) -> "Reply":
    from precdx.render.chat import diagnosis_reply
    from precdx.render.text import text_reply

    return text_reply(diag) if fmt == "text" else diagnosis_reply(diag)


def report_url(request: Request, settings: Settings, rid: str) -> str:
    base = (settings.public_url or str(request.base_url)).rstrip("/")
    return base + REPORT_PATH.format(id=rid)


def store_report(reports: ReportStore, rid: str, html: Callable[[], str]) -> None:
    """Keep the report page under `rid` (made only when not kept already)."""
    if not reports.has(rid):
        reports.put(rid, html())


def respond(request: Request, settings: Settings, fmt: str, answer: Answer, *, max_length: int | None,
            status: int = 200) -> Response:
    if fmt == "json":
        return json_response(answer.obj, status)
    if fmt == "html":
        return Response(answer.html or "", status_code=status, media_type=MEDIA["html"])
    from precdx.render import render_chat

    url = report_url(request, settings, answer.report_id) if answer.report_id else None
    body = render_chat(fmt, answer.replies, max_length=max_length, report_url=url)
    headers = {"Link": f'<{url}>; rel="alternate"; type="text/html"'} if url else None
    return Response(body, status_code=status, media_type=MEDIA[fmt], headers=headers)
