"""Request and response bodies of the HTTP API (the diagnosis itself is `engine.diagnosis.Diagnosis`)."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.diagnosis import Diagnosis
from engine.planner.nextbest import Suggestion
from engine.vocabulary import Lang

Format = Literal["json", "markdown"]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorOut(BaseModel):
    error: str = Field(description="short machine-readable code, e.g. invalid_facts, archive_too_large")
    detail: str = Field(description="what was wrong, in words")


class Answer(_Body):
    question: str = Field(description="question name from GET /v1/questions (the `id` of a suggestion)")
    answer: bool | float | str | None = Field(
        description="yes/no (true/false, 'yes', 'no', '是', '否'), a number, or 'skip' / null")


class DiagnoseRequest(_Body):
    facts: list[dict[str, Any]] = Field(default_factory=list, description="facts (see `precdx facts --vocabulary`)")
    answers: list[Answer] = Field(default_factory=list, description="answers to catalogue questions")


class SessionCreate(_Body):
    lang: Lang = "en"
    facts: list[dict[str, Any]] = Field(default_factory=list)
    answers: list[Answer] = Field(default_factory=list)


class SessionTurn(_Body):
    facts: list[dict[str, Any]] = Field(default_factory=list, description="structured facts to add")
    answers: list[Answer] = Field(default_factory=list,
                                  description="answers to questions; a later answer replaces an earlier one")


class SessionState(BaseModel):
    session_id: str
    lang: Lang
    turns: int
    created: float = Field(description="Unix time")
    updated: float = Field(description="Unix time of the last turn")
    expires_at: float = Field(description="Unix time after which the session is gone")
    facts: list[dict[str, Any]]
    skipped: list[str] = Field(description="questions answered with skip (not asked again)")
    dominant: str | None = Field(description="the failure mode that clearly dominates, if any")
    next_question: Suggestion | None = Field(description="the most valuable question to ask next")
    suggestions: list[Suggestion] = Field(description="best next evidence (questions, checks, experiments)")
    diagnosis: Diagnosis


class NextOut(BaseModel):
    session_id: str
    dominant: str | None
    next_question: Suggestion | None
    suggestions: list[Suggestion]


class QuestionOut(BaseModel):
    name: str
    kind: Literal["bool", "number"]
    text: str
    cost: str


class FailureModeOut(BaseModel):
    id: str
    title: str
    area: str
    verdict: str
    references: list[str]


class RuleOut(BaseModel):
    id: str
    name: str
    status: str
    stage: str
    failure_modes: list[str]
    against: list[str]
    symptom: str | None
    title: str


class Health(BaseModel):
    status: Literal["ok"]
    version: str
    store: str
    engine: str
