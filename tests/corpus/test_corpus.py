"""The broken-input corpus: each file of tests/corpus/<kind>/ (and each input generated here) is
put into a healthy case folder and diagnosed through the real CLI; `manifest.yaml` says what
precdx must answer (a warning naming the file, an error naming the file, or nothing at all), and
under every answer: no traceback, no exit 1, no command from the file ever run.

`pytest tests/corpus -k launch` runs one kind."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Callable

import pytest
from click.testing import CliRunner

import cli
from precdx.yamlsafe import load_yaml_file
from tests.corpus import healthy

HERE = Path(__file__).resolve().parent
MANIFEST = load_yaml_file(str(HERE / "manifest.yaml"))
EXPECTATIONS = ("warning", "error", "accepted")
ENTRY_KEYS = {"expect", "message", "case", "gap"}
MIN_CORPUS_FILES = 50
# Python exception names that mean an internal bug was swallowed into a warning (e.g. a sniffer
# tripping on odd bytes); the user-facing messages never need them.
INTERNAL = re.compile(r"\b(TypeError|AttributeError|KeyError|IndexError|NameError|AssertionError|"
                      r"RecursionError|OverflowError|ZeroDivisionError|MemoryError|UnboundLocalError|"
                      r"Traceback)\b")
PWNED = "precdx_pwned_*"  # marker files the shell-trick corpus files would create if run


# ------------------------------------------------------------------ generated inputs
def _big_line_log(path: Path) -> None:
    path.write_bytes(b"A" * (5 << 20))  # 5 MiB, no newline


def _long_lines_then_iterations(path: Path) -> None:
    path.write_bytes((b"B" * (2 << 20) + b"\n") * 3 + healthy.megatron_log().encode())


def _only_newlines(path: Path) -> None:
    path.write_bytes(b"\n" * 200_000)


def _deep_arithmetic(path: Path) -> None:
    terms = "+".join(["1"] * 20_000)
    path.write_text(healthy.MEGATRON_SCRIPT.replace("NPROC=8\n", f"NPROC=8\nN=$(({'(' * 300}1{')' * 300}))\n"
                                                                 f"M=$(({terms}))\n"))


def _deep_default_expansion(path: Path) -> None:
    path.write_text("#!/bin/bash\nX=" + "${A:-" * 3000 + "1" + "}" * 3000 +
                    "\ntorchrun --nproc_per_node 8 pretrain_gpt.py --seed $X\n")


_DS = '{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 1}, "nest": %s}'


def _ds_deep_nesting(path: Path) -> None:
    path.write_text(_DS % ("[" * 100_000 + "]" * 100_000))


def _ds_deep_but_parseable(path: Path) -> None:
    path.write_text(_DS % ('{"a": ' * 500 + "1" + "}" * 500))


def _facts_deep_nesting(path: Path) -> None:
    path.write_text('{"facts": ' + "[" * 50_000 + "]" * 50_000 + "}")


def _many_facts(path: Path) -> None:
    rows = [f"  - {{type: config_value, role: target, run: target, name: key{i}, category: other, value: '{i}'}}"
            for i in range(5000)]
    path.write_text("facts:\n" + "\n".join(rows) + "\n")


def _hosts_huge_line(path: Path) -> None:
    path.write_text("node-1 slots=8\n" + "x" * (3 << 20) + "\nnode-2 slots=8\n")


def _env_huge_value(path: Path) -> None:
    path.write_text(healthy.ENV["npu"] + "BIG=" + "v" * (10 << 20) + "\n")


def _dump_huge_key(path: Path) -> None:
    text = json.dumps(healthy.dump_json(1.5), indent=1)
    path.write_text(text.replace('"Functional.gelu.0.forward"', '"Functional.gelu' + "x" * (5 << 20) + '.0.forward"'))


def _dump_deep_nesting(path: Path) -> None:
    text = json.dumps(healthy.dump_json(1.5), indent=1)
    # ~2000 levels: deep enough to break recursive walkers, small enough for any JSON reader
    path.write_text(text.replace('"input_kwargs": {}', '"input_kwargs": {"deep": ' + "[" * 2000 + "1.0" +
                                 "]" * 2000 + "}", 1))


def _compare_huge_field(path: Path) -> None:
    rows = healthy.compare_csv().splitlines()
    rows[1] = rows[1].rsplit(",", 1)[0] + ',"' + "File x.py, line 1, in f " * 12_000 + '"'
    path.write_text("\n".join(rows) + "\n")


def _monitor_huge_field(path: Path) -> None:
    rows = healthy.monitor_csv(0, 9).splitlines()
    rows[1] = rows[1].replace("torch.float32", '"' + "y" * 300_000 + '"')
    path.write_text("\n".join(rows) + "\n")


GENERATORS: dict[str, Callable[[Path], None]] = {
    "log/huge_single_line.log": _big_line_log,
    "log/long_lines_then_iterations.log": _long_lines_then_iterations,
    "log/only_newlines.log": _only_newlines,
    "launch/deep_arithmetic.sh": _deep_arithmetic,
    "launch/deep_default_expansion.sh": _deep_default_expansion,
    "json_config/ds_deep_nesting.json": _ds_deep_nesting,
    "json_config/ds_deep_but_parseable.json": _ds_deep_but_parseable,
    "facts/deep_nesting.json": _facts_deep_nesting,
    "facts/many_facts.yaml": _many_facts,
    "hosts/huge_line.txt": _hosts_huge_line,
    "env/huge_value.txt": _env_huge_value,
    "dump/huge_key.json": _dump_huge_key,
    "dump/deep_nesting.json": _dump_deep_nesting,
    "compare/huge_field.csv": _compare_huge_field,
    "monitor/huge_field.csv": _monitor_huge_field,
}


# ------------------------------------------------------------------ the cases
# Inputs that take a second or more each (5,000 facts, 200,000 empty lines, 3,000 nested
# expansions, a 5 MiB key): run outside the fast lane (pytest -m 'not slow').
SLOW = {"facts/many_facts.yaml", "log/only_newlines.log", "launch/deep_default_expansion.sh", "dump/huge_key.json"}


def _entries() -> list:
    params = []
    for section in ("corpus", "generated"):
        for name, spec in MANIFEST[section].items():
            marks = [pytest.mark.xfail(reason=spec["gap"], strict=True)] if spec.get("gap") else []
            marks += [pytest.mark.slow] if name in SLOW else []
            params.append(pytest.param(section, name, dict(spec), id=name, marks=marks))
    return params


def _place(case: Path, kind: str, name: str) -> str:
    place = MANIFEST["places"][kind]
    return place.format(stem=Path(name).stem.split("_")[0])


def _run(args: list[str]):
    return CliRunner().invoke(cli.main, args, catch_exceptions=True)


@pytest.mark.parametrize("section, name, spec", _entries())
def test_corpus_file(section: str, name: str, spec: dict, tmp_path: Path) -> None:
    assert set(spec) <= ENTRY_KEYS, f"unknown manifest keys {set(spec) - ENTRY_KEYS}"
    assert spec["expect"] in EXPECTATIONS
    assert spec["expect"] == "accepted" or spec.get("message"), "warning/error entries need a message"
    for marker in Path("/tmp").glob(PWNED):  # left by an earlier broken run: start clean
        marker.unlink()
    kind = name.split("/", 1)[0]
    case = healthy.write_case(tmp_path / "case", spec.get("case", "megatron"))
    args = ["diagnose", str(case), "--format", "json"]
    place = _place(case, kind, name)
    if place == "--facts":
        placed = tmp_path / Path(name).name
        args += ["--facts", str(placed)]
    elif place == "--rules":
        (tmp_path / "rules").mkdir()
        placed = tmp_path / "rules" / Path(name).name
        args += ["--rules", str(tmp_path / "rules")]
    else:
        placed = case / place
        placed.parent.mkdir(parents=True, exist_ok=True)
    if section == "generated":
        GENERATORS[name](placed)
    else:
        shutil.copyfile(HERE / name, placed)

    result = _run(args)

    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"{name}: exception escaped the CLI") from result.exception
    assert not list(Path("/tmp").glob(PWNED)), f"{name}: a command from the input was executed"
    assert "Traceback" not in result.output
    expect, message = spec["expect"], spec.get("message", "")
    if expect == "error":
        assert result.exit_code == 2, f"{name}: exit {result.exit_code}, stdout {result.stdout[:300]!r}"
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("precdx: error: "), result.stderr
        assert placed.name in lines[0], f"the error does not name the file: {lines[0]}"
        assert message in lines[0], f"expected {message!r} in: {lines[0]}"
        return
    assert result.exit_code == 0, f"{name}: exit {result.exit_code}: {result.stderr[-2000:]}"
    report = json.loads(result.stdout)
    warnings = report["warnings"]
    internal = [w for w in warnings if INTERNAL.search(w["message"])]
    assert not internal, f"internal error disguised as a warning: {internal}"
    about = [w for w in warnings if _names(w, placed)]
    if expect == "accepted":
        assert not about, f"{name}: valid input, yet warned about: {about}"
        return
    assert any(message in w["message"] for w in about), \
        f"{name}: no warning naming {placed.name} says {message!r}; warnings: {warnings}"


def _names(warning: dict, placed: Path) -> bool:
    path = warning.get("path")
    return bool(path) and Path(path).resolve() == placed.resolve()


# ------------------------------------------------------------------ the corpus itself
def test_manifest_and_corpus_agree() -> None:
    """Every corpus file has an entry and every entry a file (or a generator); a typo in the
    manifest must fail, not silently test nothing."""
    on_disk = {p.relative_to(HERE).as_posix() for p in HERE.rglob("*")
               if p.is_file() and p.parent != HERE and "__pycache__" not in p.parts}
    listed = set(MANIFEST["corpus"])
    assert on_disk - listed == set(), "corpus files without a manifest entry"
    assert listed - on_disk == set(), "manifest entries without a corpus file"
    assert set(MANIFEST["generated"]) == set(GENERATORS)
    kinds = {n.split("/", 1)[0] for n in listed | set(GENERATORS)}
    assert kinds == set(MANIFEST["places"]), "every kind needs a place, every place a file"
    checked = [n for n, s in MANIFEST["corpus"].items() if s["expect"] in ("warning", "error")]
    assert len(checked) >= MIN_CORPUS_FILES


@pytest.mark.parametrize("flavour", ["megatron", "megatron-diverged", "hf", "titan"])
def test_healthy_cases_have_no_warnings(flavour: str, tmp_path: Path) -> None:
    """What a corpus entry is warned about is the broken file's doing, not the case's."""
    case = healthy.write_case(tmp_path / "case", flavour)
    result = _run(["diagnose", str(case), "--format", "json"])
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["warnings"] == []
    assert report["verdict"] == ("misaligned" if flavour == "megatron-diverged" else "aligned")
