"""The fact vocabulary's machinery: one registry of typed fact models that rules, lint,
the coverage audit, the docs and the matchers all read.

A fact type is a pydantic model registered with `@fact_type`. Field metadata:
  unit      -- "ratio", "steps", "count", "abs", ... (docs and lint)
  match     -- False for descriptive fields rules must not test (kept out of the matcher)
Every fact carries `type` and an optional `source` (the file it came from: provenance,
never matched). Non-finite numbers are first-class: NaN/Inf parse from floats or the strings
"nan", "inf", "-inf", serialise to those strings, and reach the matcher as null plus a
`<field>__nonfinite` flag (durable-rules cannot carry NaN/Inf).
"""
from __future__ import annotations

import math
import types
from dataclasses import dataclass, field as dc_field
from typing import Annotated, Any, Callable, ClassVar, Iterable, Self, Union, get_args, get_origin

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, ValidationError

from precdx.errors import PrecdxError

NONFINITE_SUFFIX = "__nonfinite"
RESERVED_FIELDS = {"id", "sid", "$s"}


def _parse_num(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("a boolean is not a number")
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("nan", "+nan", "-nan"):
            return math.nan
        if text in ("inf", "+inf", "infinity", "+infinity"):
            return math.inf
        if text in ("-inf", "-infinity"):
            return -math.inf
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"not a number: {value!r}") from None
    return value


def _dump_num(value: float | None) -> Any:
    if value is None:
        return None
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


INT_LIMIT = 2 ** 63 - 1  # counts and steps; a bigger integer is garbage (and no matcher holds it)


def _parse_int(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("a boolean is not an integer")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and abs(value) > INT_LIMIT:
        raise ValueError(f"integer out of range (more than {len(str(INT_LIMIT))} digits)")
    return value


def _parse_bool(value: Any) -> Any:
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("true", "yes", "1", "on"):
            return True
        if text in ("false", "no", "0", "off"):
            return False
        raise ValueError(f"not a boolean: {value!r}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value in (0, 1):
            return bool(value)
        raise ValueError(f"not a boolean: {value!r}")
    return value


# A float that may be NaN/Inf, written "nan"/"inf"/"-inf" in JSON.
Num = Annotated[float, BeforeValidator(_parse_num), PlainSerializer(_dump_num, when_used="json")]
Int = Annotated[int, BeforeValidator(_parse_int)]
Bool = Annotated[bool, BeforeValidator(_parse_bool)]



def F(description: str, *, unit: str | None = None, match: bool = True, default: Any = None,
      was: str | tuple[str, ...] = (), **kw: Any) -> Any:
    """A fact field with its description, unit and whether rules may test it. `was` names the
    field's former name(s), still accepted in input (facts files, HTTP, test cases, make(), rule
    conditions) for one schema version and rewritten to the current name."""
    extra: dict[str, Any] = {"match": match}
    if unit:
        extra["unit"] = unit
    if was:
        extra["was"] = [was] if isinstance(was, str) else list(was)
    return Field(default, description=description, json_schema_extra=extra, **kw)


class Fact(BaseModel):
    """Base of every fact type."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=True, defer_build=True)

    type: str
    source: str | None = F("file (or files) the fact was derived from", match=False)

    # Filled by @fact_type
    fact_name: ClassVar[str] = ""
    collectors: ClassVar[tuple[str, ...]] = ()
    identity: ClassVar[tuple[str, ...]] = ()
    doc: ClassVar[str] = ""

    def key(self) -> tuple:
        """What makes two facts of this type claim the same thing (for contradiction checks)."""
        return (self.type,) + tuple(_hashable(getattr(self, k)) for k in self.identity)

    def content(self) -> dict[str, Any]:
        """The matchable fields with their Python values (NaN kept)."""
        spec = REGISTRY[self.type]
        return {name: getattr(self, name) for name in spec.match_fields}

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)

    @classmethod
    def of(cls, **fields: Any) -> "Self":
        """Build a fact of this type from code (collectors): `ConfigDiff.of(pair=..., ...)`.
        None values are left out (absent), former field names are read as the current ones,
        and anything that breaks the vocabulary raises, naming the type and the field."""
        if not cls.fact_name:
            raise TypeError(f"{cls.__name__} is not a registered fact type")
        return parse_fact({"type": cls.fact_name, **{k: v for k, v in fields.items() if v is not None}},
                          where=f"<collector fact {cls.fact_name}>")  # type: ignore[return-value]


def _hashable(v: Any) -> Any:
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    return v


@dataclass(frozen=True)
class FieldSpec:
    name: str
    kind: str  # "number" | "integer" | "boolean" | "string"
    description: str
    unit: str | None
    match: bool
    choices: tuple[str, ...] | None = None


@dataclass
class FactSpec:
    name: str
    model: type[Fact]
    collectors: tuple[str, ...]
    doc: str
    identity: tuple[str, ...]
    fields: dict[str, FieldSpec] = dc_field(default_factory=dict)
    renamed: dict[str, str] = dc_field(default_factory=dict)  # former field name -> current name

    @property
    def match_fields(self) -> list[str]:
        return [f for f, s in self.fields.items() if s.match]


REGISTRY: dict[str, FactSpec] = {}


def _field_kind(annotation: Any) -> tuple[str, tuple[str, ...] | None]:
    origin = get_origin(annotation)
    if origin is Annotated:
        base = get_args(annotation)[0]
        return _field_kind(base)
    if origin is Union or origin is types.UnionType:
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return _field_kind(args[0])
        kinds = {_field_kind(a)[0] for a in args}
        if kinds <= {"number", "integer"}:
            return "number", None
        raise TypeError(f"unsupported union field type {annotation!r}")
    if str(origin) == "typing.Literal" or getattr(origin, "__name__", "") == "Literal":
        choices = tuple(str(a) for a in get_args(annotation))
        return "string", choices
    if annotation is bool:
        return "boolean", None
    if annotation is int:
        return "integer", None
    if annotation is float:
        return "number", None
    if annotation is str:
        return "string", None
    raise TypeError(f"unsupported fact field type {annotation!r} (use str, Int, Num, Bool or Literal)")


def fact_type(name: str, *, collectors: Iterable[str], identity: Iterable[str] = ()) -> Callable:
    """Register a fact model under `name`. `collectors` names who emits it ("logs", "msprobe",
    "checklist", "probe", "user"); `identity` the fields that say which thing a fact is about,
    so two facts with equal identity but different values are a contradiction."""

    def register(cls: type[Fact]) -> type[Fact]:
        if name in REGISTRY:
            raise RuntimeError(f"fact type {name!r} declared twice")
        cls.fact_name = name
        cls.collectors = tuple(collectors)
        cls.identity = tuple(identity)
        cls.doc = (cls.__doc__ or "").strip()
        spec = FactSpec(name=name, model=cls, collectors=cls.collectors, doc=cls.doc,
                        identity=cls.identity)
        for fname, finfo in cls.model_fields.items():
            if fname in ("type", "source"):
                continue
            if fname in RESERVED_FIELDS or fname.endswith(NONFINITE_SUFFIX):
                raise RuntimeError(f"{name}.{fname}: reserved field name")
            extra = finfo.json_schema_extra or {}
            kind, choices = _field_kind(finfo.annotation)
            for old in extra.get("was", ()):
                if old in cls.model_fields or old in spec.renamed:
                    raise RuntimeError(f"{name}.{fname}: former name {old!r} is taken")
                spec.renamed[old] = fname
            spec.fields[fname] = FieldSpec(
                name=fname, kind=kind, description=finfo.description or "",
                unit=extra.get("unit"), match=extra.get("match", True), choices=choices)
        for old, new in spec.renamed.items():  # reading a former name still works in code
            setattr(cls, old, property(lambda self, _new=new: getattr(self, _new),
                                       doc=f"former name of {new!r} (read-only)"))
        for k in spec.identity:
            if k not in spec.fields:
                raise RuntimeError(f"{name}: identity field {k!r} is not a field")
        REGISTRY[name] = spec
        return cls

    return register


def parse_fact(data: Any, *, where: str = "<facts>") -> Fact:
    """Validate one fact dict against the vocabulary; errors name the place and the field."""
    if not isinstance(data, dict):
        raise PrecdxError(f"a fact must be a mapping, got {type(data).__name__}", path=where)
    ftype = data.get("type")
    if not isinstance(ftype, str):
        raise PrecdxError("a fact needs a 'type' (string)", path=where)
    spec = REGISTRY.get(ftype)
    if spec is None:
        import difflib
        near = difflib.get_close_matches(ftype, REGISTRY.keys(), n=1)
        raise PrecdxError(f"unknown fact type {ftype!r}", path=where,
                          hint=f"did you mean {near[0]!r}?" if near else "see `precdx facts --vocabulary`")
    if spec.renamed:
        data = upgrade_names(spec, data, where)
    try:
        return spec.model.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = ".".join(str(x) for x in err["loc"])
            problems.append(f"{ftype}.{loc}: {err['msg']}")
        raise PrecdxError("invalid fact: " + "; ".join(problems), path=where) from None


def upgrade_names(spec: FactSpec, data: dict[str, Any], where: str = "<facts>") -> dict[str, Any]:
    """A fact mapping with former field names (see F(was=...)) replaced by the current ones;
    giving both names of one field is an error."""
    if not any(old in data for old in spec.renamed):
        return data
    out: dict[str, Any] = {}
    for key, value in data.items():
        new = spec.renamed.get(key, key)
        if new != key and new in data:
            raise PrecdxError(f"invalid fact: {spec.name}.{key} is the former name of {new!r}; give one of them",
                              path=where)
        out[new] = value
    return out


def renamed_field(ftype: str, name: str) -> str:
    """The current name of a (possibly former) field name of a fact type."""
    spec = REGISTRY.get(ftype)
    return spec.renamed.get(name, name) if spec else name


def make(ftype: str, **fields: Any) -> Fact:
    """Build a fact from code by type name; raises if the caller broke the vocabulary. Prefer the
    typed `Model.of(...)` (engine/facts/<area>.py models): tests/facts/test_typed_construction.py
    checks the keywords of both forms against the vocabulary."""
    data = {"type": ftype, **{k: v for k, v in fields.items() if v is not None}}
    return parse_fact(data, where=f"<collector fact {ftype}>")


def match_dict(fact: Fact) -> dict[str, Any]:
    """The flat dict a matcher sees: None fields are omitted, non-finite numbers are omitted
    and flagged with `<field>__nonfinite` ("nan", "inf", "-inf")."""
    out: dict[str, Any] = {"type": fact.type}
    for name, value in fact.content().items():
        if isinstance(value, float) and not math.isfinite(value):
            # omitted (missing => every comparison false) and flagged for `nonfinite` tests
            out[name + NONFINITE_SUFFIX] = _dump_num(value)
        elif value is not None:
            out[name] = value
    return out
