"""Chat sessions under /v1/sessions: create one with facts and answers, add turns, read the
state (diagnosis and the questions worth answering next), the next best evidence, delete it."""
from __future__ import annotations

from fastapi import APIRouter, Query
from fastapi import Path as PathParam
from fastapi.responses import Response

from engine.service.errors import ServiceError
from engine.service.models import ErrorOut, Format, NextOut, SessionCreate, SessionState, SessionTurn
from engine.service.routes.common import ERRORS, MARKDOWN, AppSettings, Runner, Store, json_response, markdown
from engine.service.store import Session

SESSION_ID = r"^[A-Za-z0-9_-]{8,64}$"
SESSION_RESPONSES = {200: {"model": SessionState, "content": MARKDOWN}, 404: {"model": ErrorOut}, **ERRORS}
SID = PathParam(..., pattern=SESSION_ID, description="id returned by POST /v1/sessions")

router = APIRouter()


def _not_found(sid: str) -> ServiceError:
    return ServiceError(404, "session_not_found", f"no session {sid!r} (never created, deleted or expired)")


def _respond_state(state: SessionState, fmt: str, status: int = 200) -> Response:
    if fmt == "markdown":
        from engine.service.sessions import state_markdown
        return markdown(state_markdown(state), status)
    return json_response(state, status)


@router.post("/sessions", tags=["sessions"], status_code=201, response_model=None,
             responses={201: {"model": SessionState, "content": MARKDOWN}, **ERRORS})
async def create_session(settings: AppSettings, store: Store, runner: Runner, body: SessionCreate | None = None,
                         fmt: Format = Query("json", alias="format")) -> Response:
    body = body or SessionCreate()

    def job() -> SessionState:
        from engine.service.sessions import apply_turn, parse_facts, session_state

        draft = Session(id="", lang=body.lang)
        apply_turn(draft, parse_facts(body.facts, max_facts=settings.max_facts,
                                     max_fact_bytes=settings.max_fact_bytes), body.answers,
                   max_facts=settings.max_facts)
        session = store.create(body.lang, draft.facts, draft.skipped)
        return session_state(session, settings)

    return _respond_state(await runner.run(job), fmt, 201)


@router.get("/sessions/{session_id}", tags=["sessions"], response_model=None, responses=SESSION_RESPONSES)
async def get_session(settings: AppSettings, store: Store, runner: Runner, session_id: str = SID,
                      fmt: Format = Query("json", alias="format")) -> Response:
    def job() -> SessionState:
        from engine.service.sessions import session_state

        session = store.get(session_id)
        if session is None:
            raise _not_found(session_id)
        return session_state(session, settings)

    return _respond_state(await runner.run(job), fmt)


@router.post("/sessions/{session_id}/turns", tags=["sessions"], response_model=None, responses=SESSION_RESPONSES,
             summary="Add facts and/or answers to the engine's questions")
async def add_turn(settings: AppSettings, store: Store, runner: Runner, body: SessionTurn, session_id: str = SID,
                   fmt: Format = Query("json", alias="format")) -> Response:
    def job() -> SessionState:
        from engine.service.sessions import apply_turn, parse_facts, session_state

        facts = parse_facts(body.facts, max_facts=settings.max_facts, max_fact_bytes=settings.max_fact_bytes)
        session = store.update(session_id, lambda s: apply_turn(s, facts, body.answers,
                                                                max_facts=settings.max_facts))
        if session is None:
            raise _not_found(session_id)
        return session_state(session, settings)

    return _respond_state(await runner.run(job), fmt)


@router.get("/sessions/{session_id}/next", tags=["sessions"], response_model=NextOut,
            responses={404: {"model": ErrorOut}, **ERRORS})
async def next_evidence(settings: AppSettings, store: Store, runner: Runner, session_id: str = SID) -> Response:
    def job() -> NextOut:
        from engine.service.sessions import session_next

        session = store.get(session_id)
        if session is None:
            raise _not_found(session_id)
        return session_next(session, settings)

    return json_response(await runner.run(job))


@router.delete("/sessions/{session_id}", tags=["sessions"], status_code=204, response_class=Response,
               responses={404: {"model": ErrorOut}, **ERRORS})
async def delete_session(store: Store, runner: Runner, session_id: str = SID) -> Response:
    if not await runner.run(store.delete, session_id):
        raise _not_found(session_id)
    return Response(status_code=204)
