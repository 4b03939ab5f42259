"""What the shell reader returns (the commands and variables of a script), its errors and
its limits."""
from __future__ import annotations

import re
from dataclasses import dataclass, field


RANDOM = "<random>"
# A launch script is a few KiB; a value or array beyond these is a doubling bomb (A=$A$A ...)
MAX_VALUE_CHARS = 1 << 20
MAX_ARRAY_ITEMS = 100_000
MAX_ARITH_CHARS = 10_000

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\[[^\]]*\])?(\+?=)(.*)$", re.DOTALL)
_KEYWORDS = {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "for", "case",
             "esac", "{", "}", "!", "function", "in", "select", "time"}
_DECLARERS = {"export", "declare", "typeset", "local", "readonly"}


class ShellSyntaxError(ValueError):
    """The script cannot be read as shell (e.g. an unterminated quote)."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


class ShellLimitError(ShellSyntaxError):
    """Reading the script would exceed a resource bound (a value doubling without end, deep
    nesting); reading stops at that command and what came before is kept."""


@dataclass
class Command:
    argv: list[str]
    line: int
    env: dict[str, str] = field(default_factory=dict)  # NAME=value prefixes of this command


@dataclass
class ShellScript:
    variables: dict[str, str | list[str]] = field(default_factory=dict)
    exports: dict[str, str] = field(default_factory=dict)
    commands: list[Command] = field(default_factory=list)
    error: ShellSyntaxError | None = None  # set when reading stopped early; what came before is kept


@dataclass
class _Tok:
    kind: str   # "word" | "op"
    text: str
    line: int
