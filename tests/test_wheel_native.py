"""A wheel built where a C compiler is carries the block reader's compiled kernels (hatch_build.py,
the wheel target's build hook): the library compiled from the scan.c being packaged, next to it
under the name native.library_name() gives, in a wheel tagged for this platform, which an install
loads from inside its package. With PRECDX_NATIVE=0 or no compiler the wheel is the pure one and the
build says why; a library left next to the source is never packed; editable builds are untouched.
(The wheel's layout otherwise is test_package_name.py.)"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from unittest import mock

import pytest

from precdx.collectors.logs import native
from tests.collectors.logs.conftest import load_build_native

REPO = Path(__file__).resolve().parents[1]
LOGS = "precdx/collectors/logs/"
needs_cc = pytest.mark.skipif(load_build_native().compiler() is None,
                              reason="no C compiler: every wheel built here is the pure one")


def _build(root: Path, out: Path, version: str = "standard", **env: str | None) -> Path:
    """A wheel of the project at `root`, built in-process with the environment changed by `env`
    (None removes a variable)."""
    wheel = pytest.importorskip("hatchling.builders.wheel", reason="hatchling (the build back end) not installed")
    with mock.patch.dict(os.environ):
        for key, value in env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        return Path(next(wheel.WheelBuilder(str(root)).build(directory=str(out), versions=[version])))


def _libraries(whl: Path) -> list[str]:
    return [n for n in zipfile.ZipFile(whl).namelist() if Path(n).name.startswith("_scan-")]


def _tag(whl: Path) -> str:
    return whl.name[:-len(".whl")].split("-", 2)[2]  # precdx-0.1.0-<python>-<abi>-<platform>.whl


def _wheel_file(whl: Path) -> str:
    return zipfile.ZipFile(whl).read("precdx-0.1.0.dist-info/WHEEL").decode()


@pytest.fixture(scope="module")
def native_wheel(tmp_path_factory) -> Path:
    return _build(REPO, tmp_path_factory.mktemp("wheel"), PRECDX_NATIVE="1")


@needs_cc
def test_a_wheel_built_with_a_compiler_carries_the_library_next_to_scan_c(native_wheel) -> None:
    from packaging.tags import sys_tags

    names = zipfile.ZipFile(native_wheel).namelist()
    assert LOGS + "scan.c" in names
    assert _libraries(native_wheel) == [LOGS + native.library_name()]
    tag = _tag(native_wheel)
    assert not tag.endswith("-any") and tag in {str(t) for t in sys_tags()}, tag  # this machine installs it
    assert tag.startswith("py3-none-"), tag  # any Python 3 (the library has no Python API)
    assert "Root-Is-Purelib: false" in _wheel_file(native_wheel) and f"Tag: {tag}" in _wheel_file(native_wheel)


RUN = """
import json, precdx
from precdx.collectors.logs import native
k = native.kernels()
print(json.dumps({"package": precdx.__file__, "library": k and str(k.path), "why": native.why(),
                  "number": k and native.number(k, b"2.5e-3")}))
"""


@needs_cc
def test_the_unpacked_wheel_loads_the_library_from_inside_its_package(native_wheel, tmp_path) -> None:
    site, cache = tmp_path / "site", tmp_path / "cache"
    zipfile.ZipFile(native_wheel).extractall(site)
    cache.mkdir()
    env = dict(os.environ, PYTHONPATH=str(site), XDG_CACHE_HOME=str(cache), PRECDX_NATIVE="1")
    proc = subprocess.run([sys.executable, "-c", RUN], capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.splitlines()[-1])
    assert Path(got["package"]) == site / "precdx" / "__init__.py"
    assert got["library"] == str(site / LOGS / native.library_name()), got["why"]
    assert got["number"] == 2.5e-3  # read by the library's pdx_number
    assert not any(cache.iterdir())


def test_with_precdx_native_0_the_wheel_is_the_pure_one_and_says_why(tmp_path, capfd) -> None:
    whl = _build(REPO, tmp_path, PRECDX_NATIVE="0")
    assert _libraries(whl) == [] and LOGS + "scan.c" in zipfile.ZipFile(whl).namelist()
    assert _tag(whl) == "py3-none-any" and "Root-Is-Purelib: true" in _wheel_file(whl)
    said = [line for line in capfd.readouterr().err.splitlines() if "C kernels" in line]
    assert len(said) == 1 and "PRECDX_NATIVE=0" in said[0], said


def test_without_a_compiler_the_wheel_is_the_pure_one_and_says_why(tmp_path, capfd) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    whl = _build(REPO, tmp_path, PATH=str(empty), CC=None, PRECDX_NATIVE="1")
    assert _libraries(whl) == [] and _tag(whl) == "py3-none-any"
    said = [line for line in capfd.readouterr().err.splitlines() if "C kernels" in line]
    assert len(said) == 1 and "no C compiler" in said[0], said


@pytest.mark.parametrize("setting", [pytest.param("1", marks=needs_cc), "0"])
def test_a_library_left_next_to_the_source_is_never_packed(setting, tmp_path) -> None:
    """In a copy of the project with no .gitignore (as an unpacked sdist is): a library of an
    older scan.c and one under the current name are both left out; only the one compiled for
    the wheel goes in."""
    root = tmp_path / "project"
    for part in ("engine", "rules", "kb"):
        shutil.copytree(REPO / part, root / part, ignore=shutil.ignore_patterns("__pycache__", "_scan-*"))
    for part in ("pyproject.toml", "README.md", "hatch_build.py", "tools/build_native.py"):
        (root / part).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / part, root / part)
    assert not (root / ".gitignore").exists()
    logs = root / "engine" / "collectors" / "logs"
    current = native.library_name(logs / "scan.c")
    for stale in ("_scan-0000000000000000.so", current):
        (logs / stale).write_bytes(b"stale")
    whl = _build(root, tmp_path / "out", PRECDX_NATIVE=setting)
    if setting == "0":
        assert _libraries(whl) == []
    else:
        assert _libraries(whl) == [LOGS + current]
        assert zipfile.ZipFile(whl).read(LOGS + current) != b"stale"


def test_an_editable_build_is_left_alone(tmp_path, capfd) -> None:
    """`pip install -e .` (make setup): the checkout runs, tools/build_native.py builds beside it."""
    whl = _build(REPO, tmp_path, "editable", PRECDX_NATIVE="1")
    assert _libraries(whl) == [] and _tag(whl) == "py3-none-any"
    assert "C kernels" not in capfd.readouterr().err
