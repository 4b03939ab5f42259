"""A small, safe reader of bash launch scripts: it never runs anything, it follows variable
assignments (strings, arrays, `${VAR:-default}`, `$((arithmetic))`), exports and line
continuations, and returns the expanded argument vectors of the script's commands.

    model.py    what a read returns (ShellScript, Command), errors, limits
    lex.py      words, operators, quotes, heredocs -> simple commands
    expand.py   assignments, exports and word expansion (never a command)
"""
from __future__ import annotations

from precdx.collectors.checklist.shell.expand import _run, expand_word  # noqa: F401
from precdx.collectors.checklist.shell.lex import _lex, _simple_commands
from precdx.collectors.checklist.shell.model import (  # noqa: F401
    MAX_ARITH_CHARS, MAX_ARRAY_ITEMS, MAX_VALUE_CHARS, RANDOM, Command, ShellLimitError, ShellScript,
    ShellSyntaxError,
)


def read_script(text: str, environ: dict[str, str] | None = None) -> ShellScript:
    """Read a script; `environ` is the launching shell's environment (e.g. env.txt)."""
    script = ShellScript()
    readable = text
    while True:
        try:
            tokens = _lex(readable)
            break
        except ShellSyntaxError as exc:
            script.error = script.error or exc
            cut = _cut_before(readable, exc.line)
            readable = cut if len(cut) < len(readable) else ""  # always make progress
    env: dict[str, str | list[str]] = dict(environ or {})
    for words, line in _simple_commands(tokens):
        try:
            _run(words, line, env, script)
        except ShellLimitError as exc:
            exc.line = line
            script.error = script.error or exc
            break
        except RecursionError:
            script.error = script.error or ShellLimitError("expansions nested too deeply", line)
            break
    return script


def _cut_before(text: str, line: int) -> str:
    """The script up to (not including) the statement that starts on `line`."""
    lines = text.splitlines(keepends=True)[: max(line - 1, 0)]
    # drop a trailing continued line, which belongs to the broken statement
    while lines and lines[-1].rstrip("\r\n").endswith("\\"):
        lines.pop()
    return "".join(lines)
