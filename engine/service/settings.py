"""Service settings: limits, session store, auth. Read from PRECDX_* environment variables so
every uvicorn worker process builds the same settings as the parent that started it."""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, fields

from engine.errors import PrecdxError

_ENV = {
    "db_url": "PRECDX_DB_URL",
    "token": "PRECDX_TOKEN",
    "engine": "PRECDX_SERVICE_ENGINE",
    "rules_path": "PRECDX_SERVICE_RULES",
    "session_ttl": "PRECDX_SESSION_TTL",
    "max_request_bytes": "PRECDX_MAX_REQUEST_BYTES",
    "max_extracted_bytes": "PRECDX_MAX_EXTRACTED_BYTES",
    "max_archive_files": "PRECDX_MAX_ARCHIVE_FILES",
    "max_facts": "PRECDX_MAX_FACTS",
    "request_timeout": "PRECDX_REQUEST_TIMEOUT",
    "max_jobs": "PRECDX_MAX_JOBS",
}


@dataclass
class Settings:
    db_url: str | None = None            # None: SQLite file in the user's state folder
    token: str | None = None             # bearer token required on /v1 when set
    # python: the reference matcher, stateless, so the job threads never queue on it; the durable
    # back end serialises each ruleset behind a lock, and the planner runs many small diagnoses
    engine: str = "python"
    rules_path: str | None = None
    session_ttl: float = 24 * 3600.0     # seconds since the last turn
    max_request_bytes: int = 64 * 1024 * 1024
    max_extracted_bytes: int = 512 * 1024 * 1024
    max_archive_files: int = 20_000
    max_facts: int = 5_000               # per request and per session
    request_timeout: float = 120.0       # seconds for one diagnosis (extraction included)
    max_jobs: int = 4                    # diagnoses running at once per worker process

    @classmethod
    def from_env(cls, **overrides) -> "Settings":
        values: dict = {}
        for f in fields(cls):
            raw = os.environ.get(_ENV[f.name])
            if raw is None or raw == "":
                continue
            values[f.name] = _convert(f.name, raw, f.type)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def to_env(self) -> dict[str, str]:
        return {_ENV[k]: str(v) for k, v in asdict(self).items() if v is not None}


def _convert(name: str, raw: str, typ) -> object:
    kind = str(typ)
    try:
        if "int" in kind and "str" not in kind:
            return int(raw)
        if "float" in kind:
            return float(raw)
    except ValueError:
        raise PrecdxError(f"{_ENV[name]}={raw!r} is not a number") from None
    return raw
