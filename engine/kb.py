"""The knowledge base: one bilingual runbook entry (Meaning / Impact / Diagnosis / Mitigation)
per failure mode, read from `kb/<area>/<id>.yaml` and validated into `KbEntry` models.

The entries carry their own title, area, verdict and sources so an installed package needs
nothing outside itself; a test keeps them in step with the canonical failure-mode list.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from precdx.errors import PrecdxError
from precdx.vocabulary import AREAS, LANGS, Area, Cost, Device  # noqa: F401 (declared there)
from precdx.vocabulary import BilingualText as Text
from precdx.yamlsafe import LineDict, LineList, line_of, load_yaml_file

Verdict = Literal["misaligned", "aligned", "tooling"]
Confidence = Literal["high", "medium", "low"]
TEXT_FIELDS = ("title", "meaning", "impact", "diagnosis", "mitigation")

# G3.1.1 (guide section), TDG (msprobe debugging guide), MSF (MindSpore Transformers guide),
# TOOL (msprobe manuals), RD (other official docs), DK (domain knowledge).
_SOURCE_TAG = re.compile(r"^(G\d+(\.\d+)*|TDG|MSF|TOOL|RD|DK)$")
_ENTRY_ID = re.compile(r"^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$")
_THRESHOLD_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
# The entry that owns the documented acceptance tolerances (first-step 0.5 % / 0.005, mean 1 %,
# grad norm 10 %, 1000 steps): every rule may refer to its thresholds besides its own mode's.
TOLERANCES_ENTRY, TOLERANCES_AREA = "aligned.within_noise", "verdict"

_STRICT = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True, defer_build=True)


class Command(BaseModel):
    """Something a person can run as written (env var, flag change, msprobe call, stress test)."""

    model_config = _STRICT
    command: str = Field(min_length=1)
    why: Text
    device: list[Device] | None = None  # devices the command applies to (None: all)
    # what following it costs, when the command alone does not show it (one that writes a rerun
    # script is the first half of a rerun); None: judged from the command
    cost: Cost | None = None


Likelihood = Literal["typical", "possible"]
Frequency = Literal["very_common", "common", "occasional", "rare"]
SYMPTOM_CLASSES = ("first_step_difference", "long_run_difference", "nan_overflow", "spikes",
                   "downstream_gap", "irreproducible", "grad_norm_difference", "overflow_hidden")


class Presentation(BaseModel):
    """How a failure mode presents (the symptom differential reads this).

    symptoms   -- per symptom class (S1 first_step_difference, S2 long_run_difference,
                  S3 nan_overflow, S4 spikes, S5 downstream_gap, S6 irreproducible, plus
                  grad_norm_difference, overflow_hidden = fewer overflows/skips than the
                  baseline): 'typical' or 'possible'; classes left out do not fit.
    runs       -- which runs show it: target_only, both (baseline too, same data), rerun_differs
                  (the target's own rerun differs as well), any.
    onset      -- step1, early, late, resume (from a restart / resume / epoch boundary), any.
    step1_magnitude -- expected first-step gap: none, noise (<=0.5%), small (0.5-5%), large (>5%),
                  or a list of those (e.g. [none, noise, small]: never a large first-step gap).
    error_shape -- one_sided, zero_mean, constant_ratio, growing, any, or a list of those (e.g.
                  [one_sided, zero_mean]: a shifted level or per-step noise, never a growing or
                  constant-ratio error).
    frequency  -- how common among GPU->NPU LLM migration cases. An EXPERT ESTIMATE
                  (shared/domain-audit.md section 5), not measured data: very_common >=20%,
                  common 5-20%, occasional 1-5%, rare <1%.
    scope      -- the kind of job the mode can occur in at all, when that is narrower than any
                  job: moe, sequence_parallel, fp16, multi_card, sft (differential.SCOPES). The
                  differential reads it from the facts (config values, dumps, hosts): a job
                  known to lack it drops the mode, an unknown one weighs it by how common such
                  jobs are, and the evidence text says which.
    """

    model_config = _STRICT
    symptoms: dict[str, Likelihood] = Field(min_length=1)
    runs: Literal["target_only", "both", "rerun_differs", "any"]
    onset: Literal["step1", "early", "late", "resume", "any"]
    step1_magnitude: Literal["none", "noise", "small", "large", "any"] | list[Literal["none", "noise", "small", "large"]]
    error_shape: Literal["one_sided", "zero_mean", "constant_ratio", "growing", "any"] | list[
        Literal["one_sided", "zero_mean", "constant_ratio", "growing"]]
    frequency: Frequency
    rerun_difference: Literal["tiny", "large", "any"] = Field(
        "any", description="for modes seen through reruns: how far the target's own rerun departs "
                           "(tiny: last digits, <0.1%; large: like a different seed)")
    scope: Literal["moe", "sequence_parallel", "fp16", "multi_card", "sft"] | None = None
    note: Text | None = None

    @field_validator("symptoms")
    @classmethod
    def _known_symptoms(cls, value: dict[str, str]) -> dict[str, str]:
        bad = sorted(set(value) - set(SYMPTOM_CLASSES))
        if bad:
            raise ValueError(f"unknown symptom class(es) {bad}; expected {', '.join(SYMPTOM_CLASSES)}")
        return value


class KbEntry(BaseModel):
    """A failure mode's runbook entry."""

    model_config = _STRICT

    id: str
    title: Text
    area: Area
    verdict: Verdict = "misaligned"
    sources: list[str] = Field(min_length=1)
    canonical: bool = True
    confidence: Confidence
    meaning: Text
    impact: Text
    diagnosis: Text
    mitigation: Text
    symptoms: list[Text] = Field(min_length=1)
    commands: list[Command] = Field(default_factory=list)
    references: list[str] = Field(min_length=1)
    related: list[str] = Field(default_factory=list)
    presentation: Presentation | None = None  # required for canonical entries (see _consistency)
    # Named numbers the mode's rules and texts refer to ({threshold: NAME} in a condition,
    # {threshold.NAME} or {threshold.NAME:.1%} in a text): declared once, here.
    thresholds: dict[str, float] = Field(default_factory=dict)

    @field_validator("thresholds")
    @classmethod
    def _threshold_names(cls, value: dict[str, float]) -> dict[str, float]:
        bad = [name for name in value if not _THRESHOLD_NAME.match(name)]
        if bad:
            raise ValueError(f"threshold names are snake_case: {bad}")
        return value

    @field_validator("id")
    @classmethod
    def _id_shape(cls, value: str) -> str:
        if not _ENTRY_ID.match(value):
            raise ValueError("id must look like 'area.snake_case_name'")
        return value

    @field_validator("sources")
    @classmethod
    def _source_tags(cls, value: list[str]) -> list[str]:
        bad = [tag for tag in value if not _SOURCE_TAG.match(tag)]
        if bad:
            raise ValueError(f"unknown source tag(s) {bad}; use G<section>, TDG, MSF, TOOL, RD or DK")
        if len(set(value)) != len(value):
            raise ValueError("source tags repeat")
        return value

    @field_validator("related")
    @classmethod
    def _related_unique(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("related ids repeat")
        return value

    @model_validator(mode="after")
    def _consistency(self) -> "KbEntry":
        if self.id in self.related:
            raise ValueError("an entry cannot be related to itself")
        if self.sources == ["DK"] and self.confidence != "low":
            raise ValueError("an entry backed only by domain knowledge (DK) must have confidence: low")
        if self.canonical and self.presentation is None:
            raise ValueError("a canonical entry needs a 'presentation' block (how the mode presents: "
                             "symptoms, runs, onset, step1_magnitude, error_shape, frequency)")
        return self

    def text(self, field: str, lang: str = "en") -> str:
        """The English or Chinese text of title/meaning/impact/diagnosis/mitigation."""
        if field not in TEXT_FIELDS:
            raise PrecdxError(f"unknown kb text field {field!r}; expected one of {', '.join(TEXT_FIELDS)}")
        value: Text = getattr(self, field)
        return value.get(lang)

    def symptom_texts(self, lang: str = "en") -> list[str]:
        return [s.get(lang) for s in self.symptoms]


def find_kb_dir(package_dir: Path) -> Path:
    """The kb directory for the package at `package_dir`: the wheel's `precdx/_pack/kb`
    (pyproject maps kb/ there) or, in a checkout, `kb/` beside the engine/ folder."""
    for candidate in (package_dir / "_pack" / "kb", package_dir.parent / "kb"):
        if candidate.is_dir():
            return candidate
    raise PrecdxError("knowledge base not found", path=str(package_dir.parent / "kb"),
                      hint="expected kb/ beside the engine/ folder of a checkout or precdx/_pack/kb in the install")


def kb_dir() -> Path:
    """The knowledge base this installation uses (resolved)."""
    return _installed_kb_dir()


@functools.lru_cache(maxsize=1)
def _installed_kb_dir() -> Path:
    # found once: every diagnosis loads the kb, and resolving the paths again each time cost
    # half of a planner run (which diagnoses once per candidate question)
    return find_kb_dir(Path(__file__).resolve().parent).resolve()


def _line_for(raw: Any, loc: tuple) -> int | None:
    """Walk a validation error location through the loaded YAML to the closest known line."""
    node, line = raw, line_of(raw)
    for part in loc:
        if isinstance(node, LineDict) and part in node:
            line = line_of(node, part) or line
            node = node[part]
        elif isinstance(node, LineList) and isinstance(part, int) and 0 <= part < len(node):
            child = node[part]
            line = line_of(child) or line
            node = child
        else:
            if isinstance(node, LineDict) and part in getattr(node, "key_lines", {}):
                line = node.key_lines[part]
            break
    return line


def _describe(err: dict) -> str:
    where = ".".join(str(p) for p in err["loc"]) or "entry"
    kind = err["type"]
    if kind == "missing":
        return f"missing required field '{where}'"
    if kind == "extra_forbidden":
        return f"unknown key '{where}'"
    msg = err["msg"].removeprefix("Value error, ")
    return f"{where}: {msg}"


def load_entry(path: Path) -> KbEntry:
    """Load and validate one entry file; every problem is a PrecdxError with file:line."""
    raw = load_yaml_file(str(path))
    if not isinstance(raw, dict):
        raise PrecdxError("a kb entry must be a YAML mapping", path=str(path), line=line_of(raw))
    try:
        entry = KbEntry.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        more = len(exc.errors()) - 1
        msg = _describe(first) + (f" (and {more} more problem(s))" if more else "")
        raise PrecdxError(msg, path=str(path), line=_line_for(raw, first["loc"])) from None
    if entry.id != path.stem:
        raise PrecdxError(f"id {entry.id!r} does not match the file name {path.name!r}",
                          path=str(path), line=line_of(raw, "id"))
    if entry.area != path.parent.name:
        raise PrecdxError(f"area {entry.area!r} does not match the folder {path.parent.name!r}",
                          path=str(path), line=line_of(raw, "area"))
    return entry


def kb_files(directory: str | Path) -> list[Path]:
    """What a knowledge base is read from: entries and strays alike (files, or folders named so)."""
    root = Path(directory)
    return sorted((*root.glob("*.y*ml"), *root.glob("*/*.y*ml")))


@functools.lru_cache(maxsize=8)
def _load_dir(directory: str) -> tuple[tuple[str, KbEntry], ...]:
    root = Path(directory)
    if not root.is_dir():
        raise PrecdxError("knowledge base directory not found", path=directory)
    from precdx import cache

    return cache.cached("kb", cache.key("kb", kb_files(root), directory), lambda: _read_dir(root, directory),
                        modules=(__name__, "precdx.vocabulary"))


def _read_dir(root: Path, directory: str) -> tuple[tuple[str, KbEntry], ...]:
    entries: dict[str, KbEntry] = {}
    origin: dict[str, Path] = {}
    stray = sorted(p for p in root.glob("*.y*ml"))
    if stray:
        raise PrecdxError("kb entries belong in an area folder (kb/<area>/<id>.yaml)", path=str(stray[0]))
    for path in sorted(root.glob("*/*.y*ml")):
        if path.suffix not in (".yaml", ".yml"):
            continue
        entry = load_entry(path)
        if entry.id in entries:
            raise PrecdxError(f"duplicate kb id {entry.id!r} (also in {origin[entry.id]})", path=str(path))
        entries[entry.id] = entry
        origin[entry.id] = path
    if not entries:
        raise PrecdxError("knowledge base is empty", path=directory)
    for kb_id, entry in entries.items():
        for rel in entry.related:
            if rel not in entries:
                raw = load_yaml_file(str(origin[kb_id]))
                raise PrecdxError(f"related id {rel!r} has no kb entry", path=str(origin[kb_id]),
                                  line=line_of(raw, "related"))
    return tuple(sorted(entries.items()))


def load_kb(path: str | Path | None = None) -> dict[str, KbEntry]:
    """All kb entries by id (cached per directory; entries are immutable)."""
    directory = Path(path).resolve() if path is not None else kb_dir()
    return dict(_load_dir(str(directory)))


def thresholds_for(mode: str | None, path: str | Path | None = None) -> dict[str, tuple[float, str]]:
    """The thresholds a rule of failure mode `mode` may name: the acceptance tolerances of
    TOLERANCES_ENTRY, then the mode's own (which win on a shared name). name -> (value, owner)."""
    kb = load_kb(path)
    out: dict[str, tuple[float, str]] = {}
    for owner in (TOLERANCES_ENTRY, mode):
        entry = kb.get(owner) if owner else None
        if entry is not None:
            out.update({name: (value, owner) for name, value in entry.thresholds.items()})
    return out


def tolerance(name: str) -> float:
    """One of the documented acceptance tolerances (thresholds of TOLERANCES_ENTRY), for code
    that applies them (the logs comparison); reads that one entry only."""
    return _tolerances(str(kb_dir().resolve()))[name]


@functools.lru_cache(maxsize=4)
def _tolerances(directory: str) -> dict[str, float]:
    from precdx import cache

    path = Path(directory) / TOLERANCES_AREA / f"{TOLERANCES_ENTRY}.yaml"
    return cache.cached("tolerances", cache.key("tolerances", [path]), lambda: dict(load_entry(path).thresholds))


def clear_cache() -> None:
    """Forget loaded knowledge bases (tests that rewrite a kb directory call this)."""
    _load_dir.cache_clear()
    _tolerances.cache_clear()
