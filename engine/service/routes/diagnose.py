"""`POST /v1/diagnose`: facts and answers as JSON (the output of `precdx facts --format json`
as it is), an uploaded zip / tar of run folders, or both (multipart); the diagnosis as JSON,
as the full HTML report, or as a chat message (markdown, text, slack, lark) that links the full
report. The work runs in the job pool through `diagnose_job` (precdx.api.diagnose_case on the
unpacked upload)."""
from __future__ import annotations

from contextlib import nullcontext
from typing import BinaryIO

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from precdx.diagnosis import Diagnosis
from precdx.errors import Warnings
from precdx.service.errors import ServiceError
from precdx.service.models import DiagnoseRequest, Format, Lang, MaxLength
from precdx.service.reports import ReportStore, new_id
from precdx.service.routes.chat import Answer, languages, reply_of, respond, store_report, wants_report
from precdx.service.routes.common import ERRORS, AppSettings, Reports, Runner, json_body, reply_responses
from precdx.service.routes.uploads import read_upload, unpacked
from precdx.service.settings import Settings

router = APIRouter()


# ---------------------------------------------------------------- the work done in the pool
def diagnose_job(settings: Settings, request: DiagnoseRequest, archive: BinaryIO | None, lang: str,
                 deadline: float, fmt: str = "json", reports: ReportStore | None = None) -> Answer:
    from precdx.api import diagnose_case
    from precdx.diagnosis import diagnose
    from precdx.service.sessions import answers_to_facts, limit_echo, parse_facts

    warnings = Warnings()
    for w in request.warnings:  # the collection that made the facts (precdx facts --format json)
        warnings.add(w.message, path=w.path, line=w.line, source=w.source)
    given = parse_facts(request.facts, max_facts=settings.max_facts, max_fact_bytes=settings.max_fact_bytes)
    answered, _ = answers_to_facts(request.answers, source="request")
    if archive is None and not given and not answered:
        raise ServiceError(400, "nothing_to_diagnose", "give facts, answers or an archive of run folders")
    report = reports is not None and wants_report(fmt, reports)
    with unpacked(archive, settings, deadline) if archive is not None else nullcontext() as up:
        result = diagnose_case(**(up.inputs() if up else {}), facts=[*given, *answered], engine=settings.engine,
                               lang=lang, rules_path=settings.rules_path, warnings=warnings, series=report)
        if up:
            up.require_recognised(result.case)
        diags = [result.diagnosis]
        for other in languages(fmt, lang)[1:]:
            carried = Warnings()
            carried.extend(warnings)
            diags.append(diagnose(result.facts, engine=settings.engine, lang=other, rules_path=settings.rules_path,
                                  warnings=carried))
        if up:  # paths inside the upload are reported relative to the case
            diags = [Diagnosis.model_validate_json(up.relative(d.model_dump_json())) for d in diags]
        diags[0] = limit_echo(diags[0], settings.max_echo_bytes)  # a huge fact is not sent back whole
        html = None
        if report:
            from precdx.render.html import render_html
            html = render_html(diags[0], series=result.series)
    answer = Answer(diags[0], [reply_of(d, fmt) for d in diags] if fmt not in ("json", "html") else [], html)
    if html is not None and fmt != "html":
        answer.report_id = new_id()
        store_report(reports, answer.report_id, lambda: html)
    return answer


# ---------------------------------------------------------------- the route
@router.post("/diagnose", tags=["diagnose"], response_model=None,
             responses={**reply_responses(Diagnosis), **ERRORS},
             summary="Diagnose facts and/or an uploaded zip or tar of run folders",
             openapi_extra={"requestBody": {"required": True, "content": {
                 "application/json": json_body("DiagnoseRequest"),
                 "multipart/form-data": {"schema": {"type": "object", "properties": {
                     "archive": {"type": "string", "format": "binary",
                                 "description": "zip or tar(.gz/.bz2/.xz) of a case: baseline/, target/, ..."},
                     "facts": {"type": "string", "description": "JSON: a list of facts, or {facts, answers}"}}}},
                 **{t: {"schema": {"type": "string", "format": "binary"}}
                    for t in ("application/zip", "application/gzip", "application/x-tar")},
             }}})
async def post_diagnose(request: Request, settings: AppSettings, runner: Runner, reports: Reports,
                        fmt: Format = Query("json", alias="format"), lang: Lang = "en",
                        max_length: MaxLength = None) -> Response:
    deadline = runner.deadline()
    upload = await read_upload(request, settings, DiagnoseRequest)
    try:
        job = request.app.state.diagnose_job
        answer = await runner.run(job, settings, upload.body, upload.archive, lang, deadline, fmt, reports,
                                  deadline=deadline)
    finally:
        await upload.close()
    return respond(request, settings, fmt, answer, max_length=max_length)
