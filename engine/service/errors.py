"""Errors the service answers with a status code of their own (limits, archives, sessions)."""
from __future__ import annotations

from engine.errors import PrecdxError


class ServiceError(PrecdxError):
    """A user-caused problem with its HTTP status and a short machine-readable code."""

    def __init__(self, status: int, code: str, message: str, **kw) -> None:
        super().__init__(message, **kw)
        self.status = status
        self.code = code
