"""`POST /v1/diagnose`: facts and answers as JSON, an uploaded zip / tar of run folders, or both
(multipart); the diagnosis as JSON or chat-ready markdown. The work runs in the job pool through
`diagnose_job` (engine.api.diagnose_case on the unpacked upload)."""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import BinaryIO

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from pydantic import ValidationError

from engine.diagnosis import Diagnosis
from engine.errors import Warnings
from engine.service.errors import ServiceError
from engine.service.limits import check_json_depth
from engine.service.models import DiagnoseRequest, Format, Lang
from engine.service.routes.common import ERRORS, MARKDOWN, AppSettings, Runner, json_response, markdown
from engine.service.settings import Settings

ARCHIVE_TYPES = ("application/zip", "application/x-zip-compressed", "application/x-tar", "application/gzip",
                 "application/x-gzip", "application/x-bzip2", "application/x-xz", "application/octet-stream")

router = APIRouter()


# ---------------------------------------------------------------- the work done in the pool
def diagnose_job(settings: Settings, request: DiagnoseRequest, archive: BinaryIO | None, lang: str,
                 deadline: float) -> Diagnosis:
    from engine.api import diagnose_case
    from engine.service.archive import Limits, case_root, extract
    from engine.service.sessions import answers_to_facts, parse_facts

    warnings = Warnings()
    given = parse_facts(request.facts, max_facts=settings.max_facts, max_fact_bytes=settings.max_fact_bytes)
    answered, _ = answers_to_facts(request.answers, source="request")
    if archive is None and not given and not answered:
        raise ServiceError(400, "nothing_to_diagnose", "give facts, answers or an archive of run folders")
    root = None
    tmp = None
    try:
        if archive is not None:
            tmp = tempfile.mkdtemp(prefix="precdx-upload-")
            extract(archive, Path(tmp), Limits(settings.max_extracted_bytes, settings.max_archive_files, deadline))
            root = str(case_root(Path(tmp)))
        diag = diagnose_case(root, facts=[*given, *answered], engine=settings.engine, lang=lang,
                             rules_path=settings.rules_path, warnings=warnings).diagnosis
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return _without_upload_paths(diag, tmp, root) if tmp and root else diag


def _without_upload_paths(diag: Diagnosis, tmp: str, root: str) -> Diagnosis:
    """Paths inside an upload's temporary folder are reported relative to the case (facts,
    evidence, warnings and texts alike); the server's folders never reach the client."""
    text = diag.model_dump_json()
    for prefix, repl in ((root.rstrip("/") + "/", ""), (tmp.rstrip("/") + "/", ""), (tmp, "<upload>")):
        text = text.replace(json.dumps(prefix)[1:-1], repl)
    return Diagnosis.model_validate_json(text)


# ---------------------------------------------------------------- the route
@router.post("/diagnose", tags=["diagnose"], response_model=None,
             responses={200: {"model": Diagnosis, "content": MARKDOWN}, **ERRORS},
             summary="Diagnose facts and/or an uploaded zip or tar of run folders")
async def post_diagnose(request: Request, settings: AppSettings, runner: Runner,
                        fmt: Format = Query("json", alias="format"), lang: Lang = "en") -> Response:
    deadline = runner.deadline()
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    archive: BinaryIO | None = None
    form = None
    job = request.app.state.diagnose_job
    try:
        if ctype == "application/json" or ctype.endswith("+json"):
            body = parse_body(DiagnoseRequest, await request.body())
        elif ctype in ("multipart/form-data", "application/x-www-form-urlencoded"):
            body, archive, form = await _read_form(request, settings)
        elif ctype in ARCHIVE_TYPES:
            body = DiagnoseRequest()
            archive = await _spool(request)
        else:
            raise ServiceError(415, "unsupported_media_type",
                               "send JSON facts, multipart/form-data (archive, facts) or a zip/tar body")
        diag = await runner.run(job, settings, body, archive, lang, deadline, deadline=deadline)
        from engine.service.sessions import limit_echo
        diag = limit_echo(diag, settings.max_echo_bytes)  # a huge fact is not sent back whole
    finally:
        if archive is not None and form is None:
            archive.close()
        if form is not None:
            await form.close()
    if fmt == "markdown":
        from engine.render.markdown import render_markdown
        return markdown(render_markdown(diag))
    return json_response(diag)


# ---------------------------------------------------------------- request parsing
def parse_body(model, raw: bytes):
    try:
        payload = json.loads(raw.decode("utf-8")) if raw.strip() else {}
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ServiceError(400, "invalid_json", f"the body is not JSON: {exc}") from None
    if isinstance(payload, list):  # a bare list of facts is fine too
        payload = {"facts": payload}
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        parts = [".".join(str(x) for x in e["loc"]) + f": {e['msg']}" for e in exc.errors()[:5]]
        raise ServiceError(422, "invalid_request", "; ".join(parts)) from None


async def _read_form(request: Request, settings: Settings):
    from starlette.datastructures import UploadFile
    from starlette.formparsers import MultiPartException

    try:
        form = await request.form(max_files=1, max_fields=2, max_part_size=settings.max_request_bytes)
    except MultiPartException as exc:
        raise ServiceError(400, "bad_multipart", exc.message) from None
    except (ValueError, KeyError, AssertionError) as exc:
        raise ServiceError(400, "bad_multipart", f"the multipart body could not be parsed: {exc}") from None
    try:
        unknown = sorted(set(form.keys()) - {"archive", "facts"})
        if unknown:
            raise ServiceError(400, "bad_multipart", f"unknown form field(s) {unknown}: use 'archive' and 'facts'")
        archive = form.get("archive")
        if archive is not None and not isinstance(archive, UploadFile):
            raise ServiceError(400, "bad_multipart", "'archive' must be a file upload")
        facts = form.get("facts")
        if isinstance(facts, UploadFile):
            facts = await facts.read()
        if facts:
            check_json_depth(facts, settings.max_json_depth)
        body = parse_body(DiagnoseRequest, facts.encode() if isinstance(facts, str) else (facts or b""))
        return body, (archive.file if archive is not None else None), form
    except BaseException:
        await form.close()
        raise


async def _spool(request: Request) -> BinaryIO:
    spool = tempfile.SpooledTemporaryFile(max_size=8 * 1024 * 1024)
    try:
        async for chunk in request.stream():
            spool.write(chunk)
    except BaseException:
        spool.close()
        raise
    spool.seek(0)
    return spool
