"""The rule schema (schema_version 1): what a YAML rule may say.

A rule matches facts (`when`) and then either supports failure modes (`failure_modes`), argues
against some (`against`), or names a symptom class (`symptom`). Conditions:

    when:
      all:   [pattern, ...]      # every pattern binds a distinct fact
      any:   [pattern, ...]      # at least one of these also binds (one alternative each)
      none:  [pattern, ...]      # no fact matches any of these (may reference bound aliases)

    pattern:  {fact: TYPE, as: ALIAS, where: {FIELD: TEST, ...}}
    TEST:     a scalar (equality) or a mapping of operators:
              eq ne lt le gt ge  -- value or {ref: ALIAS.FIELD, scale: k} (join)
              in not_in          -- list of values
              exists             -- true/false (field present with a value)
              nonfinite          -- true/false (the number is NaN or +-Inf)
              matches            -- Python regular expression, full match

Missing fields make every comparison false (also `ne` and `not_in`).
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from precdx.vocabulary import (  # noqa: F401 (declared there)
    COST_CLASSES, COST_LABELS, COST_LABELS_ZH, DEVICES, Cost, Device, Text,
)

SCHEMA_VERSION = 1
OPERATORS = ("eq", "ne", "lt", "le", "gt", "ge", "in", "not_in", "exists", "nonfinite", "matches")
JOIN_OPERATORS = ("eq", "ne", "lt", "le", "gt", "ge")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, defer_build=True)


class Ref(_Strict):
    ref: str = Field(pattern=r"^[A-Za-z_]\w*\.[A-Za-z_]\w*$")
    scale: float | None = None


class Pattern(_Strict):
    fact: str
    alias: str | None = Field(default=None, alias="as", pattern=r"^[A-Za-z_]\w*$")
    where: dict[str, Any] = Field(default_factory=dict)


class When(_Strict):
    all: list[Pattern] = Field(default_factory=list)
    any: list[Pattern] = Field(default_factory=list)
    none: list[Pattern] = Field(default_factory=list)

    @model_validator(mode="after")
    def _has_positive(self) -> "When":
        if not self.all and not self.any:
            raise ValueError("a rule needs at least one pattern under 'all' or 'any'")
        return self


class NextStep(_Strict):
    """One thing a person can do next. `device` lists the accelerators of the diagnosed (target)
    run the step applies to: an NPU-only switch (HCCL_DETERMINISTIC, ascend-dmi, ...) says
    `device: [npu]` and has a GPU/CPU counterpart step beside it. Without the key the step
    applies everywhere; a run of unknown device gets every step."""

    action: Text
    command: str | None = None
    why: Text | None = None
    cost: Cost
    device: list[Device] | None = None

    @field_validator("device")
    @classmethod
    def _devices(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and (not v or len(set(v)) != len(v)):
            raise ValueError("device lists one or more of npu, gpu, cpu, each once")
        return v


class Strength(_Strict):
    """Evidence strength from one bound number: `low` maps to 0.5, `high` to 1.0 (clipped).
    With `log: true` the interpolation is on log10 of the values (orders of magnitude)."""

    field: str = Field(alias="from", pattern=r"^[A-Za-z_]\w*\.[A-Za-z_]\w*$")
    low: float
    high: float
    log: bool = False
    absolute: bool = True

    @model_validator(mode="after")
    def _ordered(self) -> "Strength":
        if self.low == self.high:
            raise ValueError("strength.low and strength.high must differ")
        if self.log and (self.low <= 0 or self.high <= 0):
            raise ValueError("log strength needs positive low/high")
        return self


class Rule(_Strict):
    schema_version: int
    id: str = Field(pattern=r"^[A-Z][A-Z0-9]*-\d{3}$")
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    aliases: list[str] = Field(default_factory=list)
    status: Literal["experimental", "test", "stable", "deprecated"] = "stable"
    stage: Literal["symptom", "checklist", "reproduce", "localise", "confirm"] = "localise"
    failure_modes: list[str] = Field(default_factory=list)
    against: list[str] = Field(default_factory=list)
    symptom: str | None = None
    severity: Literal["low", "medium", "high", "critical"] = "medium"
    precision: float = Field(default=0.6, gt=0.0, le=1.0)
    strength: Strength | None = None
    when: When
    title: Text
    explanation: Text
    next_steps: list[NextStep] = Field(default_factory=list)
    false_positives: list[Text] = Field(default_factory=list)
    references: list[str] = Field(default_factory=list)

    @field_validator("schema_version")
    @classmethod
    def _version(cls, v: int) -> int:
        if v != SCHEMA_VERSION:
            raise ValueError(f"unsupported schema_version {v} (this precdx reads {SCHEMA_VERSION})")
        return v

    @model_validator(mode="after")
    def _effect(self) -> "Rule":
        effects = bool(self.failure_modes) + bool(self.symptom)
        if effects != 1 and not (self.against and not self.symptom):
            raise ValueError("a rule names failure_modes, or a symptom, or only 'against' modes")
        if self.symptom and self.against:
            raise ValueError("a symptom rule cannot argue against failure modes")
        return self
