"""Sessions take archives: a bot uploads the user's .zip / .tar.gz of run folders (as the body,
or as a multipart part beside JSON facts); the session's facts are collected from it, with
paths relative to the upload. A later archive updates what it measures again; a hostile archive
changes nothing. Session replies come in every chat format, and deleting a session deletes the
reports its replies linked."""
from __future__ import annotations

import io
import json
import re
import tarfile
from pathlib import Path

import pytest

from tests.service.conftest import RUNS, tar_bytes, zip_bytes
from tests.service.test_chat import LARK_POST_SCHEMA

SCENARIOS = Path(__file__).resolve().parents[2].parent / "shared" / "scenarios"


def _case(name: str) -> Path:
    path = SCENARIOS / name
    if not path.is_dir():
        pytest.skip(f"scenario {name} not available")
    return path


def _tar_of(folder: Path, arcname: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        tf.add(str(folder), arcname=arcname)
    return buf.getvalue()


def _zip_of(folder: Path, prefix: str = "") -> bytes:
    return zip_bytes({prefix + str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
                      if p.is_file()})


def _megatron(n: int, drift: float = 0.0) -> bytes:
    lines = []
    for i in range(10, n * 10 + 1, 10):
        loss = 2.0 + 8.0 * 2.718281828 ** (-i / 120) + drift * i
        lines.append(f" iteration {i:8d}/ {n * 10:8d} | consumed samples: {i * 8:10d} | lm loss: {loss:.6E} | "
                     f"loss scale: 65536.0 | grad norm: 1.000 | number of skipped iterations:   0 | "
                     f"number of nan iterations:   0 |")
    return ("\n".join(lines) + "\n").encode()


def test_a_session_starts_from_an_uploaded_case_archive(client):
    case = _case("case-05")
    r = client.post("/v1/sessions?lang=zh", content=_tar_of(case, "case-05"),
                    headers={"content-type": "application/gzip"})
    assert r.status_code == 201, r.text
    state = r.json()
    assert state["lang"] == "zh" and state["upload"]["facts"] == len(state["facts"]) > 100
    assert state["upload"]["replaced"] == 0
    sources = {f.get("source", "") for f in state["facts"]}
    assert "baseline/train.log" in sources and not any("precdx-upload" in s or s.startswith("/") for s in sources)
    assert {f["role"] for f in state["facts"] if f["type"] == "run"} == {"baseline", "target"}
    # the same facts as the CLI collects from the folder
    from precdx.api import gather

    assert len(gather(str(case)).facts) == len(state["facts"])


def test_archive_and_json_facts_in_one_multipart_turn(client):
    sid = client.post("/v1/sessions", json={}).json()["session_id"]
    archive = _zip_of(_case("case-13"), prefix="upload/")
    answers = {"answers": [{"question": "same_checkpoint", "answer": "yes"}]}
    r = client.post(f"/v1/sessions/{sid}/turns", files={"archive": ("runs.zip", archive, "application/zip")},
                    data={"facts": json.dumps(answers)})
    assert r.status_code == 200, r.text
    state = r.json()
    assert state["turns"] == 1 and state["upload"]["facts"] > 50  # an empty session starts at turn 0
    assert {"type": "observation", "name": "same_checkpoint", "value": True, "source": "chat"} in state["facts"]
    assert client.get(f"/v1/sessions/{sid}").json()["upload"] is None  # said once, on the turn of the upload


def test_a_later_archive_updates_what_it_measures_again(client):
    def runs(target_drift: float, steps: int) -> bytes:
        return tar_bytes([("case/baseline/train.log", _megatron(steps)),
                          ("case/target/train.log", _megatron(steps, drift=target_drift))])

    def compare(state: dict) -> dict:
        found = [f for f in state["facts"] if f["type"] == "loss_compare"]
        assert len(found) == 1
        return found[0]

    first = client.post("/v1/sessions", content=runs(0.0, 40), headers={"content-type": "application/gzip"}).json()
    sid = first["session_id"]
    assert compare(first)["max_rel_err"] == 0
    r = client.post(f"/v1/sessions/{sid}/turns", content=runs(0.02, 80), headers={"content-type": "application/gzip"})
    assert r.status_code == 200, r.text
    state = r.json()
    assert state["upload"]["replaced"] > 0 and compare(state)["max_rel_err"] > 0.05  # the newer measurement
    series = [f for f in state["facts"] if f["type"] == "loss_series"]
    assert len(series) == 2 and all(f["last_step"] == 800 for f in series)  # the newer logs, not both


def test_one_run_without_a_baseline_is_read_as_the_target(client):
    target = _case("case-02") / "target"
    r = client.post("/v1/sessions", content=_tar_of(target, "target"), headers={"content-type": "application/gzip"})
    assert r.status_code == 201, r.text
    runs = [f for f in r.json()["facts"] if f["type"] == "run"]
    assert [(f["role"], f["has_log"]) for f in runs] == [("target", True)]
    # a bare run folder (files at the archive root) too
    r = client.post("/v1/sessions", content=_zip_of(target), headers={"content-type": "application/zip"})
    assert r.status_code == 201 and [f["role"] for f in r.json()["facts"] if f["type"] == "run"] == ["target"]


@pytest.mark.parametrize("archive,status,code", [
    (zip_bytes({"../evil.txt": b"x"}), 400, "bad_archive"),
    (zip_bytes({"notes/readme.txt": b"hello"}), 422, "not_a_case"),
    (b"not an archive at all", 415, "unsupported_archive"),
])
def test_a_bad_archive_changes_nothing(client, archive, status, code):
    sid = client.post("/v1/sessions", json={"facts": RUNS}).json()["session_id"]
    r = client.post(f"/v1/sessions/{sid}/turns", content=archive, headers={"content-type": "application/zip"})
    assert r.status_code == status, r.text
    if code:
        assert r.json()["error"] == code
    assert "precdx-upload" not in r.text
    state = client.get(f"/v1/sessions/{sid}").json()
    assert state["turns"] == 1 and len(state["facts"]) == 2


def test_session_replies_in_every_chat_format_and_delete_takes_their_reports(client):
    sid = client.post("/v1/sessions", json={"facts": RUNS, "lang": "zh"}).json()["session_id"]
    links = []
    for fmt in ("slack", "lark", "markdown", "text"):
        r = client.get(f"/v1/sessions/{sid}?format={fmt}")
        assert r.status_code == 200, r.text
        link = r.headers["link"][1:r.headers["link"].index(">")]
        links.append(link)
        assert link in r.text and sid in r.text and "same_checkpoint" in r.text
    assert len(set(links)) == 1  # one snapshot per turn, stored once
    msg = client.get(f"/v1/sessions/{sid}?format=slack").json()
    assert not any("**" in re.sub(r"`[^`]*`", "", b["text"]["text"]) for b in msg["blocks"])
    lark = client.get(f"/v1/sessions/{sid}?format=lark").json()
    import jsonschema

    jsonschema.validate(lark, LARK_POST_SCHEMA)
    en = "".join(e["text"] for row in lark["content"]["post"]["en_us"]["content"] for e in row)
    assert "Next question" in en and "下一个问题" in "".join(
        e["text"] for row in lark["content"]["post"]["zh_cn"]["content"] for e in row)
    r = client.post(f"/v1/sessions/{sid}/turns?format=markdown",
                    json={"answers": [{"question": "same_checkpoint", "answer": "no"}]})
    turn_link = r.headers["link"][1:r.headers["link"].index(">")]
    assert turn_link != links[0] and client.get(turn_link).status_code == 200
    assert client.get(f"/v1/sessions/{sid}?format=html").text.startswith("<!DOCTYPE html>")
    assert client.delete(f"/v1/sessions/{sid}").status_code == 204
    assert client.get(links[0]).status_code == 404 and client.get(turn_link).status_code == 404


def test_lang_in_query_and_body_must_agree(client):
    r = client.post("/v1/sessions?lang=zh", json={"lang": "en"})
    assert r.status_code == 422 and "lang" in r.json()["detail"]
    assert client.post("/v1/sessions?lang=zh", json={"lang": "zh"}).json()["lang"] == "zh"
    assert client.post("/v1/sessions").json()["lang"] == "en"  # no body at all: an empty session
    # JSON without a content type is read as JSON, as FastAPI reads an undeclared body
    r = client.post("/v1/sessions", content=json.dumps({"lang": "zh"}).encode())
    assert r.status_code == 201 and r.json()["lang"] == "zh"
