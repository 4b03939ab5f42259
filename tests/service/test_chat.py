"""Chat-ready replies: Slack mrkdwn without GitHub's `**`, Lark posts that validate against the
documented post structure, a length cap that holds with many (and huge) hypotheses and is met at
hypothesis boundaries, and the closing link that resolves to the stored HTML report — on the
app and on a real `precdx serve` with two worker processes."""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

import httpx
import jsonschema
import pytest

from precdx.diagnosis import Diagnosis
from precdx.render import DEFAULT_LENGTH, render, render_chat
from precdx.render.chat import diagnosis_reply
from precdx.render.text import text_reply
from tests.service.conftest import RUNS, Server, TestClient, make_settings

SCENARIOS = Path(__file__).resolve().parents[2].parent / "shared" / "scenarios"
KSHIFT = {"type": "observation", "name": "kshift_off_fixes", "value": True}

# The Feishu / Lark "post" message as a custom bot's webhook takes it (msg_type, content.post,
# one object per locale with a title and rows of elements; the element tags and their fields as
# the message-content documentation lists them).
LARK_POST_SCHEMA = {
    "type": "object",
    "required": ["msg_type", "content"],
    "additionalProperties": False,
    "properties": {
        "msg_type": {"const": "post"},
        "content": {
            "type": "object", "required": ["post"], "additionalProperties": False,
            "properties": {"post": {
                "type": "object", "minProperties": 1, "additionalProperties": False,
                "patternProperties": {"^(zh_cn|en_us|ja_jp)$": {"$ref": "#/$defs/locale"}},
            }},
        },
    },
    "$defs": {
        "locale": {
            "type": "object", "required": ["content"], "additionalProperties": False,
            "properties": {"title": {"type": "string"},
                           "content": {"type": "array", "items": {"type": "array", "minItems": 1,
                                                                  "items": {"$ref": "#/$defs/element"}}}},
        },
        "element": {"oneOf": [
            {"type": "object", "required": ["tag", "text"], "additionalProperties": False,
             "properties": {"tag": {"const": "text"}, "text": {"type": "string"}, "un_escape": {"type": "boolean"},
                            "style": {"type": "array", "items": {"enum": ["bold", "underline", "lineThrough",
                                                                          "italic"]}}}},
            {"type": "object", "required": ["tag", "text", "href"], "additionalProperties": False,
             "properties": {"tag": {"const": "a"}, "text": {"type": "string"},
                            "href": {"type": "string", "pattern": "^https?://"},
                            "style": {"type": "array"}}},
            {"type": "object", "required": ["tag", "user_id"],
             "properties": {"tag": {"const": "at"}, "user_id": {"type": "string"}}},
            {"type": "object", "required": ["tag", "image_key"],
             "properties": {"tag": {"const": "img"}, "image_key": {"type": "string"}}},
        ]},
    },
}


def _without_code(mrkdwn: str) -> str:
    return re.sub(r"`[^`\n]*`", "", mrkdwn)


@lru_cache(maxsize=None)
def _scenario(case: str, lang: str) -> Diagnosis:
    from precdx.api import diagnose_case

    if not (SCENARIOS / case).is_dir():
        pytest.skip(f"scenario {case} not available")
    return diagnose_case(str(SCENARIOS / case), engine="python", lang=lang).diagnosis


def _many(n: int = 120, evidence_chars: int = 0) -> Diagnosis:
    """A real diagnosis with `n` ranked hypotheses (and, optionally, a huge evidence text)."""
    base = _scenario("case-01", "en")
    top = base.hypotheses[0]
    hyps = []
    for i in range(n):
        ev = [e.model_copy(update={"text": f"evidence {i}: " + ("x" * evidence_chars if evidence_chars else e.text)})
              for e in top.evidence]
        hyps.append(top.model_copy(update={"title": f"Hypothesis number {i + 1}", "failure_mode": f"mode.h{i + 1}",
                                           "score": round(1 - i / (n + 1), 3), "evidence": ev}))
    return base.model_copy(update={"hypotheses": hyps})


def _shown(text: str) -> list[int]:
    return [int(m) for m in re.findall(r"Hypothesis number (\d+)", text)]


# ---------------------------------------------------------------- Slack
@pytest.mark.parametrize("case", ["case-01", "case-05", "case-13", "case-19"])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_slack_mrkdwn_never_uses_github_bold(case, lang):
    diag = _scenario(case, lang)
    msg = json.loads(render(diag, "slack", report_url="https://precdx.example/v1/reports/abcdefghijklmnopqrstuvwx.html"))
    assert set(msg) == {"text", "blocks", "unfurl_links", "unfurl_media"}
    texts = [msg["text"]] + [b["text"]["text"] for b in msg["blocks"]]
    for text in texts:
        assert "**" not in _without_code(text), text
    assert msg["text"].startswith(f"*{'❌' if diag.verdict == 'misaligned' else ''}")  # Slack bold: one asterisk
    assert all(b["type"] == "section" and b["text"]["type"] == "mrkdwn" and 0 < len(b["text"]["text"]) <= 3000
               for b in msg["blocks"])
    assert msg["text"] == "\n\n".join(b["text"]["text"] for b in msg["blocks"]) or len(msg["blocks"]) > 1
    assert msg["blocks"][-1]["text"]["text"].endswith(
        f"<https://precdx.example/v1/reports/abcdefghijklmnopqrstuvwx.html|{'完整报告' if lang == 'zh' else 'Full report'}>")


def test_slack_escapes_its_control_characters():
    diag = _scenario("case-01", "en")
    diag = diag.model_copy(update={"summary": "loss <1e-3 & grad > 5 *not bold*"})
    text = json.loads(render(diag, "slack"))["text"]
    assert "loss &lt;1e-3 &amp; grad &gt; 5 *not bold*" in text  # & < > escaped; the rest is Slack's own text


# ---------------------------------------------------------------- Lark
@pytest.mark.parametrize("case", ["case-01", "case-05", "case-19"])
def test_lark_post_validates_and_carries_both_languages(case):
    en, zh = _scenario(case, "en"), _scenario(case, "zh")
    body = render(zh, "lark", translations=[en], report_url="https://precdx.example/v1/reports/abcdefghijklmnop.html")
    msg = json.loads(body)
    jsonschema.validate(msg, LARK_POST_SCHEMA)
    post = msg["content"]["post"]
    assert set(post) == {"zh_cn", "en_us"}
    zh_text = "".join(e.get("text", "") for row in post["zh_cn"]["content"] for e in row)
    en_text = "".join(e.get("text", "") for row in post["en_us"]["content"] for e in row)
    assert re.search(r"[\u4e00-\u9fff]", zh_text) and zh.hypotheses[0].title in zh_text
    assert en.hypotheses[0].title in en_text and not re.search(r"[\u4e00-\u9fff]", post["en_us"]["title"])
    for locale in post.values():
        last = locale["content"][-1]
        assert last[-1] == {"tag": "a", "text": last[-1]["text"],
                            "href": "https://precdx.example/v1/reports/abcdefghijklmnop.html"}
    assert len(body.encode()) <= DEFAULT_LENGTH["lark"]


# ---------------------------------------------------------------- the cap
@pytest.mark.parametrize("fmt", ["markdown", "text", "slack", "lark"])
@pytest.mark.parametrize("cap", [1_000, 2_500, 9_000])
def test_the_cap_holds_with_many_hypotheses_and_cuts_at_their_boundaries(fmt, cap):
    diag = _many(120)
    url = "https://precdx.example/v1/reports/abcdefghijklmnopqrstuvwx.html"
    replies = [text_reply(diag, max_hypotheses=120) if fmt == "text" else diagnosis_reply(diag, max_hypotheses=120)]
    body = render_chat(fmt, replies, max_length=cap, report_url=url)
    if fmt == "slack":
        msg = json.loads(body)
        size, shown_text = len(msg["text"]), msg["text"]
        assert len(msg["blocks"]) <= 50 and all(len(b["text"]["text"]) <= 3000 for b in msg["blocks"])
    elif fmt == "lark":
        size = len(body.encode())
        shown_text = "".join(e["text"] for row in json.loads(body)["content"]["post"]["en_us"]["content"] for e in row)
    else:
        size, shown_text = len(body.rstrip("\n")), body
    assert size <= cap, (fmt, cap, size)
    shown = _shown(shown_text)
    assert shown and shown == list(range(1, len(shown) + 1))  # a prefix of the ranking, in order
    assert len(shown) < 120
    left = 120 - len(shown)
    assert f"{left} more hypothes" in shown_text  # the footer says what was left out
    assert shown_text.rstrip().endswith(("Full report", url, f"{url})", f"{url}|Full report>"))


@pytest.mark.parametrize("fmt", ["markdown", "slack", "lark"])
def test_an_essential_part_after_the_ranking_keeps_its_room(fmt):
    """A session's next question comes after the hypotheses; a tight cap drops hypotheses, not it."""
    from precdx.render.chat import Part, bold, plain

    reply = diagnosis_reply(_many(60), max_hypotheses=60)
    reply.parts.append(Part("session", [[bold("Next question"), plain(" (same_checkpoint): is it the same?")]],
                            essential=True))
    body = render_chat(fmt, [reply], max_length=2_500, report_url="https://precdx.example/r.html")
    assert "Next question" in body and "(same_checkpoint)" in body
    assert 0 < len(_shown(body)) < 60


def test_a_huge_hypothesis_is_shortened_to_the_slack_section_limit():
    diag = _many(3, evidence_chars=50_000)
    msg = json.loads(render(diag, "slack"))
    assert all(len(b["text"]["text"]) <= 3000 for b in msg["blocks"])
    assert len(msg["text"]) <= DEFAULT_LENGTH["slack"]
    assert _shown(msg["text"])[:1] == [1] and "…" in msg["text"]


def test_a_cap_too_small_for_a_reply_is_refused(client):
    r = client.post("/v1/diagnose?format=slack&max_length=100", json={"facts": [KSHIFT]})
    assert r.status_code == 422 and r.json()["error"] == "invalid_request"


def test_uncapped_markdown_and_text_keep_their_shape():
    diag = _scenario("case-05", "en")
    assert render(diag, "markdown").startswith("**❌ misaligned** — ")
    text = render(diag, "text")
    assert text.startswith("Verdict: MISALIGNED\n") and "Full report" not in text and "Not shown" not in text


# ---------------------------------------------------------------- the service: replies and their link
def _link(r: httpx.Response) -> str:
    header = r.headers["link"]
    assert header.endswith('; rel="alternate"; type="text/html"')
    return header[1:header.index(">")]


@pytest.mark.parametrize("fmt,media", [("slack", "application/json"), ("lark", "application/json"),
                                       ("markdown", "text/markdown"), ("text", "text/plain")])
def test_every_chat_format_links_the_full_report(client, fmt, media):
    r = client.post(f"/v1/diagnose?format={fmt}&lang=zh", json={"facts": [*RUNS, KSHIFT]})
    assert r.status_code == 200 and r.headers["content-type"].startswith(media), r.text
    url = _link(r)
    assert url in r.text and re.fullmatch(r"http://testserver/v1/reports/[A-Za-z0-9_-]{24}\.html", url)
    if fmt == "lark":
        jsonschema.validate(r.json(), LARK_POST_SCHEMA)
        assert set(r.json()["content"]["post"]) == {"zh_cn", "en_us"}
    page = client.get(url)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "operator.matmul_kshift" in page.text and "<script" not in page.text
    assert "default-src 'none'" in page.headers["content-security-policy"]


def test_format_json_and_html_need_no_link(client):
    r = client.post("/v1/diagnose?format=html", json={"facts": [*RUNS, KSHIFT]})
    assert r.status_code == 200 and r.text.startswith("<!DOCTYPE html>") and "link" not in r.headers
    assert "link" not in client.post("/v1/diagnose", json={"facts": [KSHIFT]}).headers


def test_report_link_uses_the_public_url_and_needs_no_token(tmp_path):
    from precdx.service.app import create_app

    settings = make_settings(tmp_path, token="s3cret", public_url="https://precdx.corp.example/api/")
    with TestClient(create_app(settings)) as c:
        auth = {"Authorization": "Bearer s3cret"}
        r = c.post("/v1/diagnose?format=markdown", json={"facts": [KSHIFT]}, headers=auth)
        url = _link(r)
        assert url.startswith("https://precdx.corp.example/api/v1/reports/") and f"]({url})" in r.text
        path = url[len("https://precdx.corp.example/api"):]
        assert c.get(path).status_code == 200  # a browser opening the chat link has no token
        assert c.get("/v1/vocabulary").status_code == 401  # the API still wants it
        missing = c.get("/v1/reports/AAAAAAAAAAAAAAAAAAAAAAAA.html")
        assert missing.status_code == 404 and missing.json()["error"] == "report_not_found"
        assert c.get("/v1/reports/short.html").status_code == 422


def test_reports_can_be_turned_off_and_expire(tmp_path, monkeypatch):
    from precdx.service.app import create_app

    with TestClient(create_app(make_settings(tmp_path, report_ttl=0))) as c:
        r = c.post("/v1/diagnose?format=slack", json={"facts": [KSHIFT]})
        assert r.status_code == 200 and "link" not in r.headers and "/v1/reports/" not in r.text
    with TestClient(create_app(make_settings(tmp_path, report_ttl=60, max_reports=2))) as c:
        urls = [_link(c.post("/v1/diagnose?format=text", json={"facts": [KSHIFT]})) for _ in range(3)]
        status = [c.get(u).status_code for u in urls]
        assert status == [404, 200, 200]  # at most two kept: the oldest went first
        import time as clock

        later = clock.time() + 61
        monkeypatch.setattr("precdx.service.reports.time.time", lambda: later)
        assert c.get(urls[-1]).status_code == 404


@pytest.mark.slow
def test_the_link_resolves_on_a_real_server_with_two_workers(tmp_path):
    server = Server(f"sqlite:///{tmp_path / 'store.sqlite3'}", workers=2)
    try:
        urls = []
        with httpx.Client(base_url=server.url, timeout=60) as c:
            for fmt in ("slack", "lark", "markdown", "text"):
                r = c.post(f"/v1/diagnose?format={fmt}", json={"facts": [*RUNS, KSHIFT]})
                assert r.status_code == 200, r.text
                url = _link(r)
                assert url.startswith(server.url + "/v1/reports/") and url in r.text
                urls.append(url)
            # each link is served by whichever worker takes the connection: the report is in the store
            for url in urls * 3:
                with httpx.Client(timeout=30) as fresh:
                    page = fresh.get(url)
                assert page.status_code == 200 and "operator.matmul_kshift" in page.text
    finally:
        server.stop()
