"""The per-step checks of a watched run: the documented tolerances against a reference curve,
exactness against a rerun reference, and single-run sanity. Pure Python (no torch, no numpy):
one call per logged step, a few float operations each.

Tolerances (kb-reference.md §1.3, MindSpore migration standard): at the first compared step
the loss may differ by abs < 0.005 or rel < 0.5% (a breach needs both); afterwards the mean
relative loss error over the last ``window`` compared steps must stay <= 1% and the grad-norm
one <= 10%; the target may not be non-finite (NaN/Inf loss or grad norm, overflow skips) more
often than the reference; the grad norm may not explode (x10 its recent median) unless the
reference does at the same step. A rerun reference (same job, same device) must be reproduced
to the precision it was printed with.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from statistics import median
from typing import Iterable

EPS = 1e-12


@dataclass(frozen=True)
class Tolerances:
    """Thresholds of the checks; defaults are the documented ones."""

    first_abs: float = 0.005      # first compared step: breach when abs >= first_abs ...
    first_rel: float = 0.005      # ... and rel >= first_rel
    loss_mean_rel: float = 0.01   # mean relative loss error over the last `window` compared steps
    grad_mean_rel: float = 0.10   # mean relative grad-norm error (also the first-step grad-norm limit)
    window: int = 5
    explosion: float = 10.0       # grad norm above this multiple of the median of the last `history`
    history: int = 20
    min_history: int = 5
    lr_rel: float = 1e-3          # learning rate differs from the reference's at the same step (config)
    scale_drop: float = 8.0       # no reference: loss scale fell by this factor within `scale_window` steps
    scale_window: int = 50


@dataclass
class Point:
    """One logged step: what the loop already had (None = not reported)."""

    step: int
    loss: float | None = None
    grad_norm: float | None = None
    lr: float | None = None
    loss_scale: float | None = None
    skipped: bool = False

    @property
    def nonfinite(self) -> bool:
        return self.skipped or _bad(self.loss) or _bad(self.grad_norm)


@dataclass
class Breach:
    """The first step a check failed at, what was measured and what was allowed."""

    step: int
    check: str
    value: float | None
    limit: float | None
    reference: str | None
    en: str
    zh: str

    def as_dict(self) -> dict:
        return {"step": self.step, "check": self.check, "value": self.value, "limit": self.limit,
                "reference": self.reference, "message": {"en": self.en, "zh": self.zh}}

    @property
    def nonfinite(self) -> bool:
        return self.check == "nonfinite"


def _bad(v: float | None) -> bool:
    return v is not None and not math.isfinite(v)


def _ok(v: float | None) -> bool:
    return v is not None and math.isfinite(v)


def rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), EPS)


def sig_digits(v: float) -> int:
    """Significant digits the printed value ``v`` needs to read back exactly (1..17)."""
    if v == 0 or not math.isfinite(v):
        return 1
    for d in range(1, 18):
        if float(f"{v:.{d - 1}e}") == v:
            return d
    return 17


def print_resolution(v: float, digits: int) -> float:
    """Half a unit of the last printed digit of ``v`` printed with ``digits`` significant digits."""
    if v == 0 or not math.isfinite(v):
        return 0.0
    return 0.5 * 10.0 ** (math.floor(math.log10(abs(v))) - digits + 1)


@dataclass
class RefPoint:
    loss: float | None
    grad_norm: float | None
    lr: float | None
    loss_scale: float | None
    nonfinite: bool
    exploded: bool = False


@dataclass
class Reference:
    """A reference curve the watched run is checked against, keyed by step.

    ``exact`` (a rerun of the same job) replaces the tolerances by the printing precision;
    ``digits`` is the median significant digits of its printed losses (floor for the per-value
    resolution, so a value that happens to end in zeros does not get a coarser limit).
    """

    name: str
    points: dict[int, RefPoint]
    exact: bool = False
    windowed: bool = False
    interval: int = 1
    digits: int = 7
    source: str | None = None

    @property
    def steps(self) -> list[int]:
        return sorted(self.points)

    @property
    def last_step(self) -> int | None:
        return max(self.points) if self.points else None

    @classmethod
    def from_points(cls, name: str, rows: Iterable[tuple[int, RefPoint]], *, exact: bool = False,
                    windowed: bool = False, source: str | None = None, tol: Tolerances | None = None
                    ) -> "Reference":
        tol = tol or Tolerances()
        points = dict(rows)
        steps = sorted(points)
        gaps = sorted(b - a for a, b in zip(steps, steps[1:]))
        interval = gaps[len(gaps) // 2] if gaps else 1
        digits = [sig_digits(p.loss) for p in points.values() if _ok(p.loss)][:200]
        ref = cls(name=name, points=points, exact=exact, windowed=windowed, interval=max(1, interval),
                  digits=int(median(digits)) if digits else 7, source=source)
        hist: deque[float] = deque(maxlen=tol.history)
        for s in steps:
            p = points[s]
            if _ok(p.grad_norm):
                if len(hist) >= tol.min_history and p.grad_norm > tol.explosion * median(hist):
                    p.exploded = True
                hist.append(p.grad_norm)
        return ref


@dataclass
class _RefState:
    ref: Reference
    compared: int = 0
    loss_errs: deque = field(default_factory=deque)
    gn_errs: deque = field(default_factory=deque)
    ref_bad_steps: list[int] = field(default_factory=list)


class Checker:
    """Feed every logged step (``observe``); returns the breaches found at that step.

    With no reference only the sanity checks run (non-finite loss, non-finite grad norm when no
    loss scaler reports, loss-scale collapse, grad-norm explosion).
    """

    def __init__(self, references: Iterable[Reference] = (), tol: Tolerances | None = None) -> None:
        self.tol = tol or Tolerances()
        self.refs = [_RefState(r, loss_errs=deque(maxlen=self.tol.window),
                               gn_errs=deque(maxlen=self.tol.window),
                               ref_bad_steps=sorted(s for s, p in r.points.items() if p.nonfinite))
                     for r in references]
        self.target_bad = 0
        self.gn_hist: deque[float] = deque(maxlen=self.tol.history)
        self.scales: deque[tuple[int, float]] = deque()
        self.points = 0

    def observe(self, p: Point) -> list[Breach]:
        out: list[Breach] = []
        self.points += 1
        if p.nonfinite:
            self.target_bad += 1
        for st in self.refs:
            out.extend(self._against(st, p))
        out.extend(self._sanity(p))
        if _ok(p.grad_norm):
            self.gn_hist.append(p.grad_norm)
        return out

    # ----- against one reference -----------------------------------------------------
    def _against(self, st: _RefState, p: Point) -> list[Breach]:
        ref, tol = st.ref, self.tol
        out: list[Breach] = []
        # non-finite more often than the reference (S3), counted up to this step
        ref_bad = _count_upto(st.ref_bad_steps, p.step)
        if p.nonfinite and self.target_bad > ref_bad:
            what = "loss" if _bad(p.loss) else "grad norm" if _bad(p.grad_norm) else "step (skipped)"
            out.append(Breach(p.step, "nonfinite", float(self.target_bad), float(ref_bad), ref.name,
                              f"non-finite {what} at step {p.step}: {self.target_bad} non-finite/skipped "
                              f"step(s) so far, {ref_bad} in {ref.name} up to the same step",
                              f"第 {p.step} 步 {_zh_what(what)}非有限（NaN/Inf）：累计 {self.target_bad} 步，"
                              f"{ref.name} 同期 {ref_bad} 步"))
        rp = ref.points.get(p.step)
        if rp is None:
            return out
        if _ok(p.lr) and _ok(rp.lr) and rel(p.lr, rp.lr) > tol.lr_rel and not ref.exact:
            out.append(Breach(p.step, "lr_mismatch", p.lr, rp.lr, ref.name,
                              f"learning rate {p.lr:.6g} at step {p.step} differs from {ref.name}'s {rp.lr:.6g}",
                              f"第 {p.step} 步学习率 {p.lr:.6g} 与 {ref.name} 的 {rp.lr:.6g} 不一致"))
        if ref.exact:
            out.extend(self._exact(st, p, rp))
            return out
        first = st.compared == 0
        st.compared += 1
        if _ok(p.loss) and _ok(rp.loss):
            err, ab = rel(p.loss, rp.loss), abs(p.loss - rp.loss)
            if first and ab >= tol.first_abs and err >= tol.first_rel:
                out.append(Breach(p.step, "first_step_loss", err, tol.first_rel, ref.name,
                                  f"first compared step {p.step}: loss {p.loss:.6g} vs {rp.loss:.6g} "
                                  f"(abs {ab:.3g} >= {tol.first_abs:g} and rel {err:.3%} >= {tol.first_rel:.1%})",
                                  f"首个对比步 {p.step}：loss {p.loss:.6g} 对 {rp.loss:.6g}（绝对误差 {ab:.3g} ≥ "
                                  f"{tol.first_abs:g} 且相对误差 {err:.3%} ≥ {tol.first_rel:.1%}）"))
            st.loss_errs.append(err)
            mean = sum(st.loss_errs) / len(st.loss_errs)
            if mean > tol.loss_mean_rel:
                out.append(Breach(p.step, "loss_mean", mean, tol.loss_mean_rel, ref.name,
                                  f"mean relative loss error over the last {len(st.loss_errs)} compared step(s) "
                                  f"is {mean:.2%} at step {p.step} (> {tol.loss_mean_rel:.0%})",
                                  f"截至第 {p.step} 步最近 {len(st.loss_errs)} 个对比步的 loss 平均相对误差 "
                                  f"{mean:.2%}（> {tol.loss_mean_rel:.0%}）"))
        if _ok(p.grad_norm) and _ok(rp.grad_norm):
            gerr = rel(p.grad_norm, rp.grad_norm)
            if first and gerr > tol.grad_mean_rel:
                out.append(Breach(p.step, "first_step_grad_norm", gerr, tol.grad_mean_rel, ref.name,
                                  f"first compared step {p.step}: grad norm {p.grad_norm:.6g} vs "
                                  f"{rp.grad_norm:.6g} ({gerr:.2%} > {tol.grad_mean_rel:.0%})",
                                  f"首个对比步 {p.step}：梯度范数 {p.grad_norm:.6g} 对 {rp.grad_norm:.6g}"
                                  f"（{gerr:.2%} > {tol.grad_mean_rel:.0%}）"))
            st.gn_errs.append(gerr)
            gmean = sum(st.gn_errs) / len(st.gn_errs)
            if gmean > tol.grad_mean_rel:
                out.append(Breach(p.step, "grad_norm_mean", gmean, tol.grad_mean_rel, ref.name,
                                  f"mean relative grad-norm error over the last {len(st.gn_errs)} compared "
                                  f"step(s) is {gmean:.2%} at step {p.step} (> {tol.grad_mean_rel:.0%})",
                                  f"截至第 {p.step} 步最近 {len(st.gn_errs)} 个对比步的梯度范数平均相对误差 "
                                  f"{gmean:.2%}（> {tol.grad_mean_rel:.0%}）"))
        return out

    def _exact(self, st: _RefState, p: Point, rp: RefPoint) -> list[Breach]:
        ref = st.ref
        for name, mine, theirs in (("loss", p.loss, rp.loss), ("grad norm", p.grad_norm, rp.grad_norm)):
            if mine is None or theirs is None:
                continue
            if not (_ok(mine) and _ok(theirs)):
                if _ok(mine) != _ok(theirs):
                    return [self._differs(p.step, name, mine, theirs, 0.0, ref)]
                continue
            limit = print_resolution(theirs, max(sig_digits(theirs), ref.digits)) * (1 + 1e-9) + EPS * abs(theirs)
            if abs(mine - theirs) > limit:
                return [self._differs(p.step, name, mine, theirs, limit, ref)]
        return []

    @staticmethod
    def _differs(step: int, name: str, mine: float, theirs: float, limit: float, ref: Reference) -> Breach:
        zh_name = "loss" if name == "loss" else "梯度范数"
        return Breach(step, "rerun_differs", abs(mine - theirs) if _ok(mine) and _ok(theirs) else None,
                      limit, ref.name,
                      f"step {step}: {name} {mine!r} does not reproduce {ref.name}'s {theirs!r} "
                      f"(beyond its printed precision)",
                      f"第 {step} 步：{zh_name} {mine!r} 未复现 {ref.name} 的 {theirs!r}（超出其打印精度）")

    # ----- single-run sanity ---------------------------------------------------------
    def _sanity(self, p: Point) -> list[Breach]:
        tol = self.tol
        out: list[Breach] = []
        if not self.refs:
            if _bad(p.loss):
                out.append(Breach(p.step, "nonfinite", p.loss, None, None,
                                  f"non-finite loss ({p.loss}) at step {p.step}",
                                  f"第 {p.step} 步 loss 非有限（{p.loss}）"))
            elif _bad(p.grad_norm) and p.loss_scale is None:
                out.append(Breach(p.step, "nonfinite", p.grad_norm, None, None,
                                  f"non-finite grad norm ({p.grad_norm}) at step {p.step} without a loss scaler",
                                  f"第 {p.step} 步梯度范数非有限（{p.grad_norm}），且未使用 loss scale"))
            if _ok(p.loss_scale):
                self.scales.append((p.step, p.loss_scale))
                while self.scales and self.scales[0][0] <= p.step - tol.scale_window:
                    self.scales.popleft()
                top = max(s for _, s in self.scales)
                if p.loss_scale * tol.scale_drop <= top:
                    out.append(Breach(p.step, "loss_scale_collapse", p.loss_scale, top / tol.scale_drop, None,
                                      f"loss scale fell from {top:g} to {p.loss_scale:g} within "
                                      f"{tol.scale_window} steps (step {p.step}): repeated overflows",
                                      f"第 {p.step} 步 loss scale 在 {tol.scale_window} 步内从 {top:g} 降到 "
                                      f"{p.loss_scale:g}：反复溢出"))
        if _ok(p.grad_norm) and len(self.gn_hist) >= tol.min_history:
            med = median(self.gn_hist)
            if p.grad_norm > tol.explosion * med:
                mirrored = [st.ref.name for st in self.refs
                            if (rp := st.ref.points.get(p.step)) is not None and rp.exploded]
                if not mirrored:
                    out.append(Breach(p.step, "grad_norm_explosion", p.grad_norm, tol.explosion * med, None,
                                      f"grad norm {p.grad_norm:.4g} at step {p.step} is over {tol.explosion:g}x "
                                      f"its recent median {med:.4g}",
                                      f"第 {p.step} 步梯度范数 {p.grad_norm:.4g} 超过近期中位数 {med:.4g} 的 "
                                      f"{tol.explosion:g} 倍"))
        return out


def _count_upto(sorted_steps: list[int], step: int) -> int:
    from bisect import bisect_right
    return bisect_right(sorted_steps, step)


def _zh_what(what: str) -> str:
    return {"loss": "loss ", "grad norm": "梯度范数", "step (skipped)": "（跳过的迭代）"}[what]
