"""One self-contained HTML report: inline CSS, the loss / grad-norm plot embedded as a base64
PNG, the verdict, ranked hypotheses with their evidence and next steps, near misses, facts and
warnings. No script and no external resource, so it opens the same anywhere (mail, chat, CI
artefact)."""
from __future__ import annotations

import base64
import html
import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from precdx.diagnosis import Diagnosis, Hypothesis, grade_label

if TYPE_CHECKING:
    from precdx.collectors.logs.series import StepSeries

_L = {
    "en": {"title": "precdx report", "verdict": "Verdict", "plot": "Loss and grad norm", "symptoms": "Symptoms",
           "hyps": "Hypotheses, most likely first", "none": "No hypothesis reached the report threshold.",
           "evidence": "Evidence", "fact": "fact", "value": "value", "expected": "healthy", "source": "source",
           "steps": "Next steps (cheapest first)", "refs": "References", "rules": "Rules",
           "against": "argues against", "near": "Near misses (rules one condition short)", "facts": "Facts",
           "warnings": "Warnings", "score": "score", "no_runs": "No run folders were given (facts only), so there is no plot.",
           "no_plot": "Plot unavailable", "no_curve": "no training curve to plot", "engine": "engine",
           "pack": "rule pack", "side": "side",
           "basis": "Basis", "missing": "would firm it up", "split": "Cheapest step that splits the differential"},
    "zh": {"title": "precdx 诊断报告", "verdict": "结论", "plot": "Loss 与梯度范数", "symptoms": "症状",
           "hyps": "假设（按可能性排序）", "none": "没有假设达到报告阈值。",
           "evidence": "证据", "fact": "事实", "value": "取值", "expected": "正常范围", "source": "来源",
           "steps": "下一步（按成本从低到高）", "refs": "参考", "rules": "规则",
           "against": "反对", "near": "差一个条件即可触发的规则", "facts": "事实",
           "warnings": "警告", "score": "得分", "no_runs": "未提供运行目录（仅有事实），因此没有曲线图。",
           "no_plot": "无法生成曲线图", "no_curve": "没有可绘制的训练曲线", "engine": "引擎",
           "pack": "规则包", "side": "侧",
           "basis": "依据", "missing": "尚缺", "split": "最能区分各假设的最低成本下一步"},
}

_COLOURS = {"aligned": "#1a7f37", "misaligned": "#cf222e", "inconclusive": "#9a6700"}

_CSS = """
*{box-sizing:border-box}
body{margin:0;background:#f6f8fa;color:#1f2328;font:15px/1.5 -apple-system,"Segoe UI","Noto Sans","Noto Sans CJK SC",
"Microsoft YaHei",Helvetica,Arial,sans-serif}
main{max-width:1040px;margin:0 auto;padding:24px}
header.verdict{background:#fff;border-left:10px solid var(--vc);border-radius:8px;padding:18px 22px;
box-shadow:0 1px 3px rgba(0,0,0,.12)}
header.verdict h1{margin:0 0 4px;font-size:26px;color:var(--vc);text-transform:uppercase;letter-spacing:.04em}
header.verdict p{margin:4px 0}
.meta{color:#656d76;font-size:13px}
section{background:#fff;border-radius:8px;padding:16px 22px;margin-top:18px;box-shadow:0 1px 3px rgba(0,0,0,.12)}
h2{font-size:19px;margin:0 0 10px}
h3{font-size:17px;margin:0}
figure{margin:0}
figure img{max-width:100%;height:auto;border:1px solid #d0d7de;border-radius:6px}
.note{color:#656d76;font-style:italic}
article.hyp{border:1px solid #d0d7de;border-radius:8px;padding:14px 16px;margin:12px 0}
.hyp-head{display:flex;gap:12px;align-items:baseline;flex-wrap:wrap}
.rank{font-weight:700;color:#656d76}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:13px}
.mode{background:#eff2f5;border-radius:4px;padding:1px 6px}
.bar{height:10px;background:#eaeef2;border-radius:5px;overflow:hidden;margin:8px 0 4px;max-width:420px}
.bar span{display:block;height:100%;background:var(--vc)}
table{border-collapse:collapse;width:100%;margin:8px 0;font-size:14px}
th,td{border-bottom:1px solid #d0d7de;padding:5px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa;font-weight:600}
ol.steps li{margin:6px 0}
.cost{display:inline-block;font-size:12px;border-radius:10px;padding:0 8px;margin-right:6px;color:#fff;background:#57606a}
.cost.read{background:#1a7f37}.cost.rerun{background:#0969da}.cost.dump{background:#8250df}
.cost.long_run{background:#bc4c00}.cost.cluster{background:#cf222e}
pre{background:#f6f8fa;border:1px solid #d0d7de;border-radius:6px;padding:6px 10px;margin:4px 0;white-space:pre-wrap}
.why{color:#656d76;font-size:13px}
details summary{cursor:pointer;font-weight:600}
.against{color:#656d76}
ul.warn li{color:#9a6700}
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _plot_section(series, L: dict) -> str:
    """The curves the caller read (precdx.api.diagnose_case(series=True)) as an embedded PNG;
    None means no run was given."""
    if series is None:
        return f'<p class="note">{_e(L["no_runs"])}</p>'
    if not series:
        return f'<p class="note">{_e(L["no_plot"])}: {_e(L["no_curve"])}</p>'
    from precdx.errors import PrecdxError

    with tempfile.TemporaryDirectory(prefix="precdx-plot-") as tmp:
        try:
            from precdx.collectors.logs.plot import plot_series
            written = plot_series(list(series), Path(tmp) / "curves.png")
        except ImportError as exc:  # matplotlib (or the plot module) not installed
            return f'<p class="note">{_e(L["no_plot"])}: {_e(exc)}</p>'
        except PrecdxError as exc:
            return f'<p class="note">{_e(L["no_plot"])}: {_e(exc.render())}</p>'
        data = base64.b64encode(Path(written).read_bytes()).decode("ascii")
    return f'<figure><img alt="{_e(L["plot"])}" src="data:image/png;base64,{data}"></figure>'


def _reference(ref: str) -> str:
    if ref.startswith(("https://", "http://")):
        return f'<a href="{_e(ref)}">{_e(ref)}</a>'
    return _e(ref)


def _hypothesis(i: int, h: Hypothesis, L: dict, lang: str = "en") -> str:
    colour = _COLOURS.get(h.verdict, "#57606a")
    out = [f'<article class="hyp" style="--vc:{colour}">',
           f'<div class="hyp-head"><span class="rank">#{i}</span><h3>{_e(h.title)}</h3>'
           f'<code class="mode">{_e(h.failure_mode)}</code></div>',
           f'<div class="bar" title="{_e(L["score"])} {h.score:.2f}"><span style="width:{h.score * 100:.0f}%"></span></div>',
           f'<div class="meta">{_e(L["score"])} {h.score:.2f} · {_e(h.verdict)} · {_e(grade_label(h.grade, lang))} · {_e(L["rules"])}: '
           + ", ".join(f'<code>{_e(r.id)}</code>' if r.supports else
                       f'<span class="against">{_e(L["against"])} <code>{_e(r.id)}</code></span>' for r in h.rules)
           + "</div>"]
    if h.evidence:
        out.append(f"<h4>{_e(L['evidence'])}</h4>")
        texts = list(dict.fromkeys(e.text for e in h.evidence))
        out.append("<ul>" + "".join(f"<li>{_e(t)}</li>" for t in texts) + "</ul>")
        rows = [e for e in h.evidence if e.value is not None]
        if rows:
            out.append(f"<table><tr><th>{_e(L['fact'])}</th><th>{_e(L['side'])}</th><th>{_e(L['value'])}</th>"
                       f"<th>{_e(L['expected'])}</th><th>{_e(L['source'])}</th></tr>")
            for e in rows:
                out.append(f"<tr><td><code>{_e(e.fact)}</code></td><td>{_e(e.role or '')}</td><td>{_e(e.value)}</td>"
                           f"<td>{_e(e.expected or '')}</td><td>{_e(e.source or '')}</td></tr>")
            out.append("</table>")
    if h.next_steps:
        out.append(f"<h4>{_e(L['steps'])}</h4><ol class=\"steps\">")
        for st in h.next_steps:
            item = f'<span class="cost {_e(st.cost)}">{_e(st.cost_label)}</span>{_e(st.action)}'
            if st.command:
                item += f"<pre><code>{_e(st.command)}</code></pre>"
            if st.why:
                item += f'<div class="why">{_e(st.why)}</div>'
            out.append(f"<li>{item}</li>")
        out.append("</ol>")
    if h.references:
        out.append(f'<p class="meta">{_e(L["refs"])}: ' + " · ".join(_reference(r) for r in h.references) + "</p>")
    out.append("</article>")
    return "\n".join(out)


def _basis(diag: Diagnosis, L: dict) -> str:
    b = diag.verdict_basis
    if b is None or b.kind == "none":
        return ""
    missing = (f"<br>{_e(L['missing'])}: " + _e("; ".join(b.missing))) if b.missing else ""
    return f'<p class="meta">{_e(L["basis"])} ({_e(b.kind)}): {_e(b.text)}{missing}</p>'


def render_html(diag: Diagnosis, series: Sequence[StepSeries] | None = None) -> str:
    """The report page; `series` are the runs' training curves to plot (None: facts only, no
    run was given)."""
    L = _L.get(diag.lang, _L["en"])
    colour = _COLOURS.get(diag.verdict, "#57606a")
    verdict_word = {"en": diag.verdict, "zh": {"aligned": "精度对齐", "misaligned": "精度不对齐",
                                              "inconclusive": "无法定论"}.get(diag.verdict, diag.verdict)}
    parts = [
        "<!DOCTYPE html>",
        f'<html lang="{"zh-CN" if diag.lang == "zh" else "en"}"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(L['title'])} — {_e(diag.verdict)}</title>",
        f"<style>{_CSS}</style></head><body><main>",
        f'<header class="verdict" style="--vc:{colour}"><div class="meta">{_e(L["title"])} · {_e(L["verdict"])}</div>',
        f"<h1>{_e(verdict_word.get(diag.lang, diag.verdict))}</h1><p>{_e(diag.summary)}</p>",
        _basis(diag, L),
        f'<p class="meta">precdx {_e(diag.precdx_version)} · {_e(L["engine"])} {_e(diag.engine)} · '
        f'{_e(L["pack"])} {_e(diag.rule_pack)} · schema {_e(diag.schema_version)}</p></header>',
        f"<section><h2>{_e(L['plot'])}</h2>{_plot_section(series, L)}</section>",
    ]
    if diag.symptoms:
        items = "".join(f"<li><strong>{_e(s.title)}</strong> <code>{_e(s.id)}</code>"
                        + (f"<br><span class=\"why\">{_e(s.evidence[0].text)}</span>" if s.evidence else "")
                        + "</li>" for s in diag.symptoms)
        parts.append(f"<section><h2>{_e(L['symptoms'])}</h2><ul>{items}</ul></section>")
    parts.append(f"<section><h2>{_e(L['hyps'])}</h2>")
    if diag.hypotheses:
        parts.extend(_hypothesis(i, h, L, diag.lang) for i, h in enumerate(diag.hypotheses, 1))
    else:
        parts.append(f'<p class="note">{_e(L["none"])}</p>')
    parts.append("</section>")
    if diag.split_step is not None:
        st = diag.split_step
        item = f'<span class="cost {_e(st.cost)}">{_e(st.cost_label)}</span>{_e(st.action)}'
        if st.command:
            item += f"<pre><code>{_e(st.command)}</code></pre>"
        if st.why:
            item += f'<div class="why">{_e(st.why)}</div>'
        parts.append(f"<section><h2>{_e(L['split'])}</h2><p>{item}</p></section>")
    if diag.near_misses:
        rows = "".join(f"<tr><td><code>{_e(n.rule)}</code></td><td>{_e(', '.join(n.failure_modes))}</td>"
                       f"<td>{_e(n.text)}</td></tr>" for n in diag.near_misses)
        parts.append(f"<section><details><summary>{_e(L['near'])} ({len(diag.near_misses)})</summary>"
                     f"<table>{rows}</table></details></section>")
    if diag.facts:
        rows = []
        for f in diag.facts:
            body = {k: v for k, v in f.items() if k not in ("type", "source")}
            rows.append(f"<tr><td><code>{_e(f.get('type'))}</code></td>"
                        f"<td><code>{_e(json.dumps(body, ensure_ascii=False))}</code></td>"
                        f"<td>{_e(f.get('source', ''))}</td></tr>")
        parts.append(f"<section><details><summary>{_e(L['facts'])} ({len(diag.facts)})</summary>"
                     f"<table>{''.join(rows)}</table></details></section>")
    if diag.warnings:
        items = "".join(f"<li>{_e(w.get('path', ''))}{':' + _e(w['line']) if w.get('line') else ''}"
                        f"{' — ' if w.get('path') else ''}{_e(w.get('message'))}</li>" for w in diag.warnings)
        parts.append(f"<section><h2>{_e(L['warnings'])}</h2><ul class=\"warn\">{items}</ul></section>")
    parts.append("</main></body></html>")
    return "\n".join(parts) + "\n"
