"""The API is assembled from one router per concern (engine/service/routes/): every documented
operation is served by the router module that owns it, and a wrong method names the allowed
ones in `Allow`, also for routes of included routers."""
from __future__ import annotations

from precdx.service.routes import diagnose, meta, reports, sessions

OWNERS = {
    ("GET", "/healthz"): meta, ("GET", "/v1/failure-modes"): meta, ("GET", "/v1/rules"): meta,
    ("GET", "/v1/questions"): meta, ("GET", "/v1/coverage"): meta, ("GET", "/v1/vocabulary"): meta,
    ("POST", "/v1/diagnose"): diagnose, ("GET", "/v1/reports/{report_id}.html"): reports,
    ("POST", "/v1/sessions"): sessions, ("GET", "/v1/sessions/{session_id}"): sessions,
    ("POST", "/v1/sessions/{session_id}/turns"): sessions, ("GET", "/v1/sessions/{session_id}/next"): sessions,
    ("DELETE", "/v1/sessions/{session_id}"): sessions,
}


def test_every_operation_comes_from_its_router(client):
    from fastapi.routing import iter_route_contexts

    spec = client.get("/openapi.json").json()
    documented = {(m.upper(), p) for p, ops in spec["paths"].items() for m in ops}
    assert documented == set(OWNERS)
    served = {(m, r.path): r.endpoint.__module__ for r in iter_route_contexts(client.app.routes)
              for m in (r.methods or ()) if (m, r.path) in OWNERS}
    assert served == {k: mod.__name__ for k, mod in OWNERS.items()}


def test_wrong_method_names_the_allowed_ones(client):
    r = client.post("/healthz")
    assert r.status_code == 405 and r.headers["allow"] == "GET"
    r = client.put("/v1/sessions/abcdefgh12")
    assert r.status_code == 405 and r.headers["allow"] == "DELETE, GET"
    assert r.json()["error"] == "method_not_allowed"
