"""Following assignments and exports and expanding words as bash would (`$VAR`, `${VAR:-x}`,
arrays, `$((arithmetic))`) within fixed limits; no command is ever run."""
from __future__ import annotations

import ast
import operator
import re

from precdx.collectors.checklist.shell.lex import _lex
from precdx.collectors.checklist.shell.model import (
    _ASSIGN, _DECLARERS, _KEYWORDS, _NAME, MAX_ARITH_CHARS, MAX_ARRAY_ITEMS, MAX_VALUE_CHARS, RANDOM, Command,
    ShellLimitError, ShellScript, ShellSyntaxError, _Tok,
)


def _run(words: list[str], line: int, env: dict[str, str | list[str]], script: ShellScript) -> None:
    while words and words[0] in _KEYWORDS:
        words = words[1:]
    if not words:
        return
    if words[0] in ("[", "[[", "test", "source", ".", "set", "unset", "shift", "exit", "return",
                    "cd", "echo", "printf", "mkdir", "ulimit", "wait", "trap"):
        if words[0] == "unset":
            for w in words[1:]:
                env.pop(w, None)
        return
    exported = False
    if words[0] in _DECLARERS:
        exported = words[0] == "export" or any(w.startswith("-") and "x" in w for w in words[1:])
        for w in words[1:]:
            if w.startswith("-"):
                continue
            m = _ASSIGN.match(w)
            if m:
                _assign(m, env)
            name = m.group(1) if m else w
            if exported and _NAME.fullmatch(name):
                value = env.get(name)
                script.exports[name] = _as_text(value) if value is not None else ""
        _remember(env, script)
        return
    prefix: dict[str, str] = {}
    k = 0
    while k < len(words):
        m = _ASSIGN.match(words[k])
        if not m:
            break
        if k == len(words) - 1 or all(_ASSIGN.match(w) for w in words[k:]):
            for w in words[k:]:
                _assign(_ASSIGN.match(w), env)  # type: ignore[arg-type]
            _remember(env, script)
            return
        prefix[m.group(1)] = _as_text(_expand_value(m.group(4), env))
        k += 1
    if k >= len(words):
        return
    if "()" in words[k] or (k + 1 < len(words) and words[k + 1] == "()"):
        return  # function definition header
    local_env = dict(env)
    local_env.update(prefix)
    argv: list[str] = []
    for w in words[k:]:
        argv.extend(expand_word(w, local_env))
    if argv:
        script.commands.append(Command(argv=argv, line=line, env=prefix))


def _remember(env: dict[str, str | list[str]], script: ShellScript) -> None:
    script.variables = dict(env)
    for name in list(script.exports):
        if name in env:
            script.exports[name] = _as_text(env[name])


def _assign(m: re.Match, env: dict[str, str | list[str]]) -> None:
    name, index, op, raw = m.group(1), m.group(2), m.group(3), m.group(4)
    if raw.startswith("(") and raw.endswith(")"):
        items: list[str] = []
        try:
            inner = _lex(raw[1:-1])
        except ShellSyntaxError:
            inner = [_Tok("word", raw[1:-1], 0)]
        for tok in inner:
            if tok.kind == "word":
                items.extend(expand_word(tok.text, env))
        prior = env.get(name)
        if op == "+=" and isinstance(prior, list):
            items = prior + items
        if len(items) > MAX_ARRAY_ITEMS:
            raise ShellLimitError(f"array {name} grows beyond {MAX_ARRAY_ITEMS} items", 0)
        env[name] = items
        return
    value = _as_text(_expand_value(raw, env))
    if index:
        prior = env.get(name)
        arr = list(prior) if isinstance(prior, list) else ([prior] if prior else [])
        arr.append(value)
        if len(arr) > MAX_ARRAY_ITEMS:
            raise ShellLimitError(f"array {name} grows beyond {MAX_ARRAY_ITEMS} items", 0)
        env[name] = arr
        return
    if op == "+=":
        prior = env.get(name)
        if isinstance(prior, list):
            if len(prior) >= MAX_ARRAY_ITEMS:
                raise ShellLimitError(f"array {name} grows beyond {MAX_ARRAY_ITEMS} items", 0)
            env[name] = prior + [value]
            return
        value = (prior or "") + value
    if len(value) > MAX_VALUE_CHARS:
        raise ShellLimitError(f"variable {name} grows beyond {MAX_VALUE_CHARS} characters", 0)
    env[name] = value


def _expand_value(raw: str, env: dict[str, str | list[str]]) -> str:
    """Right-hand side of an assignment: expanded, never field-split."""
    return "".join(text for text, _ in _segments(raw, env))


def _as_text(value: str | list[str] | None) -> str:
    if value is None:
        return ""
    return " ".join(value) if isinstance(value, list) else value


def expand_word(word: str, env: dict[str, str | list[str]]) -> list[str]:
    """Expand one shell word to its fields (unquoted expansions are split on whitespace)."""
    fields: list[str] = []
    cur: list[str] = []
    have = False  # the current field exists even if empty ("" is one empty field)
    for text, splittable in _segments(word, env):
        if not splittable:
            cur.append(text)
            have = True
            continue
        parts = re.split(r"[ \t\n]+", text)
        if parts[0] == "" and len(parts) > 1 and (cur or have):
            fields.append("".join(cur))
            cur, have = [], False
        for idx, part in enumerate(parts):
            if idx > 0 and (cur or have):
                fields.append("".join(cur))
                cur, have = [], False
            if part:
                cur.append(part)
                have = True
    if cur or have:
        fields.append("".join(cur))
    return fields


def _segments(word: str, env: dict[str, str | list[str]]) -> list[tuple[str, bool]]:
    """(text, splittable) pieces of a word after quote removal and expansion."""
    out: list[tuple[str, bool]] = []
    i, n = 0, len(word)
    lit: list[str] = []

    def flush() -> None:
        if lit:
            _bounded(lit)  # before joining: "$A$A$A..." holds references, the join would copy
            out.append(("".join(lit), False))
            lit.clear()

    while i < n:
        c = word[i]
        if c == "\\" and i + 1 < n:
            lit.append(word[i + 1])
            i += 2
        elif c == "'":
            end = word.find("'", i + 1)
            end = n if end < 0 else end
            lit.append(word[i + 1:end])
            i = end + 1
        elif c == '"':
            i = _double_segments(word, i + 1, env, lit, out, flush)
        elif c == "$":
            text, i, fields = _dollar(word, i, env, quoted=False)
            if fields is not None:
                flush()
                out.append((" ".join(_bounded(fields)), True))
            elif text is not None:
                flush()
                out.append((text, True))
            else:
                lit.append("$")
                i += 1
        elif c == "`":
            end = word.find("`", i + 1)
            end = n if end < 0 else end
            lit.append(word[i:end + 1])
            i = end + 1
        else:
            lit.append(c)
            i += 1
    flush()
    _bounded([t for t, _ in out])
    return out


def _bounded(texts: list[str]) -> list[str]:
    """`texts`, unless together they are beyond what any launch script holds."""
    if len(texts) > MAX_ARRAY_ITEMS:
        raise ShellLimitError(f"a word expands to more than {MAX_ARRAY_ITEMS} fields", 0)
    if sum(len(t) for t in texts) > MAX_VALUE_CHARS:
        raise ShellLimitError(f"a word expands to more than {MAX_VALUE_CHARS} characters", 0)
    return texts


def _double_segments(word: str, i: int, env, lit: list[str], out: list, flush) -> int:
    n = len(word)
    while i < n and word[i] != '"':
        c = word[i]
        if c == "\\" and i + 1 < n:
            if word[i + 1] in '$`"\\':
                lit.append(word[i + 1])
            elif word[i + 1] != "\n":
                lit.append(word[i:i + 2])
            i += 2
        elif c == "$":
            text, j, fields = _dollar(word, i, env, quoted=True)
            if fields is not None:
                # "${ARR[@]}": one field per element
                flush()
                for k, f in enumerate(fields):
                    if k:
                        out.append((" ", True))
                    out.append((f, False))
                i = j
            elif text is not None:
                lit.append(text)
                i = j
            else:
                lit.append("$")
                i += 1
        else:
            lit.append(c)
            i += 1
    return i + 1


def _lookup(name: str, env: dict[str, str | list[str]]) -> str | list[str] | None:
    if name == "RANDOM":
        return RANDOM
    return env.get(name)


def _dollar(word: str, i: int, env, *, quoted: bool) -> tuple[str | None, int, list[str] | None]:
    """Expand the $-expression at word[i]; returns (text, next index, array fields or None)."""
    n = len(word)
    if word.startswith("$((", i):
        end = _match(word, i + 1)
        inner = word[i + 3:end - 1] if end > 0 else ""
        if end < 0 or not inner.endswith(")"):
            return word[i:], n, None
        value = _arith(inner[:-1], env)
        return (value if value is not None else word[i:end + 0]), end, None
    if word.startswith("$(", i):
        end = _match(word, i + 1)
        end = n if end < 0 else end
        return word[i:end], end, None  # command substitution: unknown, kept as written
    if word.startswith("${", i):
        end = _match(word, i + 1)
        end = n if end < 0 else end
        return _brace(word[i + 2:end - 1], env, word[i:end], end)
    m = _NAME.match(word, i + 1)
    if m:
        value = _lookup(m.group(0), env)
        if value is None:
            return word[i:m.end()], m.end(), None
        return _as_text(value) if not isinstance(value, list) else (value[0] if value else ""), m.end(), None
    if i + 1 < n and (word[i + 1].isdigit() or word[i + 1] in "@*#?$!-"):
        return word[i:i + 2], i + 2, None  # positional/special parameters: unknown here
    return None, i, None


def _brace(body: str, env, original: str, end: int) -> tuple[str | None, int, list[str] | None]:
    if body.startswith("#"):
        value = _lookup(body[1:].split("[")[0], env)
        if isinstance(value, list):
            return str(len(value)), end, None
        return str(len(value or "")), end, None
    m = _NAME.match(body)
    if not m:
        return original, end, None
    name = m.group(0)
    rest = body[m.end():]
    value = _lookup(name, env)
    if rest.startswith("["):
        close = rest.find("]")
        index = rest[1:close]
        rest = rest[close + 1:]
        if isinstance(value, list):
            if index in ("@", "*"):
                return None, end, list(value)
            try:
                value = value[int(index)]
            except (ValueError, IndexError):
                value = None
        elif index not in ("@", "*", "0"):
            value = None
    if isinstance(value, list):
        value = value[0] if value else ""
    for op in (":-", ":=", ":?", ":+", "-", "=", "?", "+"):
        if rest.startswith(op):
            arg = _expand_value(rest[len(op):], env)
            unset = value is None or (op.startswith(":") and value == "")
            if op in (":-", "-"):
                return (arg if unset else value), end, None
            if op in (":=", "="):
                if unset:
                    env[name] = arg
                    return arg, end, None
                return value, end, None
            if op in (":+", "+"):
                return ("" if unset else arg), end, None
            return (original if unset else value), end, None
    if value is None:
        return original, end, None
    return value, end, None  # pattern operations (%, #, /) are not applied: the value is kept


def _match(word: str, i: int) -> int:
    """Index after the bracket matching word[i]."""
    opener = word[i]
    closer = ")" if opener == "(" else "}"
    depth = 0
    j = i
    while j < len(word):
        c = word[j]
        if c == "\\":
            j += 2
            continue
        if c == opener:
            depth += 1
        elif c == closer:
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return -1


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.FloorDiv: operator.floordiv, ast.Div: operator.floordiv, ast.Mod: operator.mod}


def _arith(expr: str, env) -> str | None:
    """Integer arithmetic of $(( )) with variables substituted; None when not evaluable."""
    def sub(m: re.Match) -> str:
        value = _lookup(m.group(1) or m.group(2), env)
        text = _as_text(value) if value is not None else ""
        return text if re.fullmatch(r"-?\d+", text.strip()) else "x"
    if len(expr) > MAX_ARITH_CHARS:
        return None
    text = re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?|\b([A-Za-z_][A-Za-z0-9_]*)\b", sub, expr)
    try:
        tree = ast.parse(text.strip(), mode="eval")
        return str(_eval(tree.body))
    except (SyntaxError, ValueError, ZeroDivisionError, TypeError, RecursionError, MemoryError):
        return None


def _eval(node: ast.AST) -> int:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.left), _eval(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand)
    raise ValueError("not integer arithmetic")
