"""What a bot author needs from the API itself: `/v1/diagnose` takes the CLI's own
`precdx facts --format json` output as it is; /openapi.json types every fact (a union
discriminated by `type`); GET /v1/vocabulary lists the closed vocabularies; /docs and /redoc work
air-gapped (no outside host), or are off."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from precdx.facts import REGISTRY
from precdx.facts.describe import vocabulary_json
from tests.service.conftest import REPO, TestClient, make_settings

SCENARIOS = REPO.parent / "shared" / "scenarios"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "cli.py"), *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300)


# ---------------------------------------------------------------- the CLI's facts, as they are
def test_diagnose_takes_the_cli_facts_output_as_it_is(tmp_path):
    from precdx.service.app import create_app

    if not (SCENARIOS / "case-13").is_dir():
        pytest.skip("scenario case-13 not available")
    case = tmp_path / "case"
    shutil.copytree(SCENARIOS / "case-13", case)
    (case / "case.yaml").write_text("changed: [\n")  # broken on purpose: a collection warning
    facts = _cli("facts", str(case), "--format", "json")
    assert facts.returncode == 0, facts.stderr
    output = json.loads(facts.stdout)
    assert output["warnings"] and output["facts"]
    (tmp_path / "facts.json").write_text(facts.stdout)
    cli = _cli("diagnose", "--facts", str(tmp_path / "facts.json"), "--format", "json", "--engine", "python")
    assert cli.returncode == 0, cli.stderr
    expected = json.loads(cli.stdout)
    with TestClient(create_app(make_settings(tmp_path, rules_path=None))) as c:
        r = c.post("/v1/diagnose", content=facts.stdout, headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text
    got = r.json()
    assert [h["failure_mode"] for h in got["hypotheses"]] == [h["failure_mode"] for h in expected["hypotheses"]]
    assert got["verdict"] == expected["verdict"] and len(got["facts"]) == len(output["facts"])
    messages = [w["message"] for w in got["warnings"]]
    assert any("case.yaml not read" in m for m in messages)  # the collection's warnings are carried


def test_unknown_keys_beside_the_facts_are_still_refused(client):
    r = client.post("/v1/diagnose", json={"facts": [], "warning": []})
    assert r.status_code == 422 and "warning" in r.json()["detail"]
    r = client.post("/v1/diagnose", json={"facts": [], "warnings": [{"text": "no message"}]})
    assert r.status_code == 422


def test_every_json_body_may_be_a_bare_list_of_facts(client):
    """As the schema says (FactList): a list is {"facts": list} for a diagnosis, a new session and a
    turn; a JSON scalar is refused."""
    fact = {"type": "observation", "name": "same_checkpoint", "value": False}
    listed, wrapped = (client.post("/v1/diagnose", json=b) for b in ([fact], {"facts": [fact]}))
    assert listed.status_code == 200 and listed.json()["hypotheses"] == wrapped.json()["hypotheses"]
    made = client.post("/v1/sessions", json=[fact])
    assert made.status_code == 201 and [f["name"] for f in made.json()["facts"]] == ["same_checkpoint"]
    turn = client.post(f"/v1/sessions/{made.json()['session_id']}/turns", json=[])
    assert turn.status_code == 200 and turn.json()["turns"] == 2
    assert client.post("/v1/sessions", json=7).status_code == 422


# ---------------------------------------------------------------- typed facts in OpenAPI
def test_openapi_types_every_fact(client):
    spec = client.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    items = schemas["DiagnoseRequest"]["properties"]["facts"]["items"]
    assert items["discriminator"]["propertyName"] == "type"
    mapping = items["discriminator"]["mapping"]
    assert set(mapping) == set(REGISTRY)
    assert {ref["$ref"] for ref in items["oneOf"]} == set(mapping.values())
    for name, ref in mapping.items():
        model = schemas[ref.rsplit("/", 1)[-1]]
        assert model["properties"]["type"]["const"] == name
        assert set(model["properties"]) == {"type", "source", *REGISTRY[name].fields, *REGISTRY[name].renamed}
        assert all(model["properties"][old]["deprecated"] for old in REGISTRY[name].renamed)
        assert model["additionalProperties"] is False
    loss = schemas[mapping["loss_compare"].rsplit("/", 1)[-1]]["properties"]["max_rel_err"]
    assert loss["x-unit"] == "ratio" and loss["x-matchable"] is True
    assert {"type": "number"} in loss["anyOf"] and "nan / inf" in loss["anyOf"][-1]["description"]
    for body in ("SessionCreate", "SessionTurn"):
        assert schemas[body]["properties"]["facts"]["items"] == items
    # each JSON body may also be a bare list of facts (the server reads it as {"facts": [...]})
    assert schemas["FactList"]["type"] == "array" and schemas["FactList"]["items"] == items
    for path, body in (("/v1/diagnose", "DiagnoseRequest"), ("/v1/sessions", "SessionCreate"),
                       ("/v1/sessions/{session_id}/turns", "SessionTurn")):
        content = spec["paths"][path]["post"]["requestBody"]["content"]
        assert content["application/json"]["schema"] == {"anyOf": [{"$ref": f"#/components/schemas/{body}"},
                                                                    {"$ref": "#/components/schemas/FactList"}]}
        assert {"multipart/form-data", "application/zip", "application/gzip"} <= set(content)
    formats = next(p for p in spec["paths"]["/v1/diagnose"]["post"]["parameters"] if p["name"] == "format")
    assert set(formats["schema"]["enum"]) == {"json", "markdown", "text", "slack", "lark", "html"}
    ok = spec["paths"]["/v1/diagnose"]["post"]["responses"]["200"]["content"]
    assert {"application/json", "text/markdown", "text/plain", "text/html"} <= set(ok)


def test_a_typed_fact_from_the_schema_is_accepted(client):
    """An example built from the schema alone (required fields, first enum choices) is a valid fact."""
    spec = client.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    facts = []
    for name, ref in schemas["DiagnoseRequest"]["properties"]["facts"]["items"]["discriminator"]["mapping"].items():
        model = schemas[ref.rsplit("/", 1)[-1]]
        facts.append({"type": name, **{k: _example(model["properties"][k]) for k in model.get("required", [])
                                       if k != "type"}})
    from precdx.facts import parse_fact

    for fact in facts:
        parse_fact(fact)  # the vocabulary agrees with what the schema says is enough


def _example(prop: dict):
    if "enum" in prop:
        return prop["enum"][0]
    kinds = [prop.get("type")] + [alt.get("type") for alt in prop.get("anyOf", [])]
    if "number" in kinds or "integer" in kinds:
        return 1
    if "boolean" in kinds:
        return True
    return "x"


# ---------------------------------------------------------------- the vocabulary
def test_vocabulary_endpoint(client):
    from precdx.modes import mode_catalog
    from precdx.vocabulary import AREAS, COST_CLASSES, COST_LABELS_ZH, LANGS, ROLES

    v = client.get("/v1/vocabulary").json()
    assert v["fact_types"] == json.loads(json.dumps(vocabulary_json()))  # `precdx facts --vocabulary`'s data
    cli = _cli("facts", "--vocabulary", "--format", "json")
    assert json.loads(cli.stdout) == v["fact_types"]
    assert v["roles"] == list(ROLES) and v["languages"] == list(LANGS) and v["areas"] == list(AREAS)
    assert [c["id"] for c in v["costs"]] == list(COST_CLASSES) and v["costs"][0]["zh"] == COST_LABELS_ZH["read"]
    assert {m["id"] for m in v["failure_modes"]} == set(mode_catalog())
    assert all(m["title_en"] and m["title_zh"] for m in v["failure_modes"])
    assert {"slack", "lark", "text", "markdown", "html", "json"} == set(v["formats"])
    assert v["question_kinds"] == ["bool", "number"]


# ---------------------------------------------------------------- API pages without a CDN
class _Refs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.refs += [value for key, value in attrs if key in ("src", "href") and value]


def _references(html: str) -> list[str]:
    parser = _Refs()
    parser.feed(html)
    # URLs in inline scripts too (the page's configuration)
    return parser.refs + re.findall(r"""["'](\w+://[^"']+|//[^"']+)["']""", html)


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_api_pages_reference_no_outside_host(client, page):
    r = client.get(page)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    refs = _references(r.text)
    assert refs, "the page loads its script from somewhere"
    outside = [u for u in refs if "://" in u or u.startswith("//")]
    assert not outside, outside
    for ref in refs:
        if ref.startswith("/docs/assets/"):
            asset = client.get(ref)
            assert asset.status_code == 200 and len(asset.content) > 1000, ref
    assert "validatorUrl\": null" in r.text or page == "/redoc"
    assert client.get("/docs/assets/../../etc/passwd").status_code == 404
    assert client.get("/docs/assets/index.html").status_code == 404


def test_without_the_asset_package_docs_is_a_self_contained_page(client, monkeypatch):
    import precdx.service.routes.docs as docs

    monkeypatch.setattr(docs, "asset_folder", lambda: None)
    r = client.get("/docs")
    assert r.status_code == 200 and "<script" not in r.text
    assert not [u for u in _references(r.text) if "://" in u or u.startswith("//")]
    assert "/v1/sessions/{session_id}/turns" in r.text and "LossCompareFact" in r.text
    assert client.get("/redoc", follow_redirects=False).headers["location"] == "/docs"


def test_docs_can_be_off(tmp_path):
    from precdx.errors import PrecdxError
    from precdx.service.app import create_app

    with TestClient(create_app(make_settings(tmp_path, docs="off"))) as c:
        assert c.get("/docs").status_code == 404 and c.get("/redoc").status_code == 404
        assert c.get("/openapi.json").status_code == 200
    with pytest.raises(PrecdxError):
        create_app(make_settings(tmp_path, docs="maybe"))


def test_served_docs_assets_come_from_the_installed_package():
    from precdx.service.routes.docs import ASSETS, asset_folder

    folder = asset_folder()
    if folder is None:
        pytest.skip("fastapi-offline not installed (pip install '.[serve]')")
    assert all((folder / name).is_file() for name in ASSETS)
    assert Path(folder).parts[-2] == "fastapi_offline"
