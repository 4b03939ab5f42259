"""Streams one log file through the format parsers in bounded memory: binary-safe decoding,
capped line length, one pass, items handed on as they are found (never a list of all lines)."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from precdx.collectors.logs.formats import Item, LineParser, builtin_parsers
from precdx.collectors.logs.model import Record
from precdx.compression import open_binary

MAX_LINE = 1 << 20          # longer "lines" are binary garbage or a missing newline; cut them
BINARY_SNIFF = 64 * 1024


@dataclass
class ReadStats:
    """What the reader saw besides the items: for warnings and provenance."""

    path: str
    lines: int = 0
    bytes: int = 0
    binary: bool = False
    truncated_last_line: bool = False
    cut_lines: int = 0
    frameworks: dict[str, int] = field(default_factory=dict)  # records per framework
    columnar: int = 0  # lines the block reader read in columns (not through the per-line parsers)


def looks_binary(head: bytes) -> bool:
    """NUL bytes or mostly undecodable bytes: not a text log. A run of NULs at the end is the
    tail of a log cut off by a crash (the file system had allocated, not written, those blocks)."""
    if not head:
        return False
    sample = head[:BINARY_SNIFF].rstrip(b"\x00")
    if not sample or b"\x00" in sample:
        return True
    bad = len(sample) - len(sample.decode("utf-8", errors="ignore").encode("utf-8"))
    return bad > len(sample) // 10


class Dispatcher:
    """The parsers over lines one at a time, in order (state kept between lines). One metric
    record per line at most: the first parser that yields one owns the line; events from every
    parser are kept. Fallback parsers (generic readers) only see lines no other parser claimed
    or swallowed (a multi-line record being assembled)."""

    def __init__(self, parsers: list[LineParser]) -> None:
        self.parsers = parsers
        self.always = [p for p in parsers if not p.hints and not p.fallback]
        self.hinted = [(p, p.hints) for p in parsers if p.hints and not p.fallback]
        self.fallback = [(p, p.hints) for p in parsers if p.fallback]

    @property
    def pending(self) -> bool:
        for p in self.parsers:
            if p.pending:
                return True
        return False

    def feed(self, text: str, lineno: int) -> list[Item]:
        out: list[Item] = []
        claimed = False
        swallowed = False
        for p in self.always:
            got = _feed(p, text, lineno)
            if got:
                out.extend(got)
        for p, hints in self.hinted:
            if not p.pending:
                for h in hints:
                    if h in text:
                        break
                else:
                    continue
            else:
                swallowed = True
            got = _feed(p, text, lineno)
            if not got:
                continue
            for item in got:
                if isinstance(item, Record) and item.line == lineno:
                    if claimed:
                        continue
                    claimed = True
                out.append(item)
        if claimed or swallowed or not self.fallback:
            return out
        for p, hints in self.fallback:
            if hints and not any(h in text for h in hints):
                continue
            got = _feed(p, text, lineno)
            if got:
                out.extend(got)
                break
        return out

    def flush(self) -> list[Item]:
        out: list[Item] = []
        for p in self.parsers:
            out.extend(p.flush())
        return out


def line_text(raw) -> str:
    """A line's bytes as the reader gives them to the parsers (a trailing CR dropped)."""
    text = raw.decode("utf-8", errors="replace")
    return text[:-1] if text.endswith("\r") else text


def trigger_literals(parsers: list[LineParser], fallback: bool = True) -> list[bytes]:
    """The literals `parsers` act on (their triggers; those of fallback ones only with
    `fallback`), as bytes."""
    return [t.encode("utf-8") for p in parsers if fallback or not p.fallback for t in (p.triggers or ())]


def parse_lines(lines: Iterable[str], parsers: list[LineParser] | None = None,
                first_line: int = 1) -> Iterator[Item]:
    """Run parsers over text lines (no newline needed), see `Dispatcher`."""
    d = Dispatcher(parsers if parsers is not None else builtin_parsers())
    feed = d.feed
    for lineno, text in enumerate(lines, first_line):
        got = feed(text, lineno)
        if got:
            yield from got
    yield from d.flush()


def _feed(parser: LineParser, text: str, lineno: int) -> list[Item] | None:
    """One parser on one line. A number too long to convert (a 5000-digit step, int() refuses
    it) makes that line no record of this format, not the whole file unreadable."""
    try:
        return parser.feed(text, lineno)
    except (ValueError, OverflowError):
        return None


def _decoded_lines(fh, stats: ReadStats, block: int = 1 << 22) -> Iterator[str]:
    """Text lines of a binary file, read in blocks (decoding a block at a time is much faster
    than line by line); a line longer than MAX_LINE is cut and the rest of it dropped."""
    rest = b""
    skipping = False
    while True:
        chunk = fh.read(block)
        if not chunk:
            break
        stats.bytes += len(chunk)
        data = rest + chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            rest = b"" if skipping else data
            if len(rest) > MAX_LINE:
                stats.cut_lines += 1
                stats.lines += 1
                yield rest[:MAX_LINE].decode("utf-8", errors="replace")
                rest, skipping = b"", True
            continue
        body, rest = data[:cut], data[cut + 1:]
        lines = body.decode("utf-8", errors="replace").split("\n")
        if skipping:  # the tail of an over-long line ends here
            lines = lines[1:]
            skipping = False
        for line in lines:
            stats.lines += 1
            if len(line) > MAX_LINE:
                stats.cut_lines += 1
                line = line[:MAX_LINE]
            yield line[:-1] if line.endswith("\r") else line
    if rest and not skipping:
        stats.truncated_last_line = True
        stats.lines += 1
        yield rest.decode("utf-8", errors="replace").rstrip("\r")


@contextmanager
def open_log(path: Path, stats: ReadStats):
    """The log's bytes (.gz / .zst decompressed on the fly) from the start, or None when its
    head looks binary (then stats.binary is set). Raises OSError if it cannot be opened."""
    with open_binary(path) as fh:
        if looks_binary(fh.read(BINARY_SNIFF)):
            stats.binary = True
            yield None
            return
        fh.seek(0)
        yield fh


def iter_log(path: Path, stats: ReadStats, parsers: list[LineParser] | None = None,
             block: int = 1 << 22) -> Iterator[Item]:
    """Items of one log file, streamed, one line at a time (the reference path; the logs
    collector reads through `blocks.read_into`, which gives the same). Raises OSError if the
    file cannot be opened."""
    with open_log(path, stats) as fh:
        if fh is None:
            return
        for item in parse_lines(_decoded_lines(fh, stats, block), parsers):
            if isinstance(item, Record):
                stats.frameworks[item.framework] = stats.frameworks.get(item.framework, 0) + 1
            yield item
