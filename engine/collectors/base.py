"""What collectors share: the discovered case (runs and their recognised artefacts) and the
collector interface. A collector knows one area of artefacts, recognises its files by content
(`sniff`) and turns a case into facts (`collect`); it never scores.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Protocol

from precdx.errors import Warnings
from precdx.facts import Fact
from precdx.vocabulary import ROLES as ROLE_ORDER  # noqa: F401 (declared there)


@dataclass
class Artefact:
    """One recognised file (or directory, for dumps) and what it was recognised as."""

    path: Path
    kind: str          # area-qualified kind, e.g. "log", "msprobe.dump", "config.launch", "env", "pip"
    detail: str = ""   # format or flavour, e.g. "megatron", "hf_trainer", "statistics/mix"


@dataclass(frozen=True)
class ArtefactKind:
    """An artefact kind a collector reads, what it is in words, and the file names a run layout
    usually gives it: discovery recognises files by content only, but warns when a file named
    like one of these is not recognised as one (a garbled env.txt is worth a warning, an
    unknown notes.txt is not)."""

    kind: str                      # e.g. "log", "env", "msprobe.compare_result"
    what: str                      # e.g. "a training log"
    names: tuple[str, ...] = ()    # exact file names (lower case)
    pattern: str | None = None     # or a regular expression the lower-case file name matches

    def named_like(self, name: str) -> bool:
        low = name.lower()
        return low in self.names or (self.pattern is not None and re.match(self.pattern, low) is not None)


@dataclass(frozen=True)
class Reads:
    """What a collector declares it reads (module `kinds` of its package, `READS`): its artefact
    kinds, and whether its readers decompress .gz / .zst files (only such collectors are shown
    a compressed file's decompressed head)."""

    kinds: tuple[ArtefactKind, ...] = ()
    compressed: bool = False


@dataclass
class RunDir:
    """One run folder of a comparison (a grouped run is one RunDir per group)."""

    role: str                         # baseline | target | baseline_rerun | target_rerun
    name: str                         # display name, e.g. "target" or "target/group03"
    root: Path
    artefacts: list[Artefact] = field(default_factory=list)
    ignored: list[tuple[Path, str]] = field(default_factory=list)  # (file, why)
    group: str | None = None          # group folder name for grouped runs
    hosts: list[str] = field(default_factory=list)

    def files(self, kind: str) -> list[Artefact]:
        """Artefacts whose kind equals `kind` or starts with `kind + '.'`."""
        return [a for a in self.artefacts if a.kind == kind or a.kind.startswith(kind + ".")]


@dataclass
class Case:
    """All runs of one diagnosis request."""

    runs: list[RunDir]
    root: Path | None = None

    def by_role(self, role: str) -> list[RunDir]:
        return [r for r in self.runs if r.role == role]

    def main(self, role: str) -> RunDir | None:
        """The single run of a role (first group when grouped)."""
        found = self.by_role(role)
        return found[0] if found else None


class Collector(Protocol):
    name: str

    def sniff(self, path: Path, head: bytes) -> Artefact | None:
        """Recognise a file by its name and first bytes; None if not this collector's."""

    def collect(self, case: Case, warnings: Warnings) -> Iterable[Fact]:
        """Turn the case's artefacts of this area into facts; problems go to `warnings`
        (naming the file) unless nothing at all can be done (raise PrecdxError)."""
