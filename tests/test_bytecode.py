"""Every `precdx` call imports ~190 modules of the package: they must come from .pyc files, also
where PYTHONDONTWRITEBYTECODE is set (the interpreter then never writes any, and an editable
install writes none either). `make setup` byte-compiles engine/ with compileall, which writes
them regardless of that variable; pip does the same for a wheel install."""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_make_setup_byte_compiles_the_package():
    makefile = (REPO / "Makefile").read_text()
    setup = re.search(r"^setup:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert setup, "the setup target has a recipe"
    assert re.search(r"-m compileall\b.*\bengine\b", setup.group(1)), setup.group(1)


def test_compileall_writes_bytecode_despite_pythondontwritebytecode(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "mod.py").write_text("X = 1\n")
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(pkg)], check=True, env=env)
    assert Path(importlib.util.cache_from_source(str(pkg / "mod.py"))).is_file()


@pytest.mark.slow
def test_a_wheel_install_has_bytecode_for_every_module(tmp_path):
    wheel = pytest.importorskip("hatchling.builders.wheel", reason="hatchling (the build back end) not installed")
    built = next(wheel.WheelBuilder(str(REPO)).build(directory=str(tmp_path / "dist"), versions=["standard"]))
    target = tmp_path / "site"
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                           "--target", str(target), built], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    sources = sorted((target / "precdx").rglob("*.py"))
    assert len(sources) > 150
    missing = [s for s in sources if not Path(importlib.util.cache_from_source(str(s))).is_file()]
    assert not missing, missing[:5]
