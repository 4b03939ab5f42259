"""Chat sessions under /v1/sessions: create one with facts, answers and/or an uploaded archive of
run folders, add turns (the same three), read the state (diagnosis and the questions worth
answering next) as JSON, a chat message or the full report, the next best evidence, delete it."""
from __future__ import annotations

import json
from dataclasses import replace
from typing import BinaryIO

from fastapi import APIRouter, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import Response

from precdx.service.errors import ServiceError
from precdx.service.models import ErrorOut, Format, Lang, MaxLength, NextOut, SessionCreate, SessionState, \
    SessionTurn, UploadOut
from precdx.service.reports import ReportStore, derived_id
from precdx.service.routes.chat import Answer, languages, respond, store_report, wants_report
from precdx.service.routes.common import (ERRORS, AppSettings, Reports, Runner, Store, json_body, json_response,
                                          reply_responses)
from precdx.service.routes.uploads import read_upload, unpacked
from precdx.service.settings import Settings
from precdx.service.store import Session, SessionStore

SESSION_ID = r"^[A-Za-z0-9_-]{8,64}$"
SESSION_RESPONSES = {**reply_responses(SessionState), 404: {"model": ErrorOut}, **ERRORS}
SID = PathParam(..., pattern=SESSION_ID, description="id returned by POST /v1/sessions")
FORMAT = Query("json", alias="format", description="json: the session state; markdown / text / slack / lark: a "
                                                    "chat message linking the full report; html: the full report")


def _body_doc(model: str) -> dict:
    """The request body of a turn: JSON, multipart (archive + facts) or an archive as the body."""
    return {"requestBody": {"content": {
        "application/json": json_body(model),
        "multipart/form-data": {"schema": {"type": "object", "properties": {
            "archive": {"type": "string", "format": "binary",
                        "description": "zip or tar(.gz/.bz2/.xz) of run folders: a case (baseline/, target/, ...) "
                                       "or one run; its facts are collected into the session"},
            "facts": {"type": "string", "description": f"JSON: {model} (or a list of facts)"}}}},
        **{t: {"schema": {"type": "string", "format": "binary"}}
           for t in ("application/zip", "application/gzip", "application/x-tar")},
    }}}


router = APIRouter()


def _not_found(sid: str) -> ServiceError:
    return ServiceError(404, "session_not_found", f"no session {sid!r} (never created, deleted or expired)")


# ---------------------------------------------------------------- the work done in the pool
def collect_archive(archive: BinaryIO, settings: Settings, deadline: float):
    """The facts of an uploaded archive (a case or one run), with the paths made relative to it,
    and the collection's warnings."""
    from precdx.api import gather
    from precdx.errors import Warnings
    from precdx.facts import parse_fact

    warnings = Warnings()
    with unpacked(archive, settings, deadline) as up:
        got = gather(**up.inputs(), warnings=warnings)
        up.require_recognised(got.case)
        facts = json.loads(up.relative(json.dumps([f.to_json() for f in got.facts])))
        problems = json.loads(up.relative(json.dumps(warnings.items)))
    return [parse_fact(d, where=f"archive fact {i}") for i, d in enumerate(facts)], problems


def _answer(session: Session, state: SessionState, fmt: str, settings: Settings, reports: ReportStore) -> Answer:
    """The state, its chat replies (a Lark post also in the other language) and report page."""
    from precdx.service.sessions import session_state, state_reply

    answer = Answer(state)
    if fmt not in ("json", "html"):
        answer.replies = [state_reply(state, fmt)]
        for other in languages(fmt, session.lang)[1:]:
            translated = session_state(replace(session, lang=other), settings, state.upload)
            answer.replies.append(state_reply(translated, fmt))
    if wants_report(fmt, reports):
        from precdx.render.html import render_html

        if fmt == "html":
            answer.html = render_html(state.diagnosis)
        else:
            answer.report_id = derived_id(session.id, str(session.turns))
            store_report(reports, answer.report_id, lambda: render_html(state.diagnosis))
    return answer


def _turn(settings: Settings, body, archive: BinaryIO | None, deadline: float):
    """Parse a turn's facts and collect its archive: (facts, collected, warnings)."""
    from precdx.service.sessions import parse_facts

    facts = parse_facts(body.facts, max_facts=settings.max_facts, max_fact_bytes=settings.max_fact_bytes)
    collected, problems = collect_archive(archive, settings, deadline) if archive is not None else ([], [])
    return facts, collected, problems


# ---------------------------------------------------------------- routes
@router.post("/sessions", tags=["sessions"], status_code=201, response_model=None,
             responses={**reply_responses(SessionState, 201), **ERRORS}, openapi_extra=_body_doc("SessionCreate"),
             summary="Start a session with facts, answers and/or an archive of run folders")
async def create_session(request: Request, settings: AppSettings, store: Store, runner: Runner, reports: Reports,
                         fmt: Format = FORMAT, max_length: MaxLength = None,
                         lang: Lang | None = Query(None, description="the session's language when the body does "
                                                                     "not say (e.g. an archive as the body)")) -> Response:
    deadline = runner.deadline()
    upload = await read_upload(request, settings, SessionCreate)
    body: SessionCreate = upload.body
    if lang is not None and "lang" in body.model_fields_set and body.lang != lang:
        raise ServiceError(422, "invalid_request", f"lang={lang} in the query but {body.lang!r} in the body")
    session_lang = body.lang if "lang" in body.model_fields_set else (lang or "en")

    def job() -> Answer:
        from precdx.service.sessions import apply_turn, session_state

        facts, collected, problems = _turn(settings, body, upload.archive, deadline)
        draft = Session(id="", lang=session_lang)
        apply_turn(draft, facts, body.answers, max_facts=settings.max_facts, collected=collected)
        session = store.create(session_lang, draft.facts, draft.skipped)
        got = UploadOut(facts=len(collected), replaced=0, warnings=problems) if upload.archive is not None else None
        return _answer(session, session_state(session, settings, got), fmt, settings, reports)

    try:
        answer = await runner.run(job, deadline=deadline)
    finally:
        await upload.close()
    return respond(request, settings, fmt, answer, max_length=max_length, status=201)


@router.get("/sessions/{session_id}", tags=["sessions"], response_model=None, responses=SESSION_RESPONSES)
async def get_session(request: Request, settings: AppSettings, store: Store, runner: Runner, reports: Reports,
                      session_id: str = SID, fmt: Format = FORMAT, max_length: MaxLength = None) -> Response:
    def job() -> Answer:
        from precdx.service.sessions import session_state

        session = store.get(session_id)
        if session is None:
            raise _not_found(session_id)
        return _answer(session, session_state(session, settings), fmt, settings, reports)

    return respond(request, settings, fmt, await runner.run(job), max_length=max_length)


@router.post("/sessions/{session_id}/turns", tags=["sessions"], response_model=None, responses=SESSION_RESPONSES,
             openapi_extra=_body_doc("SessionTurn"),
             summary="Add facts, answers to the engine's questions and/or an archive of run folders")
async def add_turn(request: Request, settings: AppSettings, store: Store, runner: Runner, reports: Reports,
                   session_id: str = SID, fmt: Format = FORMAT, max_length: MaxLength = None) -> Response:
    deadline = runner.deadline()
    upload = await read_upload(request, settings, SessionTurn)
    body: SessionTurn = upload.body

    def job() -> Answer:
        from precdx.service.sessions import apply_turn, session_state

        facts, collected, problems = _turn(settings, body, upload.archive, deadline)
        replaced: list[int] = []
        session = store.update(session_id, lambda s: replaced.append(
            apply_turn(s, facts, body.answers, max_facts=settings.max_facts, collected=collected)))
        if session is None:
            raise _not_found(session_id)
        got = (UploadOut(facts=len(collected), replaced=replaced[0], warnings=problems)
               if upload.archive is not None else None)
        return _answer(session, session_state(session, settings, got), fmt, settings, reports)

    try:
        answer = await runner.run(job, deadline=deadline)
    finally:
        await upload.close()
    return respond(request, settings, fmt, answer, max_length=max_length)


@router.get("/sessions/{session_id}/next", tags=["sessions"], response_model=NextOut,
            responses={404: {"model": ErrorOut}, **ERRORS})
async def next_evidence(settings: AppSettings, store: Store, runner: Runner, session_id: str = SID) -> Response:
    def job() -> NextOut:
        from precdx.service.sessions import session_next

        session = store.get(session_id)
        if session is None:
            raise _not_found(session_id)
        return session_next(session, settings)

    return json_response(await runner.run(job))


def _delete(store: SessionStore, reports: ReportStore, sid: str) -> bool:
    """The session and the reports of its turns."""
    session = store.get(sid)
    if session is not None:
        reports.delete([derived_id(sid, str(t)) for t in range(session.turns + 1)])
    return store.delete(sid)


@router.delete("/sessions/{session_id}", tags=["sessions"], status_code=204, response_class=Response,
               responses={404: {"model": ErrorOut}, **ERRORS})
async def delete_session(store: Store, runner: Runner, reports: Reports, session_id: str = SID) -> Response:
    if not await runner.run(_delete, store, reports, session_id):
        raise _not_found(session_id)
    return Response(status_code=204)
