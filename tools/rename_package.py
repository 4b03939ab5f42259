#!/usr/bin/env python3
"""Make every reference to the *import name* of the package say `precdx` (issue 18 item 5).

The source folder stays `engine/` (the layout), but the package is imported as `precdx`: the
wheel maps engine/ to a top-level `precdx` (pyproject.toml), and in a checkout the `precdx`
symlink beside engine/ makes `import precdx` resolve to the same folder (README, layout). This
script rewrites what still imports, patches, lazily loads or names modules as `engine...`:

- import statements: `from engine.x import y`, `from engine import x`, `import engine.x as z`,
  `import engine` (in code, and in code held in strings or docs);
- dotted module paths anywhere: `engine.<module>...` where <module> is a module or subpackage
  that exists in engine/ (lazy imports, `importlib.import_module("engine.demo.watching")`,
  `mock.patch("engine.service.app.X")`, entry points `engine.cli:main`, `python -m engine.x`,
  logger names, docs), and `engine.__version__`-style attributes of the package;
- the package prefix as a whole string: `"engine."`, `f"engine.{name}"`,
  `import_module("engine")`, `find_spec("engine")`.

It leaves alone what names the folder (`engine/cli.py`, `Path(...) / "engine"`), the matcher
option (`--engine python`, `settings.engine`, `args.engine`), attributes of other objects
(`durable.engine`, `self.engine.x`) and the word in prose ("the rule engine").

Idempotent: a second run changes nothing. Run it after merging branches that still import
`engine.`:

    python tools/rename_package.py            # rewrite in place, list the files changed
    python tools/rename_package.py --check    # change nothing; exit 1 if a file would change

Files: those git tracks (plus untracked, not ignored ones) under the repository root, text
only; this script itself is skipped.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDER = "engine"   # the source folder (layout) and the old import name
NAME = "precdx"     # the import name
SELF = Path(__file__).resolve()


def module_names(folder: Path) -> list[str]:
    """Top-level modules and subpackages of the package folder (what may follow `engine.`)."""
    names = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    names |= {p.name for p in folder.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    return sorted(names, key=lambda n: (-len(n), n))


def rules(folder: Path) -> list[tuple[re.Pattern[str], str]]:
    mods = "|".join(map(re.escape, module_names(folder)))
    # not part of a longer name, an attribute (`x.engine`), an option (`--engine`) or a path
    free = r"(?:(?<![\w.\-/\\])|(?<=\\[nt]))"  # (after a `\n` escape: code in a string)
    return [
        # from engine import x / from engine.x import y
        (re.compile(rf"{free}(from\s+){FOLDER}(?=\.\w|\s+import\b)"), rf"\1{NAME}"),
        # import engine / import engine.x [as y] / import engine, engine.x
        (re.compile(rf"{free}(import\s+){FOLDER}(?=\.\w|\s*(?:,|;|$|as\b|\\n|[\"'`)]))", re.M),
         rf"\1{NAME}"),
        # engine.<module> (dotted module paths in code, strings, mock targets, docs)
        (re.compile(rf"{free}{FOLDER}\.(?=(?:{mods})\b)"), f"{NAME}."),
        # engine.__version__, engine.__file__, ...
        (re.compile(rf"{free}{FOLDER}\.(?=__\w+__)"), f"{NAME}."),
        # "engine." and f"engine.{x}": the package prefix as a string
        (re.compile(rf"(?<=[\"']){FOLDER}\.(?=[\"'{{])"), f"{NAME}."),
        # import_module("engine"), find_spec("engine"), sys.modules["engine"]
        (re.compile(rf"((?:import_module|find_spec|__import__)\(\s*|sys\.modules\[\s*)([\"']){FOLDER}\2"),
         rf"\1\2{NAME}\2"),
    ]


def candidate_files(root: Path) -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             cwd=root, check=True, capture_output=True).stdout.decode()
        paths = [root / p for p in out.split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", "build", "dist", "__pycache__"}
        paths = [p for p in root.rglob("*") if not skip & set(p.relative_to(root).parts)]
    return sorted({p for p in paths if p.is_file() and not p.is_symlink() and p.resolve() != SELF})


def rewrite(text: str, compiled: list[tuple[re.Pattern[str], str]]) -> str:
    for pattern, repl in compiled:
        text = pattern.sub(repl, text)
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a file would change")
    ap.add_argument("--root", type=Path, default=ROOT, help="repository root (default: this checkout)")
    args = ap.parse_args(argv)
    root = args.root.resolve()
    folder = root / FOLDER
    if not (folder / "__init__.py").is_file():
        print(f"rename_package: {folder}/__init__.py not found", file=sys.stderr)
        return 2
    compiled = rules(folder)
    changed = []
    for path in candidate_files(root):
        raw = path.read_bytes()
        if b"\0" in raw[:8192]:
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            continue
        new = rewrite(text, compiled)
        if new != text:
            changed.append(path.relative_to(root))
            if not args.check:
                path.write_bytes(new.encode("utf-8"))
    verb = "would change" if args.check else "changed"
    for rel in changed:
        print(f"{verb}: {rel}")
    print(f"rename_package: {len(changed)} file(s) {verb}")
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
