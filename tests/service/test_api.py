"""The HTTP API: diagnose facts (JSON or markdown), catalogues, auth, limits, error bodies, and
the event loop staying responsive while diagnoses run."""
from __future__ import annotations

import asyncio
import json
import threading
import time

import httpx
import pytest

from precdx.service.app import create_app
from tests.service.conftest import RUNS, TestClient, make_settings

KSHIFT = {"type": "observation", "name": "kshift_off_fixes", "value": True}


def test_health_and_openapi(client):
    r = client.get("/healthz")
    assert r.status_code == 200 and r.json()["status"] == "ok" and r.json()["store"] == "sqlite"
    spec = client.get("/openapi.json").json()
    for path in ("/v1/diagnose", "/v1/failure-modes", "/v1/rules", "/v1/coverage", "/v1/sessions",
                 "/v1/sessions/{session_id}/turns", "/healthz"):
        assert path in spec["paths"], path
    content = spec["paths"]["/v1/diagnose"]["post"]["requestBody"]["content"]
    assert {"application/json", "multipart/form-data", "application/zip"} <= set(content)
    assert client.get("/docs").status_code == 200


def test_diagnose_facts_as_json(client):
    r = client.post("/v1/diagnose", json={"facts": [*RUNS, KSHIFT]})
    assert r.status_code == 200
    body = r.json()
    assert body["verdict"] == "misaligned" and body["hypotheses"][0]["failure_mode"] == "operator.matmul_kshift"
    assert body["schema_version"] and len(body["facts"]) == 3
    # a bare list of facts, and answers instead of facts, say the same
    assert client.post("/v1/diagnose", json=[*RUNS, KSHIFT]).json()["hypotheses"] == body["hypotheses"]
    r = client.post("/v1/diagnose", json={"facts": RUNS, "answers": [{"question": "kshift_off_fixes", "answer": "yes"}]})
    assert r.json()["hypotheses"][0]["failure_mode"] == "operator.matmul_kshift"


def test_diagnose_as_markdown_for_chat(client):
    r = client.post("/v1/diagnose?format=markdown&lang=zh", json={"facts": [KSHIFT]})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/markdown")
    assert r.text.startswith("**❌ misaligned**") and "operator.matmul_kshift" in r.text and "关闭 K 轴" not in r.text


@pytest.mark.parametrize("body,status,code", [
    ({"facts": [{"type": "no_such_fact"}]}, 422, "invalid_input"),
    ({"facts": [{"type": "observation", "name": "kshift_off_fixes", "value": "perhaps"}]}, 422, "invalid_input"),
    ({"facts": [KSHIFT, dict(KSHIFT, value=False)]}, 422, "invalid_input"),
    ({"facts": "not a list"}, 422, "invalid_request"),
    ({"fact": []}, 422, "invalid_request"),
    ({"answers": [{"question": "no_such_question", "answer": "yes"}]}, 422, "invalid_input"),
    ({}, 400, "nothing_to_diagnose"),
])
def test_bad_facts_are_4xx_with_a_clear_message(client, body, status, code):
    r = client.post("/v1/diagnose", json=body)
    assert r.status_code == status, r.text
    assert r.json()["error"] == code and r.json()["detail"]


def test_contradiction_message_names_both_values(client):
    r = client.post("/v1/diagnose", json={"facts": [KSHIFT, dict(KSHIFT, value=False)]})
    assert "contradictory" in r.json()["detail"] and "True vs False" in r.json()["detail"]


def test_malformed_bodies(client):
    r = client.post("/v1/diagnose", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"] == "invalid_json"
    r = client.post("/v1/diagnose", content=b"\xff\xfe", headers={"content-type": "application/json"})
    assert r.status_code == 400
    r = client.post("/v1/diagnose", content=b"hello", headers={"content-type": "text/plain"})
    assert r.status_code == 415 and r.json()["error"] == "unsupported_media_type"
    r = client.post("/v1/diagnose", files={"other": ("x", b"1")})
    assert r.status_code == 400 and "unknown form field" in r.json()["detail"]
    r = client.post("/v1/diagnose", data={"archive": "not a file"})
    assert r.status_code == 400
    r = client.post("/v1/diagnose", data={"facts": json.dumps([KSHIFT])})
    assert r.status_code == 200 and r.json()["hypotheses"][0]["failure_mode"] == "operator.matmul_kshift"
    r = client.post("/v1/diagnose?format=pdf", json={"facts": [KSHIFT]})
    assert r.status_code == 422 and r.json()["error"] == "invalid_request"
    assert client.get("/v1/nowhere").json()["error"] == "not_found"
    assert client.delete("/v1/rules").status_code == 405


def test_catalogues(client):
    modes = client.get("/v1/failure-modes").json()
    assert any(m["id"] == "operator.matmul_kshift" for m in modes)
    zh = {m["id"]: m["title"] for m in client.get("/v1/failure-modes?lang=zh").json()}
    assert zh["operator.matmul_kshift"] != {m["id"]: m["title"] for m in modes}["operator.matmul_kshift"]
    rules = client.get("/v1/rules").json()
    assert [r["id"] for r in rules][:3] == ["ASK-001", "ASK-002", "ASK-003"]
    questions = {q["name"]: q for q in client.get("/v1/questions").json()}
    assert questions["same_checkpoint"]["cost"] == "read" and questions["same_checkpoint"]["kind"] == "bool"
    r = client.get("/v1/coverage")
    if r.status_code == 501:
        assert r.json()["error"] == "not_available"
    else:
        assert r.status_code == 200 and "coverage_percent" in r.json()


def test_bearer_token(tmp_path):
    with TestClient(create_app(make_settings(tmp_path, token="s3cret"))) as c:
        assert c.get("/healthz").status_code == 200  # health stays open for probes
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic czNjcmV0"}):
            r = c.get("/v1/rules", headers=headers)
            assert r.status_code == 401 and r.json()["error"] == "unauthorized"
            assert r.headers["www-authenticate"] == "Bearer"
        assert c.post("/v1/sessions", json={}).status_code == 401
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            r = c.post("/v1/diagnose", json={"facts": []}, headers=headers)
            assert r.status_code == 401 and r.json()["error"] == "unauthorized"
        # with the token the request is read (and an empty list of facts refused as such)
        r = c.post("/v1/diagnose", json={"facts": []}, headers={"Authorization": "Bearer s3cret"})
        assert r.status_code == 400 and r.json()["error"] != "unauthorized"
        assert c.get("/v1/rules", headers={"Authorization": "Bearer s3cret"}).status_code == 200


def test_request_size_limit(tmp_path):
    with TestClient(create_app(make_settings(tmp_path, max_request_bytes=10_000))) as c:
        big = {"facts": [KSHIFT], "pad": "x" * 20_000}
        r = c.post("/v1/diagnose", json=big)
        assert r.status_code == 413 and r.json()["error"] == "request_too_large"

        def chunks():  # no Content-Length: counted while streaming
            for _ in range(20):
                yield b"x" * 1000
        r = c.post("/v1/diagnose", content=chunks(), headers={"content-type": "application/zip"})
        assert r.status_code == 413


def test_fact_count_limit(tmp_path):
    with TestClient(create_app(make_settings(tmp_path, max_facts=3))) as c:
        facts = [{"type": "run", "role": "target", "name": f"t{i}"} for i in range(5)]
        r = c.post("/v1/diagnose", json={"facts": facts})
        assert r.status_code == 413 and r.json()["error"] == "too_many_facts"


def test_slow_diagnosis_times_out_with_408_and_the_loop_keeps_serving(tmp_path, monkeypatch):
    import precdx.service.app as app_module

    release = threading.Event()
    real = app_module.diagnose_job

    def slow_job(*args):
        release.wait(10)
        return real(*args)

    monkeypatch.setattr(app_module, "diagnose_job", slow_job)
    app = create_app(make_settings(tmp_path, request_timeout=1.0, max_jobs=2))

    async def scenario():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
            slow = asyncio.create_task(c.post("/v1/diagnose", json={"facts": [KSHIFT]}))
            await asyncio.sleep(0.2)
            started = time.monotonic()
            health = await c.get("/healthz")  # answered while the diagnosis blocks its thread
            quick = time.monotonic() - started
            r = await slow
            release.set()
            return health, quick, r

    health, quick, r = asyncio.run(scenario())
    assert health.status_code == 200 and quick < 0.9
    assert r.status_code == 408 and r.json()["error"] == "timeout"


def test_no_server_error_leaks_a_traceback(tmp_path, monkeypatch):
    import precdx.service.app as app_module

    def broken(*args):
        raise RuntimeError("boom at /secret/path")

    monkeypatch.setattr(app_module, "diagnose_job", broken)
    with TestClient(create_app(make_settings(tmp_path)), raise_server_exceptions=False) as c:
        r = c.post("/v1/diagnose", json={"facts": [KSHIFT]})
    assert r.status_code == 500 and r.json()["error"] == "internal_error" and "/secret/path" not in r.text
