"""Property-based run against the served OpenAPI spec (schemathesis): every generated request,
valid or not, gets a documented, well-formed answer and never a server error.

The schema is loaded lazily, from a fixture: schemathesis builds an operation's test cases --
its coverage phase alone is about 5,000 deterministic requests for each of the three operations
that take a list of facts -- when the test runs, not when the module is collected. A run that
does not include this module (the fast lane, `-k`, another xdist worker) does not pay for them.
The three fact-taking operations are tests of their own, the rest one test.

The three take the same list of facts (one schema, one parser: service/sessions.py parse_facts),
as an object's `facts` or as a bare list (FactList). Its coverage phase -- every boundary and
wrong type of every fact of the union -- runs once, on /v1/diagnose (both forms built, one in eight
of the bare-list bodies sent: `_list_coverage_case`).
The two session operations run the explicit examples and the fuzzing phase (randomised bodies:
facts, answers, lang, archives) with more examples instead (a few seconds each): each of their
requests also plans the session's next question (two dozen simulated diagnoses), so the same
fact variants there cost a minute and a half of the suite and checked nothing /v1/diagnose does
not. (Their fuzzing found the bare list the server took but the schema did not document.)"""
from __future__ import annotations

import zlib

import pytest
from hypothesis import HealthCheck, settings

schemathesis = pytest.importorskip("schemathesis", reason="schemathesis not installed (pip install schemathesis)")

from precdx.service.app import create_app  # noqa: E402
from tests.service.conftest import make_settings  # noqa: E402

TOKEN = "fuzz-token"
# (the two session operations that take facts; see the module's docstring)
CONFIG = schemathesis.config.SchemathesisConfig.from_dict({"operations": [
    {"include-path-regex": r"^/v1/sessions(/\{session_id\}/turns)?$", "phases": {"coverage": {"enabled": False}}}]})
# the operations whose body is a list of facts (the typed fact union): most of the requests
FACT_TAKING = ("/v1/diagnose", "/v1/sessions", "/v1/sessions/{session_id}/turns")


@pytest.fixture(scope="module")
def api_schema(tmp_path_factory):
    app = create_app(make_settings(tmp_path_factory.mktemp("fuzz"), max_extracted_bytes=2_000_000,
                                   max_request_bytes=1_000_000, request_timeout=20.0, token=TOKEN))
    return schemathesis.openapi.from_asgi("/openapi.json", app, config=CONFIG)


schema = schemathesis.pytest.from_fixture("api_schema")


@pytest.fixture(scope="module")
def client(api_schema):
    """One in-process client for every generated request (schemathesis would otherwise build a
    new requests session per request and read the proxy settings from the environment for each,
    a fifth of the run). The app sets no cookies; the jar is emptied after each request anyway,
    so every request starts as on a fresh client. Its auth probes still use their own clients."""
    from schemathesis.python import asgi

    with asgi.get_client(api_schema.app) as c:
        c.trust_env = False  # no proxies or .netrc for an in-process app
        yield c


@pytest.fixture(autouse=True)
def _node_id_for_subtests(request):
    """schemathesis' lazy tests read and rename `node._nodeid` to label each operation's subtest;
    pytest 9.2 keeps the node id elsewhere, so the attribute is given here (reporting only)."""
    if not hasattr(request.node, "_nodeid"):
        request.node._nodeid = request.node.nodeid
    yield


@schemathesis.serializer("application/zip", "application/gzip", "application/x-tar")
def _raw_archive(ctx, value):
    """Generated archive bodies (binary strings) go out as they are."""
    return value if isinstance(value, bytes) else str(value).encode()


@schemathesis.auth(refresh_interval=None)
class BearerToken:
    """Valid requests carry the token; schemathesis drops it itself for its negative auth checks."""

    def get(self, case, context):
        return TOKEN

    def set(self, case, data, context):
        case.headers = case.headers or {}
        case.headers["Authorization"] = f"Bearer {data}"


# Every check except "schema-valid data is accepted": facts are validated against the fact
# vocabulary and for contradictions, which the JSON Schema of a free-form fact list cannot say,
# so a schema-valid but meaningless fact is rightly refused with 422.
EXCLUDED = [schemathesis.checks.positive_data_acceptance]
# The token is one app-wide dependency: every other operation, the two session operations among
# them, still has its requests resent without it (test_api.py checks /v1/diagnose by hand), but
# doing so for each of /v1/diagnose's ten thousand coverage cases was a third of this module.
DIAGNOSE_EXCLUDED = [*EXCLUDED, schemathesis.checks.ignored_auth]
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
SESSION_SETTINGS = settings(SETTINGS, max_examples=150)


def _never_fails(case, client, excluded=EXCLUDED):
    try:
        case.call_and_validate(excluded_checks=excluded, session=client)
    finally:
        client.cookies.clear()


@schema.exclude(method="POST", path=list(FACT_TAKING)).parametrize()
@SETTINGS
def test_api_never_fails_on_generated_requests(case, client):
    _never_fails(case, client)


@schema.include(method="POST", path="/v1/diagnose").parametrize()
@SETTINGS
def test_diagnose_never_fails_on_generated_requests(case, client):
    if _list_coverage_case(case) and zlib.crc32(repr(case.body).encode()) % 8:
        return  # (see _list_coverage_case: one in eight is sent)
    _never_fails(case, client, DIAGNOSE_EXCLUDED)


def _list_coverage_case(case) -> bool:
    """A coverage-phase request whose body is a bare list of facts. The phase builds about as many
    of them as of `{"facts": [...]}` bodies, with the same fact variants (both forms go to one
    parser: service/sessions.py parse_facts), so sending them all doubled the module for nothing
    the object form does not check; a fixed one in eight of them (by their body) still puts the
    bare-list form through the same boundaries, and the fuzzing phase sends both forms."""
    phase = getattr(case.meta, "phase", None)
    return getattr(phase, "name", None) == "coverage" and isinstance(case.body, list)


@schema.include(method="POST", path="/v1/sessions").parametrize()
@SESSION_SETTINGS
def test_session_creation_never_fails_on_generated_requests(case, client):
    _never_fails(case, client)


@schema.include(method="POST", path="/v1/sessions/{session_id}/turns").parametrize()
@SESSION_SETTINGS
def test_session_turns_never_fail_on_generated_requests(case, client):
    _never_fails(case, client)
