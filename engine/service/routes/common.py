"""What the routers share: the app's settings, session store, report store and job pool (read
from `app.state`, set by precdx.service.app.create_app), responses as JSON, the documented
responses of an operation that answers in any format, and the documented error responses."""
from __future__ import annotations

from typing import Annotated, Any, Union

from fastapi import Depends, Request
from fastapi.responses import Response

from precdx.service.jobs import JobRunner
from precdx.service.models import FACT_LIST, ErrorOut, LarkMessage, SlackMessage
from precdx.service.reports import ReportStore
from precdx.service.settings import Settings
from precdx.service.store import SessionStore

# 429: rate_limited (any operation, when PRECDX_RATE_LIMIT is set) and too_many_sessions
ERRORS = {code: {"model": ErrorOut} for code in (400, 401, 408, 413, 415, 422, 429, 503)}
TEXTS = {media: {"schema": {"type": "string"}} for media in ("text/markdown", "text/plain", "text/html")}


def json_body(model: str) -> dict:
    """The JSON media type of a request body read by uploads.read_upload: `model`, or a bare list
    of facts."""
    return {"schema": {"anyOf": [{"$ref": f"#/components/schemas/{model}"},
                                 {"$ref": f"#/components/schemas/{FACT_LIST}"}]}}


def reply_responses(model: Any, status: int = 200) -> dict:
    """An operation answering in any `format`: the object (json) or a chat payload (slack, lark)
    as JSON, a chat message as markdown or plain text, the full report as HTML."""
    return {status: {"model": Union[model, SlackMessage, LarkMessage], "content": TEXTS,
                     "description": "format=json: the object; slack / lark: the message payload; markdown / "
                                    "text: the chat message; html: the full report"}}


# async: FastAPI runs a plain `def` dependency in its thread pool, a thread hand-off per dependency and
# request for reading an attribute
async def _settings(request: Request) -> Settings:
    return request.app.state.settings


async def _store(request: Request) -> SessionStore:
    return request.app.state.store


async def _runner(request: Request) -> JobRunner:
    return request.app.state.runner


async def _reports(request: Request) -> ReportStore:
    return request.app.state.reports


AppSettings = Annotated[Settings, Depends(_settings)]
Store = Annotated[SessionStore, Depends(_store)]
Runner = Annotated[JobRunner, Depends(_runner)]
Reports = Annotated[ReportStore, Depends(_reports)]


def json_response(model, status: int = 200) -> Response:
    return Response(model.model_dump_json(), status_code=status, media_type="application/json")
