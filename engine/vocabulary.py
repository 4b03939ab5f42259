"""The closed vocabularies of precdx, declared once and imported wherever they are used: the
roles of the runs of a comparison, the cost classes of a next step (with their English and
Chinese labels), the report languages and formats, the rule matcher back ends, the areas of the
knowledge base, the accelerators, and the bilingual text of rules and kb entries.

This module sits at the bottom of the package layering (tests/test_layering.py): it imports
nothing from engine but `precdx.errors`. The fact vocabulary itself (fact types and their
fields) is declared in engine/facts/.
"""
from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from precdx.errors import PrecdxError

# The runs of one comparison, in the order they are listed.
Role = Literal["baseline", "target", "baseline_rerun", "target_rerun"]
ROLES: tuple[str, ...] = get_args(Role)

# What a next step costs, cheapest first.
Cost = Literal["read", "rerun", "dump", "long_run", "cluster"]
COST_CLASSES: tuple[str, ...] = get_args(Cost)
COST_LABELS = {
    "read": "read a file / config",
    "rerun": "rerun a step",
    "dump": "dump one step",
    "long_run": "long run",
    "cluster": "cluster time",
}
COST_LABELS_ZH = {
    "read": "查看文件/配置",
    "rerun": "重跑一步",
    "dump": "dump 一步",
    "long_run": "长稳运行",
    "cluster": "集群资源",
}

# Accelerators: those a next step may be written for, and what a run is found to have used.
Device = Literal["npu", "gpu", "cpu"]
DEVICES: tuple[str, ...] = get_args(Device)
RunDevice = Literal["npu", "gpu", "cpu", "unknown"]

# Languages of the user-facing text (reports, kb entries, rule texts).
Lang = Literal["en", "zh"]
LANGS: tuple[str, ...] = get_args(Lang)

# Formats a diagnosis is rendered in (slack: a Slack message payload; lark: a Feishu / Lark post).
ReportFormat = Literal["text", "json", "markdown", "html", "slack", "lark"]
REPORT_FORMATS: tuple[str, ...] = get_args(ReportFormat)

# Rule matcher back ends (engine/matching/).
Engine = Literal["durable", "python"]
ENGINES: tuple[str, ...] = get_args(Engine)

# Areas of the knowledge base (kb/<area>/<mode>.yaml) and of the rule pack (rules/<area>/).
Area = Literal["verdict", "checklist", "determinism", "operator", "numerics", "optimizer", "nan",
               "memory", "framework", "communication", "hardware", "tooling", "rl"]
AREAS: tuple[str, ...] = get_args(Area)


class Text(BaseModel):
    """Bilingual text: English, and Chinese where written (`get("zh")` falls back to English)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, defer_build=True)
    en: str
    zh: str | None = None

    def get(self, lang: str = "en") -> str:
        if lang not in LANGS:
            raise PrecdxError(f"unknown language {lang!r}; expected one of {', '.join(LANGS)}")
        return self.zh if lang == "zh" and self.zh else self.en


class BilingualText(Text):
    """Text that must be written in both languages (kb entries): both non-empty, trimmed."""

    model_config = ConfigDict(str_strip_whitespace=True)
    en: str = Field(min_length=1)
    zh: str = Field(min_length=1)
