"""The line-parser contract every log format implements, so the reader can stream a file once
through all of them. A parser sees only lines containing one of its `hints` (cheap substring
prefilter) unless it is mid-record (`pending`), and returns what the line carried."""
from __future__ import annotations

from typing import Union

from precdx.collectors.logs.model import Event, Record

Item = Union[Record, Event]


class LineParser:
    """Base: stateless by default. Subclasses set `name`, `hints` and implement `feed`."""

    name: str = ""
    hints: tuple[str, ...] = ()
    pending: bool = False  # True while a multi-line record is being assembled
    fallback: bool = False  # a generic reader: only lines no other parser claimed or swallowed
    # Stateless and yields records only (no events): on a line an earlier parser claimed, what
    # it would read is dropped, so the block reader may skip it there.
    pure: bool = False
    stateless: bool = False  # keeps nothing between lines (a pure parser never does either)

    def state(self) -> object:
        """What of this parser's state can change what it makes of a later line, as a hashable
        value that is only compared (the block reader reuses what it learnt of a line shape only
        while every parser's state is what it was then; see shapes.py). Default: a pure or
        stateless parser has none, any other all its attributes."""
        return None if self.pure or self.stateless else repr(vars(self))

    def set_state(self, value: object) -> None:
        """Put the parser in the state `state()` returned (what the block reader does for a line
        whose effect on the state it learnt; see shapes.py). Parsers that cannot say no."""
        raise NotImplementedError

    @property
    def triggers(self) -> tuple[str, ...] | None:
        """Literals at least one of which a line must contain for `feed` to yield anything or
        change state (while not `pending`); None: any line may matter."""
        return self.hints or None

    def feed(self, text: str, lineno: int) -> list[Item] | None:
        raise NotImplementedError

    def flush(self) -> list[Item]:
        """Records still buffered at end of file."""
        return []
