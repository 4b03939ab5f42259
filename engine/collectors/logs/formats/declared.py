"""User-declared log formats: a YAML file describing lines of a trainer precdx does not know.

The file (recognised by its top-level `precdx_log_formats` key; put it in the run folder or
the case folder) looks like::

    precdx_log_formats:
      - name: mytrainer                 # framework name reported in facts
        contains: "train_step"          # optional literal prefilter (speeds up big logs)
        regex: 'train_step=(?P<step>\\d+) loss=(?P<loss>\\S+)(?: gnorm=(?P<grad_norm>\\S+))?'
        kind: train                     # optional: train (default) or eval
        windowed: false                 # optional: values are averages over the log interval
        skipped_cumulative: false       # optional: `skipped` is a running total

`regex` is a Python regular expression searched in each line; its named groups give the values.
Known group names: step, loss, grad_norm, lr, loss_scale, skipped, nan_iters; any other named
group is kept as an extra value (e.g. epoch). `step` is optional: without it the records are
numbered in line order (the facts then say step_inferred). Values use the shared number grammar
(NaN/Inf, `nan.0`, `1.2K`, `1,024`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from precdx.collectors.logs.formats.base import Item, LineParser
from precdx.collectors.logs.model import Record, parse_int, parse_num
from precdx.errors import PrecdxError
from precdx.yamlsafe import line_of, load_yaml_file

TOP_KEY = "precdx_log_formats"
KNOWN_GROUPS = {"step", "loss", "grad_norm", "lr", "loss_scale", "skipped", "nan_iters"}
_ALLOWED_KEYS = {"name", "contains", "regex", "kind", "windowed", "skipped_cumulative"}


@dataclass(frozen=True)
class DeclaredFormat:
    name: str
    regex: re.Pattern
    contains: str | None = None
    kind: str = "train"
    windowed: bool = False
    skipped_cumulative: bool = False


def load_declared_formats(path: str | Path) -> list[DeclaredFormat]:
    """Read and validate a declared-format YAML; every mistake is a PrecdxError with file:line."""
    where = str(path)
    data = load_yaml_file(where)
    if not isinstance(data, dict) or TOP_KEY not in data:
        raise PrecdxError(f"not a log-format file: expected a top-level '{TOP_KEY}' list", path=where)
    entries = data[TOP_KEY]
    if not isinstance(entries, list) or not entries:
        raise PrecdxError(f"'{TOP_KEY}' must be a non-empty list", path=where, line=line_of(data, TOP_KEY))
    out = []
    for entry in entries:
        line = line_of(entry)
        if not isinstance(entry, dict):
            raise PrecdxError("each log format must be a mapping", path=where, line=line)
        unknown = set(entry) - _ALLOWED_KEYS
        if unknown:
            raise PrecdxError(f"unknown key(s) {sorted(unknown)} (allowed: {sorted(_ALLOWED_KEYS)})",
                              path=where, line=line)
        name, pattern = entry.get("name"), entry.get("regex")
        if not isinstance(name, str) or not name:
            raise PrecdxError("a log format needs a 'name' (string)", path=where, line=line)
        if not isinstance(pattern, str) or not pattern:
            raise PrecdxError(f"log format {name!r} needs a 'regex' (string)", path=where, line=line)
        try:
            regex = re.compile(pattern)
        except (re.error, OverflowError, RecursionError) as exc:  # a{99999999999}, ((((...))))
            reason = "nested too deeply" if isinstance(exc, RecursionError) else exc
            raise PrecdxError(f"log format {name!r}: invalid regex: {reason}", path=where,
                              line=line_of(entry, "regex")) from None
        if _nested_unbounded_repeat(pattern):
            raise PrecdxError(f"log format {name!r}: the regex repeats a group that itself repeats without bound "
                              f"(e.g. (a+)+), which can take exponential time on some lines; rewrite it",
                              path=where, line=line_of(entry, "regex"))
        if not set(regex.groupindex) & KNOWN_GROUPS:
            raise PrecdxError(f"log format {name!r}: the regex needs a named group for the step or a "
                              f"value (one of {sorted(KNOWN_GROUPS)})", path=where,
                              line=line_of(entry, "regex"))
        kind = entry.get("kind", "train")
        if kind not in ("train", "eval"):
            raise PrecdxError(f"log format {name!r}: kind must be train or eval", path=where,
                              line=line_of(entry, "kind"))
        contains = entry.get("contains")
        if contains is not None and not isinstance(contains, str):
            raise PrecdxError(f"log format {name!r}: 'contains' must be a string", path=where,
                              line=line_of(entry, "contains"))
        flags = {}
        for key in ("windowed", "skipped_cumulative"):
            value = entry.get(key, False)
            if not isinstance(value, bool):
                raise PrecdxError(f"log format {name!r}: '{key}' must be true or false", path=where,
                                  line=line_of(entry, key))
            flags[key] = value
        out.append(DeclaredFormat(name=name, regex=regex, contains=contains, kind=kind, **flags))
    return out


class DeclaredParser(LineParser):
    """Runs one declared format over lines."""

    pure = True

    def __init__(self, fmt: DeclaredFormat) -> None:
        self.fmt = fmt
        self.name = fmt.name
        self.hints = (fmt.contains,) if fmt.contains else ()

    @property
    def triggers(self) -> tuple[str, ...] | None:
        if self.hints:
            return self.hints
        literal = required_literal(self.fmt.regex)
        return (literal,) if literal else None

    def feed(self, text: str, lineno: int) -> list[Item] | None:
        m = self.fmt.regex.search(text)
        if not m:
            return None
        groups = {k: v for k, v in m.groupdict().items() if v is not None}
        step = parse_num(groups.get("step"))
        if step is None and "step" in self.fmt.regex.groupindex:
            return None  # the format prints a step and this line's is not a number
        rec = Record(line=lineno, framework=self.name, kind=self.fmt.kind, step=step,
                     loss=parse_num(groups.get("loss")), grad_norm=parse_num(groups.get("grad_norm")),
                     lr=parse_num(groups.get("lr")), loss_scale=parse_num(groups.get("loss_scale")),
                     skipped=parse_int(groups.get("skipped")), nan_iters=parse_int(groups.get("nan_iters")),
                     skipped_cumulative=self.fmt.skipped_cumulative)
        for key, raw in groups.items():
            if key not in KNOWN_GROUPS:
                value = parse_num(raw)
                if value is not None:
                    rec.extra[key] = value
        return [rec]


def _nested_unbounded_repeat(pattern: str) -> bool:
    """True for the classic catastrophic-backtracking shape: a repeated group whose body holds an
    unbounded repeat and no literal separator ((a+)+, (a*)*, (\\w+\\s?)+). Python's re has no
    timeout, so such user-declared patterns are refused up front; `(\\d+,)*` stays allowed."""
    try:
        from re import _constants as const, _parser as parser  # Python 3.11+
    except ImportError:  # pragma: no cover
        import sre_constants as const  # type: ignore[no-redef]
        import sre_parse as parser  # type: ignore[no-redef]
    repeats = (const.MAX_REPEAT, const.MIN_REPEAT)

    def children(op, av):
        if op in repeats:
            return [av[2]]
        if op == const.SUBPATTERN:
            return [av[-1]]
        if op == const.BRANCH:
            return list(av[1])
        if op in (const.ASSERT, const.ASSERT_NOT):
            return [av[1]]
        return []

    def has_unbounded(items) -> bool:
        for op, av in items:
            if op in repeats and av[1] == const.MAXREPEAT:
                return True
            if any(has_unbounded(c) for c in children(op, av)):
                return True
        return False

    def flat(items):
        for op, av in items:
            if op == const.SUBPATTERN:
                yield from flat(av[-1])
            else:
                yield op, av

    def risky(items) -> bool:
        for op, av in items:
            if op in repeats and av[1] > 1:
                body = av[2]
                separated = any(o in (const.LITERAL, const.NOT_LITERAL) for o, _ in flat(body))
                if has_unbounded(body) and not separated:
                    return True
            if any(risky(c) for c in children(op, av)):
                return True
        return False

    try:
        return risky(parser.parse(pattern))
    except Exception:  # noqa: BLE001 - compile() already accepted it; never block on our own check
        return False


def required_literal(regex: re.Pattern) -> str | None:
    """The longest run of literal characters every match of `regex` contains (None when there
    is none: a top-level alternation, case-insensitive matching, ...): a line without it cannot
    match, so the block reader need not run the regex there."""
    if regex.flags & re.IGNORECASE:
        return None
    try:
        from re import _constants as const, _parser as parser  # Python 3.11+
    except ImportError:  # pragma: no cover
        import sre_constants as const  # type: ignore[no-redef]
        import sre_parse as parser  # type: ignore[no-redef]
    try:
        items = parser.parse(regex.pattern, regex.flags)
    except Exception:  # noqa: BLE001 - compile() accepted it; no prefilter then
        return None
    if items.state.flags & re.IGNORECASE:
        return None
    best, run = "", []

    def walk(seq) -> None:
        nonlocal best, run
        for op, av in seq:
            if op == const.LITERAL:
                run.append(chr(av))
                continue
            if op == const.SUBPATTERN and av[1] == 0 and av[2] == 0:  # a plain group: its items are required
                walk(av[-1])
                continue
            if op in (const.MAX_REPEAT, const.MIN_REPEAT) and av[0] >= 1:
                if len(run) > len(best):
                    best = "".join(run)
                run = []
                body = list(av[2])
                if len(body) == 1 and body[0][0] == const.LITERAL:  # "a+" requires one "a"
                    run.append(chr(body[0][1]))
                if len(run) > len(best):
                    best = "".join(run)
                run = []
                continue
            if len(run) > len(best):
                best = "".join(run)
            run = []

    walk(items)
    if len(run) > len(best):
        best = "".join(run)
    return best or None
