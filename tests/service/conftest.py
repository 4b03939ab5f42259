"""Service fixtures: an app on a temporary SQLite store with the small consultation pack, hostile
archive builders, a throwaway PostgreSQL server, and a real `precdx serve` process."""
from __future__ import annotations

import glob
import io
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # starlette asks for httpx2 (a deprecation notice); httpx still works
    from fastapi.testclient import TestClient

from precdx.service.app import create_app
from precdx.service.settings import Settings

REPO = Path(__file__).resolve().parents[2]
PACK = REPO / "tests" / "planner" / "consult_pack.yaml"
RUNS = [{"type": "run", "role": "baseline", "name": "baseline", "device": "gpu"},
        {"type": "run", "role": "target", "name": "target", "device": "npu"}]


def make_settings(tmp_path: Path, **kw) -> Settings:
    # no rate limit unless a test sets one: the TestClient sends every request from one address
    base = dict(db_url=f"sqlite:///{tmp_path / 'sessions.sqlite3'}", rules_path=str(PACK), request_timeout=60.0,
                rate_limit=0.0)
    base.update(kw)
    return Settings(**base)


@pytest.fixture
def settings(tmp_path) -> Settings:
    return make_settings(tmp_path)


@pytest.fixture
def client(settings):
    with TestClient(create_app(settings)) as c:
        yield c


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`precdx serve` in a subprocess (stopped with SIGTERM), reached on 127.0.0.1; `args` are
    more command-line options (e.g. --host 0.0.0.0 --token-file PATH)."""

    def __init__(self, db_url: str, workers: int = 2, token: str | None = None, env: dict | None = None,
                 args: tuple[str, ...] = ()) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [sys.executable, str(REPO / "cli.py"), "serve", "--port", str(self.port), "--workers", str(workers),
               "--db", db_url, *args]
        if token:
            cmd += ["--token", token]
        self.log = tempfile.TemporaryFile()
        full_env = dict(os.environ, PRECDX_SERVICE_RULES=str(PACK), **(env or {}))
        self.proc = subprocess.Popen(cmd, cwd=REPO, env=full_env, stdout=self.log, stderr=subprocess.STDOUT)
        self._wait()

    def _wait(self, timeout: float = 60.0) -> None:
        import httpx

        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}: {self.output()}")
            try:
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"server did not come up: {self.output()}")

    def output(self) -> str:
        return self.full_output()[-3000:]

    def full_output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# ---------------------------------------------------------------- PostgreSQL
def _pg_bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


@pytest.fixture(scope="session")
def postgres_url():
    """A throwaway PostgreSQL server on a Unix socket (no TCP), run as a non-root user."""
    pytest.importorskip("psycopg", reason="psycopg not installed (pip install 'psycopg[binary]')")
    bindir = _pg_bindir()
    if bindir is None:
        pytest.skip("no PostgreSQL server binaries (apt-get install -y postgresql); PostgreSQL store tests skipped")
    base = Path(tempfile.mkdtemp(prefix="precdx-pg-"))
    prefix: list[str] = []
    if os.geteuid() == 0:
        user = "postgres" if _has_user("postgres") else "nobody"
        owner = pwd.getpwnam(user)
        os.chmod(base, 0o700)
        os.chown(base, owner.pw_uid, owner.pw_gid)
        prefix = ["runuser", "-u", user, "--"]
    data, sock, log = base / "data", base / "sock", base / "server.log"
    port = free_port()
    try:
        subprocess.run(prefix + ["mkdir", str(sock)], check=True)
        subprocess.run(prefix + [str(bindir / "initdb"), "-D", str(data), "-U", "precdx", "-A", "trust", "-E", "UTF8",
                                 "--no-sync"], check=True, capture_output=True, timeout=120)
        subprocess.run(prefix + [str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60", "-o",
                                 f"-k {sock} -p {port} -c listen_addresses='' -c fsync=off", "start"],
                       check=True, capture_output=True, timeout=90)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        shutil.rmtree(base, ignore_errors=True)
        pytest.fail(f"could not start a throwaway PostgreSQL: {exc}: {detail.decode(errors='replace')[-800:]}")
    try:
        yield f"postgresql://precdx@/postgres?host={sock}&port={port}"
    finally:
        subprocess.run(prefix + [str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                       capture_output=True, timeout=60)
        shutil.rmtree(base, ignore_errors=True)


def _has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


# ---------------------------------------------------------------- archives
def zip_bytes(members: dict[str, bytes], *, compression=None) -> bytes:
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=compression or zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def tar_bytes(members: list, mode: str = "w:gz") -> bytes:
    """members: (name, data) for files, or prepared TarInfo objects (links, devices)."""
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tf:
        for item in members:
            if isinstance(item, tarfile.TarInfo):
                tf.addfile(item)
            else:
                name, data = item
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()
