"""Inputs can never run code: YAML is only ever loaded through the safe-loader class (one module,
engine/yamlsafe.py), nothing in engine/ calls a shell, a process or eval, and a case full of shell
tricks (command substitution, backticks, eval, python YAML tags) is read without running any."""
from __future__ import annotations

import ast
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

import cli
from precdx import yamlsafe
from tests.corpus import healthy

REPO = Path(__file__).resolve().parents[1]
SOURCES = sorted([*(REPO / "engine").rglob("*.py"), REPO / "cli.py"])
YAML_LOADING = {"load", "load_all", "unsafe_load", "unsafe_load_all", "full_load", "full_load_all", "Loader",
                "FullLoader", "UnsafeLoader", "CLoader", "CFullLoader", "CUnsafeLoader", "add_constructor",
                "add_multi_constructor", "compose", "parse", "scan"}
BANNED_CALLS = {"eval", "exec", "compile", "__import__", "breakpoint"}
BANNED_MODULES = {"subprocess", "pickle", "marshal", "shelve", "pty", "dill", "cloudpickle"}
BANNED_OS = {"system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp"}  # and exec*/spawn*


def _violations(path: Path, rel: str | None = None) -> list[str]:
    rel = rel or path.relative_to(REPO).as_posix()
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
    found = []
    for node in ast.walk(tree):
        where = f"{rel}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            mod, attr = node.value.id, node.attr
            if mod == "yaml" and attr in YAML_LOADING and rel != "engine/yamlsafe.py":
                found.append(f"{where}: yaml.{attr} (load YAML through precdx.yamlsafe)")
            if mod == "os" and (attr in BANNED_OS or attr.startswith(("exec", "spawn"))):
                found.append(f"{where}: os.{attr}")
        elif isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id in BANNED_CALLS:
                found.append(f"{where}: {node.func.id}()")
            for kw in node.keywords:
                if kw.arg == "Loader":
                    found.append(f"{where}: Loader= (load YAML through precdx.yamlsafe)")
                if kw.arg == "shell" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                    found.append(f"{where}: shell=")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                if name.split(".")[0] in BANNED_MODULES:
                    found.append(f"{where}: import {name}")
                if name == "yaml" and isinstance(node, ast.ImportFrom) and rel != "engine/yamlsafe.py":
                    found.append(f"{where}: from yaml import ... (load YAML through precdx.yamlsafe)")
    return found


def test_sources_are_scanned() -> None:
    assert len(SOURCES) > 50 and REPO / "engine" / "yamlsafe.py" in SOURCES


def test_no_unsafe_yaml_and_no_code_execution_in_engine() -> None:
    problems = [v for path in SOURCES for v in _violations(path)]
    assert problems == []


def test_the_scan_catches_what_it_looks_for(tmp_path: Path) -> None:
    bad = tmp_path / "probe.py"
    bad.write_text("import subprocess\nimport yaml\nx = yaml.load(s, Loader=yaml.Loader)\n"
                   "os.system('x')\neval('1')\nsubprocess.run('x', shell=True)\n")
    found = " | ".join(_violations(bad, "engine/probe.py"))
    for needle in ("import subprocess", "yaml.load", "Loader=", "yaml.Loader", "os.system", "eval()", "shell="):
        assert needle in found


def test_the_one_yaml_loader_is_a_safe_loader() -> None:
    for loader in (yamlsafe._StrictLoader, yamlsafe._CountingLoader):
        assert issubclass(loader, yaml.constructor.SafeConstructor)
        assert not issubclass(loader, (yaml.constructor.FullConstructor, yaml.constructor.UnsafeConstructor))


@pytest.fixture
def no_processes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Any attempt to start a program fails the test (worker processes of the msprobe pool fork
    through multiprocessing, which is allowed: they run our code, not the input's)."""
    attempts: list[str] = []

    def refuse(name):
        def _refuse(*args, **kwargs):
            attempts.append(f"{name}{args[:2]}")
            raise AssertionError(f"{name} called while reading inputs")
        return _refuse

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse("subprocess.Popen"))
    for name in ("system", "popen", "execv", "execve", "execvp", "execvpe", "execl", "execlp", "spawnv",
                 "spawnve", "spawnvp", "posix_spawn", "posix_spawnp"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, refuse(f"os.{name}"))
    return attempts


def test_a_case_full_of_shell_tricks_runs_nothing(tmp_path: Path, no_processes: list[str]) -> None:
    mark = tmp_path / "pwned"
    touch = f"touch {mark}"
    case = healthy.write_case(tmp_path / "case", "hf")
    target = case / "target"
    (target / "run_train.sh").write_text(
        "#!/bin/bash\n"
        f"SEED=$({touch}_subst; echo 7)\n"
        f"LR=`{touch}_tick`\n"
        f'CMD="{touch}_eval"\neval "$CMD"\n'
        f"source <({touch}_procsub)\n"
        f"exec bash -c '{touch}_exec'\n"
        f"trap '{touch}_trap' EXIT\n"
        f"X=${{UNSET:-$({touch}_default)}}\n"
        f"N=$(( $({touch}_arith) + 1 ))\n"
        f"cat <<EOF > cfg.txt\n$({touch}_heredoc)\nEOF\n"
        "torchrun --nproc_per_node 8 train_clm.py train_config.yaml --seed $SEED --learning_rate $LR $X\n")
    with open(target / "env.txt", "a") as fh:
        fh.write(f"PROMPT_COMMAND=$({touch}_env)\nBASH_ENV=`{touch}_bashenv`\n")
    with open(target / "train_config.yaml", "a") as fh:
        fh.write(f'callback: !!python/object/apply:os.system ["{touch}_yaml"]\n')
    facts = tmp_path / "facts.yaml"
    facts.write_text(f'facts:\n  - !!python/object/apply:os.system ["{touch}_facts"]\n')
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "r.yaml").write_text(f'rules:\n  - !!python/object/apply:os.system ["{touch}_rules"]\n')

    runner = CliRunner()
    results = [runner.invoke(cli.main, args) for args in (
        ["diagnose", str(case), "--format", "json"],
        ["facts", str(case), "--format", "json"],
        ["inspect", str(case)],
        ["diagnose", str(case), "--facts", str(facts)],
        ["diagnose", str(case), "--rules", str(rules)],
    )]

    assert no_processes == []
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("pwned")) == []
    assert [r.exit_code for r in results] == [0, 0, 0, 2, 2]
    assert all(r.exception is None or isinstance(r.exception, SystemExit) for r in results)
    assert "YAML construct not allowed" in results[3].stderr and "YAML construct not allowed" in results[4].stderr
