"""`GET /v1/reports/{id}.html`: the full report a chat reply links to. Served without the bearer
token (a link posted in a chat opens in a browser); the unguessable id is the key. The page is
self-contained and runs no script: the response forbids scripts and any outside resource."""
from __future__ import annotations

from fastapi import APIRouter
from fastapi import Path as PathParam
from fastapi.responses import Response

from precdx.service.errors import ServiceError
from precdx.service.models import ErrorOut
from precdx.service.reports import ID_PATTERN
from precdx.service.routes.common import Reports, Runner

router = APIRouter()

HEADERS = {
    "Content-Security-Policy": "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; "
                               "form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "private, max-age=3600",
}


@router.get("/v1/reports/{report_id}.html", tags=["reports"], response_class=Response,
            responses={200: {"content": {"text/html": {"schema": {"type": "string"}}},
                             "description": "the full report page"},
                       404: {"model": ErrorOut}, 422: {"model": ErrorOut}},
            summary="The full HTML report a chat reply links to")
async def get_report(reports: Reports, runner: Runner,
                     report_id: str = PathParam(..., pattern=ID_PATTERN,
                                                description="the id in the link of a chat reply")) -> Response:
    html = await runner.run(reports.get, report_id)
    if html is None:
        raise ServiceError(404, "report_not_found", f"no report {report_id!r} (never made or expired)")
    return Response(html, media_type="text/html; charset=utf-8", headers=HEADERS)
