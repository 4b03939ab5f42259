"""Health and catalogues: `GET /healthz` (at the root, never behind the token) and, under /v1,
the vocabulary, the failure modes, rules, questions and the coverage audit."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from precdx import __version__
from precdx.service.errors import ServiceError
from precdx.service.models import ErrorOut, FailureModeOut, Health, Lang, QuestionOut, RuleOut, VocabularyOut
from precdx.service.routes.common import AppSettings, Runner, Store, json_response

health = APIRouter()
catalogue = APIRouter()


@health.get("/healthz", response_model=Health, tags=["service"], responses={503: {"model": ErrorOut}})
async def healthz(settings: AppSettings, store: Store, runner: Runner) -> Response:
    try:
        await runner.run(store.ping)
    except Exception as exc:  # the store is down: say so, do not crash
        if isinstance(exc, ServiceError):
            raise
        raise ServiceError(503, "store_unavailable", f"session store unavailable: {type(exc).__name__}") from None
    return json_response(Health(status="ok", version=__version__, store=store.backend, engine=settings.engine))


@catalogue.get("/vocabulary", response_model=VocabularyOut, tags=["catalogue"], response_model_exclude_unset=True,
               summary="Fact types and their fields, roles, cost classes, failure modes, formats, languages")
async def vocabulary() -> Any:
    from typing import get_args

    from precdx import vocabulary as v
    from precdx.facts.describe import vocabulary_json
    from precdx.modes import mode_catalog
    from precdx.service.models import Format

    modes = sorted(mode_catalog().values(), key=lambda m: m.id)
    return VocabularyOut(
        fact_types=vocabulary_json(), roles=list(v.ROLES),
        costs=[{"id": c, "en": v.COST_LABELS[c], "zh": v.COST_LABELS_ZH[c]} for c in v.COST_CLASSES],
        failure_modes=[{"id": m.id, "area": m.area, "verdict": m.verdict, "title_en": m.title("en"),
                        "title_zh": m.title("zh")} for m in modes],
        formats=list(get_args(Format)), languages=list(v.LANGS), devices=list(v.DEVICES), areas=list(v.AREAS),
        question_kinds=list(get_args(QuestionOut.model_fields["kind"].annotation)))


@catalogue.get("/failure-modes", response_model=list[FailureModeOut], tags=["catalogue"])
async def failure_modes(lang: Lang = "en") -> Any:
    from precdx.modes import mode_catalog

    return [FailureModeOut(id=m.id, title=m.title(lang), area=m.area, verdict=m.verdict,
                           references=list(m.references)) for m in sorted(mode_catalog().values(), key=lambda m: m.id)]


@catalogue.get("/rules", response_model=list[RuleOut], tags=["catalogue"])
async def rules(settings: AppSettings, runner: Runner, lang: Lang = "en") -> Any:
    from precdx.diagnosis import get_matcher

    pack, _ = await runner.run(get_matcher, settings.engine, settings.rules_path)
    return [RuleOut(id=r.id, name=r.rule.name, status=r.rule.status, stage=r.rule.stage,
                    failure_modes=list(r.rule.failure_modes), against=list(r.rule.against), symptom=r.rule.symptom,
                    title=r.rule.title.get(lang)) for r in pack.rules]


@catalogue.get("/questions", response_model=list[QuestionOut], tags=["catalogue"])
async def questions(lang: Lang = "en") -> Any:
    from precdx.facts.core import OBSERVATIONS
    from precdx.planner.costs import observation_cost

    return [QuestionOut(name=name, kind=kind, text=zh if lang == "zh" else en, cost=observation_cost(name))
            for name, (kind, en, zh) in OBSERVATIONS.items()]


@catalogue.get("/coverage", tags=["catalogue"], responses={501: {"model": ErrorOut}},
               response_model=dict[str, Any])
async def coverage(request: Request, settings: AppSettings, runner: Runner) -> Any:
    try:
        from precdx.audit import build_audit
    except ImportError:
        raise ServiceError(501, "not_available", "the coverage audit is not part of this installation") from None
    cache = request.app.state.coverage  # one audit per app: the rule pack does not change while it runs
    if "report" not in cache:
        cache["report"] = await runner.run(build_audit, settings.rules_path)
    return cache["report"]
