"""Errors the service answers with a status code of their own (limits, archives, sessions).
Every error body is `{"error": code, "detail": text}`; each condition has exactly one code, and
the README's service section lists them all (a test keeps the two in step)."""
from __future__ import annotations

from precdx.errors import PrecdxError


class ServiceError(PrecdxError):
    """A user-caused problem with its HTTP status, a short machine-readable code and, where a
    client should wait, headers such as Retry-After."""

    def __init__(self, status: int, code: str, message: str, *, headers: dict[str, str] | None = None,
                 **kw) -> None:
        super().__init__(message, **kw)
        self.status = status
        self.code = code
        self.headers = headers or None
