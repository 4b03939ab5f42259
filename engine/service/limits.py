"""What every HTTP request passes before a route sees it, as one ASGI middleware (`RequestGuard`):

- a rate limit per client address (a token bucket per address, per worker process): 429
  `rate_limited` with Retry-After; `/healthz` is not counted, so probes behind the same proxy as
  the clients keep working;
- the bearer token, when the server has one: an upload (POST, PUT, PATCH) under /v1 without it
  is answered 401 `unauthorized` before its body is read; the routers check every request
  (and declare the scheme in OpenAPI), so reading routes decide for themselves;
- the body size: a declared Content-Length over the limit is refused before reading, a streamed
  body is counted and cut off at the limit (413 `request_too_large`);
- the body read time: a body not received within `body_timeout` seconds is answered with 408
  `body_timeout` and the connection is closed, so stalled uploads are not held open;
- a client that goes away during its upload is logged as one line, never a traceback;
- a JSON body nested deeper than `max_json_depth` is refused with 400 `json_too_deep` before any
  parser recurses into it (the same answer on every endpoint).

A route sees a failure of the body read as an exception from `receive()` and may turn it into an
answer of its own; the guard's answer wins (the route's is dropped), so each condition keeps one
status and one code whatever route it meets."""
from __future__ import annotations

import asyncio
import hmac
import json
import logging
import math
import re
import time
from array import array
from collections import OrderedDict
from itertools import accumulate

from precdx.service.errors import ServiceError

log = logging.getLogger("precdx.service")

UNLIMITED_PATHS = ("/healthz",)
_BODY_METHODS = ("POST", "PUT", "PATCH")
_THREAD_SCAN_BYTES = 256 * 1024   # deeper-than scans of bigger bodies run off the event loop


# ---------------------------------------------------------------- JSON nesting depth
# Strings (and, outside strings, escape pairs) are removed before brackets are counted; both
# quantifiers are possessive, and escape pairs are consumed the same way inside and outside a
# string, so a body of unterminated strings costs one linear pass, not one pass per quote.
_STRINGS = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"|\\.', re.S)
_BRACKETS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def json_depth(raw: bytes, *, limit: int | None = None) -> int:
    """How deeply the arrays and objects of a JSON text nest (0 for a scalar). With `limit`, a
    text with no more opening brackets than that is not scanned: the answer is then only known
    to be within the limit."""
    opening = raw.count(b"[") + raw.count(b"{")
    if opening == 0:
        return 0
    if limit is not None and opening <= limit:
        return opening  # an upper bound, within the limit
    text = _STRINGS.sub(b"", raw) if (b'"' in raw or b"\\" in raw) else raw
    steps = array("b", text.translate(_BRACKETS, _NOT_BRACKETS))
    return max(0, max(accumulate(steps), default=0))


def check_json_depth(raw: bytes | str, max_depth: int) -> None:
    """400 `json_too_deep` when the JSON text nests deeper than `max_depth`."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    depth = json_depth(data, limit=max_depth)
    if depth > max_depth:
        raise too_deep(depth, max_depth)


def too_deep(depth: int, max_depth: int) -> ServiceError:
    return ServiceError(400, "json_too_deep", f"the JSON nests {depth} levels deep (limit {max_depth})")


# ---------------------------------------------------------------- rate limit
class TokenBuckets:
    """One token bucket per client key: `burst` requests at once, then `rate` per second. The
    least recently seen clients are forgotten beyond `max_clients` (a forgotten client starts
    again with a full bucket)."""

    def __init__(self, rate: float, burst: int, *, max_clients: int = 10_000, clock=time.monotonic) -> None:
        self.rate = rate
        self.burst = float(max(1, burst))
        self.max_clients = max_clients
        self.clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def take(self, key: str) -> float:
        """0 when the request may go ahead (a token is taken), else the seconds until it may."""
        now = self.clock()
        tokens, last = self._buckets.pop(key, (self.burst, now))
        tokens = min(self.burst, tokens + (now - last) * self.rate)
        wait = 0.0
        if tokens >= 1.0:
            tokens -= 1.0
        else:
            wait = (1.0 - tokens) / self.rate
        self._buckets[key] = (tokens, now)
        while len(self._buckets) > self.max_clients:
            self._buckets.popitem(last=False)
        return wait


# ---------------------------------------------------------------- the middleware
class _BodyFailed(Exception):
    """Raised from receive() into the route when the body read fails (the guard answers)."""


class _Request:
    def __init__(self) -> None:
        self.received = 0
        self.complete = False
        self.gone = False
        self.failure: ServiceError | None = None
        self.response_started = False


class RequestGuard:
    def __init__(self, app, *, max_bytes: int, body_timeout: float, max_json_depth: int,
                 rate_limit: float = 0.0, rate_burst: int = 1, token: str | None = None,
                 protected: str = "/v1") -> None:
        self.app = app
        self.expected = token.encode() if token else None
        self.protected = protected
        self.max_bytes = max_bytes
        self.body_timeout = body_timeout
        self.max_json_depth = max_json_depth
        self.buckets = TokenBuckets(rate_limit, rate_burst) if rate_limit > 0 else None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if self.buckets is not None and scope.get("path") not in UNLIMITED_PATHS:
            wait = self.buckets.take(_client_address(scope))
            if wait > 0:
                retry = max(1, math.ceil(wait))
                return await respond(send, ServiceError(
                    429, "rate_limited", f"too many requests from this client; retry in {retry} s",
                    headers={"Retry-After": str(retry)}))
        if (self.expected is not None and scope.get("method") in _BODY_METHODS
                and _under(scope.get("path", ""), self.protected)):
            header = next((v for k, v in scope.get("headers", []) if k == b"authorization"), b"")
            scheme, _, given = header.partition(b" ")  # as FastAPI's HTTPBearer reads it
            if scheme.lower() != b"bearer" or not hmac.compare_digest(given, self.expected):
                return await respond(send, ServiceError(401, "unauthorized", "missing or wrong bearer token",
                                                        headers={"WWW-Authenticate": "Bearer"}))
        declared = None
        for key, value in scope.get("headers", []):
            if key == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    return await respond(send, ServiceError(400, "bad_request", "Content-Length is not a number"))
        if declared is not None and declared > self.max_bytes:
            return await respond(send, _too_large(self.max_bytes, declared))

        state = _Request()
        deadline = time.monotonic() + self.body_timeout

        async def guarded_receive():
            if state.complete or state.gone:
                return await receive()
            if state.failure is not None:
                raise _BodyFailed(state.failure.code)
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                state.failure = ServiceError(408, "body_timeout", f"the request body was not received within "
                                             f"{self.body_timeout:g} s ({state.received} bytes arrived)")
                raise _BodyFailed(state.failure.code) from None
            if message["type"] == "http.disconnect":
                state.gone = True
                return message
            if message["type"] == "http.request":
                state.received += len(message.get("body", b""))
                if state.received > self.max_bytes:
                    state.failure = _too_large(self.max_bytes)
                    raise _BodyFailed(state.failure.code)
                if not message.get("more_body", False):
                    state.complete = True
            return message

        async def guarded_send(message):
            if state.failure is not None or state.gone:
                return  # the route's answer to a failed body read: the guard answers instead
            if message["type"] == "http.response.start":
                state.response_started = True
            await send(message)

        app_receive = guarded_receive
        if _json_body(scope):
            try:
                body = await _read_all(guarded_receive)
            except _BodyFailed:
                return await respond(send, state.failure)
            if state.gone:
                return _log_gone(scope, state, declared)
            if body.lstrip()[:1] in (b"[", b"{"):
                try:
                    if len(body) > _THREAD_SCAN_BYTES:
                        await asyncio.to_thread(check_json_depth, body, self.max_json_depth)
                    else:
                        check_json_depth(body, self.max_json_depth)
                except ServiceError as exc:
                    return await respond(send, exc)
            app_receive = _replay(body, guarded_receive)

        try:
            await self.app(scope, app_receive, guarded_send)
        except Exception:
            if state.gone:
                return _log_gone(scope, state, declared)
            if state.failure is None:
                raise
        if state.gone:
            return _log_gone(scope, state, declared)
        if state.failure is not None and not state.response_started:
            await respond(send, state.failure)


def _too_large(limit: int, declared: int | None = None) -> ServiceError:
    size = f" ({declared} bytes)" if declared is not None else ""
    return ServiceError(413, "request_too_large", f"the request body{size} is over the limit of {limit} bytes")


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix.rstrip("/") + "/")


def _client_address(scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


def _json_body(scope) -> bool:
    """A body the routes will parse as JSON: a JSON media type, or none at all (FastAPI reads
    a body without a Content-Type as JSON)."""
    if scope.get("method") not in _BODY_METHODS:
        return False
    ctype = None
    for key, value in scope.get("headers", []):
        if key == b"content-type":
            ctype = value.decode("latin-1").split(";")[0].strip().lower()
    return ctype is None or ctype == "application/json" or ctype.endswith("+json")


async def _read_all(receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive):
    sent = False

    async def replay():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()
    return replay


def _log_gone(scope, state: _Request, declared: int | None) -> None:
    of = f" of {declared}" if declared is not None else ""
    log.warning("client %s disconnected during its upload (%d%s bytes received): %s %s",
                _client_address(scope), state.received, of, scope.get("method"), scope.get("path"))


async def respond(send, exc: ServiceError) -> None:
    """Answer with the JSON error body; the connection is closed afterwards (the rest of the
    request body, if any, is not read)."""
    body = json.dumps({"error": exc.code, "detail": exc.render()}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               (b"connection", b"close")]
    headers += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (exc.headers or {}).items()]
    await send({"type": "http.response.start", "status": exc.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
