"""Feishu / Lark: a rich-text ("post") message, the JSON body a custom bot's webhook takes as it
is: {"msg_type": "post", "content": {"post": {"zh_cn": {...}, "en_us": {...}}}}. Each locale
holds a title and rows of `text` elements (style bold / italic) and `a` links; Feishu shows the
locale of the reader's language. To send it through the Open API instead (im/v1/messages),
post msg_type "post" with `content` = json.dumps(message["content"]["post"]).

The cap is on the UTF-8 bytes of the whole JSON body (default 20,000: a custom bot refuses a
larger request body, the Open API's limit for a post is 30 KB); it is shared equally by the
locales and met at hypothesis boundaries, closed by a link to the full report."""
from __future__ import annotations

import json
from typing import Any, Sequence

from precdx.diagnosis import Diagnosis
from precdx.errors import PrecdxError
from precdx.render.chat import Cap, Markup, Part, Reply, Span, diagnosis_reply, fit

DEFAULT_BYTES = 20_000
MIN_BYTES = 1_000
LOCALES = {"zh": "zh_cn", "en": "en_us"}
_STYLES = {"b": ["bold"], "i": ["italic"]}
_BLANK: list[dict] = [{"tag": "text", "text": " "}]  # a blank line between parts


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class LarkMarkup(Markup):
    """Parts become rows of post elements; sizes are UTF-8 bytes of their JSON."""

    name = "lark"
    bullet = "    • "

    def elements(self, spans: Sequence[Span]) -> list[dict]:
        out: list[dict] = []
        for s in spans:
            if s.style == "link":
                out.append({"tag": "a", "text": s.text, "href": s.href})
                continue
            text = self.bullet if s.style == "li" else s.text
            if not text:
                continue
            style = _STYLES.get(s.style)
            if out and out[-1]["tag"] == "text" and out[-1].get("style") == style:
                out[-1]["text"] += text  # one element per run of equal style
                continue
            out.append({"tag": "text", "text": text, **({"style": style} if style else {})})
        return out or [{"tag": "text", "text": ""}]

    def rows(self, p: Part) -> list[list[dict]]:
        return [self.elements(line) for line in p.lines]

    def size(self, p: Part) -> int:
        return len(_dumps(self.rows(p)).encode()) - 2  # the rows inside the content list

    def sep_size(self, prev: Part, nxt: Part) -> int:
        return 1 if nxt.tight else 2 + len(_dumps(_BLANK).encode())  # a comma, or a blank row between commas

    def content(self, parts: Sequence[Part]) -> list[list[dict]]:
        rows: list[list[dict]] = []
        for i, p in enumerate(parts):
            if i and not p.tight:
                rows.append(list(_BLANK))
            rows.extend(self.rows(p))
        return rows


LARK = LarkMarkup()


def lark_message(replies: Sequence[Reply], *, max_length: int | None = None,
                 report_url: str | None = None) -> dict[str, Any]:
    """One post with a locale per reply (their languages must differ)."""
    budget = max_length or DEFAULT_BYTES
    if budget < MIN_BYTES:
        raise PrecdxError(f"a Lark post needs at least {MIN_BYTES} bytes (max_length {budget})")
    empty = {"msg_type": "post", "content": {"post": {LOCALES.get(r.lang, "en_us"): {"title": r.title, "content": []}
                                                      for r in replies}}}
    share = (budget - len(_dumps(empty).encode())) // max(1, len(replies))
    post: dict[str, Any] = {}
    for r in replies:
        parts = fit(r, LARK, Cap(total=share, minimum=200), report_url)
        post[LOCALES.get(r.lang, "en_us")] = {"title": r.title, "content": LARK.content(parts)}
    return {"msg_type": "post", "content": {"post": post}}


def render_lark(diags: Diagnosis | Sequence[Diagnosis], *, max_hypotheses: int = 5, max_length: int | None = None,
                report_url: str | None = None) -> str:
    """The Lark post of a diagnosis, one locale per diagnosis given (the same facts diagnosed in
    English and in Chinese give en_us and zh_cn), as JSON."""
    diags = [diags] if isinstance(diags, Diagnosis) else list(diags)
    replies = [diagnosis_reply(d, max_hypotheses=max_hypotheses) for d in diags]
    return _dumps(lark_message(replies, max_length=max_length, report_url=report_url)) + "\n"
