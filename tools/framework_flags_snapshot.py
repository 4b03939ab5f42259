#!/usr/bin/env python3
"""Regenerate engine/rulepack/data/framework_flags.json: the launch-argument names of Megatron-LM,
MindSpeed, MindSpeed-LLM, DeepSpeed and the Hugging Face Trainer, with the first and last release
each name appears in and the release that marks it deprecated.

The command lint (engine/rulepack/commands.py) checks every `--flag` written in rules/ and kb/
against this list, so a next step never tells someone to pass a flag that does not exist.

Sources (read, never executed outside a throw-away process):
  * git mirrors of NVIDIA/Megatron-LM, Ascend/MindSpeed, Ascend/MindSpeed-LLM, deepspeedai/DeepSpeed:
    each release tag is exported to a temporary folder. Megatron's parser is built for real
    (`add_megatron_arguments` on a fresh ArgumentParser, or `parse_args` intercepted) in a child
    process where optional imports (triton, transformer_engine, apex, ...) are stubbed; newer
    Megatron derives many flags from dataclasses, which only the real parser shows. The other
    projects declare flags with literal add_argument calls and are read from their source.
  * transformers wheels (pip download transformers==X --no-deps): the TrainingArguments fields,
    which HfArgumentParser turns into --<field> flags.

    python tools/framework_flags_snapshot.py --mirror megatron=/path/Megatron-LM \\
        --mirror mindspeed=/path/MindSpeed --mirror mindspeed_llm=/path/MindSpeed-LLM \\
        --mirror deepspeed=/path/DeepSpeed --hf-wheels /tmp/hf
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "engine" / "rulepack" / "data" / "framework_flags.json"

# framework -> (package folders to export, ordered release refs, how to read them)
FRAMEWORKS = {
    "megatron": {
        "repo": "NVIDIA/Megatron-LM",
        "folders": ["megatron", "tools/preprocess_data.py"],
        "refs": [f"core_v0.{i}.0" for i in range(4, 20)] + ["HEAD"],
        "method": "parser",
    },
    "mindspeed": {
        "repo": "Ascend/MindSpeed",
        "folders": ["mindspeed"],
        "refs": ["v1.0.RC2", "v1.0.RC3_core_r0.7.0", "v1.0.0_core_r0.7.0", "v1.1.0", "v2.0.0_core_r0.8.0",
                 "v2.1.0_core_r0.12.1", "v2.2.0_core_r0.12.1", "v2.3.0_core_r0.12.1", "v26.0.0_core_r0.12.1",
                 "HEAD"],
        "method": "source",
    },
    "mindspeed_llm": {
        "repo": "Ascend/MindSpeed-LLM",
        "folders": ["mindspeed_llm", "modellink", "preprocess_data.py"],
        "refs": ["v1.0.RC1.0", "v1.0.RC2.0", "v1.0.RC3.0", "v1.0.0", "v2.0.0", "v2.1.0", "v2.2.0", "v2.3.0",
                 "v26.0.0", "v26.1.0", "HEAD"],
        "method": "source",
    },
    "deepspeed": {
        "repo": "deepspeedai/DeepSpeed",
        "folders": ["deepspeed/launcher", "deepspeed/__init__.py"],
        "refs": ["v0.10.0", "v0.12.0", "v0.14.0", "v0.16.0", "v0.17.0", "v0.18.0", "v0.19.0", "HEAD"],
        "method": "source",
    },
}

ADD_ARG = re.compile(r"add_argument\(\s*((?:['\"]-{1,2}[\w-]+['\"]\s*,\s*)+)", re.S)
FLAG_STR = re.compile(r"['\"](--[\w-]+)['\"]")

CHILD = r'''
import argparse, importlib, importlib.abc, importlib.machinery, json, sys, types
from unittest import mock
root = sys.argv[1]
sys.path.insert(0, root)
OWN = ("megatron",)
class _Any(type):
    """A stand-in class: any attribute, any call, usable as a base class."""
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Any(name, (), {})
    def __call__(cls, *a, **k):
        return _Any("result", (), {})
    def __iter__(cls):
        return iter(())
    def __len__(cls):
        return 0
    def __getitem__(cls, key):
        return _Any("item", (), {})
    def __or__(cls, other):
        return cls
    __ror__ = __or__
    def __contains__(cls, item):
        return False
class _StubModule(types.ModuleType):
    __version__ = "99.0.0"
    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Any(name, (), {})
class _Stub(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        top = name.split(".")[0]
        if top in OWN or top in sys.stdlib_module_names or top.startswith("_"):
            return None
        if isinstance(sys.modules.get(top), _StubModule):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        # stub only the optional packages megatron itself imports, never a library's own probes
        frame = sys._getframe(1)
        while frame is not None and ("importlib" in frame.f_code.co_filename
                                     or frame.f_code.co_filename.startswith("<frozen")):
            frame = frame.f_back
        if frame is None or not frame.f_code.co_filename.startswith(root):
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            try:
                if finder.find_spec(name, path, target) is not None:
                    return None
            except Exception:
                pass
        return importlib.machinery.ModuleSpec(name, self, is_package=True)
    def create_module(self, spec):
        m = _StubModule(spec.name)
        m.__path__ = []
        m.__spec__ = spec
        return m
    def exec_module(self, module):
        pass
import typing
if not hasattr(typing, "override"):  # Megatron main targets Python 3.12
    typing.override = lambda f: f
for pre in ("torch", "torch._dynamo", "torch._inductor.runtime.triton_heuristics", "torch.distributed"):
    try:  # let torch settle its own optional-dependency probes before any stub exists
        importlib.import_module(pre)
    except Exception:
        pass
sys.meta_path.append(_Stub())
mod = None
for name in ("megatron.training.arguments", "megatron.arguments"):
    try:
        mod = importlib.import_module(name)
        break
    except ModuleNotFoundError:
        continue
captured = {}
if hasattr(mod, "add_megatron_arguments"):
    p = argparse.ArgumentParser(allow_abbrev=False, conflict_handler="resolve")
    mod.add_megatron_arguments(p)
    captured["p"] = p
else:
    class _Stop(Exception):
        pass
    def _grab(self, *a, **k):
        captured["p"] = self
        raise _Stop()
    argparse.ArgumentParser.parse_known_args = _grab
    argparse.ArgumentParser.parse_args = _grab
    sys.argv = ["megatron"]
    try:
        mod.parse_args()
    except _Stop:
        pass
import re
DEP = re.compile(r"^\s*[\[(]?deprecated|\b(this|the) (argument|option|flag|arg|parameter) (is|has been) deprecated"
                 r"|^\s*\S+ is deprecated", re.I)
flags = {}
for a in captured["p"]._actions:
    dep = bool(DEP.search(a.help or "")) or (a.dest or "").startswith("deprecated")
    for o in a.option_strings:
        if o.startswith("--"):
            flags[o] = dep
print(json.dumps(flags))
'''


def _export(mirror: Path, ref: str, folders: list[str], dest: Path) -> None:
    tar = subprocess.run(["git", "-C", str(mirror), "archive", ref, *folders], capture_output=True)
    if tar.returncode != 0:  # a folder missing at this ref: export what exists
        for folder in folders:
            one = subprocess.run(["git", "-C", str(mirror), "archive", ref, folder], capture_output=True)
            if one.returncode == 0:
                subprocess.run(["tar", "-x", "-C", str(dest)], input=one.stdout, check=True)
        return
    subprocess.run(["tar", "-x", "-C", str(dest)], input=tar.stdout, check=True)


DEPRECATED = re.compile(r"dest\s*=\s*['\"]deprecated|help\s*=\s*[\(\s]*[rf]?['\"]\s*[\[(]?deprecated"
                        r"|\b(this|the) (argument|option|flag|arg|parameter) (is|has been) deprecated", re.I)


def _deprecated_near(text: str, start: int) -> bool:
    """The add_argument call starting at `start` marks its flag deprecated (dest or help says so)."""
    depth, end = 0, start
    for end in range(text.index("(", start), min(len(text), start + 2000)):
        depth += {"(": 1, ")": -1}.get(text[end], 0)
        if depth == 0:
            break
    return bool(DEPRECATED.search(text[start:end + 1]))


def _flags_from_source(root: Path) -> dict[str, bool]:
    flags: dict[str, bool] = {}
    for path in root.rglob("*.py"):
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in ADD_ARG.finditer(text):
            dep = _deprecated_near(text, m.start())
            for flag in FLAG_STR.findall(m.group(1)):
                flags[flag] = flags.get(flag, False) or dep
    return flags


def _flags_from_parser(root: Path, python: str) -> dict[str, bool] | None:
    proc = subprocess.run([python, "-c", CHILD, str(root)], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        sys.stderr.write(f"  parser import failed at {root.name}: {proc.stderr.strip().splitlines()[-1:]}\n")
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _hf_fields(wheel: Path) -> dict[str, bool]:
    with zipfile.ZipFile(wheel) as z:
        text = z.read("transformers/training_args.py").decode("utf-8")
    tree = ast.parse(text)
    flags: dict[str, bool] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "TrainingArguments":
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    name = item.target.id
                    seg = ast.get_source_segment(text, item) or ""
                    helptext = re.search(r"[\"']help[\"']\s*:\s*\(?\s*[rf]?[\"'](.{0,160})", seg, re.S)
                    head = helptext.group(1).lower() if helptext else ""
                    flags["--" + name] = bool(re.match(r"\s*[\[(]?deprecated", head)
                                              or re.search(r"\b(this|the) (argument|option|parameter) (is|has been) deprecated"
                                                           r"|\bis deprecated and will be removed", head))
    return flags


def _merge(per_ref: list[tuple[str, dict[str, bool]]]) -> dict:
    out: dict[str, dict] = {}
    refs = [r for r, _ in per_ref]
    for ref, flags in per_ref:
        for flag, dep in flags.items():
            entry = out.setdefault(flag, {"since": ref, "last": ref, "deprecated_since": None})
            entry["last"] = ref
            if dep and entry["deprecated_since"] is None:
                entry["deprecated_since"] = ref
    newest = refs[-1]
    for entry in out.values():
        entry["removed_after"] = None if entry["last"] == newest else entry["last"]
        del entry["last"]
    return {"versions": refs, "flags": dict(sorted(out.items()))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mirror", action="append", default=[], help="NAME=PATH of a git mirror (megatron, "
                    "mindspeed, mindspeed_llm, deepspeed)")
    ap.add_argument("--hf-wheels", help="folder with transformers-*.whl files (pip download transformers==X --no-deps)")
    ap.add_argument("--python", default=sys.executable, help="interpreter with torch for building Megatron's parser")
    ap.add_argument("-o", "--output", default=str(OUT))
    args = ap.parse_args()
    mirrors = dict(m.split("=", 1) for m in args.mirror)
    data = json.loads(Path(args.output).read_text()) if Path(args.output).exists() else {}
    data["generated_by"] = "tools/framework_flags_snapshot.py"
    for name, spec in FRAMEWORKS.items():
        if name not in mirrors:
            continue
        mirror = Path(mirrors[name])
        per_ref = []
        for ref in spec["refs"]:
            with tempfile.TemporaryDirectory() as tmp:
                _export(mirror, ref, spec["folders"], Path(tmp))
                flags = None
                if spec["method"] == "parser":
                    flags = _flags_from_parser(Path(tmp), args.python)
                    if flags is not None:  # scripts beside the package (tools/preprocess_data.py)
                        extra = Path(tmp) / "tools"
                        flags.update({k: v for k, v in (_flags_from_source(extra) if extra.exists() else {}).items()
                                      if k not in flags})
                if flags is None:
                    flags = _flags_from_source(Path(tmp))
            if ref == "HEAD":
                ref = "main@" + subprocess.run(["git", "-C", str(mirror), "rev-parse", "--short", "HEAD"],
                                               capture_output=True, text=True).stdout.strip()
            sys.stderr.write(f"{name} {ref}: {len(flags)} flags\n")
            per_ref.append((ref, flags))
        data[name] = {"source": spec["repo"], **_merge(per_ref)}
    if args.hf_wheels:
        wheels = sorted(Path(args.hf_wheels).glob("transformers-*.whl"),
                        key=lambda p: [int(x) for x in re.findall(r"\d+", p.name.split("-")[1])])
        per_ref = [("v" + w.name.split("-")[1], _hf_fields(w)) for w in wheels]
        data["hf_trainer"] = {"source": "huggingface/transformers TrainingArguments", **_merge(per_ref)}
    Path(args.output).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
