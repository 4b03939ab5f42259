"""Lexing a script into words and operators (quotes, command substitutions, heredocs, comments)
and grouping them into simple commands; nothing is executed."""
from __future__ import annotations

from precdx.collectors.checklist.shell.model import ShellSyntaxError, _ASSIGN, _Tok


def _lex(text: str) -> list[_Tok]:
    toks: list[_Tok] = []
    i, n, line = 0, len(text), 1
    pending_heredocs: list[tuple[str, bool, int]] = []
    expect_redir_target = False
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n and text[i + 1] == "\n":
            i += 2
            line += 1
            continue
        if c == "\n":
            toks.append(_Tok("op", "\n", line))
            i += 1
            line += 1
            if pending_heredocs:
                i, line = _skip_heredocs(text, i, line, pending_heredocs)
                pending_heredocs = []
            continue
        if c in " \t\r":
            i += 1
            continue
        if c == "#":
            while i < n and text[i] != "\n":
                i += 1
            continue
        if c in ";&|()":
            two = text[i:i + 2]
            if two in ("&&", "||", ";;"):
                toks.append(_Tok("op", two, line))
                i += 2
            else:
                toks.append(_Tok("op", c, line))
                i += 1
            continue
        if c in "<>":
            j = i
            while j < n and text[j] in "<>&-":
                j += 1
            op = text[i:j]
            i = j
            if op.startswith("<<") and not op.startswith("<<<"):
                start = i
                while i < n and text[i] in " \t":
                    i += 1
                word_start = i
                i, _ = _scan_word(text, i, line)
                delim = text[word_start:i].strip("'\"")
                pending_heredocs.append((delim, op.endswith("-"), line))
                del start
                continue
            if op.endswith("&"):
                while i < n and (text[i].isdigit() or text[i] == "-"):
                    i += 1
                continue
            expect_redir_target = True
            continue
        start_line = line
        j, line = _scan_word(text, i, line)
        word = text[i:j]
        i = j
        if expect_redir_target:
            expect_redir_target = False
            continue
        # a bare fd number glued to a redirection (2>&1) is not an argument
        if i < n and text[i] in "<>" and word.isdigit():
            continue
        toks.append(_Tok("word", word, start_line))
    return toks


def _scan_word(text: str, i: int, line: int) -> tuple[int, int]:
    """End index of the word starting at i (quotes, ${...}, $(...), arrays NAME=(...))."""
    n = len(text)
    start_line = line
    start = i
    while i < n:
        c = text[i]
        if c == "\\":
            if i + 1 < n and text[i + 1] == "\n":
                line += 1
            i += 2
            continue
        if c == "'":
            i, line = _skip_single(text, i, line, start_line)
            continue
        if c == '"':
            i, line = _scan_double(text, i + 1, line, start_line)
            continue
        if c == "`":
            end = text.find("`", i + 1)
            if end < 0:
                raise ShellSyntaxError("unterminated backquote", start_line)
            line += text.count("\n", i, end)
            i = end + 1
            continue
        if c == "$" and i + 1 < n and text[i + 1] in "({":
            i, line = _scan_group(text, i + 1, line, start_line)
            continue
        if c == "(" and i > start and text[i - 1] == "=" and _ASSIGN.match(text[start:i] + "x"):
            i, line = _scan_group(text, i, line, start_line)
            continue
        if c in " \t\r\n;&|()<>":
            break
        i += 1
    return i, line


def _skip_single(text: str, i: int, line: int, start_line: int) -> tuple[int, int]:
    """Skip a single-quoted string starting at text[i]; returns (index after it, line)."""
    end = text.find("'", i + 1)
    if end < 0:
        raise ShellSyntaxError("unterminated single quote", start_line)
    return end + 1, line + text.count("\n", i, end)


def _scan_double(text: str, i: int, line: int, start_line: int) -> tuple[int, int]:
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            if i + 1 < n and text[i + 1] == "\n":
                line += 1
            i += 2
            continue
        if c == '"':
            return i + 1, line
        if c == "$" and i + 1 < n and text[i + 1] in "({":
            i, line = _scan_group(text, i + 1, line, start_line)
            continue
        if c == "\n":
            line += 1
        i += 1
    raise ShellSyntaxError("unterminated double quote", start_line)


def _scan_group(text: str, i: int, line: int, start_line: int) -> tuple[int, int]:
    """From an opening ( or { to just after its match, skipping quoted parts."""
    n = len(text)
    opener = text[i]
    closer = ")" if opener == "(" else "}"
    depth = 0
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "'" and opener == "(":
            i, line = _skip_single(text, i, line, start_line)
            continue
        if c == '"':
            i, line = _scan_double(text, i + 1, line, start_line)
            continue
        if c == opener:
            depth += 1
        elif c == closer:
            depth -= 1
            if depth == 0:
                return i + 1, line
        elif c == "\n":
            line += 1
        i += 1
    raise ShellSyntaxError(f"unterminated '{opener}'", start_line)


def _skip_heredocs(text: str, i: int, line: int, docs: list[tuple[str, bool, int]]) -> tuple[int, int]:
    for delim, strip_tabs, start_line in docs:
        while True:
            if i >= len(text):
                # bash reads to the end of the file (and warns): the rest of the script is data
                raise ShellSyntaxError(f"here-document is never closed by a '{delim}' line", start_line)
            end = text.find("\n", i)
            cur = text[i:] if end < 0 else text[i:end]
            i = len(text) if end < 0 else end + 1
            line += 1
            if (cur.rstrip("\r").lstrip("\t") if strip_tabs else cur.rstrip("\r")) == delim:
                break
    return i, line


def _simple_commands(tokens: list[_Tok]) -> list[tuple[list[str], int]]:
    out: list[tuple[list[str], int]] = []
    words: list[str] = []
    line = 1
    for tok in tokens:
        if tok.kind == "op":
            if words:
                out.append((words, line))
            words = []
            continue
        if not words:
            line = tok.line
        words.append(tok.text)
    if words:
        out.append((words, line))
    return out
