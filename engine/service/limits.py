"""Request body size limit as ASGI middleware: a declared Content-Length over the limit is
refused before reading; a streamed body is counted and cut off at the limit (413)."""
from __future__ import annotations

import json

from starlette.exceptions import HTTPException


class BodyLimit:
    def __init__(self, app, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = None
        for key, value in scope.get("headers", []):
            if key == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    return await _refuse(send, 400, "bad_request", "Content-Length is not a number")
        if declared is not None and declared > self.max_bytes:
            return await _refuse(send, 413, "request_too_large",
                                 f"the request body ({declared} bytes) is over the limit of {self.max_bytes} bytes")
        seen = 0
        limit = self.max_bytes

        async def counted():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise HTTPException(413, f"the request body is over the limit of {limit} bytes")
            return message

        return await self.app(scope, counted, send)


async def _refuse(send, status: int, code: str, detail: str) -> None:
    body = json.dumps({"error": code, "detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})
