"""Service settings: limits, session store, auth. Read from PRECDX_* environment variables so
every uvicorn worker process builds the same settings as the parent that started it.

`ENVIRONMENT` lists every environment variable the server reads (these settings, the token
file, where the default store lives, the engine's own folders and workers, uvicorn's proxy
trust); `precdx serve --help` prints it, and a test keeps it complete."""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, fields

from precdx.errors import PrecdxError

KiB = 1024
MiB = 1024 * KiB
DEFAULT_MAX_JSON_DEPTH = 32


def _s(env: str, help: str, default):  # noqa: A002 (click's word)
    return field(default=default, metadata={"env": env, "help": help})


@dataclass
class Settings:
    db_url: str | None = _s("PRECDX_DB_URL", "session store: sqlite:///PATH, a file path, or postgresql://USER@HOST/DB "
                            "(default: sessions.sqlite3 in the state folder)", None)
    token: str | None = _s("PRECDX_TOKEN", "bearer token required on /v1 (not shown in `ps`, unlike --token)", None)
    # python: the reference matcher, stateless, so the job threads never queue on it; the durable
    # back end serialises each ruleset behind a lock, and the planner runs many small diagnoses
    engine: str = _s("PRECDX_SERVICE_ENGINE", "matcher: python or durable", "python")
    rules_path: str | None = _s("PRECDX_SERVICE_RULES", "rule folder or file to serve instead of the packaged rules",
                                None)
    session_ttl: float = _s("PRECDX_SESSION_TTL", "seconds a session lives after its last turn", 24 * 3600.0)
    max_request_bytes: int = _s("PRECDX_MAX_REQUEST_BYTES", "largest request body (413 request_too_large)", 64 * MiB)
    max_extracted_bytes: int = _s("PRECDX_MAX_EXTRACTED_BYTES", "bytes an uploaded archive may unpack to",
                                  512 * MiB)
    max_archive_files: int = _s("PRECDX_MAX_ARCHIVE_FILES", "files and folders in one uploaded archive", 20_000)
    max_facts: int = _s("PRECDX_MAX_FACTS", "facts per request and per session (413 too_many_facts)", 5_000)
    max_fact_bytes: int = _s("PRECDX_MAX_FACT_BYTES", "bytes of one fact as JSON (413 fact_too_large)", 64 * KiB)
    max_session_bytes: int = _s("PRECDX_MAX_SESSION_BYTES", "bytes one stored session may hold (413 "
                                "session_too_large)", 8 * MiB)
    max_sessions: int = _s("PRECDX_MAX_SESSIONS", "live sessions in the store (429 too_many_sessions)", 1_000)
    max_echo_bytes: int = _s("PRECDX_MAX_ECHO_BYTES", "bytes of facts a response repeats back; larger facts are "
                             "summarised and the response says so", 256 * KiB)
    max_json_depth: int = _s("PRECDX_MAX_JSON_DEPTH", "nesting depth of a JSON body (400 json_too_deep)",
                             DEFAULT_MAX_JSON_DEPTH)
    rate_limit: float = _s("PRECDX_RATE_LIMIT", "requests per second per client address, per worker process "
                           "(0: no limit; 429 rate_limited)", 10.0)
    rate_burst: int = _s("PRECDX_RATE_BURST", "requests a client may send at once before the rate applies", 40)
    body_timeout: float = _s("PRECDX_BODY_TIMEOUT", "seconds to receive a whole request body (408 body_timeout)",
                             60.0)
    request_timeout: float = _s("PRECDX_REQUEST_TIMEOUT", "seconds for one diagnosis, unpacking included "
                                "(408 timeout)", 120.0)
    max_jobs: int = _s("PRECDX_MAX_JOBS", "diagnoses running at once per worker process", 4)
    # chat replies link the full HTML report at <public_url>/v1/reports/<id>.html
    public_url: str | None = _s("PRECDX_PUBLIC_URL", "base URL of the links to full reports in chat replies "
                                "(default: the URL the request came to)", None)
    report_ttl: float = _s("PRECDX_REPORT_TTL", "seconds a full report behind a chat reply's link is kept (0: none "
                           "kept, no links)", 7 * 24 * 3600.0)
    max_reports: int = _s("PRECDX_MAX_REPORTS", "full reports kept at most (the oldest go first)", 10_000)
    docs: str = _s("PRECDX_DOCS", "on: the API pages /docs and /redoc, served without a CDN; off: none", "on")

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
                raise PrecdxError(f"{f.metadata['env']}={value} must not be negative")
        for name in ("max_request_bytes", "max_fact_bytes", "max_session_bytes", "max_sessions", "max_json_depth",
                     "body_timeout", "request_timeout", "max_jobs", "max_reports"):
            if getattr(self, name) <= 0:
                raise PrecdxError(f"{_env_of(name)}={getattr(self, name)} must be positive")
        if self.docs not in ("on", "off"):
            raise PrecdxError(f"PRECDX_DOCS={self.docs!r}: use on or off")
        if self.rate_limit > 0 and self.rate_burst < 1:
            raise PrecdxError(f"PRECDX_RATE_BURST={self.rate_burst} must be at least 1 when PRECDX_RATE_LIMIT is set")

    @classmethod
    def from_env(cls, **overrides) -> "Settings":
        values: dict = {}
        for f in fields(cls):
            raw = os.environ.get(f.metadata["env"])
            if raw is None or raw == "":
                continue
            values[f.name] = _convert(f.metadata["env"], raw, f.type)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def to_env(self) -> dict[str, str]:
        return {_env_of(k): str(v) for k, v in asdict(self).items() if v is not None}


def _env_of(name: str) -> str:
    return next(f.metadata["env"] for f in fields(Settings) if f.name == name)


def _convert(env: str, raw: str, typ) -> object:
    kind = str(typ)
    try:
        if "int" in kind and "str" not in kind:
            return int(raw)
        if "float" in kind:
            return float(raw)
    except ValueError:
        raise PrecdxError(f"{env}={raw!r} is not a number") from None
    return raw


# Read by the server besides the settings above (a test checks that every PRECDX_* name in
# engine/ is listed here or there).
OTHER_ENVIRONMENT: list[tuple[str, str]] = [
    ("PRECDX_TOKEN_FILE", "file holding the bearer token (like --token-file)"),
    ("PRECDX_STATE_DIR", "folder of the default SQLite session store"),
    ("XDG_STATE_HOME", "its parent when PRECDX_STATE_DIR is unset (default ~/.local/state)"),
    ("PRECDX_RULES_DIR", "the packaged rule folder"),
    ("PRECDX_KB_DIR", "the packaged knowledge base folder"),
    ("PRECDX_LOG_MAX_POINTS", "loss-curve points kept per log"),
    ("PRECDX_WORKERS", "processes that read msprobe dumps"),
    ("PRECDX_DASK_SCHEDULER", "a Dask cluster that reads msprobe dumps"),
    ("PRECDX_NATIVE", "0: read logs without the compiled kernels (tools/build_native.py builds them)"),
    ("PRECDX_CACHE_DIR", "folder of the parsed rule pack and kb cache (default $XDG_CACHE_HOME/precdx, "
                         "else ~/.cache/precdx; 'off' turns it off)"),
    ("FORWARDED_ALLOW_IPS", "proxies whose X-Forwarded-For names the client (uvicorn; default 127.0.0.1,::1); "
                            "the rate limit counts per that client address"),
]


def environment() -> list[tuple[str, str, str]]:
    """(variable, meaning, default) for every variable the server reads."""
    out = []
    for f in fields(Settings):
        default = f.default
        out.append((f.metadata["env"], f.metadata["help"], "" if default is None else _show(default)))
    out.extend((name, text, "") for name, text in OTHER_ENVIRONMENT)
    return out


def _show(value) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value >= MiB and value % MiB == 0:
        return f"{value // MiB} MiB ({value})"
    if isinstance(value, int) and not isinstance(value, bool) and value >= KiB and value % KiB == 0:
        return f"{value // KiB} KiB ({value})"
    if isinstance(value, float) and value.is_integer():
        return f"{value:g}"
    return str(value)
