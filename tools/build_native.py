#!/usr/bin/env python3
"""Build the block reader's C kernels (engine/collectors/logs/scan.c) with the machine's C
compiler ($CC, else cc, gcc or clang) into the file name precdx.collectors.logs.native looks
for: next to scan.c, or in ~/.cache/precdx/native/ when that folder is read-only. Atomic (a
concurrent build never leaves half a library); nothing to do when the library for this source
is already there. Without a compiler it says so and exits 0: the block reader then does the same
work with numpy. `make setup` runs it.

usage: python tools/build_native.py [--force] [--quiet] [--cache]
  --cache: build into ~/.cache/precdx/native/ (found by any install of the same source, a
           wheel's included)

A wheel built where a compiler is carries the library (hatch_build.py calls build() into a
temporary folder and packs the result next to scan.c).
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

try:
    from precdx.collectors.logs import native
except ImportError:
    # A wheel build (hatch_build.py, which uses build() below) runs where only the build back end
    # is installed, not the package's dependencies, and an unpacked sdist has no `precdx` link:
    # native.py itself needs neither, so it is loaded from its file.
    _spec = importlib.util.spec_from_file_location("_precdx_native", ROOT / "engine" / "collectors" / "logs" / "native.py")
    native = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(native)


def compiler() -> list[str] | None:
    cc = os.environ.get("CC")
    if cc and shutil.which(cc.split()[0]):
        return cc.split()
    for name in ("cc", "gcc", "clang"):
        if shutil.which(name):
            return [name]
    return None


def build(force: bool = False, source: Path | None = None, targets: list[Path] | None = None) -> Path:
    """Compile `source` (scan.c) to the first writable of `targets` (native.candidates()).
    Returns the library's path; raises RuntimeError saying why it could not be built."""
    source = source or native.SOURCE
    targets = targets if targets is not None else native.candidates()
    if not force:
        for t in targets:
            if t.is_file():
                return t
    cc = compiler()
    if cc is None:
        raise RuntimeError("no C compiler (cc, gcc, clang or $CC) on PATH")
    problems = []
    for target in targets:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=target.stem + ".", suffix=".tmp", dir=target.parent)
        except OSError as exc:
            problems.append(f"{target.parent}: {exc}")
            continue
        os.close(fd)
        try:
            cmd = cc + ["-O2", "-shared", "-fPIC", "-o", tmp, str(source)]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            if done.returncode != 0:
                raise RuntimeError(f"{' '.join(cmd)} failed: {(done.stderr or done.stdout).strip()[:500]}")
            os.replace(tmp, target)
            return target
        except (OSError, subprocess.SubprocessError) as exc:
            raise RuntimeError(f"building {source.name} failed: {exc}") from None
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    raise RuntimeError("no writable folder for the library: " + "; ".join(problems))


def main() -> int:
    try:
        targets = native.candidates()
        if "--cache" in sys.argv:
            targets = targets[1:]
        path = build(force="--force" in sys.argv, targets=targets)
    except RuntimeError as exc:
        print(f"precdx: the block reader's C kernels were not built ({exc}); "
              "logs are read with the numpy path (same results, slower)", file=sys.stderr)
        return 0
    if "--quiet" not in sys.argv:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
