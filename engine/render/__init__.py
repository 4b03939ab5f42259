"""Renderers of a Diagnosis: text (people at a terminal), markdown (chat), json (bots), html
(one self-contained report file)."""
from __future__ import annotations

from engine.diagnosis import Diagnosis
from engine.vocabulary import REPORT_FORMATS as FORMATS  # noqa: F401 (declared there)


def render(diag: Diagnosis, fmt: str, **kw) -> str:
    if fmt == "json":
        return diag.model_dump_json(indent=2)
    if fmt == "markdown":
        from engine.render.markdown import render_markdown
        return render_markdown(diag)
    if fmt == "html":
        from engine.render.html import render_html
        return render_html(diag, **kw)
    from engine.render.text import render_text
    return render_text(diag, **kw)
