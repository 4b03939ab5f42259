"""Property-based run against the served OpenAPI spec (schemathesis): every generated request,
valid or not, gets a documented, well-formed answer and never a server error."""
from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

schemathesis = pytest.importorskip("schemathesis", reason="schemathesis not installed (pip install schemathesis)")

from precdx.service.app import create_app  # noqa: E402
from tests.service.conftest import make_settings  # noqa: E402

_TMP = tempfile.mkdtemp(prefix="precdx-fuzz-")
atexit.register(shutil.rmtree, _TMP, True)
TOKEN = "fuzz-token"
APP = create_app(make_settings(Path(_TMP), max_extracted_bytes=2_000_000, max_request_bytes=1_000_000,
                               request_timeout=20.0, token=TOKEN))
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)


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


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_never_fails_on_generated_requests(case):
    case.call_and_validate(excluded_checks=EXCLUDED)
