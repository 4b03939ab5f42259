"""The block reader's compiled kernels (engine/collectors/logs/scan.c, native.py, built by
tools/build_native.py): they build wherever a C compiler is, read a number only when they give
exactly what float() gives (else they leave it to the shared grammar), and a library not built,
or PRECDX_NATIVE=0, falls back to the numpy path. (That both paths give the per-line reader's
series is test_logs_blocks.py.)"""
from __future__ import annotations

import math
import struct
import pytest

from precdx.collectors.logs import native
from tests.collectors.logs.conftest import load_build_native

build_native = load_build_native()

needs_cc = pytest.mark.skipif(build_native.compiler() is None, reason="no C compiler: the numpy path is used")


@pytest.fixture
def kern(monkeypatch):
    monkeypatch.setenv("PRECDX_NATIVE", "1")
    build_native.build()  # (make setup has; a no-op then)
    monkeypatch.setattr(native, "_loaded", False)
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
@pytest.mark.slow  # (3,000 examples: `make test` runs it, the fast lane does not)
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
    assert kern.path.name == native.library_name() and kern.path in native.candidates()
    assert build_native.build() == kern.path  # already there: not rebuilt
    edited = kern.path.parent / "edited.c"
    try:
        edited.write_bytes(native.SOURCE.read_bytes() + b"\n/* edited */\n")
        assert native.library_name(edited) != kern.path.name  # an edit never loads the old library
    finally:
        edited.unlink()


@needs_cc
def test_the_tool_builds_into_the_cache_when_asked(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    target = native.candidates()[1]
    assert target == tmp_path / "precdx" / "native" / native.library_name()
    assert build_native.build(force=True, targets=[target]) == target and target.is_file()
    monkeypatch.setattr(native, "candidates", lambda: [target])
    monkeypatch.setattr(native, "_loaded", False)
    assert native.kernels() is not None and native.kernels().path == target


def test_not_built_means_the_numpy_path(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(native, "_loaded", False)
    monkeypatch.setattr(native, "candidates", lambda: [tmp_path / native.library_name()])
    assert native.kernels() is None
    assert "not built" in native.why() and "tools/build_native.py" in native.why()


def test_a_library_that_does_not_load_says_which_and_why(monkeypatch, tmp_path) -> None:
    bad = tmp_path / native.library_name()
    bad.write_bytes(b"not a shared library")
    monkeypatch.setattr(native, "_loaded", False)
    monkeypatch.setattr(native, "candidates", lambda: [bad])
    assert native.kernels() is None and str(bad) in native.why()


def test_without_a_compiler_the_tool_says_so_and_succeeds(monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.setattr(build_native, "compiler", lambda: None)
    monkeypatch.setattr(native, "candidates", lambda: [tmp_path / native.library_name()])
    monkeypatch.setattr("sys.argv", ["build_native.py", "--force"])
    assert build_native.main() == 0
    assert "no C compiler" in capsys.readouterr().err


def test_precdx_native_0_turns_it_off(monkeypatch) -> None:
    monkeypatch.setenv("PRECDX_NATIVE", "0")
    assert native.kernels() is None and native.why() == "PRECDX_NATIVE=0"


@needs_cc
def test_a_failed_build_says_why(tmp_path) -> None:
    bad = tmp_path / "scan.c"
    bad.write_text("this is not C\n")
    with pytest.raises(RuntimeError, match="failed"):
        build_native.build(force=True, source=bad, targets=[tmp_path / "out" / "lib.so"])
    assert not list(tmp_path.rglob("*.so")) and not list(tmp_path.rglob("*.tmp"))  # nothing half-built left
