"""Every real-log excerpt in shared/real-logs parses to its hand-read records and overflow events,
and to no other records."""
from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
import yaml

from precdx.collectors.logs.model import Event, Record
from precdx.collectors.logs.reader import ReadStats, iter_log

REAL = Path(os.environ.get("PRECDX_SHARED", Path(__file__).resolve().parents[3].parent / "shared")) / "real-logs"
FIELDS = ("step", "loss", "grad_norm", "loss_scale", "lr", "skipped", "nan_iters")


def _same(got, want) -> bool:
    if want is None or got is None:
        return want is None and got is None
    if isinstance(want, float) and math.isnan(want):
        return isinstance(got, float) and math.isnan(got)
    return math.isclose(float(got), float(want), rel_tol=1e-9, abs_tol=1e-15)


def _specs() -> list[Path]:
    return sorted(REAL.glob("*/*.yaml")) if REAL.is_dir() else []


def test_excerpts_present(shared_dir: Path) -> None:
    assert len(sorted((shared_dir / "real-logs").glob("*/*.yaml"))) >= 33


@pytest.mark.parametrize("spec_path", _specs(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_real_excerpt(spec_path: Path) -> None:
    spec = yaml.safe_load(spec_path.read_text())
    log = spec_path.with_name(spec["file"])
    items = list(iter_log(log, ReadStats(str(log))))
    records: dict[int, Record] = {}
    for it in items:
        if isinstance(it, Record):
            assert it.line not in records, f"two records on line {it.line}"
            records[it.line] = it
    expected = spec["expected"]
    assert sorted(records) == sorted(e["line"] for e in expected)
    for e in expected:
        rec = records[e["line"]]
        assert rec.kind == e.get("kind", "train"), e
        for key in FIELDS:
            if key in e:
                assert _same(getattr(rec, key), e[key]), (e["line"], key, getattr(rec, key), e[key])
        for key in spec.get("extra_fields", []):
            if key in e:
                assert _same(rec.extra.get(key), e[key]), (e["line"], key)
    overflows = {it.line: it for it in items if isinstance(it, Event) and it.kind == "overflow"}
    want = spec.get("expected_events", [])
    assert sorted(overflows) == sorted(e["line"] for e in want)
    for e in want:
        ev = overflows[e["line"]]
        for key in ("attempted", "reduced_to", "hysteresis_to"):
            assert _same(getattr(ev, key), e[key]), (e["line"], key)
