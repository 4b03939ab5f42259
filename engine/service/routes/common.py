"""What the routers share: the app's settings, session store and job pool (read from
`app.state`, set by engine.service.app.create_app), responses as JSON or chat-ready markdown,
and the documented error responses."""
from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.responses import Response

from engine.service.jobs import JobRunner
from engine.service.models import ErrorOut
from engine.service.settings import Settings
from engine.service.store import SessionStore

ERRORS = {code: {"model": ErrorOut} for code in (400, 401, 408, 413, 415, 422, 503)}
MARKDOWN = {"text/markdown": {"schema": {"type": "string"}}}


def _settings(request: Request) -> Settings:
    return request.app.state.settings


def _store(request: Request) -> SessionStore:
    return request.app.state.store


def _runner(request: Request) -> JobRunner:
    return request.app.state.runner


AppSettings = Annotated[Settings, Depends(_settings)]
Store = Annotated[SessionStore, Depends(_store)]
Runner = Annotated[JobRunner, Depends(_runner)]


def json_response(model, status: int = 200) -> Response:
    return Response(model.model_dump_json(), status_code=status, media_type="application/json")


def markdown(text: str, status: int = 200) -> Response:
    return Response(text, status_code=status, media_type="text/markdown; charset=utf-8")
