"""The package is imported as `precdx` (issue 18): the source folder keeps its layout name,
engine/, the wheel installs it as the one top-level package `precdx` (no `engine`, a name many
training codebases use), and nothing imports, patches or lazily loads a module by the folder's
name. In a checkout both names would resolve (the `precdx` symlink points at engine/), and a
module loaded under both would be two modules: two fact registries, isinstance failing across
them. tools/rename_package.py rewrites such references; its `--check` is the gate here."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("rename_package", REPO / "tools" / "rename_package.py")
rename_package = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rename_package)

OLD = rename_package.FOLDER  # spelled through the tool so that its --check does not flag this file


def test_a_checkout_imports_precdx_from_the_engine_folder():
    import precdx

    assert Path(precdx.__file__).resolve() == REPO / "engine" / "__init__.py"
    link = REPO / "precdx"
    assert link.is_symlink() and os.readlink(link) == "engine", "the checkout's `precdx` is a symlink to engine/"


def test_nothing_refers_to_a_module_by_the_folder_name():
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "rename_package.py"), "--check"],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, ("run `python tools/rename_package.py`:\n" + proc.stdout + proc.stderr)


REWRITTEN = [  # (before, after) with {o} for the old import name
    ("from {o}.diagnosis import diagnose", "from precdx.diagnosis import diagnose"),
    ("from {o} import progress", "from precdx import progress"),
    ("import {o}.service.app as app_module", "import precdx.service.app as app_module"),
    ('"import {o}, {o}.probe, {o}.demo\\n"', '"import precdx, precdx.probe, precdx.demo\\n"'),
    ('"def f():\\n    from {o} import service\\n"', '"def f():\\n    from precdx import service\\n"'),
    ('mock.patch("{o}.service.app.create_app")', 'mock.patch("precdx.service.app.create_app")'),
    ('importlib.import_module("{o}.demo.watching")', 'importlib.import_module("precdx.demo.watching")'),
    ('find_spec("{o}")', 'find_spec("precdx")'),
    ('STEP_FN = "{o}.watch.hf:trainer_step"', 'STEP_FN = "precdx.watch.hf:trainer_step"'),
    ('precdx = "{o}.cli:main"', 'precdx = "precdx.cli:main"'),
    ("python -m {o}.watch.replayer", "python -m precdx.watch.replayer"),
    ("users write `from {o}.watch import Watcher`.", "users write `from precdx.watch import Watcher`."),
    ('f"{o}.{{name}}"', 'f"precdx.{{name}}"'),
    ("print({o}.__version__)", "print(precdx.__version__)"),
]
LEFT_ALONE = [
    "the code lives in {o}/cli.py and {o}/collectors/",
    'Path(__file__).parents[1] / "{o}" / "rulepack"',
    '@click.option("--{o}", type=click.Choice(ENGINES))',
    "diagnose(facts, {o}=settings.{o}, lang=lang)",
    "import durable.{o}\nself.{o}.facts",
    'raise ValueError("cannot be sent to the durable {o}.")',
    "the rule {o} asks; the rollout {o}. Then the {o} facts",
    "import durable_rules_engine as _engine",
    "transformer-{o}.diagnosis",
]


@pytest.mark.parametrize("before,after", REWRITTEN)
def test_the_rename_tool_rewrites_import_names(before, after):
    rules = rename_package.rules(REPO / "engine")
    got = rename_package.rewrite(before.format(o=OLD), rules)
    assert got == after.format()
    assert rename_package.rewrite(got, rules) == got  # idempotent


@pytest.mark.parametrize("text", LEFT_ALONE)
def test_the_rename_tool_leaves_folder_paths_options_and_prose(text):
    text = text.format(o=OLD)
    assert rename_package.rewrite(text, rename_package.rules(REPO / "engine")) == text


# The run checks sys.modules after running the code: a module loaded by the folder's name shows.
RUN = """
import importlib, json, pkgutil, sys
from precdx.cli import main
for args in (["--help"], ["diagnose", sys.argv[1], "--format", "json", "-o", sys.argv[2]]):
    try:
        main(args, standalone_mode=False)
    except SystemExit as exc:
        assert not exc.code, exc
skipped = []
if sys.argv[3] == "all":
    import precdx
    for info in pkgutil.walk_packages(precdx.__path__, "precdx."):
        try:
            importlib.import_module(info.name)
        except ImportError as exc:  # an optional extra that is not installed
            skipped.append(f"{info.name}: {exc}")
print(json.dumps({"old": sorted(m for m in sys.modules if m == OLD or m.startswith(OLD + ".")),
                  "new": sum(m.startswith("precdx.") for m in sys.modules), "skipped": skipped}))
"""


@pytest.mark.parametrize("scope", ["cli", pytest.param("all", marks=pytest.mark.slow)])
def test_running_precdx_loads_no_module_under_the_folder_name(scope, shared_dir, tmp_path):
    case = shared_dir / "scenarios" / "case-01"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", f"OLD = {OLD!r}\n{RUN}", str(case), str(tmp_path / "d.json"),
                           scope], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.splitlines()[-1])
    assert got["old"] == [], f"loaded twice, under the folder's name too: {got['old']}"
    assert got["new"] > (150 if scope == "all" else 40), got
    assert json.loads((tmp_path / "d.json").read_text())["verdict"]
    if scope == "all":
        assert not [s for s in got["skipped"] if f"'{OLD}" in s], got["skipped"]


def _build(tmp_path: Path, version: str) -> zipfile.ZipFile:
    wheel = pytest.importorskip("hatchling.builders.wheel", reason="hatchling (the build back end) not installed")
    path = next(wheel.WheelBuilder(str(REPO)).build(directory=str(tmp_path), versions=[version]))
    return zipfile.ZipFile(path)


def test_the_wheel_installs_precdx_with_its_rule_pack_and_kb_and_no_engine(tmp_path):
    whl = _build(tmp_path, "standard")
    names = whl.namelist()
    top = {n.split("/")[0] for n in names}
    assert top == {"precdx", "precdx-0.1.0.dist-info"}, top
    py = {f"precdx/{p.relative_to(REPO / 'engine').as_posix()}" for p in (REPO / "engine").rglob("*.py")}
    assert py <= set(names), sorted(py - set(names))[:5]
    for data in ("rules", "kb"):
        shipped = {f"precdx/_pack/{data}/{p.relative_to(REPO / data).as_posix()}"
                   for p in (REPO / data).rglob("*.yaml")}
        assert shipped and shipped <= set(names), (data, sorted(shipped - set(names))[:5])
    assert "precdx/data/mechanisms.yaml" in names
    entry_points = whl.read("precdx-0.1.0.dist-info/entry_points.txt").decode()
    assert "precdx = precdx.cli:main" in entry_points


def test_the_editable_install_puts_the_checkout_root_on_the_path(tmp_path):
    """`pip install -e .`: hatchling cannot map engine/ to precdx in dev mode, so the root goes on
    sys.path (a .pth file) and the `precdx` symlink there is what `import precdx` finds."""
    whl = _build(tmp_path, "editable")
    pth = [n for n in whl.namelist() if n.endswith(".pth")]
    assert [n for n in whl.namelist() if not n.startswith("precdx-0.1.0.dist-info/")] == pth == ["_precdx.pth"]
    assert [Path(line) for line in whl.read(pth[0]).decode().split()] == [REPO]
