"""The failure-mode catalogue as the engine needs it (title, verdict, area, references),
read from the knowledge base entries (kb/), which carry the canonical ids."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache


@dataclass(frozen=True)
class ModeInfo:
    id: str
    title_en: str
    title_zh: str
    verdict: str = "misaligned"
    area: str = ""
    references: tuple[str, ...] = ()
    canonical: bool = True
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    def title(self, lang: str) -> str:
        return self.title_zh if lang == "zh" and self.title_zh else self.title_en


@lru_cache(maxsize=1)
def mode_catalog() -> dict[str, ModeInfo]:
    from precdx.kb import load_kb

    out: dict[str, ModeInfo] = {}
    for mid, entry in load_kb().items():
        refs = tuple(str(r) for r in (getattr(entry, "references", None) or ()))
        out[mid] = ModeInfo(
            id=mid, title_en=entry.title.en if hasattr(entry.title, "en") else str(entry.title),
            title_zh=getattr(entry.title, "zh", "") or "",
            verdict=getattr(entry, "verdict", "misaligned") or "misaligned",
            area=getattr(entry, "area", "") or "", references=refs,
            canonical=bool(getattr(entry, "canonical", True)))
    return out
