"""Records queued in columns (SeriesBuilder.queue) date the events between them as the same
records added one by one do: an event takes the step of the last record before its line, whichever
framework's, however many frameworks are queued and however many events are looked up."""
from __future__ import annotations

import random

import numpy as np
import pytest

from precdx.collectors.logs.model import Event, Record, Rows
from precdx.collectors.logs.series import _LOOKUPS, SeriesBuilder


def _rows(fw: str, recs: list[Record]) -> Rows:
    n = len(recs)
    f = lambda name: np.array([getattr(r, name) for r in recs], dtype=np.float64)  # noqa: E731
    return Rows(fw, np.array([r.line for r in recs], dtype=np.int64), f("step"), f("loss"), np.ones(n, dtype=bool),
                np.zeros(n, dtype=bool), np.full(n, np.nan), np.zeros(n, dtype=bool), np.full(n, np.nan),
                np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan))


def _draw(seed: int, frameworks: int, events: int) -> tuple[list[Record], list[Event]]:
    rnd = random.Random(seed)
    fws = [f"fw{i}" for i in range(frameworks)]
    recs, evs, step = [], [], {fw: 0 for fw in fws}
    line = 0
    for _ in range(3000):
        line += rnd.randint(1, 3)
        if rnd.random() < events / 3000:
            # (one event in four on the line of the record before it: a record's own line is not before it)
            evs.append(Event(line=line - 1 if rnd.random() < 0.25 and recs and recs[-1].line == line - 1 else line,
                             kind="overflow"))
            continue
        fw = rnd.choice(fws)
        step[fw] += rnd.randint(1, 2)
        recs.append(Record(line=line, framework=fw, step=step[fw], loss=2.0))
    return recs, evs


@pytest.mark.parametrize("frameworks", [1, 2, 5])
@pytest.mark.parametrize("events", [10, 3 * _LOOKUPS, 1500])
def test_events_between_queued_records(frameworks: int, events: int) -> None:
    recs, evs = _draw(frameworks * 1000 + events, frameworks, events)
    one = SeriesBuilder("r", "target")  # one by one, in line order
    for item in sorted([*recs, *evs], key=lambda x: (x.line, isinstance(x, Record))):
        one.add(Event(line=item.line, kind=item.kind) if isinstance(item, Event) else item, at=item.line)
    one.settle()
    queued = SeriesBuilder("r", "target")  # in blocks: records queued in columns, the events added
    lines = sorted({x.line for x in [*recs, *evs]})
    for a in range(0, len(lines), 700):
        lo, hi = lines[a], lines[min(a + 700, len(lines)) - 1]
        for fw in sorted({r.framework for r in recs}):
            part = [r for r in recs if r.framework == fw and lo <= r.line <= hi]
            if part:
                queued.queue(_rows(fw, part))
        for e in (e for e in evs if lo <= e.line <= hi):
            queued.add(Event(line=e.line, kind=e.kind), at=e.line)
        queued.settle()
    assert [(e.line, e.step) for e in queued.events] == [(e.line, e.step) for e in one.events]
    assert any(e.step is not None for e in one.events)
    for fw in one.frameworks():
        assert one.build(fw).steps.tolist() == queued.build(fw).steps.tolist()
