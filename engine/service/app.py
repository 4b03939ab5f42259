"""The FastAPI application and `serve()`. Routes stay thin: they parse the request, hand the
work to the job pool and render the result as JSON or chat-ready markdown. Every error is JSON
`{error, detail}`; bad input never yields a 500."""
from __future__ import annotations

import hmac
import json
import logging
import os
import shutil
import sys
import tempfile
from contextlib import asynccontextmanager
from http import HTTPStatus
from pathlib import Path
from typing import Any, BinaryIO

from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import ValidationError
from starlette.exceptions import HTTPException

from engine import __version__
from engine.diagnosis import Diagnosis
from engine.errors import PrecdxError, Warnings
from engine.service.errors import ServiceError
from engine.service.jobs import JobRunner
from engine.service.limits import BodyLimit
from engine.service.models import (
    DiagnoseRequest, ErrorOut, FailureModeOut, Format, Health, Lang, NextOut, QuestionOut, RuleOut, SessionCreate,
    SessionState, SessionTurn,
)
from engine.service.settings import Settings
from engine.service.store import Session, SessionStore

log = logging.getLogger("precdx.service")

ARCHIVE_TYPES = ("application/zip", "application/x-zip-compressed", "application/x-tar", "application/gzip",
                 "application/x-gzip", "application/x-bzip2", "application/x-xz", "application/octet-stream")
SESSION_ID = r"^[A-Za-z0-9_-]{8,64}$"
_ERRORS = {code: {"model": ErrorOut} for code in (400, 401, 408, 413, 415, 422, 503)}
_MARKDOWN = {"text/markdown": {"schema": {"type": "string"}}}


def _json_response(model, status: int = 200) -> Response:
    return Response(model.model_dump_json(), status_code=status, media_type="application/json")


def _markdown(text: str, status: int = 200) -> Response:
    return Response(text, status_code=status, media_type="text/markdown; charset=utf-8")


def _error(status: int, code: str, detail: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"error": code, "detail": detail}, status_code=status, headers=headers)


def _without_upload_paths(diag: Diagnosis, tmp: str, root: str) -> Diagnosis:
    """Paths inside an upload's temporary folder are reported relative to the case (facts,
    evidence, warnings and texts alike); the server's folders never reach the client."""
    text = diag.model_dump_json()
    for prefix, repl in ((root.rstrip("/") + "/", ""), (tmp.rstrip("/") + "/", ""), (tmp, "<upload>")):
        text = text.replace(json.dumps(prefix)[1:-1], repl)
    return Diagnosis.model_validate_json(text)


# ---------------------------------------------------------------- the work done in the pool
def diagnose_job(settings: Settings, request: DiagnoseRequest, archive: BinaryIO | None, lang: str,
                 deadline: float) -> Diagnosis:
    from engine.api import diagnose_case
    from engine.service.archive import Limits, case_root, extract
    from engine.service.sessions import answers_to_facts, parse_facts

    warnings = Warnings()
    given = parse_facts(request.facts, max_facts=settings.max_facts)
    answered, _ = answers_to_facts(request.answers, source="request")
    if archive is None and not given and not answered:
        raise ServiceError(400, "nothing_to_diagnose", "give facts, answers or an archive of run folders")
    root = None
    tmp = None
    try:
        if archive is not None:
            tmp = tempfile.mkdtemp(prefix="precdx-upload-")
            extract(archive, Path(tmp), Limits(settings.max_extracted_bytes, settings.max_archive_files, deadline))
            root = str(case_root(Path(tmp)))
        diag = diagnose_case(root, facts=[*given, *answered], engine=settings.engine, lang=lang,
                             rules_path=settings.rules_path, warnings=warnings).diagnosis
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return _without_upload_paths(diag, tmp, root) if tmp and root else diag


# ---------------------------------------------------------------- app
def create_app(settings: Settings | None = None) -> FastAPI:
    from engine.matching import ENGINES

    settings = settings or Settings.from_env()
    if settings.engine not in ENGINES:
        raise PrecdxError(f"unknown matcher {settings.engine!r} (PRECDX_SERVICE_ENGINE)", hint=f"use one of {ENGINES}")
    store = SessionStore(settings.db_url, ttl=settings.session_ttl)
    runner = JobRunner(settings.max_jobs, settings.request_timeout)

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        yield
        runner.close()
        store.close()

    app = FastAPI(title="precdx", version=__version__, lifespan=lifespan, dependencies=[Depends(_known_query)],
                  responses={422: {"model": ErrorOut, "description": "Invalid request or facts"}},
                  description="Diagnose accuracy problems in large-model training: facts or run folders in, "
                              "ranked hypotheses out; chat sessions that ask for the next best evidence.")
    app.state.settings = settings
    app.state.store = store
    app.state.runner = runner
    app.add_middleware(BodyLimit, max_bytes=settings.max_request_bytes)

    # ---------------------------------------------------------- errors
    @app.exception_handler(ServiceError)
    async def _service_error(_req: Request, exc: ServiceError):
        return _error(exc.status, exc.code, exc.render())

    @app.exception_handler(PrecdxError)
    async def _precdx_error(_req: Request, exc: PrecdxError):
        return _error(422, "invalid_input", exc.render())

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_req: Request, exc: RequestValidationError):
        parts = []
        for err in exc.errors():
            loc = ".".join(str(x) for x in err.get("loc", ()))
            parts.append(f"{loc}: {err.get('msg', 'invalid')}")
        return _error(422, "invalid_request", "; ".join(parts) or "invalid request")

    @app.exception_handler(HTTPException)
    async def _http_error(req: Request, exc: HTTPException):
        try:
            code = HTTPStatus(exc.status_code).phrase.lower().replace(" ", "_").replace("-", "_")
        except ValueError:
            code = "error"
        headers = dict(getattr(exc, "headers", None) or {})
        if exc.status_code == 405:
            # one route per method: the router names only the first route's methods
            allowed: set[str] = set()
            for route in app.routes:
                regex, methods = getattr(route, "path_regex", None), getattr(route, "methods", None)
                if regex is not None and methods and regex.match(req.url.path):
                    allowed |= set(methods)
            headers["Allow"] = ", ".join(sorted(allowed))
        return _error(exc.status_code, code, str(exc.detail), headers=headers or None)

    @app.exception_handler(Exception)
    async def _internal_error(_req: Request, exc: Exception):
        log.exception("internal error")
        return _error(500, "internal_error", f"internal error ({type(exc).__name__}); see the server log")

    # ---------------------------------------------------------- auth
    # the spec declares bearer auth only when the server requires it, so it never says more than is true
    guards = []
    if settings.token is not None:
        bearer = HTTPBearer(auto_error=False, description="the token the server was started with (--token)")
        expected = settings.token.encode()

        async def require_token(creds: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
            given = creds.credentials.encode() if creds is not None else b""
            if creds is None or not hmac.compare_digest(given, expected):
                raise HTTPException(401, "missing or wrong bearer token", headers={"WWW-Authenticate": "Bearer"})
        guards.append(Depends(require_token))

    v1 = APIRouter(prefix="/v1", dependencies=guards,
                   responses={401: {"model": ErrorOut}} if guards else {})

    # ---------------------------------------------------------- health and catalogues
    @app.get("/healthz", response_model=Health, tags=["service"], responses={503: {"model": ErrorOut}})
    async def healthz() -> Response:
        try:
            await runner.run(store.ping)
        except Exception as exc:  # the store is down: say so, do not crash
            if isinstance(exc, ServiceError):
                raise
            raise ServiceError(503, "store_unavailable", f"session store unavailable: {type(exc).__name__}") from None
        return _json_response(Health(status="ok", version=__version__, store=store.backend, engine=settings.engine))

    @v1.get("/failure-modes", response_model=list[FailureModeOut], tags=["catalogue"])
    async def failure_modes(lang: Lang = "en") -> Any:
        from engine.modes import mode_catalog

        return [FailureModeOut(id=m.id, title=m.title(lang), area=m.area, verdict=m.verdict,
                               references=list(m.references)) for m in sorted(mode_catalog().values(), key=lambda m: m.id)]

    @v1.get("/rules", response_model=list[RuleOut], tags=["catalogue"])
    async def rules(lang: Lang = "en") -> Any:
        from engine.diagnosis import get_matcher

        pack, _ = await runner.run(get_matcher, settings.engine, settings.rules_path)
        return [RuleOut(id=r.id, name=r.rule.name, status=r.rule.status, stage=r.rule.stage,
                        failure_modes=list(r.rule.failure_modes), against=list(r.rule.against), symptom=r.rule.symptom,
                        title=r.rule.title.get(lang)) for r in pack.rules]

    @v1.get("/questions", response_model=list[QuestionOut], tags=["catalogue"])
    async def questions(lang: Lang = "en") -> Any:
        from engine.facts.core import OBSERVATIONS
        from engine.planner.costs import observation_cost

        return [QuestionOut(name=name, kind=kind, text=zh if lang == "zh" else en, cost=observation_cost(name))
                for name, (kind, en, zh) in OBSERVATIONS.items()]

    coverage_cache: dict[str, Any] = {}

    @v1.get("/coverage", tags=["catalogue"], responses={501: {"model": ErrorOut}},
            response_model=dict[str, Any])
    async def coverage() -> Any:
        try:
            from engine.audit import build_audit
        except ImportError:
            raise ServiceError(501, "not_available", "the coverage audit is not part of this installation") from None
        if "report" not in coverage_cache:
            coverage_cache["report"] = await runner.run(build_audit, settings.rules_path)
        return coverage_cache["report"]

    # ---------------------------------------------------------- diagnose
    @v1.post("/diagnose", tags=["diagnose"], response_model=None,
             responses={200: {"model": Diagnosis, "content": _MARKDOWN}, **_ERRORS},
             summary="Diagnose facts and/or an uploaded zip or tar of run folders")
    async def post_diagnose(request: Request, fmt: Format = Query("json", alias="format"),
                            lang: Lang = "en") -> Response:
        deadline = runner.deadline()
        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
        archive: BinaryIO | None = None
        form = None
        try:
            if ctype == "application/json" or ctype.endswith("+json"):
                body = _parse_body(DiagnoseRequest, await request.body())
            elif ctype in ("multipart/form-data", "application/x-www-form-urlencoded"):
                body, archive, form = await _read_form(request, settings)
            elif ctype in ARCHIVE_TYPES:
                body = DiagnoseRequest()
                archive = await _spool(request)
            else:
                raise ServiceError(415, "unsupported_media_type",
                                   "send JSON facts, multipart/form-data (archive, facts) or a zip/tar body")
            diag = await runner.run(diagnose_job, settings, body, archive, lang, deadline, deadline=deadline)
        finally:
            if archive is not None and form is None:
                archive.close()
            if form is not None:
                await form.close()
        if fmt == "markdown":
            from engine.render.markdown import render_markdown
            return _markdown(render_markdown(diag))
        return _json_response(diag)

    # ---------------------------------------------------------- sessions
    def _not_found(sid: str) -> ServiceError:
        return ServiceError(404, "session_not_found", f"no session {sid!r} (never created, deleted or expired)")

    def _respond_state(state: SessionState, fmt: str, status: int = 200) -> Response:
        if fmt == "markdown":
            from engine.service.sessions import state_markdown
            return _markdown(state_markdown(state), status)
        return _json_response(state, status)

    session_responses = {200: {"model": SessionState, "content": _MARKDOWN}, 404: {"model": ErrorOut}, **_ERRORS}
    sid_param = PathParam(..., pattern=SESSION_ID, description="id returned by POST /v1/sessions")

    @v1.post("/sessions", tags=["sessions"], status_code=201, response_model=None,
             responses={201: {"model": SessionState, "content": _MARKDOWN}, **_ERRORS})
    async def create_session(body: SessionCreate | None = None,
                             fmt: Format = Query("json", alias="format")) -> Response:
        body = body or SessionCreate()

        def job() -> SessionState:
            from engine.service.sessions import apply_turn, parse_facts, session_state

            draft = Session(id="", lang=body.lang)
            apply_turn(draft, parse_facts(body.facts, max_facts=settings.max_facts), body.answers,
                       max_facts=settings.max_facts)
            session = store.create(body.lang, draft.facts, draft.skipped)
            return session_state(session, settings)

        return _respond_state(await runner.run(job), fmt, 201)

    @v1.get("/sessions/{session_id}", tags=["sessions"], response_model=None, responses=session_responses)
    async def get_session(session_id: str = sid_param, fmt: Format = Query("json", alias="format")) -> Response:
        def job() -> SessionState:
            from engine.service.sessions import session_state

            session = store.get(session_id)
            if session is None:
                raise _not_found(session_id)
            return session_state(session, settings)

        return _respond_state(await runner.run(job), fmt)

    @v1.post("/sessions/{session_id}/turns", tags=["sessions"], response_model=None, responses=session_responses,
             summary="Add facts and/or answers to the engine's questions")
    async def add_turn(body: SessionTurn, session_id: str = sid_param,
                       fmt: Format = Query("json", alias="format")) -> Response:
        def job() -> SessionState:
            from engine.service.sessions import apply_turn, parse_facts, session_state

            facts = parse_facts(body.facts, max_facts=settings.max_facts)
            session = store.update(session_id, lambda s: apply_turn(s, facts, body.answers,
                                                                    max_facts=settings.max_facts))
            if session is None:
                raise _not_found(session_id)
            return session_state(session, settings)

        return _respond_state(await runner.run(job), fmt)

    @v1.get("/sessions/{session_id}/next", tags=["sessions"], response_model=NextOut,
            responses={404: {"model": ErrorOut}, **_ERRORS})
    async def next_evidence(session_id: str = sid_param) -> Response:
        def job() -> NextOut:
            from engine.service.sessions import session_next

            session = store.get(session_id)
            if session is None:
                raise _not_found(session_id)
            return session_next(session, settings)

        return _json_response(await runner.run(job))

    @v1.delete("/sessions/{session_id}", tags=["sessions"], status_code=204, response_class=Response,
               responses={404: {"model": ErrorOut}, **_ERRORS})
    async def delete_session(session_id: str = sid_param) -> Response:
        if not await runner.run(store.delete, session_id):
            raise _not_found(session_id)
        return Response(status_code=204)

    app.include_router(v1)

    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


# ---------------------------------------------------------------- request parsing
async def _known_query(request: Request) -> None:
    """Refuse query parameters the operation does not take (a typo like ?fromat=markdown would
    otherwise be ignored silently)."""
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return
    known: set[str] = set()
    pending = [dependant]
    while pending:
        current = pending.pop()
        known |= {p.alias for p in getattr(current, "query_params", ())}
        pending.extend(getattr(current, "dependencies", ()))
    unknown = sorted(set(request.query_params.keys()) - known)
    if unknown:
        raise ServiceError(422, "invalid_request", f"unknown query parameter(s) {unknown}"
                           + (f"; this operation takes {sorted(known)}" if known else ""))


def _parse_body(model, raw: bytes):
    try:
        payload = json.loads(raw.decode("utf-8")) if raw.strip() else {}
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ServiceError(400, "invalid_json", f"the body is not JSON: {exc}") from None
    if isinstance(payload, list):  # a bare list of facts is fine too
        payload = {"facts": payload}
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        parts = [".".join(str(x) for x in e["loc"]) + f": {e['msg']}" for e in exc.errors()[:5]]
        raise ServiceError(422, "invalid_request", "; ".join(parts)) from None


async def _read_form(request: Request, settings: Settings):
    from starlette.datastructures import UploadFile
    from starlette.formparsers import MultiPartException

    try:
        form = await request.form(max_files=1, max_fields=2, max_part_size=settings.max_request_bytes)
    except MultiPartException as exc:
        raise ServiceError(400, "bad_multipart", exc.message) from None
    except (ValueError, KeyError, AssertionError) as exc:
        raise ServiceError(400, "bad_multipart", f"the multipart body could not be parsed: {exc}") from None
    try:
        unknown = sorted(set(form.keys()) - {"archive", "facts"})
        if unknown:
            raise ServiceError(400, "bad_multipart", f"unknown form field(s) {unknown}: use 'archive' and 'facts'")
        archive = form.get("archive")
        if archive is not None and not isinstance(archive, UploadFile):
            raise ServiceError(400, "bad_multipart", "'archive' must be a file upload")
        facts = form.get("facts")
        if isinstance(facts, UploadFile):
            facts = await facts.read()
        body = _parse_body(DiagnoseRequest, facts.encode() if isinstance(facts, str) else (facts or b""))
        return body, (archive.file if archive is not None else None), form
    except BaseException:
        await form.close()
        raise


async def _spool(request: Request) -> BinaryIO:
    spool = tempfile.SpooledTemporaryFile(max_size=8 * 1024 * 1024)
    try:
        async for chunk in request.stream():
            spool.write(chunk)
    except BaseException:
        spool.close()
        raise
    spool.seek(0)
    return spool


# ---------------------------------------------------------------- OpenAPI
def _openapi(app: FastAPI) -> dict:
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    body = DiagnoseRequest.model_json_schema(ref_template="#/components/schemas/{model}")
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components.update(body.pop("$defs", {}))
    components["DiagnoseRequest"] = body
    binary = {"schema": {"type": "string", "format": "binary"}}
    schema["paths"]["/v1/diagnose"]["post"]["requestBody"] = {
        "required": True,
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/DiagnoseRequest"}},
            "multipart/form-data": {"schema": {
                "type": "object",
                "properties": {
                    "archive": {"type": "string", "format": "binary",
                                "description": "zip or tar(.gz/.bz2/.xz) of a case: baseline/, target/, ..."},
                    "facts": {"type": "string", "description": "JSON: a list of facts, or {facts, answers}"},
                },
            }},
            "application/zip": binary,
            "application/gzip": binary,
            "application/x-tar": binary,
        },
    }
    app.openapi_schema = schema
    return schema


# ---------------------------------------------------------------- entry points
def app_from_env() -> FastAPI:
    """uvicorn factory for worker processes: settings come from PRECDX_* variables."""
    return create_app(Settings.from_env())


def serve(host: str = "127.0.0.1", port: int = 8787, workers: int = 2, db_url: str | None = None,
          token: str | None = None, **overrides: Any) -> None:
    import uvicorn

    settings = Settings.from_env(db_url=db_url, token=token, **overrides)
    SessionStore(settings.db_url, ttl=settings.session_ttl).close()  # a bad store URL fails here, clearly
    if host not in ("127.0.0.1", "localhost", "::1") and not settings.token:
        print(f"precdx serve: warning: listening on {host} without --token", file=sys.stderr)
    os.environ.update(settings.to_env())
    if workers <= 1:
        uvicorn.run(create_app(settings), host=host, port=port, log_level="info")
        return
    from uvicorn.supervisors import Multiprocess

    config = _TcpConfig("engine.service.app:app_from_env", factory=True, host=host, port=port, workers=workers,
                        log_level="info")
    Multiprocess(config, sockets=[config.bind_socket()]).run()


try:
    import uvicorn as _uvicorn

    class _TcpConfig(_uvicorn.Config):
        """uvicorn's shared listening socket for several workers is made without a protocol number,
        and asyncio turns on TCP_NODELAY only for sockets that say TCP; without it every response
        written in two parts waits ~40 ms for the client's delayed ACK. Re-label the socket."""

        def bind_socket(self):
            import socket

            sock = super().bind_socket()
            if sock.family in (socket.AF_INET, socket.AF_INET6) and sock.proto == 0:
                sock = socket.socket(sock.family, sock.type, socket.IPPROTO_TCP, fileno=sock.detach())
            return sock
except ImportError:  # uvicorn is an optional extra; create_app() works without it (tests, ASGI hosts)
    pass
