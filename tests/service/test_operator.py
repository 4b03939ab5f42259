"""A service an operator can expose, tested against the real `precdx serve` process: byte caps
per fact and per session, the session-count cap, the store shrinking when sessions are deleted,
deeply nested JSON refused alike on every endpoint, one error code per condition, responses
that do not repeat huge facts, client disconnects logged as one line, the per-client rate limit,
refusing a public address without a token, the token from a file (not in `ps`), stalled uploads
cut off, and a timed-out diagnosis giving its slot back. Every test starts real servers (slow)."""
from __future__ import annotations

import gzip
import io
import json
import os
import socket
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import httpx
import pytest

from tests.service.conftest import REPO, RUNS, Server, free_port

pytestmark = pytest.mark.slow

KiB, MiB = 1024, 1024 * 1024
KSHIFT = {"type": "observation", "name": "kshift_off_fixes", "value": True}


def big_run(i: int, size: int) -> dict:
    """A run fact whose name makes it `size` bytes long (facts are small in practice; this is
    the client that posts a huge one)."""
    return {"type": "run", "role": "target_rerun", "name": f"rerun{i}-" + "x" * size}


def store_bytes(db: Path) -> int:
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*"))


def wait_for(predicate, timeout: float, step: float = 0.1):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    return predicate()


def raw_request(port: int, head: str, body: bytes = b"") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(head.encode() + body)
    return sock


def read_response(sock: socket.socket, timeout: float) -> tuple[bytes, bool]:
    """What the server sent, and whether it closed the connection, within `timeout` seconds."""
    sock.settimeout(0.2)
    data, closed = b"", False
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            if b"\r\n\r\n" in data and b'"}' in data:
                break
            continue
        except ConnectionResetError:
            closed = True
            break
        if not chunk:
            closed = True
            break
        data += chunk
    return data, closed


# ---------------------------------------------------------------- one server with small limits
@pytest.fixture(scope="module")
def capped(tmp_path_factory):
    folder = tmp_path_factory.mktemp("capped")
    db = folder / "sessions.sqlite3"
    env = {"PRECDX_MAX_REQUEST_BYTES": str(4 * MiB), "PRECDX_MAX_FACT_BYTES": str(1536 * KiB),
           "PRECDX_MAX_SESSION_BYTES": str(3584 * KiB), "PRECDX_MAX_SESSIONS": "4",
           "PRECDX_MAX_ECHO_BYTES": str(64 * KiB), "PRECDX_RATE_LIMIT": "0"}
    server = Server(f"sqlite:///{db}", workers=1, env=env)
    server.db = db
    yield server
    server.stop()


def test_fact_and_session_byte_caps(capped):
    url = capped.url
    r = httpx.post(url + "/v1/diagnose", json={"facts": [*RUNS, big_run(0, 2 * MiB)]}, timeout=30)
    assert r.status_code == 413 and r.json()["error"] == "fact_too_large", r.text
    assert "facts[2] (run)" in r.json()["detail"] and f"limit {1536 * KiB}" in r.json()["detail"]
    r = httpx.post(url + "/v1/sessions", json={"facts": [big_run(0, 2 * MiB)]}, timeout=30)
    assert r.status_code == 413 and r.json()["error"] == "fact_too_large"

    r = httpx.post(url + "/v1/sessions", json={"facts": [*RUNS, big_run(1, 1200 * KiB)]}, timeout=30)
    assert r.status_code == 201, r.text
    sid = r.json()["session_id"]
    try:
        r = httpx.post(f"{url}/v1/sessions/{sid}/turns", json={"facts": [big_run(2, 1200 * KiB)]}, timeout=30)
        assert r.status_code == 200 and r.json()["turns"] == 2
        r = httpx.post(f"{url}/v1/sessions/{sid}/turns", json={"facts": [big_run(3, 1200 * KiB)]}, timeout=30)
        assert r.status_code == 413 and r.json()["error"] == "session_too_large", r.text
        assert f"limit {3584 * KiB}" in r.json()["detail"]
        state = httpx.get(f"{url}/v1/sessions/{sid}", timeout=30).json()
        assert state["turns"] == 2 and len(state["facts"]) == 4  # the refused turn changed nothing
    finally:
        httpx.delete(f"{url}/v1/sessions/{sid}", timeout=30)


def test_session_count_cap_and_the_store_shrinks_when_sessions_are_deleted(capped):
    url = capped.url
    empty = store_bytes(capped.db)
    ids = []
    for i in range(4):
        facts = [big_run(10 * i + k, 1000 * KiB) for k in range(3)]
        r = httpx.post(url + "/v1/sessions", json={"facts": facts}, timeout=60)
        assert r.status_code == 201, r.text
        ids.append(r.json()["session_id"])
    full = store_bytes(capped.db)
    assert full > 11 * MiB, (empty, full)
    r = httpx.post(url + "/v1/sessions", json={"facts": RUNS}, timeout=30)
    assert r.status_code == 429 and r.json()["error"] == "too_many_sessions"
    assert "limit 4" in r.json()["detail"] and int(r.headers["retry-after"]) > 0
    for sid in ids:
        assert httpx.delete(f"{url}/v1/sessions/{sid}", timeout=30).status_code == 204
    after = store_bytes(capped.db)
    assert after < 1 * MiB, (full, after)  # the file gives the space back
    r = httpx.post(url + "/v1/sessions", json={"facts": RUNS}, timeout=30)
    assert r.status_code == 201
    httpx.delete(f"{url}/v1/sessions/{r.json()['session_id']}", timeout=30)


def test_responses_do_not_repeat_a_huge_fact(capped):
    url = capped.url
    huge = big_run(1, 1400 * KiB)
    r = httpx.post(url + "/v1/diagnose", json={"facts": [*RUNS, KSHIFT, huge]}, timeout=60)
    assert r.status_code == 200, r.text
    assert len(r.content) < 128 * KiB and "x" * 1000 not in r.text
    body = r.json()
    assert body["hypotheses"][0]["failure_mode"] == "operator.matmul_kshift"  # the facts were all used
    stubs = [f for f in body["facts"] if f.get("omitted")]
    assert len(stubs) == 1 and stubs[0]["type"] == "run" and stubs[0]["role"] == "target_rerun"
    assert stubs[0]["bytes"] > 1400 * KiB and "name" not in stubs[0]
    assert any("PRECDX_MAX_ECHO_BYTES" in w["message"] for w in body["warnings"])
    assert len(body["facts"]) == 4

    r = httpx.post(url + "/v1/sessions", json={"facts": [*RUNS, huge]}, timeout=60)
    assert r.status_code == 201 and len(r.content) < 192 * KiB and "x" * 1000 not in r.text
    state = r.json()
    try:
        assert [f.get("omitted") for f in state["facts"]].count(True) == 1
        assert [f.get("omitted") for f in state["diagnosis"]["facts"]].count(True) == 1
        r = httpx.get(f"{url}/v1/sessions/{state['session_id']}", timeout=30)
        assert len(r.content) < 192 * KiB
    finally:
        httpx.delete(f"{url}/v1/sessions/{state['session_id']}", timeout=30)


def _deep(depth: int) -> str:
    return '{"facts": [' + '{"a": [' * depth + "1" + "]}" * depth + "]}"


def test_deeply_nested_json_is_400_json_too_deep_on_every_endpoint(capped):
    url = capped.url
    r = httpx.post(url + "/v1/sessions", json={"facts": RUNS}, timeout=30)
    sid = r.json()["session_id"]
    try:
        for depth in (40, 100_000):
            body = _deep(depth).encode()
            for path in ("/v1/diagnose", "/v1/sessions", f"/v1/sessions/{sid}/turns"):
                for headers in ({"content-type": "application/json"}, {}):  # FastAPI reads a bare body as JSON
                    r = httpx.post(url + path, content=body, headers=headers, timeout=30)
                    assert r.status_code == 400 and r.json()["error"] == "json_too_deep", (path, depth, r.text)
            r = httpx.post(url + "/v1/diagnose", data={"facts": _deep(depth)}, timeout=30)  # multipart field
            assert r.status_code == 400 and r.json()["error"] == "json_too_deep", r.text
        bare = ("[" * 100_000).encode()  # not even valid JSON: still refused for its depth, not a 500
        assert httpx.post(url + "/v1/diagnose", content=bare, headers={"content-type": "application/json"},
                          timeout=30).json()["error"] == "json_too_deep"
        ok = {"facts": [{"type": "run", "role": "target", "name": "t", "device": "npu"}]}
        assert httpx.post(url + "/v1/diagnose", json=ok, timeout=30).status_code == 200
        assert httpx.get(f"{url}/v1/sessions/{sid}", timeout=30).json()["turns"] == 1
    finally:
        httpx.delete(f"{url}/v1/sessions/{sid}", timeout=30)
    assert "Traceback" not in capped.full_output()


def test_one_error_code_per_condition(capped):
    url = capped.url
    sid = httpx.post(url + "/v1/sessions", json={"facts": RUNS}, timeout=30).json()["session_id"]
    try:
        too_big = b"x" * (4 * MiB + 1)

        def chunks():  # no Content-Length: counted while it streams
            for _ in range(5):
                yield b"[" + b" " * MiB

        for path in ("/v1/diagnose", "/v1/sessions", f"/v1/sessions/{sid}/turns"):
            for ctype in ("application/json", "application/zip"):
                r = httpx.post(url + path, content=too_big, headers={"content-type": ctype}, timeout=60)
                assert r.status_code == 413 and r.json()["error"] == "request_too_large", (path, ctype, r.text)
                r = httpx.post(url + path, content=chunks(), headers={"content-type": ctype}, timeout=60)
                assert r.status_code == 413 and r.json()["error"] == "request_too_large", (path, ctype, r.text)
            r = httpx.post(url + path, content=b"{not json", headers={"content-type": "application/json"}, timeout=30)
            assert r.status_code == 400 and r.json()["error"] == "invalid_json", (path, r.text)
    finally:
        httpx.delete(f"{url}/v1/sessions/{sid}", timeout=30)
    assert "request_entity_too_large" not in capped.full_output()


def test_a_client_that_goes_away_mid_upload_is_one_log_line(capped):
    before = capped.full_output()
    uploads = [("/v1/sessions", "application/json"), ("/v1/diagnose", "application/zip"),
               ("/v1/diagnose", "multipart/form-data; boundary=xyz")]
    for path, ctype in uploads:
        head = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {2 * MiB}\r\n\r\n")
        first = b"--xyz\r\nContent-Disposition: form-data; name=\"archive\"; filename=\"a.zip\"\r\n\r\n" \
            if ctype.startswith("multipart") else b"{"
        sock = raw_request(capped.port, head, first + b" " * 50_000)
        time.sleep(0.3)
        sock.close()

    def new_lines():
        return capped.full_output()[len(before):].splitlines()

    assert wait_for(lambda: sum("disconnected during its upload" in line for line in new_lines()) == len(uploads),
                    timeout=15), new_lines()
    added = capped.full_output()[len(before):]
    assert "Traceback" not in added and "ClientDisconnect" not in added, added
    gone = [line for line in new_lines() if "disconnected during its upload" in line]
    assert all("of 2097152 bytes" in line and "127.0.0.1" in line for line in gone), gone
    assert len(added) < 400 * len(uploads), added
    assert httpx.get(capped.url + "/healthz", timeout=10).status_code == 200


# ---------------------------------------------------------------- the rate limit
def test_rate_limit_per_client(tmp_path):
    # one token a second: the burst of six requests has a whole second before a token comes back
    env = {"PRECDX_RATE_LIMIT": "1", "PRECDX_RATE_BURST": "5"}
    server = Server(f"sqlite:///{tmp_path / 's.db'}", workers=1, env=env)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as c:
            codes = [c.get("/v1/failure-modes").status_code for _ in range(5)]
            r = c.get("/v1/failure-modes")
            assert codes == [200] * 5 and r.status_code == 429, (codes, r.text)
            assert r.json()["error"] == "rate_limited" and int(r.headers["retry-after"]) >= 1
            # another client (uvicorn takes the address from X-Forwarded-For of a trusted local proxy)
            assert c.get("/v1/failure-modes", headers={"X-Forwarded-For": "10.1.2.3"}).status_code == 200
            assert c.get("/healthz").status_code == 200  # probes are not counted
            time.sleep(1.1)  # one more token
            assert c.get("/v1/failure-modes").status_code == 200
            assert c.get("/v1/failure-modes").status_code == 429
    finally:
        server.stop()


# ---------------------------------------------------------------- binding and the token
def test_a_public_address_needs_a_token_and_the_token_stays_out_of_ps(tmp_path):
    port = free_port()
    cmd = [sys.executable, str(REPO / "cli.py"), "serve", "--host", "0.0.0.0", "--port", str(port),
           "--db", f"sqlite:///{tmp_path / 's.db'}"]
    env = {k: v for k, v in os.environ.items() if k not in ("PRECDX_TOKEN", "PRECDX_TOKEN_FILE")}
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "refusing to listen on 0.0.0.0 without a token" in done.stderr
    assert "--insecure" in done.stderr and "Traceback" not in done.stderr

    secret = "tok-" + os.urandom(12).hex()
    token_file = tmp_path / "token"
    token_file.write_text(secret + "\n")
    token_file.chmod(0o600)
    server = Server(f"sqlite:///{tmp_path / 's.db'}", workers=2,
                    args=("--host", "0.0.0.0", "--token-file", str(token_file)))
    try:
        assert httpx.get(server.url + "/v1/rules", timeout=10).status_code == 401
        r = httpx.get(server.url + "/v1/rules", headers={"Authorization": f"Bearer {secret}"}, timeout=30)
        assert r.status_code == 200
        # an upload without the token is refused before its body is read (here: never sent)
        sock = raw_request(server.port, "POST /v1/diagnose HTTP/1.1\r\nHost: x\r\nContent-Type: application/zip\r\n"
                                        f"Content-Length: {50 * MiB}\r\n\r\n")
        data, _ = read_response(sock, timeout=10)
        sock.close()
        assert data.startswith(b"HTTP/1.1 401") and b'"unauthorized"' in data, data[:300]
        ps = subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True, timeout=30).stdout
        assert str(token_file) in ps and secret not in ps
    finally:
        server.stop()

    server = Server(f"sqlite:///{tmp_path / 's.db'}", workers=1, args=("--host", "0.0.0.0", "--insecure"),
                    env={"PRECDX_TOKEN": ""})
    try:
        assert httpx.get(server.url + "/v1/rules", timeout=30).status_code == 200
        assert "listening on 0.0.0.0 without a token (--insecure)" in server.full_output()
    finally:
        server.stop()


def test_the_token_from_the_environment(tmp_path):
    server = Server(f"sqlite:///{tmp_path / 's.db'}", workers=1, args=("--host", "0.0.0.0"),
                    env={"PRECDX_TOKEN": "from-env-123"})
    try:
        assert httpx.get(server.url + "/v1/rules", timeout=10).status_code == 401
        r = httpx.get(server.url + "/v1/rules", headers={"Authorization": "Bearer from-env-123"}, timeout=30)
        assert r.status_code == 200
    finally:
        server.stop()


# ---------------------------------------------------------------- stalled uploads
def test_stalled_and_dripping_uploads_are_cut_with_408(tmp_path):
    server = Server(f"sqlite:///{tmp_path / 's.db'}", workers=1, env={"PRECDX_BODY_TIMEOUT": "1.5"})
    try:
        for path, ctype in (("/v1/sessions", "application/json"), ("/v1/diagnose", "application/zip")):
            head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: {ctype}\r\nContent-Length: 100000\r\n\r\n"
            started = time.monotonic()
            sock = raw_request(server.port, head, b"[" + b" " * 999)  # then nothing more
            data, closed = read_response(sock, timeout=10)
            waited = time.monotonic() - started
            sock.close()
            assert data.startswith(b"HTTP/1.1 408"), data[:200]
            assert b'"error": "body_timeout"' in data and b"within 1.5 s (1000 bytes arrived)" in data
            assert 1.4 < waited < 6.0, waited
            if not closed:  # the server closes the connection after its answer
                sock2 = raw_request(server.port, head, b"[")
                data2, closed = read_response(sock2, timeout=10)
                sock2.close()
            assert closed

        # a body that keeps dripping in is cut at the same deadline
        head = "POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
        sock = raw_request(server.port, head, b"[")
        started = time.monotonic()
        answer = b""
        while time.monotonic() - started < 8 and not answer:
            try:
                sock.sendall(b" " * 10)
            except OSError:
                break
            sock.settimeout(0.25)
            try:
                answer = sock.recv(65536)
            except socket.timeout:
                pass
        sock.close()
        assert answer.startswith(b"HTTP/1.1 408") and time.monotonic() - started < 6.0, answer[:200]
        assert httpx.get(server.url + "/healthz", timeout=10).status_code == 200
        assert "Traceback" not in server.full_output()
    finally:
        server.stop()


# ---------------------------------------------------------------- the worker slot
def _slow_case(lines: int, files: int = 2) -> bytes:
    """A case whose training logs take several seconds to read: `files` gzipped copies of a long
    Megatron log a side (decompressed and read in compiled code, which lets the server's other
    threads run; gzipped, so that the archive stays far below its unpacked-size limit)."""
    row = (" iteration {i:>8}/ 1000000 | consumed samples: {s} | elapsed time per iteration (ms): 1000.0 | "
           "learning rate: 1.000E-04 | global batch size:   256 | lm loss: {l:.6E} | loss scale: 1.0 | "
           "grad norm: 1.234 | number of skipped iterations:   0 | number of nan iterations:   0 |\n")
    log = "".join(row.format(i=i, s=i * 256, l=10 / (1 + i / 1000)) for i in range(1, lines + 1)).encode()
    packed = gzip.compress(log, compresslevel=1)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for side in ("baseline", "target"):
            for k in range(files):
                info = tarfile.TarInfo(f"{side}/train-{k}.log.gz")
                info.size = len(packed)
                tf.addfile(info, io.BytesIO(packed))
    return buf.getvalue()


def test_a_timed_out_diagnosis_gives_its_slot_back(tmp_path):
    env = {"PRECDX_MAX_JOBS": "1", "PRECDX_REQUEST_TIMEOUT": "2"}
    server = Server(f"sqlite:///{tmp_path / 's.db'}", workers=1, env=env)
    try:
        # about 4 s of reading on a fast 2-core machine (2 s were not enough once the block reader
        # got faster: the job ended at the deadline, before the second request was answered)
        case = _slow_case(400_000, files=4)
        started = time.monotonic()
        r = httpx.post(server.url + "/v1/diagnose", content=case, headers={"content-type": "application/x-tar"},
                       timeout=60)
        took = time.monotonic() - started
        assert r.status_code == 408 and r.json()["error"] == "timeout", r.text
        assert took < 5, took
        started = time.monotonic()  # the one slot is free again though the timed-out job still runs
        r = httpx.post(server.url + "/v1/diagnose", json={"facts": [*RUNS, KSHIFT]}, timeout=60)
        took = time.monotonic() - started
        assert r.status_code == 200 and r.json()["hypotheses"][0]["failure_mode"] == "operator.matmul_kshift"
        assert took < 1.9, took  # would wait for the slot, then 503 at the 2 s deadline
        assert "ended in the background" not in server.full_output()  # it was still running
        assert wait_for(lambda: "a timed-out diagnose_job ended in the background" in server.full_output(),
                        timeout=60, step=0.5)
    finally:
        server.stop()
