"""Request and response bodies of the HTTP API (the diagnosis itself is `precdx.diagnosis.Diagnosis`).

Facts are validated by the fact vocabulary (precdx.facts.parse_fact, with its messages); their
JSON Schema here is the discriminated union of the typed fact models (`TypedFact`, one per
fact type, keyed by `type`), so /openapi.json shows every fact type's fields."""
from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, PlainValidator

from precdx.diagnosis import Diagnosis
from precdx.planner.nextbest import Suggestion
from precdx.vocabulary import Lang

# json: the diagnosis (or session state) object; markdown / text: a chat message; slack: a Slack
# message payload; lark: a Feishu / Lark post payload; html: the full report page
Format = Literal["json", "markdown", "text", "slack", "lark", "html"]
CHAT_FORMATS = ("markdown", "text", "slack", "lark")
MaxLength = Annotated[int | None, Field(ge=300, le=1_000_000, description=(
    "cap a chat reply (markdown, text, slack: characters; lark: bytes of the JSON body), cut at hypothesis "
    "boundaries; defaults: slack 12000, lark 20000, markdown and text 16000"))]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorOut(BaseModel):
    error: str = Field(description="short machine-readable code, e.g. invalid_facts, archive_too_large")
    detail: str = Field(description="what was wrong, in words")


# ---------------------------------------------------------------- typed facts (schema)
# What the fact parser also takes for a JSON type (it is lenient: `"yes"` or 1 for true, numbers
# written as text, "nan" / "inf" / "-inf"); the schema lists these forms so it never refuses
# input the service accepts.
LENIENT = {
    "boolean": [{"type": "integer", "enum": [0, 1]},
                {"type": "string", "description": "true / false, yes / no, on / off, 1 / 0"}],
    "integer": [{"type": "string", "description": "the integer written as text"}],
    "number": [{"type": "string", "description": "the number written as text, or nan / inf / -inf"}],
}


def _schema_extensions(schema: dict[str, Any], renamed: dict[str, str] | None = None) -> None:
    """The vocabulary's field metadata as OpenAPI extensions (x-unit, x-matchable), the lenient
    forms of booleans and numbers, and the former names of renamed fields (still accepted,
    marked deprecated)."""
    props = schema.get("properties", {})
    for old, new in (renamed or {}).items():
        if new in props and old not in props:
            props[old] = {**props[new], "deprecated": True, "title": old,
                          "description": f"former name of `{new}` (still accepted)"}
    for prop in props.values():
        if "unit" in prop:
            prop["x-unit"] = prop.pop("unit")
        if "match" in prop:
            prop["x-matchable"] = prop.pop("match")
        if prop.get("type") in LENIENT:
            kind = prop.pop("type")
            prop["anyOf"] = [{"type": kind}, *LENIENT[kind]]
        elif "anyOf" in prop:
            kinds = [alt.get("type") for alt in prop["anyOf"] if "enum" not in alt and "const" not in alt]
            prop["anyOf"] = prop["anyOf"] + [extra for kind in kinds if kind in LENIENT for extra in LENIENT[kind]]


def _extensions_for(renamed: dict[str, str]):
    def extend(schema: dict[str, Any]) -> None:  # one argument: pydantic passes the model too otherwise
        _schema_extensions(schema, renamed)
    return extend


def _typed_fact_models() -> list[type[BaseModel]]:
    """One model per registered fact type: the vocabulary's own model with `type` fixed to its
    name, so the union below is discriminated by `type`."""
    from precdx.facts import REGISTRY

    models = []
    for name in sorted(REGISTRY):
        base = REGISTRY[name].model
        title = "".join(w.capitalize() for w in re.split(r"[_\W]+", name) if w) + "Fact"
        namespace = {
            "__module__": __name__,
            "__doc__": base.__doc__,
            "__annotations__": {"type": Literal[name]},
            "type": Field(description=f"fact type: {name}"),
            "model_config": ConfigDict(title=title, json_schema_extra=_extensions_for(dict(REGISTRY[name].renamed))),
        }
        models.append(type(base)(title, (base,), namespace))
    return models


TYPED_FACT_MODELS = _typed_fact_models()
TypedFact = Annotated[Union[tuple(TYPED_FACT_MODELS)], Field(discriminator="type")]  # type: ignore[valid-type]


def _fact_object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError("a fact is a JSON object with a 'type' (see GET /v1/vocabulary)")
    return value


# validated as an object here and against the vocabulary where it is used (parse_fact), shown as
# the typed union in the schema
FactIn = Annotated[dict[str, Any], PlainValidator(_fact_object, json_schema_input_type=TypedFact)]


class Answer(_Body):
    question: str = Field(description="question name from GET /v1/questions (the `id` of a suggestion)")
    answer: bool | float | str | None = Field(
        description="yes/no (true/false, 'yes', 'no', '是', '否'), a number, or 'skip' / null")


class CollectionWarning(_Body):
    """A problem met while collecting facts (as `precdx facts --format json` lists them)."""

    message: str
    path: str | None = None
    line: int | None = None
    source: str | None = None


class DiagnoseRequest(_Body):
    """Facts and answers to diagnose. The output of `precdx facts --format json` ({facts,
    warnings}) is accepted as it is; its warnings are carried into the diagnosis."""

    facts: list[FactIn] = Field(default_factory=list, description="facts (GET /v1/vocabulary, `precdx facts "
                                                                  "--vocabulary`)")
    answers: list[Answer] = Field(default_factory=list, description="answers to catalogue questions")
    warnings: list[CollectionWarning] = Field(default_factory=list,
                                              description="warnings of the collection that produced the facts")


class SessionCreate(_Body):
    lang: Lang = "en"
    facts: list[FactIn] = Field(default_factory=list)
    answers: list[Answer] = Field(default_factory=list)


class SessionTurn(_Body):
    facts: list[FactIn] = Field(default_factory=list, description="structured facts to add")
    answers: list[Answer] = Field(default_factory=list,
                                  description="answers to questions; a later answer replaces an earlier one")


class UploadOut(BaseModel):
    """What an archive uploaded in this turn gave the session."""

    facts: int = Field(description="facts collected from the archive")
    replaced: int = Field(description="stored facts the archive measured again with another value (the new "
                                      "value is kept)")
    warnings: list[dict[str, Any]] = Field(description="problems met while collecting (files not read, ...)")


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
    upload: UploadOut | None = Field(None, description="set on the turn that uploaded an archive")


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


# ---------------------------------------------------------------- chat payloads (responses)
class SlackText(BaseModel):
    type: Literal["mrkdwn"]
    text: str = Field(max_length=3000)


class SlackSection(BaseModel):
    type: Literal["section"]
    text: SlackText


class SlackMessage(BaseModel):
    """format=slack: the body of Slack's chat.postMessage (add `channel`) or of an incoming
    webhook, posted as it is."""

    text: str = Field(description="the whole reply in Slack mrkdwn (also the notification text)")
    blocks: list[SlackSection] = Field(max_length=50, description="the same reply, one section per part")
    unfurl_links: bool
    unfurl_media: bool


class LarkText(BaseModel):
    tag: Literal["text"]
    text: str
    style: list[Literal["bold", "italic", "underline", "lineThrough"]] | None = None


class LarkLink(BaseModel):
    tag: Literal["a"]
    text: str
    href: str


class LarkPostBody(BaseModel):
    title: str
    content: list[list[Annotated[Union[LarkText, LarkLink], Field(discriminator="tag")]]] = Field(
        description="rows of elements")


class LarkPost(BaseModel):
    zh_cn: LarkPostBody | None = None
    en_us: LarkPostBody | None = None


class LarkContent(BaseModel):
    post: LarkPost


class LarkMessage(BaseModel):
    """format=lark: the body of a Feishu / Lark custom bot webhook, posted as it is (for the
    Open API's im/v1/messages send msg_type "post" with content = JSON of content.post)."""

    msg_type: Literal["post"]
    content: LarkContent


# ---------------------------------------------------------------- vocabulary
class FieldOut(BaseModel):
    kind: str
    description: str
    unit: str | None
    matchable: bool
    choices: list[str] | None = None
    former_names: list[str] | None = Field(None, description="names this field had before (still accepted)")


class FactTypeOut(BaseModel):
    doc: str
    collectors: list[str]
    identity: list[str]
    fields: dict[str, FieldOut]


class CostOut(BaseModel):
    id: str
    en: str
    zh: str


class ModeOut(BaseModel):
    id: str
    area: str
    verdict: str
    title_en: str
    title_zh: str


class VocabularyOut(BaseModel):
    """The closed vocabularies a client needs to build requests and read answers."""

    fact_types: dict[str, FactTypeOut] = Field(description="every fact type and its fields (`precdx facts "
                                                           "--vocabulary --format json`)")
    roles: list[str] = Field(description="the runs of a comparison")
    costs: list[CostOut] = Field(description="cost classes of a next step, cheapest first")
    failure_modes: list[ModeOut]
    formats: list[str] = Field(description="values of `format=` on /v1/diagnose and the session endpoints")
    languages: list[str]
    devices: list[str]
    areas: list[str] = Field(description="areas of the knowledge base and of the rule pack")
    question_kinds: list[str] = Field(description="kinds of answer a question takes (GET /v1/questions)")


# request bodies read by the routes themselves (JSON, multipart or an archive), documented in components
REQUEST_BODIES: dict[str, type[BaseModel]] = {"DiagnoseRequest": DiagnoseRequest, "SessionCreate": SessionCreate,
                                              "SessionTurn": SessionTurn}
# a JSON body may also be a bare list of facts (uploads.parse_body reads it as {"facts": [...]}):
# documented as this component, the facts field of DiagnoseRequest
FACT_LIST = "FactList"
