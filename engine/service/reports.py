"""Full HTML reports behind the links of chat replies: stored in the session store's database
(SQLite or PostgreSQL, table precdx_reports) under a random id, so every worker process can
serve the link; zlib-compressed, kept `ttl` seconds, at most `max_reports` of them (the oldest
are dropped first). The id is the capability: GET /v1/reports/{id}.html needs no token, so a
link posted in a chat opens in a browser."""
from __future__ import annotations

import base64
import hashlib
import secrets
import time
import zlib

from precdx.service.store import SessionStore

SCHEMA = [
    """CREATE TABLE IF NOT EXISTS precdx_reports (
        id TEXT PRIMARY KEY,
        body TEXT NOT NULL,
        created DOUBLE PRECISION NOT NULL,
        expires DOUBLE PRECISION NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS precdx_reports_expires ON precdx_reports (expires)",
]
ID_PATTERN = r"^[A-Za-z0-9_-]{16,64}$"


def new_id() -> str:
    return secrets.token_urlsafe(18)


def derived_id(*parts: str) -> str:
    """A stable id for a snapshot (a session at one turn) that does not reveal its parts."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).digest()
    return base64.urlsafe_b64encode(digest[:18]).decode()


class ReportStore:
    def __init__(self, store: SessionStore, *, ttl: float, max_reports: int) -> None:
        self.ttl = ttl
        self.max_reports = max(1, max_reports)
        self._db = store.database
        with self._db.transaction(write=True) as run:
            for stmt in SCHEMA:
                run(stmt)

    @property
    def enabled(self) -> bool:
        return self.ttl > 0

    def has(self, rid: str) -> bool:
        with self._db.transaction(write=False) as run:
            return bool(run("SELECT id FROM precdx_reports WHERE id = ? AND expires > ?", (rid, time.time())))

    def put(self, rid: str, html: str) -> None:
        now = time.time()
        body = base64.b64encode(zlib.compress(html.encode("utf-8"), 6)).decode("ascii")
        with self._db.transaction(write=True) as run:
            expired = int(run("SELECT COUNT(*) FROM precdx_reports WHERE expires <= ?", (now,))[0][0])
            run("DELETE FROM precdx_reports WHERE expires <= ? OR id = ?", (now, rid))
            run("INSERT INTO precdx_reports (id, body, created, expires) VALUES (?, ?, ?, ?)",
                (rid, body, now, now + self.ttl))
            count = int(run("SELECT COUNT(*) FROM precdx_reports")[0][0])
            if count > self.max_reports:
                run("DELETE FROM precdx_reports WHERE id IN (SELECT id FROM precdx_reports ORDER BY created "
                    "LIMIT ?)", (count - self.max_reports,))
        if expired or count > self.max_reports:
            self._db.reclaim()  # the space of dropped reports goes back to the file system (SQLite)

    def get(self, rid: str) -> str | None:
        with self._db.transaction(write=False) as run:
            rows = run("SELECT body FROM precdx_reports WHERE id = ? AND expires > ?", (rid, time.time()))
        if not rows:
            return None
        return zlib.decompress(base64.b64decode(rows[0][0])).decode("utf-8")

    def delete(self, ids: list[str]) -> None:
        with self._db.transaction(write=True) as run:
            for rid in ids:
                run("DELETE FROM precdx_reports WHERE id = ?", (rid,))
        self._db.reclaim()
