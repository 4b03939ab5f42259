"""Installed Python packages from `pip freeze`, `pip list` or `conda list` output, and the
version differences between runs that matter (device stacks on a cross-device pair do not)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator
from urllib.parse import unquote

from precdx.collectors.base import RunDir
from precdx.errors import Warnings
from precdx.facts import Fact
from precdx.facts.checklist import LibraryDiff, LibraryVersion, UNSET

MAX_PIP_BYTES = 8 * 1024 * 1024

KEY_LIBRARIES: dict[str, str] = {
    "torch": "framework", "transformers": "framework", "megatron-core": "framework",
    "megatron-lm": "framework", "megatron": "framework", "deepspeed": "framework",
    "accelerate": "framework", "apex": "framework", "torchtitan": "framework", "peft": "framework",
    "trl": "framework", "mindspore": "framework", "nemo-toolkit": "framework",
    "lightning": "framework", "pytorch-lightning": "framework",
    "tokenizers": "data", "sentencepiece": "data", "datasets": "data", "tiktoken": "data",
    "numpy": "numerics", "safetensors": "numerics", "einops": "numerics",
    "torch-npu": "device", "mindspeed": "device", "mindspeed-llm": "device", "flash-attn": "device",
    "transformer-engine": "device", "triton": "device",
    # not pip packages: the device stack as training logs print it
    "cann": "device", "hccl": "device", "nccl": "device", "cuda": "device",
}
_DEVICE = re.compile(r"^(torch-npu|torchair|mindspeed(-[a-z]+)?|nvidia-.+|triton|flash-attn.*|"
                     r"transformer-engine.*|cupy-cuda.*|pynvml|nvidia-ml-py.*|xformers|"
                     r"te|hccl|hccl-parser|op-gen|op-compile-tool|opc-tool|auto-tune|dataflow|"
                     r"llm-datadist|schedule-search|topi|tbe|npu-.*|ascend.*|cann.*|deepspeed-npu|"
                     r"apex-npu|msprobe|mindstudio-probe)$")
_WHEEL = re.compile(r"/([A-Za-z0-9_.]+?)-(\d[^-/]*?)(?:-\d[^-/]*)?-(?:py|cp)\d", re.IGNORECASE)
_SDIST = re.compile(r"/([A-Za-z0-9_.]+?)-(\d[\w.+!]*?)\.(?:tar\.gz|zip)$", re.IGNORECASE)


def norm_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name.strip().lower())


def base_version(version: str) -> str:
    """1.2.0+cu121 -> 1.2.0 (the local part names the build, not the release)."""
    return version.split("+", 1)[0]


def _ref_version(ref: str) -> str:
    ref = unquote(ref.strip())
    m = _WHEEL.search(ref) or _SDIST.search(ref)
    if m:
        return m.group(2)
    if ref.startswith("git+") or "@" in ref.rsplit("/", 1)[-1]:
        tail = ref.rsplit("@", 1)[-1] if "@" in ref.split("://", 1)[-1] else ""
        tail = tail.split("#", 1)[0]
        return f"git:{tail}" if tail else "git"
    return ref


def read_listing(path: Path, warnings: Warnings) -> dict[str, tuple[str, str]] | None:
    """package -> (version without local suffix, as listed); None when unusable."""
    try:
        raw = path.read_bytes()[:MAX_PIP_BYTES]
    except OSError as exc:
        warnings.add(f"cannot read package listing: {exc.strerror or exc}", path=str(path))
        return None
    if b"\x00" in raw:
        warnings.add("package listing is binary, not pip output; library versions of this run "
                     "are unknown", path=str(path))
        return None
    text = raw.decode("utf-8", errors="replace")
    out: dict[str, tuple[str, str]] = {}
    lines = text.splitlines()
    is_list = bool(lines) and lines[0].split()[:2] == ["Package", "Version"]
    bad = 0
    for line in lines:
        s = line.strip()
        if not s or s.startswith("#") or set(s) <= {"-", " "}:
            continue
        if is_list or text.lstrip().startswith("# packages in environment"):
            parts = s.split()
            if len(parts) >= 2 and parts[0] != "Package":
                out[norm_name(parts[0])] = (base_version(parts[1]), parts[1])
            continue
        if s.startswith("-e "):
            egg = re.search(r"#egg=([\w.-]+)", s)
            if egg:
                out[norm_name(egg.group(1))] = (_ref_version(s[3:]), s[3:])
            continue
        m = re.match(r"^([A-Za-z0-9][\w.-]*)(?:\[[^\]]*\])?\s*(===?|@)\s*(.+)$", s)
        if not m:
            bad += 1
            continue
        name, op, rest = norm_name(m.group(1)), m.group(2), m.group(3).strip()
        version = rest if op != "@" else _ref_version(rest)
        out[name] = (base_version(version), rest)
    if not out:
        warnings.add("package listing holds no 'name==version' lines", path=str(path))
        return None
    if bad > max(3, len(lines) // 10):
        warnings.add(f"{bad} lines of the package listing could not be read; the rest was used",
                     path=str(path))
    return out


def run_packages(run: RunDir, warnings: Warnings) -> tuple[dict[str, tuple[str, str]] | None, str | None]:
    merged: dict[str, tuple[str, str]] | None = None
    sources = []
    for art in run.files("pip"):
        listing = read_listing(art.path, warnings)
        if listing is not None:
            merged = {**(merged or {}), **listing}
            sources.append(str(art.path))
    return merged, ", ".join(sources) or None


def from_log(versions: dict[str, str]) -> dict[str, tuple[str, str]]:
    """Versions a training log prints, in the listing shape (version without local suffix, raw)."""
    return {norm_name(k): (base_version(v), f"{v} (from the training log)") for k, v in versions.items()}


def _category(name: str, raw: str) -> str:
    if name in KEY_LIBRARIES:
        return KEY_LIBRARIES[name]
    if _DEVICE.match(name) or "/ascend" in raw.lower():
        return "device"
    return "other"


def version_facts(run: RunDir, packages: dict[str, tuple[str, str]], source: str | None) -> Iterator[Fact]:
    for name, (version, raw) in sorted(packages.items()):
        if name in KEY_LIBRARIES:
            yield LibraryVersion.of(role=run.role, run=run.name, package=name, version=version,
                                    category=KEY_LIBRARIES[name], raw=raw, source=source)


def library_diffs(run: RunDir, mine: dict[str, tuple[str, str]], ref: RunDir,
                  theirs: dict[str, tuple[str, str]], pair: str, cross_device: bool,
                  source: str | None) -> Iterator[Fact]:
    for name in sorted(set(mine) | set(theirs)):
        a, b = mine.get(name), theirs.get(name)
        if a and b and a[0] == b[0]:
            continue
        raw = (a[1] if a else "") + " " + (b[1] if b else "")
        cat = _category(name, raw)
        if cross_device and cat == "device":
            continue  # torch_npu, CANN wheels, nvidia-* and CUDA-only kernels belong to one device
        yield LibraryDiff.of(pair=pair, role=run.role, against_role=ref.role, package=name,
                             baseline=b[0] if b else UNSET, target=a[0] if a else UNSET,
                             key_library=name in KEY_LIBRARIES, category=cat,
                             baseline_raw=b[1] if b else None, target_raw=a[1] if a else None, source=source)
