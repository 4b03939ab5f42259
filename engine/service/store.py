"""Chat sessions in SQL: a SQLite file by default (stdlib sqlite3), or PostgreSQL given a
`postgresql://` URL (psycopg 3) so several service instances share sessions. One table, one row
per session; the same statements run on both (only the placeholder and the row lock differ).
A session expires `ttl` seconds after its last turn; expired rows read as absent and are
purged when new sessions are created.

Limits: at most `max_sessions` live sessions (429 `too_many_sessions`, with Retry-After until the
oldest expires) and `max_session_bytes` of stored data per session (413 `session_too_large`).
Space is given back: the SQLite file uses incremental auto-vacuum, and after a delete or a purge
the freed pages are returned to the file system and the write-ahead log is truncated, so the
file shrinks. PostgreSQL's autovacuum makes the space of deleted rows reusable by itself.
"""
from __future__ import annotations

import json
import os
import secrets
import sqlite3
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from precdx.errors import PrecdxError
from precdx.service.errors import ServiceError

SCHEMA = [
    """CREATE TABLE IF NOT EXISTS precdx_sessions (
        id TEXT PRIMARY KEY,
        lang TEXT NOT NULL,
        data TEXT NOT NULL,
        turns INTEGER NOT NULL,
        created DOUBLE PRECISION NOT NULL,
        updated DOUBLE PRECISION NOT NULL,
        expires DOUBLE PRECISION NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS precdx_sessions_expires ON precdx_sessions (expires)",
]
_COLUMNS = "id, lang, data, turns, created, updated, expires"


@dataclass
class Session:
    id: str
    lang: str
    facts: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    turns: int = 0
    created: float = 0.0
    updated: float = 0.0
    expires: float = 0.0

    def data(self) -> str:
        return json.dumps({"facts": self.facts, "skipped": self.skipped}, ensure_ascii=False)

    @classmethod
    def from_row(cls, row: tuple) -> "Session":
        sid, lang, data, turns, created, updated, expires = row
        payload = json.loads(data)
        return cls(id=sid, lang=lang, facts=payload.get("facts", []), skipped=payload.get("skipped", []),
                   turns=int(turns), created=float(created), updated=float(updated), expires=float(expires))


def default_sqlite_path() -> Path:
    base = os.environ.get("PRECDX_STATE_DIR") or os.path.join(
        os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state"), "precdx")
    return Path(base) / "sessions.sqlite3"


def describe_url(url: str | None) -> tuple[str, str]:
    """(backend, location) for a store URL: sqlite:///relative, sqlite:////absolute, a plain
    file path, or postgresql://user@host/db."""
    if url is None or url == "":
        return "sqlite", str(default_sqlite_path())
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql", url
    if url.startswith("sqlite://"):
        rest = url[len("sqlite://"):]
        if not rest.startswith("/") or rest in ("/", "/:memory:"):
            raise PrecdxError(f"session store URL {url!r}: give a file, e.g. sqlite:///sessions.db",
                              hint="an in-memory database would not survive a restart or be shared by workers")
        return "sqlite", rest[1:]
    if "://" in url:
        raise PrecdxError(f"unsupported session store URL {url!r}",
                          hint="use sqlite:///PATH, a file path, or postgresql://USER@HOST/DB")
    return "sqlite", url


_INCREMENTAL = 2  # PRAGMA auto_vacuum value


class _SQLite:
    name = "sqlite"
    lock_suffix = ""

    def __init__(self, path: str) -> None:
        self.path = path
        parent = Path(path).parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
            conn = self._connect()
            try:
                if conn.execute("PRAGMA auto_vacuum").fetchone()[0] != _INCREMENTAL:
                    # set before the first table exists; a file made by an older version is
                    # rebuilt once (VACUUM) so the setting takes effect
                    conn.execute(f"PRAGMA auto_vacuum={_INCREMENTAL}")
                    conn.execute("VACUUM")
                conn.execute("PRAGMA journal_mode=WAL")
                for stmt in SCHEMA:
                    conn.execute(stmt)
            finally:
                conn.close()
        except (sqlite3.Error, OSError) as exc:
            raise PrecdxError(f"cannot open the session store: {exc}", path=path) from None

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        conn.execute("PRAGMA busy_timeout=30000")
        # a checkpointed write-ahead log is cut back to this size instead of keeping its peak
        conn.execute(f"PRAGMA journal_size_limit={4 * 1024 * 1024}")
        return conn

    def reclaim(self) -> None:
        """Give the pages freed by deletes back to the file system: move them to the end of the
        file and cut it (incremental vacuum), then copy the log into the file and truncate the
        log. Concurrent readers may keep the log from being truncated; the next reclaim does it."""
        conn = self._connect()
        try:
            if conn.execute("PRAGMA freelist_count").fetchone()[0]:
                # executescript steps the pragma to its end; execute() would free one page per call
                conn.executescript("PRAGMA incremental_vacuum;")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        except sqlite3.OperationalError:
            pass  # busy: the space stays free inside the file and is reused
        finally:
            conn.close()

    @contextmanager
    def transaction(self, write: bool) -> Iterator[Callable[[str, tuple], list[tuple]]]:
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")

            def run(sql: str, params: tuple = ()) -> list[tuple]:
                return conn.execute(sql, params).fetchall()
            try:
                yield run
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        finally:
            conn.close()

    def close(self) -> None:
        pass


class _Postgres:
    name = "postgresql"
    lock_suffix = " FOR UPDATE"
    POOL = 4

    def __init__(self, url: str) -> None:
        try:
            import psycopg
        except ImportError:
            raise PrecdxError("a postgresql:// session store needs psycopg",
                              hint="pip install 'psycopg[binary]>=3.1'") from None
        self._psycopg = psycopg
        self.url = url
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        try:
            with self.transaction(write=True) as run:
                # several workers may start at once: serialise the CREATEs
                run("SELECT pg_advisory_xact_lock(7070726563)")
                for stmt in SCHEMA:
                    run(stmt)
        except psycopg.Error as exc:
            raise PrecdxError(f"cannot open the session store: {str(exc).strip()}") from None

    def _get(self):
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return self._psycopg.connect(self.url, autocommit=True, connect_timeout=10)

    def _put(self, conn) -> None:
        with self._lock:
            if len(self._idle) < self.POOL and not conn.closed:
                self._idle.append(conn)
                return
        conn.close()

    @contextmanager
    def transaction(self, write: bool) -> Iterator[Callable[[str, tuple], list[tuple]]]:
        conn = self._get()
        healthy = True
        try:
            with conn.transaction():
                cur = conn.cursor()

                def run(sql: str, params: tuple = ()) -> list[tuple]:
                    cur.execute(sql.replace("?", "%s"), params)
                    return cur.fetchall() if cur.description else []
                yield run
        except self._psycopg.OperationalError:
            healthy = False
            raise
        finally:
            if healthy and not conn.broken:
                self._put(conn)
            else:
                conn.close()

    def reclaim(self) -> None:
        """Nothing to do: autovacuum makes the space of deleted rows reusable."""

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


class SessionStore:
    """Create, read, update (atomically, row-locked) and expire sessions."""

    def __init__(self, url: str | None = None, *, ttl: float = 24 * 3600.0, max_sessions: int | None = None,
                 max_session_bytes: int | None = None, clock: Callable[[], float] = time.time) -> None:
        backend, location = describe_url(url)
        self.clock = clock  # wall-clock seconds; expiry times are stored in them
        self.backend = backend
        self.ttl = ttl
        self.max_sessions = max_sessions
        self.max_session_bytes = max_session_bytes
        self._db = _Postgres(location) if backend == "postgresql" else _SQLite(location)

    def _data(self, session: Session) -> str:
        data = session.data()
        if self.max_session_bytes is not None:
            size = len(data.encode("utf-8"))
            if size > self.max_session_bytes:
                raise ServiceError(413, "session_too_large", f"the session would hold {size} bytes of facts "
                                   f"(limit {self.max_session_bytes}); start a new session for another case")
        return data

    def create(self, lang: str, facts: list[dict] | None = None, skipped: list[str] | None = None) -> Session:
        now = self.clock()
        session = Session(id=secrets.token_urlsafe(18), lang=lang, facts=list(facts or []),
                          skipped=list(skipped or []), turns=1 if (facts or skipped) else 0,
                          created=now, updated=now, expires=now + self.ttl)
        data = self._data(session)
        with self._db.transaction(write=True) as run:
            purged = run("SELECT COUNT(*) FROM precdx_sessions WHERE expires <= ?", (now,))[0][0]
            if purged:
                run("DELETE FROM precdx_sessions WHERE expires <= ?", (now,))
            if self.max_sessions is not None:
                live, first_expiry = run("SELECT COUNT(*), MIN(expires) FROM precdx_sessions", ())[0]
                if live >= self.max_sessions:
                    retry = max(1, int(float(first_expiry) - now) + 1)
                    raise ServiceError(429, "too_many_sessions",
                                       f"the server holds {live} live sessions (limit {self.max_sessions}); "
                                       f"delete finished sessions or retry when one expires",
                                       headers={"Retry-After": str(retry)})
            run(f"INSERT INTO precdx_sessions ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (session.id, session.lang, data, session.turns, session.created, session.updated,
                 session.expires))
        if purged:
            self._db.reclaim()
        return session

    def get(self, sid: str) -> Session | None:
        with self._db.transaction(write=False) as run:
            rows = run(f"SELECT {_COLUMNS} FROM precdx_sessions WHERE id = ? AND expires > ?", (sid, self.clock()))
        return Session.from_row(rows[0]) if rows else None

    def update(self, sid: str, change: Callable[[Session], None]) -> Session | None:
        """Apply `change` to the session under a row lock and save it (one turn). An exception
        from `change` leaves the session as it was."""
        with self._db.transaction(write=True) as run:
            rows = run(f"SELECT {_COLUMNS} FROM precdx_sessions WHERE id = ? AND expires > ?{self._db.lock_suffix}",
                       (sid, self.clock()))
            if not rows:
                return None
            session = Session.from_row(rows[0])
            change(session)
            data = self._data(session)
            now = self.clock()
            session.turns += 1
            session.updated = now
            session.expires = now + self.ttl
            run("UPDATE precdx_sessions SET data = ?, turns = ?, updated = ?, expires = ? WHERE id = ?",
                (data, session.turns, session.updated, session.expires, sid))
        return session

    def delete(self, sid: str) -> bool:
        with self._db.transaction(write=True) as run:
            found = run("SELECT id FROM precdx_sessions WHERE id = ? AND expires > ?", (sid, self.clock()))
            removed = run("SELECT COUNT(*) FROM precdx_sessions WHERE id = ?", (sid,))[0][0]
            run("DELETE FROM precdx_sessions WHERE id = ?", (sid,))
        if removed:
            self._db.reclaim()
        return bool(found)

    def purge_expired(self) -> int:
        now = self.clock()
        with self._db.transaction(write=True) as run:
            gone = run("SELECT COUNT(*) FROM precdx_sessions WHERE expires <= ?", (now,))
            run("DELETE FROM precdx_sessions WHERE expires <= ?", (now,))
        if gone[0][0]:
            self._db.reclaim()
        return int(gone[0][0])

    def reclaim(self) -> None:
        """Return the space of deleted sessions to the file system (SQLite)."""
        self._db.reclaim()

    def count(self) -> int:
        with self._db.transaction(write=False) as run:
            return int(run("SELECT COUNT(*) FROM precdx_sessions WHERE expires > ?", (self.clock(),))[0][0])

    @property
    def database(self):
        """The backend (its `transaction(write)`), for other tables of the same database (reports)."""
        return self._db

    def ping(self) -> None:
        with self._db.transaction(write=False) as run:
            run("SELECT 1")

    def close(self) -> None:
        self._db.close()
