"""The FastAPI application and `serve()`: settings, the session store and the job pool on
`app.state`, the request guard (engine/service/limits.py: rate limit, token, body size and read
time, JSON depth), JSON errors and the routers of engine/service/routes/ (health and catalogues,
diagnose, sessions, reports, docs). Routes stay thin: they parse the request, hand the work to the
job pool and answer as JSON, a chat message or an HTML report. Every error is JSON `{error, detail}` with one
code per condition (the README's service section lists them); bad input never yields a 500.

`serve()` refuses a non-loopback address without a token (unless `insecure`), reads the token
from a file or the environment rather than the command line, and logs through uvicorn's handler."""
from __future__ import annotations

import hmac
import ipaddress
import logging
import os
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException

from precdx import __version__
from precdx.errors import PrecdxError
from precdx.service.errors import ServiceError
from precdx.service.jobs import JobRunner
from precdx.service.limits import RequestGuard
from precdx.service.models import FACT_LIST, REQUEST_BODIES, ErrorOut
from precdx.service.reports import ReportStore
from precdx.service.routes import diagnose, docs, meta, reports, sessions
from precdx.service.routes.diagnose import diagnose_job  # noqa: F401 (the job POST /v1/diagnose runs)
from precdx.service.settings import Settings
from precdx.service.store import SessionStore

log = logging.getLogger("precdx.service")


# The code of an error raised as a bare HTTP status (by the framework or the token guard): fixed
# here rather than derived from the status phrase, which differs between Python versions
# (413 is "Request Entity Too Large" before 3.13, "Content Too Large" after) and would give one
# condition two codes.
HTTP_CODES = {400: "bad_request", 401: "unauthorized", 404: "not_found", 405: "method_not_allowed",
              413: "request_too_large", 415: "unsupported_media_type", 422: "invalid_request"}


def _error(status: int, code: str, detail: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"error": code, "detail": detail}, status_code=status, headers=headers)


# ---------------------------------------------------------------- app
def create_app(settings: Settings | None = None) -> FastAPI:
    from precdx.matching import ENGINES

    settings = settings or Settings.from_env()
    if settings.engine not in ENGINES:
        raise PrecdxError(f"unknown matcher {settings.engine!r} (PRECDX_SERVICE_ENGINE)", hint=f"use one of {ENGINES}")
    store = SessionStore(settings.db_url, ttl=settings.session_ttl, max_sessions=settings.max_sessions,
                         max_session_bytes=settings.max_session_bytes)
    runner = JobRunner(settings.max_jobs, settings.request_timeout)

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        yield
        runner.close()
        store.close()

    app = FastAPI(title="precdx", version=__version__, lifespan=lifespan, dependencies=[Depends(_known_query)],
                  docs_url=None, redoc_url=None,  # engine/service/routes/docs.py: no CDN
                  responses={422: {"model": ErrorOut, "description": "Invalid request or facts"}},
                  description="Diagnose accuracy problems in large-model training: facts or run folders in, "
                              "ranked hypotheses out; chat sessions that ask for the next best evidence.")
    app.state.settings = settings
    app.state.store = store
    app.state.reports = ReportStore(store, ttl=settings.report_ttl, max_reports=settings.max_reports)
    app.state.runner = runner
    app.state.diagnose_job = diagnose_job  # looked up here, so a test may replace it on this module
    app.state.coverage = {}
    app.add_middleware(RequestGuard, max_bytes=settings.max_request_bytes, body_timeout=settings.body_timeout,
                       max_json_depth=settings.max_json_depth, rate_limit=settings.rate_limit,
                       rate_burst=settings.rate_burst, token=settings.token)
    _add_error_handlers(app)

    # the spec declares bearer auth only when the server requires it, so it never says more than is true
    guards = [Depends(_token_guard(settings.token))] if settings.token is not None else []
    v1 = APIRouter(prefix="/v1", dependencies=guards,
                   responses={401: {"model": ErrorOut}} if guards else {})
    v1.include_router(meta.catalogue)
    v1.include_router(diagnose.router)
    v1.include_router(sessions.router)
    app.include_router(meta.health)
    app.include_router(v1)
    app.include_router(reports.router)  # the link of a chat reply opens in a browser: no token
    if settings.docs == "on":
        app.include_router(docs.router)

    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def _token_guard(token: str):
    bearer = HTTPBearer(auto_error=False, description="the token the server was started with (--token)")
    expected = token.encode()

    async def require_token(creds: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
        given = creds.credentials.encode() if creds is not None else b""
        if creds is None or not hmac.compare_digest(given, expected):
            raise HTTPException(401, "missing or wrong bearer token", headers={"WWW-Authenticate": "Bearer"})
    return require_token


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ServiceError)
    async def _service_error(_req: Request, exc: ServiceError):
        return _error(exc.status, exc.code, exc.render(), headers=exc.headers)

    @app.exception_handler(PrecdxError)
    async def _precdx_error(_req: Request, exc: PrecdxError):
        return _error(422, "invalid_input", exc.render())

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_req: Request, exc: RequestValidationError):
        errors = exc.errors()
        broken = next((e for e in errors if e.get("type") == "json_invalid"), None)
        if broken is not None:  # the same answer as a route that parses its JSON itself
            reason = (broken.get("ctx") or {}).get("error", "JSON decode error")
            return _error(400, "invalid_json", f"the body is not JSON: {reason}")
        parts = []
        for err in errors:
            loc = ".".join(str(x) for x in err.get("loc", ()))
            parts.append(f"{loc}: {err.get('msg', 'invalid')}")
        return _error(422, "invalid_request", "; ".join(parts) or "invalid request")

    @app.exception_handler(HTTPException)
    async def _http_error(req: Request, exc: HTTPException):
        code = HTTP_CODES.get(exc.status_code, "error")
        headers = dict(getattr(exc, "headers", None) or {})
        if exc.status_code == 405:
            # one route per method: the router names only the first route's methods
            allowed: set[str] = set()
            for route in _all_routes(req.app):
                regex, methods = getattr(route, "path_regex", None), getattr(route, "methods", None)
                if regex is not None and methods and regex.match(req.url.path):
                    allowed |= set(methods)
            headers["Allow"] = ", ".join(sorted(allowed))
        return _error(exc.status_code, code, str(exc.detail), headers=headers or None)

    @app.exception_handler(Exception)
    async def _internal_error(_req: Request, exc: Exception):
        log.exception("internal error")
        return _error(500, "internal_error", f"internal error ({type(exc).__name__}); see the server log")


def _all_routes(app: FastAPI) -> list:
    """Every route of the app, those of included routers too (FastAPI >= 0.160 keeps an
    included router as one entry of `app.routes`)."""
    try:
        from fastapi.routing import iter_route_contexts
    except ImportError:  # older FastAPI copies included routes into app.routes
        return list(app.routes)
    return list(iter_route_contexts(app.routes))


# ---------------------------------------------------------------- request checks
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


# ---------------------------------------------------------------- OpenAPI
def _openapi(app: FastAPI) -> dict:
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    # the bodies the routes read themselves (JSON, multipart or an archive; their requestBody is
    # declared on the route), with the typed facts they reference
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    for name, model in REQUEST_BODIES.items():
        body = model.model_json_schema(ref_template="#/components/schemas/{model}")
        components.update(body.pop("$defs", {}))
        components[name] = body
    components[FACT_LIST] = {**components["DiagnoseRequest"]["properties"]["facts"], "title": FACT_LIST,
                             "description": "a bare list of facts: the same as {\"facts\": [...]}"}
    app.openapi_schema = schema
    return schema


# ---------------------------------------------------------------- entry points
def app_from_env() -> FastAPI:
    """uvicorn factory for worker processes: settings come from PRECDX_* variables."""
    return create_app(Settings.from_env())


def serve(host: str = "127.0.0.1", port: int = 8787, workers: int = 2, db_url: str | None = None,
          token: str | None = None, token_file: str | None = None, insecure: bool = False,
          **overrides: Any) -> None:
    """Run the API with uvicorn. The token comes from `token`, else `token_file`, else the
    environment (PRECDX_TOKEN, else PRECDX_TOKEN_FILE). Without a token, only a loopback address
    is served unless `insecure` says otherwise."""
    import uvicorn

    token = resolve_token(token, token_file)
    settings = Settings.from_env(db_url=db_url, token=token, **overrides)
    check_bind(host, settings.token, insecure)
    SessionStore(settings.db_url, ttl=settings.session_ttl).close()  # a bad store URL fails here, clearly
    os.environ.update(settings.to_env())
    os.environ.pop("PRECDX_TOKEN_FILE", None)  # the workers take the token already read
    logging_config = log_config()
    if workers <= 1:
        uvicorn.run(create_app(settings), host=host, port=port, log_level="info", log_config=logging_config)
        return
    from uvicorn.supervisors import Multiprocess

    config = _TcpConfig("precdx.service.app:app_from_env", factory=True, host=host, port=port, workers=workers,
                        log_level="info", log_config=logging_config)
    Multiprocess(config, sockets=[config.bind_socket()]).run()


def resolve_token(token: str | None = None, token_file: str | None = None) -> str | None:
    """The bearer token: given directly, read from a file, or from PRECDX_TOKEN / PRECDX_TOKEN_FILE."""
    if token is not None and token_file is not None:
        raise PrecdxError("give --token or --token-file, not both")
    if token is not None:
        return _checked_token(token, "--token")
    if token_file is not None:
        return read_token_file(token_file)
    env_token, env_file = os.environ.get("PRECDX_TOKEN") or None, os.environ.get("PRECDX_TOKEN_FILE") or None
    if env_token is not None and env_file is not None:
        raise PrecdxError("both PRECDX_TOKEN and PRECDX_TOKEN_FILE are set; keep one")
    if env_file is not None:
        return read_token_file(env_file)
    return _checked_token(env_token, "PRECDX_TOKEN") if env_token is not None else None


def read_token_file(path: str) -> str:
    """The token in a file (one line; surrounding whitespace ignored). A file others may read is
    used, with a warning."""
    try:
        text = Path(path).read_text(encoding="utf-8")
        mode = os.stat(path).st_mode
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise PrecdxError(f"cannot read the token file: {reason}", path=path) from None
    if mode & 0o077:
        print(f"precdx serve: warning: the token file {path} can be read by other users (chmod 600 it)",
              file=sys.stderr)
    return _checked_token(text.strip(), f"the token file {path}")


def _checked_token(token: str, where: str) -> str:
    if not token:
        raise PrecdxError(f"{where} is empty")
    if any(c.isspace() for c in token):
        raise PrecdxError(f"{where} holds whitespace inside the token (one line, one token)")
    return token


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to any address


def check_bind(host: str, token: str | None, insecure: bool) -> None:
    """Refuse to serve a non-loopback address without a token, unless told to (insecure)."""
    if token or is_loopback(host):
        return
    if not insecure:
        raise PrecdxError(f"refusing to listen on {host} without a token: anyone who can reach it could use the API",
                          hint="set PRECDX_TOKEN or --token-file, or pass --insecure")
    print(f"precdx serve: warning: listening on {host} without a token (--insecure)", file=sys.stderr)


def log_config() -> dict:
    """uvicorn's logging, with the service's own logger (one line per event) on its handler."""
    import copy

    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["loggers"]["precdx"] = {"handlers": ["default"], "level": "INFO", "propagate": False}
    return config


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
