"""Chat sessions: facts and answers over several turns, the next question, expiry, isolation
between sessions, the same store code on SQLite and on a real PostgreSQL server, and sessions
surviving a restart of `precdx serve`."""
from __future__ import annotations

import threading
import time

import httpx
import pytest

from precdx.service.app import create_app
from precdx.service.store import SessionStore, describe_url
from precdx.errors import PrecdxError
from tests.service.conftest import RUNS, Server, TestClient, make_settings


def _answer(q: str, a) -> dict:
    return {"answers": [{"question": q, "answer": a}]}


def test_a_session_from_no_fact_asks_the_symptom_class_first(client):
    """A chat that starts from what a person says: the first question is which symptom they see;
    a yes is the symptom (the verdict follows from it), and the next question is about a cause."""
    from precdx.differential import SYMPTOM_QUESTIONS

    state = client.post("/v1/sessions", json={"facts": []}).json()
    assert state["next_question"]["id"] in {*SYMPTOM_QUESTIONS, "downstream_metric_gap"}
    state = client.post(f"/v1/sessions/{state['session_id']}/turns", json=_answer("target_loss_nan", "yes")).json()
    assert state["diagnosis"]["verdict"] == "misaligned"
    assert "nan_overflow" in state["diagnosis"]["profile"]["symptoms"]
    assert state["next_question"] is None or state["next_question"]["id"] not in {
        *SYMPTOM_QUESTIONS, "downstream_metric_gap", "generation_never_stops", "wrong_first_token"}


def test_a_chat_consultation_over_several_turns(client):
    r = client.post("/v1/sessions", json={"facts": RUNS})
    assert r.status_code == 201
    state = r.json()
    sid = state["session_id"]
    assert state["turns"] == 1 and state["dominant"] is None
    assert state["next_question"]["id"] == "same_checkpoint" and state["next_question"]["answer"] == "yes_no"
    r = client.post(f"/v1/sessions/{sid}/turns", json=_answer("same_checkpoint", "yes"))
    state = r.json()
    assert state["turns"] == 2 and state["next_question"]["id"] != "same_checkpoint"
    r = client.post(f"/v1/sessions/{sid}/turns", json=_answer("kshift_off_fixes", "是"))
    state = r.json()
    assert state["dominant"] == "operator.matmul_kshift" and state["next_question"] is None
    assert state["diagnosis"]["hypotheses"][0]["failure_mode"] == "operator.matmul_kshift"
    assert client.get(f"/v1/sessions/{sid}").json()["facts"] == state["facts"]
    nxt = client.get(f"/v1/sessions/{sid}/next").json()
    assert nxt["dominant"] == "operator.matmul_kshift" and nxt["next_question"] is None


def test_markdown_state_is_ready_for_a_chat_message(client):
    sid = client.post("/v1/sessions", json={"facts": RUNS, "lang": "zh"}).json()["session_id"]
    text = client.get(f"/v1/sessions/{sid}?format=markdown").text
    assert "**下一个问题**（`same_checkpoint`" in text and "是/否/skip" in text and sid in text
    r = client.post(f"/v1/sessions/{sid}/turns?format=markdown", json=_answer("same_checkpoint", "否"))
    assert r.headers["content-type"].startswith("text/markdown") and "**已确定：**" in r.text


def test_a_later_answer_replaces_an_earlier_one_and_skips_are_remembered(client):
    sid = client.post("/v1/sessions", json={}).json()["session_id"]
    client.post(f"/v1/sessions/{sid}/turns", json=_answer("same_checkpoint", "no"))
    state = client.post(f"/v1/sessions/{sid}/turns", json=_answer("same_checkpoint", "yes")).json()
    answers = [f for f in state["facts"] if f["type"] == "observation"]
    assert answers == [{"type": "observation", "name": "same_checkpoint", "value": True, "source": "chat"}]
    assert not state["diagnosis"]["hypotheses"]
    state = client.post(f"/v1/sessions/{sid}/turns", json=_answer("kshift_off_fixes", "skip")).json()
    assert state["skipped"] == ["kshift_off_fixes"]
    assert "kshift_off_fixes" not in [s["id"] for s in state["suggestions"]]
    state = client.post(f"/v1/sessions/{sid}/turns", json=_answer("kshift_off_fixes", True)).json()
    assert state["skipped"] == [] and state["dominant"] == "operator.matmul_kshift"


def test_a_bad_turn_changes_nothing(client):
    sid = client.post("/v1/sessions", json={"facts": RUNS}).json()["session_id"]
    bad = {"facts": [{"type": "run", "role": "target", "name": "target", "device": "gpu"}]}  # contradicts RUNS
    r = client.post(f"/v1/sessions/{sid}/turns", json=bad)
    assert r.status_code == 422 and "contradictory" in r.json()["detail"]
    r = client.post(f"/v1/sessions/{sid}/turns", json=_answer("same_checkpoint", "perhaps"))
    assert r.status_code == 422 and "takes yes, no or skip" in r.json()["detail"]
    state = client.get(f"/v1/sessions/{sid}").json()
    assert state["turns"] == 1 and len(state["facts"]) == 2


def test_unknown_deleted_and_malformed_session_ids(client):
    assert client.get("/v1/sessions/AAAAAAAAAAAAAAAAAAAAAAAA").status_code == 404
    assert client.get("/v1/sessions/bad id!").status_code == 422
    sid = client.post("/v1/sessions", json={}).json()["session_id"]
    assert client.delete(f"/v1/sessions/{sid}").status_code == 204
    r = client.post(f"/v1/sessions/{sid}/turns", json=_answer("same_checkpoint", "yes"))
    assert r.status_code == 404 and r.json()["error"] == "session_not_found"
    assert client.delete(f"/v1/sessions/{sid}").status_code == 404


def test_sessions_expire(tmp_path):
    # the store's clock, not the wall's: a loaded machine must not make the first read late
    now = [1_000_000.0]
    with TestClient(create_app(make_settings(tmp_path, session_ttl=60))) as c:
        c.app.state.store.clock = lambda: now[0]
        sid = c.post("/v1/sessions", json={"facts": RUNS}).json()["session_id"]
        now[0] += 59.0
        assert c.get(f"/v1/sessions/{sid}").status_code == 200
        assert c.post(f"/v1/sessions/{sid}/turns", json=_answer("same_checkpoint", "yes")).status_code == 200
        now[0] += 59.0  # a turn renews the session: 118 s after creation, 59 s after the turn
        assert c.get(f"/v1/sessions/{sid}").status_code == 200
        now[0] += 1.5
        assert c.get(f"/v1/sessions/{sid}").status_code == 404
        r = c.post(f"/v1/sessions/{sid}/turns", json=_answer("overlap_off_fixes", "no"))
        assert r.status_code == 404 and r.json()["error"] == "session_not_found"


def test_sessions_never_see_each_others_facts(client):
    ids = {}
    for i in range(4):
        marker = f"client-{i}-marker"
        ids[marker] = client.post("/v1/sessions", json={"facts": [{"type": "run", "role": "target", "name": marker}]}
                                  ).json()["session_id"]
    errors: list[str] = []

    def chat(marker: str, sid: str) -> None:
        for q in ("same_checkpoint", "overlap_off_fixes", "vanishes_with_dump"):
            text = client.post(f"/v1/sessions/{sid}/turns", json=_answer(q, "yes" if marker.endswith("0-marker") else "no")
                               ).text
            others = [m for m in ids if m != marker and m in text]
            if marker not in text or others:
                errors.append(f"{marker}: saw {others}")

    threads = [threading.Thread(target=chat, args=item) for item in ids.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


# ---------------------------------------------------------------- the store itself, on both back ends
@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 's.db'}"
    return request.getfixturevalue("postgres_url")


def test_store_round_trip_update_expiry_and_isolation(store_url):
    store = SessionStore(store_url, ttl=60)
    try:
        a = store.create("en", [{"type": "run", "role": "target", "name": "a"}])
        b = store.create("zh")
        assert a.id != b.id and store.get(b.id).facts == [] and store.get(b.id).lang == "zh"
        updated = store.update(a.id, lambda s: s.facts.append({"type": "run", "role": "baseline", "name": "a2"}))
        assert updated.turns == 2 and len(store.get(a.id).facts) == 2 and store.get(b.id).facts == []

        def fail(s):
            s.facts.clear()
            raise PrecdxError("rejected")
        with pytest.raises(PrecdxError):
            store.update(a.id, fail)
        assert len(store.get(a.id).facts) == 2  # rolled back
        assert store.update("nope-nope-nope", lambda s: None) is None
        assert store.delete(b.id) and store.get(b.id) is None and not store.delete(b.id)
        short = SessionStore(store_url, ttl=0.01)
        gone = short.create("en")
        time.sleep(0.05)
        assert store.get(gone.id) is None and short.update(gone.id, lambda s: None) is None
        assert short.purge_expired() == 1   # exactly the expired session, and only once
        assert short.purge_expired() == 0
        assert store.get(b.id) is None and store.get(a.id) is not None
        short.close()
    finally:
        store.close()


def test_concurrent_turns_are_serialised(store_url):
    store = SessionStore(store_url, ttl=60)
    try:
        s = store.create("en")

        def add(i: int) -> None:
            for j in range(5):
                store.update(s.id, lambda sess: sess.skipped.append(f"{i}-{j}"))

        threads = [threading.Thread(target=add, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        final = store.get(s.id)
        assert len(final.skipped) == 20 and final.turns == 20  # no lost update
    finally:
        store.close()


def test_two_service_instances_share_sessions_on_postgresql(postgres_url, tmp_path):
    one = create_app(make_settings(tmp_path, db_url=postgres_url))
    two = create_app(make_settings(tmp_path, db_url=postgres_url))
    with TestClient(one) as a, TestClient(two) as b:
        assert a.get("/healthz").json()["store"] == "postgresql"
        sid = a.post("/v1/sessions", json={"facts": RUNS}).json()["session_id"]
        state = b.post(f"/v1/sessions/{sid}/turns", json=_answer("same_checkpoint", "no")).json()
        assert state["dominant"] == "model.weight_init_mismatch"
        assert a.get(f"/v1/sessions/{sid}").json()["turns"] == 2


def test_store_urls():
    assert describe_url("sqlite:////var/x.db") == ("sqlite", "/var/x.db")
    assert describe_url("sqlite:///rel.db") == ("sqlite", "rel.db")
    assert describe_url("postgres://u@h/db")[0] == "postgresql"
    assert describe_url("plain/path.sqlite3") == ("sqlite", "plain/path.sqlite3")
    assert describe_url(None)[1].endswith("sessions.sqlite3")
    for bad in ("mysql://x/y", "sqlite:///:memory:", "sqlite://"):
        with pytest.raises(PrecdxError):
            describe_url(bad)


def test_unreachable_postgresql_is_a_clear_error():
    pytest.importorskip("psycopg")
    with pytest.raises(PrecdxError, match="cannot open the session store"):
        SessionStore("postgresql://nobody@/none?host=/nonexistent-socket-dir&connect_timeout=2")


# ---------------------------------------------------------------- a real server, restarted
def test_sessions_survive_a_server_restart(tmp_path):
    db = f"sqlite:///{tmp_path / 'sessions.sqlite3'}"
    server = Server(db, workers=2, token="t0ken")
    auth = {"Authorization": "Bearer t0ken"}
    try:
        assert httpx.get(server.url + "/v1/rules", timeout=10).status_code == 401
        sid = httpx.post(server.url + "/v1/sessions", json={"facts": RUNS}, headers=auth, timeout=30).json()["session_id"]
        r = httpx.post(f"{server.url}/v1/sessions/{sid}/turns", json=_answer("same_checkpoint", "yes"), headers=auth,
                       timeout=30)
        before = r.json()
        assert before["turns"] == 2
    finally:
        server.stop()
    assert server.proc.returncode is not None
    server = Server(db, workers=1, token="t0ken")
    try:
        after = httpx.get(f"{server.url}/v1/sessions/{sid}", headers=auth, timeout=30).json()
        assert after["facts"] == before["facts"] and after["turns"] == 2
        assert after["next_question"] == before["next_question"]
        r = httpx.post(f"{server.url}/v1/sessions/{sid}/turns", json=_answer("kshift_off_fixes", "yes"), headers=auth,
                       timeout=30)
        assert r.json()["dominant"] == "operator.matmul_kshift"
    finally:
        server.stop()
