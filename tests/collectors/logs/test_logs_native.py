"""The block reader's compiled kernels (engine/collectors/logs/scan.c, native.py): they build
wherever a C compiler is, read a number only when they give exactly what float() gives (else
they leave it to the shared grammar), and a missing compiler or PRECDX_NATIVE=0 falls back to
the numpy path. (That both paths give the per-line reader's series is test_logs_blocks.py.)"""
from __future__ import annotations

import math
import shutil
import struct

import pytest

from precdx.collectors.logs import native

needs_cc = pytest.mark.skipif(native._compiler() is None, reason="no C compiler: the numpy path is used")


@pytest.fixture
def kern(monkeypatch):
    monkeypatch.setenv("PRECDX_NATIVE", "1")
    k = native.kernels()
    assert k is not None, native.why()
    return k


def _same(a: float, b: float) -> bool:
    return struct.pack("<d", a) == struct.pack("<d", b)  # bit for bit: -0.0 is not 0.0


@needs_cc
@pytest.mark.parametrize("text", [
    "1.5", "-0.0", "0", "-0", "+3", ".5", "5.", "2.999660E-04", "1.639", "61.3", "1e22", "1E-22",
    "123456789012345", "0.000000000000000000001", "00012.5", "  7  ", "9.99999999999999e-5",
    "4.2e+00", "1.0E+00", "0e500", "-1.25e-3",
])
def test_plain_decimals_read_exactly_as_float_reads_them(kern, text: str) -> None:
    got = native.number(kern, text.encode())
    assert got is not None and _same(got, float(text)), text


@needs_cc
@pytest.mark.parametrize("text", [
    "", " ", ".", "+", "-", "e5", "1e", "1e+", "nan", "NaN", "inf", "-inf", "1_0", "1,5", "0x10",
    "1.2K", "1e23", "1e-23", "1e-300", "9.999999999999999e-5", "1234567890123456", "1.5\t", "\t1.5", "1..5", "1.5.", "--1", "1e5.5",
])
def test_other_spellings_are_left_to_the_grammar(kern, text: str) -> None:
    assert native.number(kern, text.encode()) is None, text


@needs_cc
def test_random_decimals_match_float(kern) -> None:
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies

    @hypothesis.settings(max_examples=3000, deadline=None, derandomize=True)
    @hypothesis.given(sign=st.sampled_from(["", "+", "-"]), whole=st.text("0123456789", max_size=18),
                      frac=st.none() | st.text("0123456789", max_size=18),
                      exp=st.none() | st.tuples(st.sampled_from("eE"), st.sampled_from(["", "+", "-"]),
                                                st.integers(0, 40)),
                      pad=st.tuples(st.integers(0, 2), st.integers(0, 2)))
    def check(sign, whole, frac, exp, pad):
        text = sign + whole + ("" if frac is None else "." + frac)
        if exp is not None:
            text += f"{exp[0]}{exp[1]}{exp[2]}"
        text = " " * pad[0] + text + " " * pad[1]
        got = native.number(kern, text.encode())
        try:
            want = float(text)
        except ValueError:
            assert got is None, text
            return
        if got is not None:
            assert _same(got, want), (text, got, want)
        elif math.isfinite(want):  # left to the grammar only beyond 15 digits or 10^±22
            digits = (whole + (frac or "")).lstrip("0")
            assert len(digits) > 15 or exp is not None and abs(exp[2]) > 0, text

    check()


@needs_cc
def test_the_library_is_built_once_per_source_and_platform(kern) -> None:
    path = native.library_path()
    assert kern.path == path and path.is_file()
    assert native.build() == path  # already there: not rebuilt


def test_without_a_compiler_the_numpy_path_is_used(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(native, "_loaded", False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # nothing built there yet
    monkeypatch.setattr(native, "_compiler", lambda: None)
    assert native.kernels() is None
    assert "no C compiler" in native.why()


def test_precdx_native_0_turns_it_off(monkeypatch) -> None:
    monkeypatch.setenv("PRECDX_NATIVE", "0")
    assert native.kernels() is None and native.why() == "PRECDX_NATIVE=0"


@needs_cc
def test_a_failed_build_says_why(monkeypatch, tmp_path) -> None:
    bad = tmp_path / "scan.c"
    bad.write_text("this is not C\n")
    monkeypatch.setattr(native, "SOURCE", bad)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(RuntimeError, match="failed"):
        native.build()
    assert not list((tmp_path / "cache").rglob("*.so"))  # no half-built library left behind
    assert shutil.which(native._compiler().split()[0])
