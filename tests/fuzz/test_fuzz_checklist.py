"""Property: the checklist readers (shell launch scripts, env and pip listings, hostfiles, JSON/YAML/
TOML configs, evaluation results), every collector's sniffer and the whole checklist collector
never raise on any input; configs fail only with their own ConfigFileError."""
from __future__ import annotations

import pytest

import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from precdx.collectors import all_collectors
from precdx.collectors.base import Case, RunDir
from precdx.collectors.checklist import COLLECTOR
from precdx.collectors.checklist.configfiles import ConfigFileError, flatten, load
from precdx.collectors.checklist.envlisting import read_env_listing
from precdx.collectors.checklist.evals import read_metrics
from precdx.collectors.checklist.libraries import read_listing
from precdx.collectors.checklist.shell import expand_word, read_script
from precdx.discovery import _read_hosts
from precdx.errors import Warnings

from .strategies import bounded, dumps, json_values, junk_text, numbers_as_text, shell_text

pytestmark = pytest.mark.slow  # trains, dumps or fuzzes: outside the fast lane (pytest -m 'not slow')

ARTEFACT_NAMES = ["train.log", "env.txt", "pip_freeze.txt", "hosts.txt", "eval.json", "pretrain_gpt.sh",
                  "run_train.sh", "train_config.yaml", "train_config.toml", "ds_config.json", "dump.json",
                  "stack.json", "construct.json", "compare_result_rank0_1.csv", "grad_reduced_0-9.csv",
                  "trainer_state.json", "result.xlsx", "notes.txt", "x"]
env_lines = st.lists(st.one_of(
    st.builds(lambda k, v: f"{k}={v}", st.from_regex(r"[A-Z_][A-Z0-9_]{0,12}", fullmatch=True), shell_text),
    st.builds(lambda k, v: f"export {k}='{v}'", st.from_regex(r"[A-Z_]{1,8}", fullmatch=True), junk_text),
    junk_text), max_size=30)
pip_lines = st.lists(st.one_of(
    st.builds(lambda n, op, v: f"{n}{op}{v}", st.from_regex(r"[a-z][a-z0-9_.-]{0,10}", fullmatch=True),
              st.sampled_from(["==", "===", " @ ", " ", "~=", ""]), st.one_of(numbers_as_text, junk_text)),
    st.just("Package Version"), st.just("------- -------"), st.just("-e git+https://x/y.git@abc#egg="),
    junk_text), max_size=30)


def _file(tmp: str, name: str, data: bytes | str) -> Path:
    path = Path(tmp) / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass"))
    return path


@bounded(800)
@given(shell_text, st.dictionaries(st.sampled_from(["A", "B", "MASTER_ADDR", "SEED"]), junk_text, max_size=3))
def test_shell_reader_never_raises(text: str, environ: dict) -> None:
    script = read_script(text, environ)
    for cmd in script.commands:
        assert all(isinstance(a, str) for a in cmd.argv)
    assert script.error is None or script.error.line >= 0


@bounded(600)
@given(st.lists(st.sampled_from(["$A", "${A[@]}", '"${A[@]}"', "${A:-$B}", "$((A*2))", "'$A'", "\\$A", "$"]),
                max_size=12).map("".join),
       st.one_of(junk_text, st.lists(junk_text, max_size=5)))
def test_word_expansion_never_raises(word: str, value) -> None:
    assert all(isinstance(f, str) for f in expand_word(word, {"A": value, "B": "b"}))


@bounded(300)
@given(st.one_of(env_lines.map("\n".join), st.binary(max_size=300)),
       st.one_of(pip_lines.map("\n".join), st.binary(max_size=300)),
       st.one_of(st.lists(st.one_of(st.builds(lambda h, n: f"{h} slots={n}", junk_text, numbers_as_text),
                                    junk_text), max_size=10).map("\n".join), st.binary(max_size=200)))
def test_listings_never_raise(env, pip, hosts) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        w = Warnings()
        got = read_env_listing(_file(tmp, "env.txt", env), w)
        assert got is None or all(isinstance(k, str) and isinstance(v, str) for k, v in got.items())
        got = read_listing(_file(tmp, "pip_freeze.txt", pip), w)
        assert got is None or all(isinstance(v, tuple) for v in got.values())
        _file(tmp, "hosts.txt", hosts)
        assert all(isinstance(h, str) and len(h) <= 253 for h in _read_hosts(Path(tmp), w))


@bounded(400)
@given(st.sampled_from(["json", "yaml", "toml"]),
       st.one_of(json_values.map(dumps), junk_text, st.binary(max_size=200),
                 st.lists(st.sampled_from(["a", ":", " ", "\n", "-", "[", "]", "{", "}", "&x", "*x", "!!str",
                                           "=", '"', "'", "lr", "1e999", "<<: *x", "\t", "#"]),
                          max_size=40).map("".join)))
def test_config_loader_raises_only_config_errors(fmt: str, data) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = _file(tmp, f"config.{fmt}", data)
        try:
            config = load(path, fmt)
        except ConfigFileError:
            return
        list(flatten(config))


@bounded(300)
@given(st.one_of(json_values, st.dictionaries(st.sampled_from(["eval_loss", "eval_accuracy", "perplexity",
                                                               "results", "epoch"]), json_values, max_size=4)))
def test_eval_reader_never_raises(doc) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        got = read_metrics(_file(tmp, "eval.json", dumps(doc)), Warnings())
        assert got is None or all(isinstance(v, float) for v in got.values())


@bounded(600)
@given(st.sampled_from(ARTEFACT_NAMES),
       st.one_of(st.binary(max_size=400), junk_text.map(str.encode), shell_text.map(str.encode),
                 json_values.map(lambda v: dumps(v).encode())))
def test_every_sniffer_on_any_head(name: str, head: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = _file(tmp, name, head)
        for collector in all_collectors():
            collector.sniff(path, head)


@bounded(120)
@given(shell_text, st.one_of(env_lines.map("\n".join), st.binary(max_size=100)),
       st.one_of(pip_lines.map("\n".join), st.binary(max_size=100)), json_values)
def test_checklist_collector_end_to_end(script: str, env, pip, config) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        runs = []
        for role in ("baseline", "target"):
            d = root / role
            d.mkdir()
            files = {"pretrain_gpt.sh": "#!/bin/bash\n" + script if role == "target" else
                     "#!/bin/bash\ntorchrun --nproc_per_node 8 pretrain_gpt.py --lr 3e-4 --seed 1\n",
                     "env.txt": env, "pip_freeze.txt": pip, "ds_config.json": dumps(config)}
            run = RunDir(role=role, name=role, root=d)
            for fname, data in files.items():
                path = _file(str(d), fname, data)
                for collector in all_collectors():
                    art = collector.sniff(path, path.read_bytes()[:65536])
                    if art is not None:
                        run.artefacts.append(art)
            runs.append(run)
        for fact in COLLECTOR.collect(Case(runs=runs, root=root), Warnings()):
            fact.to_json()
