"""Reading environment listings (`env`, `printenv`, `export -p`, `declare -x` output) into a
name -> value mapping; lines that are not assignments are reported, not guessed.
"""
from __future__ import annotations

import re
from pathlib import Path

from precdx.errors import Warnings

_LINE = re.compile(r"^(?:export\s+|declare\s+-[a-zA-Z]*x[a-zA-Z]*\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
MAX_ENV_BYTES = 8 * 1024 * 1024


def read_env_listing(path: Path, warnings: Warnings) -> dict[str, str] | None:
    """The variables of one listing, or None (with a warning) when the file is unusable."""
    try:
        raw = path.read_bytes()[:MAX_ENV_BYTES]
    except OSError as exc:
        warnings.add(f"cannot read environment listing: {exc.strerror or exc}", path=str(path))
        return None
    if b"\x00" in raw:
        warnings.add("environment listing is binary, not KEY=VALUE text; environment switches of "
                     "this run are unknown", path=str(path))
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("utf-8", errors="replace")
        if text.count("\ufffd") > max(4, len(text) // 200):
            warnings.add("environment listing is not UTF-8 text; environment switches of this run "
                         "are unknown", path=str(path))
            return None
    out: dict[str, str] = {}
    bad: list[int] = []
    lines = text.splitlines()
    for lineno, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _LINE.match(line.strip())
        if not m:
            # multi-line values (exported shell functions) leave a few such lines in any real
            # listing; only many of them say the file is not a listing
            bad.append(lineno)
            continue
        out[m.group(1)] = _unquote(m.group(2))
    if not out:
        warnings.add("environment listing holds no KEY=VALUE lines", path=str(path))
        return None
    if bad and len(bad) > max(3, len(lines) // 10):
        warnings.add(f"{len(bad)} lines of the environment listing are not KEY=VALUE (first at "
                     f"line {bad[0]}); the rest was used", path=str(path), line=bad[0])
    return out


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value
