"""The one user-facing error type: what a user (or a bot) can cause, said plainly."""
from __future__ import annotations


class PrecdxError(Exception):
    """An error caused by input (bad file, unknown fact, broken rule): printed, never a traceback.

    `path` names the file, `line` the 1-based line when known, `hint` what still worked or
    what to do next. `exit_code` is what the CLI exits with (2 = bad input, 3 = internal limit).
    """

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 hint: str | None = None, exit_code: int = 2) -> None:
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line
        self.hint = hint
        self.exit_code = exit_code
        super().__init__(self.render())

    def render(self) -> str:
        where = ""
        if self.path:
            where = self.path + (f":{self.line}" if self.line else "") + ": "
        text = f"{where}{self.message}"
        if self.hint:
            text += f" ({self.hint})"
        return text


class Warnings:
    """Collects non-fatal problems (file, message) so a partial result can still be reported."""

    def __init__(self) -> None:
        self.items: list[dict] = []

    def add(self, message: str, *, path: str | None = None, line: int | None = None,
            source: str | None = None) -> None:
        entry = {"message": message}
        if path:
            entry["path"] = str(path)
        if line:
            entry["line"] = line
        if source:
            entry["source"] = source
        if entry not in self.items:
            self.items.append(entry)

    def extend(self, other: "Warnings") -> None:
        for item in other.items:
            if item not in self.items:
                self.items.append(item)

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self):
        return iter(self.items)
