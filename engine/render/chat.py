"""Chat replies, shared by every chat format: a diagnosis becomes *parts* (the verdict, the
symptoms, one part per hypothesis, the step that splits the differential, the warnings) made of
styled spans; a platform's `Markup` renders them (GitHub markdown, Slack mrkdwn, a Lark post,
plain text) and `fit()` keeps the reply under the platform's length cap.

The cap is met at part boundaries: hypotheses are kept in rank order and the first one that
does not fit ends the list (a lower-ranked hypothesis never replaces a higher one); a part
longer than the platform's per-section limit loses its last lines; the reply then ends with a
footer saying what was left out and linking the full HTML report (the service stores it under
the diagnosis id: GET /v1/reports/{id}.html).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from precdx.diagnosis import Diagnosis, grade_label
from precdx.errors import PrecdxError

ICONS = {"aligned": "✅", "misaligned": "❌", "inconclusive": "❔"}
ELLIPSIS = "…"
MIN_PIECE = 80  # a shortened part keeps at least this much, or is left out

LABELS: dict[str, dict] = {
    "en": {"missing": "Would firm it up:", "symptoms": "Symptoms:", "none": "No hypothesis reached the report threshold.",
           "split": "Next (splits the differential):", "warnings": " warning(s): ",
           "more_h": ("{n} more hypothesis", "{n} more hypotheses"), "more_o": ("{n} more section", "{n} more sections"),
           "left_out": "Not shown:", "report": "Full report", "title": "precdx diagnosis"},
    "zh": {"missing": "尚缺：", "symptoms": "症状：", "none": "没有达到报告阈值的假设。",
           "split": "下一步（最能区分）：", "warnings": " 条警告：",
           "more_h": ("另有 {n} 个假设",) * 2, "more_o": ("另有 {n} 个部分",) * 2,
           "left_out": "未显示：", "report": "完整报告", "title": "precdx 诊断"},
}


def labels(lang: str) -> dict:
    return LABELS.get(lang, LABELS["en"])


# ---------------------------------------------------------------- the content
@dataclass(frozen=True)
class Span:
    """A run of text with one style: "" plain, "b" bold, "i" italic, "code", "link" (href),
    "li" (the bullet of an indented list item; its text is ignored)."""

    text: str
    style: str = ""
    href: str | None = None


def plain(text: str) -> Span:
    return Span(text)


def bold(text: str) -> Span:
    return Span(text, "b")


def italic(text: str) -> Span:
    return Span(text, "i")


def code(text: str) -> Span:
    return Span(text, "code")


def link(label: str, href: str) -> Span:
    return Span(label, "link", href)


BULLET = Span("", "li")


Line = list[Span]


@dataclass
class Part:
    """One section of a reply. `kind`: head, symptoms, hypothesis, split, warnings, session,
    footer. `essential` parts are shortened rather than left out when the cap is tight; a
    `tight` part follows the one before it on the next line (no blank line between)."""

    kind: str
    lines: list[Line]
    essential: bool = False
    tight: bool = False


@dataclass
class Reply:
    """The parts of a reply and how many hypotheses were left out before fitting (beyond
    `max_hypotheses`)."""

    parts: list[Part]
    hypotheses_left_out: int = 0
    lang: str = "en"
    title: str = ""


def diagnosis_reply(diag: Diagnosis, *, max_hypotheses: int = 5, next_steps: int = 3) -> Reply:
    """The chat content of a diagnosis: verdict and summary, symptoms, the top hypotheses with
    their evidence and cheapest next steps, the splitting step, the first warnings."""
    L = labels(diag.lang)
    parts: list[Part] = []
    head: list[Line] = [[bold(f"{ICONS.get(diag.verdict, '')} {diag.verdict}".strip()), plain(f" — {diag.summary}")]]
    basis = diag.verdict_basis
    if basis is not None and basis.kind in ("accepted", "provisional") and basis.missing:
        head.append([italic(L["missing"]), plain(" " + "; ".join(basis.missing))])
    parts.append(Part("head", head, essential=True))
    if diag.symptoms:
        parts.append(Part("symptoms", [[bold(L["symptoms"]), plain(" " + "; ".join(s.title for s in diag.symptoms))]]))
    shown = diag.hypotheses[:max(0, max_hypotheses)]
    for i, h in enumerate(shown, 1):
        lines: list[Line] = [[plain(f"{i}. "), bold(h.title), plain(" ("), code(h.failure_mode),
                              plain(f", {h.score:.2f}, {grade_label(h.grade, diag.lang)})")]]
        for text in dict.fromkeys(e.text for e in h.evidence):
            lines.append([BULLET, plain(text)])
        for st in h.next_steps[:next_steps]:
            line = [BULLET, plain("▶ "), italic(st.cost_label), plain(": " + st.action)]
            if st.command:
                line += [plain(" — "), code(st.command)]
            lines.append(line)
        parts.append(Part("hypothesis", lines, essential=i == 1, tight=i > 1))
    if not diag.hypotheses:
        parts.append(Part("hypothesis", [[italic(L["none"])]], essential=True))
    if diag.split_step is not None:
        st = diag.split_step
        line = [bold(L["split"]), plain(" "), italic(st.cost_label), plain(": " + st.action)]
        if st.command:
            line += [plain(" — "), code(st.command)]
        parts.append(Part("split", [line]))
    if diag.warnings:
        parts.append(Part("warnings", [[plain("⚠️ " + str(len(diag.warnings)) + L["warnings"]
                                              + "; ".join(w["message"] for w in diag.warnings[:3]))]]))
    word = {"zh": {"aligned": "精度对齐", "misaligned": "精度不对齐", "inconclusive": "无法定论"}}
    title = f"{L['title']}: {word.get(diag.lang, {}).get(diag.verdict, diag.verdict)}"
    return Reply(parts, max(0, len(diag.hypotheses) - len(shown)), diag.lang, title)


def footer(lang: str, report_url: str | None, hypotheses: int, others: int) -> Part | None:
    """What was left out, and the link to the full report (always, when there is one)."""
    L = labels(lang)
    gone = []
    if hypotheses:
        gone.append(L["more_h"][hypotheses != 1].format(n=hypotheses))
    if others:
        gone.append(L["more_o"][others != 1].format(n=others))
    lines: list[Line] = []
    if gone:
        lines.append([italic(L["left_out"]), plain(" " + ", ".join(gone))])
    if report_url:
        lines.append([plain("📄 "), link(L["report"], report_url)])
    return Part("footer", lines) if lines else None


# ---------------------------------------------------------------- markup
class Markup:
    """How a platform writes spans, lines and parts, and how it counts their size."""

    name = "text"
    line_sep = "\n"

    bullet = "   - "

    def span(self, s: Span) -> str:
        if s.style == "link":
            return f"{s.text}: {s.href}"
        if s.style == "li":
            return self.bullet
        return s.text

    def line(self, spans: Sequence[Span]) -> str:
        return "".join(self.span(s) for s in spans if s.text or s.style in ("link", "li"))

    def part(self, p: Part) -> str:
        return self.line_sep.join(self.line(x) for x in p.lines)

    def sep(self, prev: Part, nxt: Part) -> str:
        return "\n" if nxt.tight else "\n\n"

    def size(self, p: Part) -> int:
        return len(self.part(p))

    def sep_size(self, prev: Part, nxt: Part) -> int:
        return len(self.sep(prev, nxt))

    def join(self, parts: Sequence[Part]) -> str:
        out: list[str] = []
        for i, p in enumerate(parts):
            if i:
                out.append(self.sep(parts[i - 1], p))
            out.append(self.part(p))
        return "".join(out)

    def total(self, parts: Sequence[Part]) -> int:
        return sum(self.size(p) for p in parts) + sum(self.sep_size(a, b) for a, b in zip(parts, parts[1:]))


# ---------------------------------------------------------------- the length cap
@dataclass
class Cap:
    """`total`: the whole reply; `section`: one part (a Slack section block); `parts`: how many
    parts at most (Slack: 50 blocks), the footer included."""

    total: int
    section: int | None = None
    parts: int | None = None
    minimum: int = 300


def shrink(p: Part, limit: int, markup: Markup) -> Part:
    """The part cut to `limit`: its last lines go first (an ellipsis marks the cut), then the
    end of its last remaining line."""
    if markup.size(p) <= limit:
        return p
    lines = [list(x) for x in p.lines]
    mark: Line = [plain(ELLIPSIS)]
    lo, hi = 1, len(lines) - 1  # the most leading lines that fit with the ellipsis line after them
    best = 0
    while lo <= hi:
        mid = (lo + hi) // 2
        if markup.size(Part(p.kind, lines[:mid] + [mark], p.essential)) <= limit:
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    if best:
        return Part(p.kind, lines[:best] + [mark], p.essential)
    first = lines[0]
    # keep whole spans while they fit, then cut the text of the next one
    kept: Line = []
    for s in first:
        if markup.size(Part(p.kind, [kept + [s, plain(ELLIPSIS)]])) <= limit:
            kept.append(s)
            continue
        lo, hi = 0, len(s.text)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            trial = Span(s.text[:mid], s.style, s.href)
            if markup.size(Part(p.kind, [kept + [trial, plain(ELLIPSIS)]])) <= limit:
                lo = mid
            else:
                hi = mid - 1
        if lo:
            kept.append(Span(s.text[:lo], s.style, s.href))
        break
    return Part(p.kind, [kept + [plain(ELLIPSIS)]], p.essential)


def fit(reply: Reply, markup: Markup, cap: Cap | None, report_url: str | None = None) -> list[Part]:
    """The parts that fit under `cap`, then the footer (what was left out, the report link)."""
    parts = reply.parts
    make_footer: Callable[[int, int], Part | None] = lambda h, o: footer(reply.lang, report_url, h, o)  # noqa: E731
    if cap is None:
        tail = make_footer(reply.hypotheses_left_out, 0)
        return parts + ([tail] if tail else [])
    if cap.total < cap.minimum:
        raise PrecdxError(f"a length cap of {cap.total} is too small for a reply (at least {cap.minimum})")
    hyps = sum(p.kind == "hypothesis" for p in parts) + reply.hypotheses_left_out
    candidates = [make_footer(reply.hypotheses_left_out, 0), make_footer(hyps, len(parts))]
    gap_max = markup.sep_size(Part("head", []), Part("footer", []))
    reserve = max((markup.size(c) + gap_max for c in candidates if c is not None), default=0)
    avail = cap.total - reserve
    if avail < MIN_PIECE:
        raise PrecdxError(f"a length cap of {cap.total} leaves no room for the reply beside the report link",
                          hint="raise the cap")
    section = cap.section or cap.total
    limit_parts = (cap.parts - 1) if cap.parts else None
    # room held back for the essential parts still to come (e.g. a session's next question after
    # the ranking), each up to a quarter of the budget
    held = [min(markup.size(p), section, avail // 4) + gap_max if p.essential else 0 for p in parts]
    out: list[Part] = []
    used = 0
    left_h, left_o = reply.hypotheses_left_out, 0
    stopped = False
    for i, p in enumerate(parts):
        is_h = p.kind == "hypothesis"
        if (is_h and stopped) or (limit_parts is not None and len(out) >= limit_parts):
            left_h, left_o = left_h + is_h, left_o + (not is_h)
            stopped = stopped or is_h
            continue
        gap = markup.sep_size(out[-1], p) if out else 0
        left = avail - used - gap - sum(held[i + 1:])
        room = min(section, left)
        size = markup.size(p)
        if size > room:
            # a part over the section limit keeps its first lines when a whole section is free;
            # an essential part (the verdict, the top hypothesis) is cut to whatever room is left
            target = section if (size > section and left >= section) else (room if p.essential else 0)
            if target >= MIN_PIECE:
                p = shrink(p, target, markup)
                size = markup.size(p)
        if size <= room:
            out.append(p)
            used += gap + size
        elif is_h:
            stopped = True
            left_h += 1
        else:
            left_o += 1
    tail = make_footer(left_h, left_o)
    if tail is not None:
        out.append(tail)
    while markup.total(out) > cap.total and len(out) > 1:  # a safety net; the reserve above should make it moot
        drop = out.pop(-2 if tail is not None else -1)
        left_h, left_o = left_h + (drop.kind == "hypothesis"), left_o + (drop.kind != "hypothesis")
        if tail is not None:
            out[-1] = make_footer(left_h, left_o) or out[-1]
    return out
