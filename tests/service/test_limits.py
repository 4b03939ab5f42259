"""The operator's limits in process (the fast lane; tests/service/test_operator.py runs them
against the real server): JSON depth, token buckets, echo budget, the store's caps and reclaimed
space, the job slot of a timed-out job, the token and bind checks, the settings, every variable in
`serve --help`, and the README's table of error codes matching the codes the service answers."""
from __future__ import annotations

import asyncio
import re
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from precdx.errors import PrecdxError
from precdx.service.app import HTTP_CODES, check_bind, create_app, is_loopback, resolve_token
from precdx.service.errors import ServiceError
from precdx.service.jobs import JobRunner
from precdx.service.limits import TokenBuckets, json_depth
from precdx.service.sessions import echo_facts, limit_echo
from precdx.service.settings import Settings, environment
from precdx.service.store import SessionStore
from tests.service.conftest import REPO, RUNS, TestClient, make_settings

ENGINE = REPO / "engine"


# ---------------------------------------------------------------- JSON depth
@pytest.mark.parametrize("text,depth", [
    (b"1", 0), (b'"[[["', 0), (b"[]", 1), (b'{"a": [1, {"b": "]]]{{{"}]}', 3),
    (b'["\\\\", [["\\""]]]', 3),       # an escaped backslash ends the string; an escaped quote does not
    (b"[" * 50 + b"]" * 50, 50), (b"[" * 50, 50),
])
def test_json_depth(text, depth):
    assert json_depth(text) == depth


def test_json_depth_is_linear_on_hostile_bodies():
    for body in (b'"' + b'\\"' * 2_000_000 + b"[[", b"[" + b'"\\' * 2_000_000, b'["' + b"x" * 8_000_000 + b'"]'):
        started = time.monotonic()
        json_depth(body)
        assert time.monotonic() - started < 3.0, body[:20]


def test_deep_json_is_the_same_400_on_every_endpoint(client):
    sid = client.post("/v1/sessions", json={"facts": RUNS}).json()["session_id"]
    deep = '{"facts": [' + '{"a": [' * 5000 + "1" + "]}" * 5000 + "]}"
    for path in ("/v1/diagnose", "/v1/sessions", f"/v1/sessions/{sid}/turns"):
        r = client.post(path, content=deep, headers={"content-type": "application/json"})
        assert r.status_code == 400 and r.json()["error"] == "json_too_deep", (path, r.text)
    r = client.post("/v1/diagnose", data={"facts": deep})
    assert r.status_code == 400 and r.json()["error"] == "json_too_deep"
    shallow = {"facts": [{"type": "run", "role": "target", "name": "t", "device": "npu"}]}
    assert client.post("/v1/diagnose", json=shallow).status_code == 200


def test_invalid_json_is_one_code_everywhere(client):
    for path in ("/v1/diagnose", "/v1/sessions"):
        r = client.post(path, content=b"{oops", headers={"content-type": "application/json"})
        assert r.status_code == 400 and r.json()["error"] == "invalid_json", (path, r.text)


# ---------------------------------------------------------------- rate limit
def test_token_buckets():
    now = [0.0]
    buckets = TokenBuckets(rate=2.0, burst=3, max_clients=2, clock=lambda: now[0])
    assert [buckets.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.take("a") == pytest.approx(0.5)
    assert buckets.take("b") == 0.0          # another client has its own bucket
    now[0] = 0.5
    assert buckets.take("a") == 0.0          # one token back after 1/rate seconds
    assert buckets.take("a") > 0
    buckets.take("c")                        # beyond max_clients the least recent is forgotten
    assert "b" not in buckets._buckets and len(buckets._buckets) == 2


def test_rate_limit_in_the_app(tmp_path):
    with TestClient(create_app(make_settings(tmp_path, rate_limit=1.0, rate_burst=2))) as c:
        assert [c.get("/v1/questions").status_code for _ in range(2)] == [200, 200]
        r = c.get("/v1/questions")
        assert r.status_code == 429 and r.json()["error"] == "rate_limited" and r.headers["retry-after"] == "1"
        assert c.get("/healthz").status_code == 200


# ---------------------------------------------------------------- facts repeated back
def test_echo_budget_keeps_small_facts_and_stubs_big_ones():
    facts = [{"type": "run", "role": "target", "name": "t"}, {"type": "run", "role": "baseline", "name": "b" * 5000},
             {"type": "observation", "name": "same_checkpoint", "value": True}]
    out, omitted, size = echo_facts(facts, budget=1000)
    assert out[0] == facts[0] and out[2] == facts[2] and omitted == 1 and size > 5000
    assert out[1] == {"type": "run", "role": "baseline", "omitted": True, "bytes": size}
    assert echo_facts(facts, budget=10_000) == (facts, 0, 0)


def test_limit_echo_says_what_it_left_out(client):
    diag_json = client.post("/v1/diagnose", json={"facts": RUNS}).json()
    from precdx.diagnosis import Diagnosis

    diag = Diagnosis.model_validate(diag_json)
    assert limit_echo(diag, 1 << 20) is diag
    cut = limit_echo(diag, 10)
    assert all(f["omitted"] for f in cut.facts) and "PRECDX_MAX_ECHO_BYTES" in cut.warnings[-1]["message"]
    assert diag.facts == diag_json["facts"]  # the original is left as it was


def test_fact_byte_cap(tmp_path):
    with TestClient(create_app(make_settings(tmp_path, max_fact_bytes=1000))) as c:
        big = {"type": "run", "role": "target", "name": "x" * 2000}
        for path in ("/v1/diagnose", "/v1/sessions"):
            r = c.post(path, json={"facts": [big]})
            assert r.status_code == 413 and r.json()["error"] == "fact_too_large", r.text
            assert "facts[0] (run)" in r.json()["detail"]


# ---------------------------------------------------------------- the store
def _size(db: Path) -> int:
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*"))


def test_store_caps_and_reclaimed_space(tmp_path):
    db = tmp_path / "s.db"
    store = SessionStore(f"sqlite:///{db}", ttl=60, max_sessions=3, max_session_bytes=2_000_000)
    try:
        ids = [store.create("en", [{"type": "run", "role": "target", "name": "x" * 1_500_000}]).id for _ in range(3)]
        full = _size(db)
        with pytest.raises(ServiceError) as err:
            store.create("en")
        assert err.value.status == 429 and err.value.code == "too_many_sessions"
        assert 55 <= int(err.value.headers["Retry-After"]) <= 61
        with pytest.raises(ServiceError) as err:
            store.update(ids[0], lambda s: s.facts.append({"type": "run", "role": "baseline", "name": "y" * 600_000}))
        assert err.value.status == 413 and err.value.code == "session_too_large"
        assert store.get(ids[0]).turns == 1
        for sid in ids:
            assert store.delete(sid)
        assert full > 4_000_000 and _size(db) < 200_000, (full, _size(db))
        short = SessionStore(f"sqlite:///{db}", ttl=0.01)
        short.create("en", [{"type": "run", "role": "target", "name": "z" * 1_500_000}])
        time.sleep(0.05)
        assert short.purge_expired() == 1 and _size(db) < 200_000
    finally:
        store.close()


def test_an_old_store_file_is_switched_to_incremental_vacuum(tmp_path):
    import sqlite3

    db = tmp_path / "old.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE precdx_sessions (id TEXT PRIMARY KEY, lang TEXT NOT NULL, data TEXT NOT NULL, "
                 "turns INTEGER NOT NULL, created DOUBLE PRECISION NOT NULL, updated DOUBLE PRECISION NOT NULL, "
                 "expires DOUBLE PRECISION NOT NULL)")
    conn.execute("INSERT INTO precdx_sessions VALUES ('keep-this-session', 'en', '{\"facts\": []}', 0, 0, 0, ?)",
                 (time.time() + 60,))
    conn.commit()
    conn.close()
    store = SessionStore(f"sqlite:///{db}")
    assert store.get("keep-this-session") is not None
    assert sqlite3.connect(db).execute("PRAGMA auto_vacuum").fetchone()[0] == 2


# ---------------------------------------------------------------- the job slot
def test_a_timed_out_job_gives_its_slot_back():
    release = threading.Event()

    async def scenario():
        runner = JobRunner(max_jobs=1, timeout=0.3)
        try:
            with pytest.raises(ServiceError) as err:
                await runner.run(release.wait, 10)
            assert err.value.code == "timeout" and runner.abandoned == 1
            started = time.monotonic()
            assert await runner.run(lambda: 42) == 42
            quick = time.monotonic() - started
            # the spare threads are all taken: the next timed-out job keeps its slot
            with pytest.raises(ServiceError):
                await runner.run(release.wait, 10)
            assert runner.abandoned == 1
            with pytest.raises(ServiceError) as err:
                await runner.run(lambda: 1)
            assert err.value.code == "busy"
            release.set()
            for _ in range(100):
                if runner.abandoned == 0:
                    break
                await asyncio.sleep(0.02)
            assert runner.abandoned == 0 and await runner.run(lambda: 7) == 7
            return quick
        finally:
            release.set()
            runner.close()

    assert asyncio.run(scenario()) < 0.2


# ---------------------------------------------------------------- binding and the token
def test_bind_and_token_checks(tmp_path, monkeypatch):
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("[::1]") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.1") and not is_loopback("myhost")
    check_bind("127.0.0.1", None, False)
    check_bind("0.0.0.0", "t", False)
    with pytest.raises(PrecdxError, match="refusing to listen on 0.0.0.0 without a token"):
        check_bind("0.0.0.0", None, False)
    monkeypatch.delenv("PRECDX_TOKEN", raising=False)
    monkeypatch.delenv("PRECDX_TOKEN_FILE", raising=False)
    assert resolve_token() is None
    f = tmp_path / "tok"
    f.write_text("abc123\n")
    f.chmod(0o600)
    assert resolve_token(token_file=str(f)) == "abc123" and resolve_token("direct") == "direct"
    monkeypatch.setenv("PRECDX_TOKEN_FILE", str(f))
    assert resolve_token() == "abc123"
    monkeypatch.setenv("PRECDX_TOKEN", "env")
    with pytest.raises(PrecdxError, match="both PRECDX_TOKEN and PRECDX_TOKEN_FILE"):
        resolve_token()
    assert resolve_token("flag") == "flag"  # a flag wins over the environment
    with pytest.raises(PrecdxError, match="not both"):
        resolve_token("a", str(f))
    for text, problem in (("", "is empty"), ("two words", "whitespace")):
        f.write_text(text)
        with pytest.raises(PrecdxError, match=problem):
            resolve_token(token_file=str(f))
    with pytest.raises(PrecdxError, match="cannot read the token file"):
        resolve_token(token_file=str(tmp_path / "missing"))


# ---------------------------------------------------------------- settings and --help
def test_settings_from_the_environment(monkeypatch):
    monkeypatch.setenv("PRECDX_MAX_SESSIONS", "7")
    monkeypatch.setenv("PRECDX_RATE_LIMIT", "0.5")
    monkeypatch.setenv("PRECDX_BODY_TIMEOUT", "3")
    s = Settings.from_env()
    assert (s.max_sessions, s.rate_limit, s.body_timeout) == (7, 0.5, 3.0)
    assert Settings.from_env(**{"max_sessions": 9}).max_sessions == 9
    assert s.to_env()["PRECDX_MAX_SESSIONS"] == "7"
    monkeypatch.setenv("PRECDX_MAX_FACT_BYTES", "lots")
    with pytest.raises(PrecdxError, match="PRECDX_MAX_FACT_BYTES='lots' is not a number"):
        Settings.from_env()
    with pytest.raises(PrecdxError, match="PRECDX_BODY_TIMEOUT=0"):
        Settings(body_timeout=0)
    with pytest.raises(PrecdxError, match="must not be negative"):
        Settings(rate_limit=-1)


def _variables_read_by_the_engine() -> set[str]:
    names = set()
    for path in ENGINE.rglob("*.py"):
        names |= set(re.findall(r"\bPRECDX_[A-Z_]*[A-Z]\b", path.read_text(encoding="utf-8")))
    # engine/paths.py builds PRECDX_{NAME}_DIR for the packaged folders
    names |= {"PRECDX_RULES_DIR", "PRECDX_KB_DIR"}
    return names


def test_serve_help_lists_every_variable_the_server_reads():
    from precdx.cli import main

    result = CliRunner().invoke(main, ["serve", "--help"])
    assert result.exit_code == 0
    listed = {name for name, _, _ in environment()}
    missing = _variables_read_by_the_engine() - listed
    assert not missing, f"not in serve --help: {sorted(missing)}"
    for name in listed | {"FORWARDED_ALLOW_IPS", "XDG_STATE_HOME"}:
        assert name in result.output, name
    assert "Visible to every user in `ps`" in result.output and "--token-file" in result.output


# ---------------------------------------------------------------- one code per condition
def _codes_in_source() -> dict[str, set[int]]:
    found: dict[str, set[int]] = {}
    pattern = re.compile(r'(?:ServiceError|_error)\(\s*(\d{3}),\s*"([a-z_]+)"')
    for path in (ENGINE / "service").rglob("*.py"):
        for status, code in pattern.findall(path.read_text(encoding="utf-8")):
            found.setdefault(code, set()).add(int(status))
    for status, code in HTTP_CODES.items():
        found.setdefault(code, set()).add(status)
    return found


def test_each_error_code_has_one_status_and_a_row_in_the_readme():
    found = _codes_in_source()
    assert len(found) > 20
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("### Error codes"):]
    rows = dict(re.findall(r"^\| `([a-z_]+)` \| (\d{3}) \|", section, flags=re.M))
    for code, statuses in sorted(found.items()):
        assert len(statuses) == 1, f"{code} is answered with several statuses {sorted(statuses)}"
        assert code in rows, f"error code {code} is not in the README's table"
        assert int(rows[code]) in statuses, f"{code}: README says {rows[code]}, the code answers {statuses}"
    assert set(rows) <= set(found), f"README lists codes the service never answers: {set(rows) - set(found)}"
    assert "request_entity_too_large" not in {c for p in (ENGINE / "service").rglob("*.py")
                                             for c in re.findall(r"[a-z_]+", p.read_text(encoding="utf-8"))}


def test_without_the_token_the_body_is_not_even_read(tmp_path):
    from precdx.service.limits import RequestGuard

    read = []

    async def app(scope, receive, send):  # a route that would read the body
        read.append(await receive())
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    guard = RequestGuard(app, max_bytes=100, body_timeout=5, max_json_depth=8, token="s3cret")

    async def call(path: str, auth: bytes | None, method: str = "POST") -> int:
        sent = []

        async def receive():
            return {"type": "http.request", "body": b"{}", "more_body": False}

        async def send(message):
            sent.append(message)
        headers = [(b"content-type", b"application/json")] + ([(b"authorization", auth)] if auth else [])
        await guard({"type": "http", "method": method, "path": path, "headers": headers}, receive, send)
        return sent[0]["status"]

    assert asyncio.run(call("/v1/sessions", None)) == 401 and not read
    assert asyncio.run(call("/v1/sessions", b"Bearer wrong")) == 401 and not read
    assert asyncio.run(call("/v1/sessions", b"bearer s3cret")) == 200 and len(read) == 1
    assert asyncio.run(call("/healthz", None)) == 200 and asyncio.run(call("/v1x", None)) == 200
    # reading routes are left to the routers' own check (some may be public)
    assert asyncio.run(call("/v1/sessions/abc", None, method="GET")) == 200


@pytest.mark.slow
def test_store_caps_on_postgresql(postgres_url):
    probe = SessionStore(postgres_url, ttl=60)
    live = probe.count()  # other tests share the server
    probe.close()
    store = SessionStore(postgres_url, ttl=60, max_sessions=live + 2, max_session_bytes=100_000)
    try:
        ids = [store.create("en").id for _ in range(2)]
        with pytest.raises(ServiceError) as err:
            store.create("en")
        assert err.value.code == "too_many_sessions" and int(err.value.headers["Retry-After"]) > 0
        with pytest.raises(ServiceError) as err:
            store.update(ids[0], lambda s: s.facts.append({"type": "run", "role": "target", "name": "x" * 200_000}))
        assert err.value.code == "session_too_large" and store.get(ids[0]).facts == []
        assert store.delete(ids[0]) and store.create("en").id
    finally:
        store.close()
