"""Line shapes (engine/collectors/logs/shapes.py, scan.c pdx_shapes; issue 17): the
compiled shape lookup agrees with the reference `shape`, long decimals are read as float() reads
them, what is learnt is only used where it holds (the parsers' state, zero against non-zero, a
field that is no token), and the block reader with shapes gives what the per-line reader gives."""
from __future__ import annotations

import math
import struct
from pathlib import Path

import numpy as np
import pytest

from precdx.collectors.logs import blocks, native, shapes
from precdx.collectors.logs.formats import builtin_parsers
from precdx.collectors.logs.formats.base import LineParser
from precdx.collectors.logs.formats.declared import DeclaredParser, load_declared_formats
from precdx.collectors.logs.model import Record
from precdx.collectors.logs.blocks import read_into
from precdx.collectors.logs.reader import Dispatcher, ReadStats
from precdx.collectors.logs.series import SeriesBuilder
from precdx.collectors.logs.shapes import Shapes, Table, Template, fingerprint, shape
from tests.collectors.logs.conftest import ensure_kernels
from tests.collectors.logs.test_logs_blocks import REAL, _assert_same

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies


def _lookup(kern, lines: list[bytes], templates: list[Template]) -> tuple[np.ndarray, np.ndarray]:
    body = b"".join(line + b"\n" for line in lines)
    buf = np.frombuffer(body, dtype=np.uint8)
    ends = np.flatnonzero(buf == 10).astype(np.int64)
    starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64)
    idx = np.arange(len(lines), dtype=np.int64)
    return native.shapes(kern, buf.ctypes.data, starts, ends, idx, Table(templates))


def _hash(kern, line: bytes) -> int:
    return int(_lookup(kern, [line], [])[0][0])


def test_shape_reference() -> None:
    line = b"step: 12  loss: 0.0500 lr=1.0e-05 nan.0\r"
    assert shape(line) == b"step: 1  loss: 1.1 lr=1.1e-1 nan.1"
    assert shape(line, zeros=True) == b"step: 1  loss: 0.1 lr=1.0e-1 nan.0"  # runs of zeros kept as they are
    assert shape(b"iteration 0/ 100 |") == b"iteration 1/ 1 |"
    assert shape(b"t=000 x=1000", zeros=True) == b"t=000 x=1"


@hypothesis.settings(max_examples=300, deadline=None, derandomize=True)
@hypothesis.given(line=st.lists(st.sampled_from(["0", "00", "7", "12", "9999", " ", ".", "e", "-", "é", "ab"]),
                                max_size=40))
def test_places_map_between_a_line_and_its_shape(line) -> None:
    """compact_at and locate are inverse at every place outside a run the shape makes one '1'
    (of a shape and of a zero shape), and a place of the shape stands for the same byte;
    compactor is compact_at."""
    text = "".join(line)
    for zeros in (False, True):
        rs = shapes.runs(text, zeros)
        inside = {k for a, b in rs for k in range(a + 1, b)}
        sh = shape(text.encode(), zeros).decode()
        cat = shapes.compactor(rs)
        for pos in range(len(text) + 1):
            c = shapes.compact_at(rs, pos)
            assert cat(pos) == c
            if pos in inside:
                assert c is None
                continue
            assert shapes.locate(rs, c) == pos
            assert sh[c:c + 1] == ("1" if pos in {a for a, _ in rs} else text[pos:pos + 1])


@hypothesis.settings(max_examples=300, deadline=None, derandomize=True)
@hypothesis.given(line=st.lists(st.sampled_from([b"0", b"00", b"7", b"1", b"9", b" ", b".", b"e", b"-", b"|", b":",
                                                 b"a", b"\xc3\xa9", b"\r", b"step", b"\t"]), max_size=60),
                  cut=st.integers(0, 59))
def test_compiled_shape_is_the_reference(line, cut) -> None:
    """The table finds a line under the reference shape, and never a line of another shape (a
    byte outside the digits changed, a run turned from zeros to non-zero)."""
    kern = native.kernels() if ensure_kernels() else None
    if kern is None:
        pytest.skip("no C compiler")
    raw = b"".join(line)
    if b"\n" in raw:
        return
    h = _hash(kern, raw)
    tpl = Template(shape(raw), h, "lines")
    _, tid = _lookup(kern, [raw], [tpl])
    assert tid[0] == 0
    # looked up by its zero shape when its shape says so
    zh = int(kern.shape_hash(raw, len(raw), 1))
    ztpl = Template(shape(raw, True), zh, "lines", zeros=True)
    hashes, tid = _lookup(kern, [raw], [Template(shape(raw), h, "zero"), ztpl])
    assert (int(hashes[0]), int(tid[0])) == (zh, 1)
    if raw:
        k = cut % len(raw)
        c = raw[k:k + 1]
        other = raw[:k] + (b"x" if not c.isdigit() else b"0" if c != b"0" else b"5") + raw[k + 1:]
        if shape(other) != shape(raw):
            _, tid = _lookup(kern, [other], [tpl])
            assert tid[0] == -1, (raw, other)
        if shape(other, True) != shape(raw, True):
            _, tid = _lookup(kern, [other], [Template(shape(raw), h, "zero"), ztpl])
            assert tid[0] == -1, (raw, other)


def test_lines_of_one_shape_share_a_hash(kern) -> None:
    a, b = b"[12:10:01] step: 10 loss: 2.5 lr=3.1e-04", b"[99:59:59] step: 99 loss: 7.1 lr=9.9e-09"
    assert shape(a) == shape(b) and _hash(kern, a) == _hash(kern, b)
    wide = b"[1:10:1] step: 123456 loss: 12.5 lr=3.14159e-4"  # numbers of other widths: the same shape
    assert shape(wide) == shape(a) and _hash(kern, wide) == _hash(kern, a)
    assert shape(b"[12:10:01] step: 10 loss: 2.5 lr=3.0e-04", True) != shape(a, True)  # runs of zeros kept
    c = b"[12:10:01] step: 10 loss: 0.0 lr=3.1e-04"  # a zero value: another zero shape, the same shape
    assert shape(c) == shape(a) and shape(c, True) != shape(a, True)
    assert _hash(kern, a + b"\r") == _hash(kern, a)  # the reader drops a trailing CR


def _values(kern, tokens: list[bytes], learnt_from: list[bytes] | None = None) -> tuple[list[float], bool]:
    """The tokens read by scan.c from the line of `tokens` (a space between each), the shape's
    tokens placed as in the line of `learnt_from` (default: the same line)."""
    ref = b" ".join(learnt_from or tokens)
    rs = shapes.runs(ref)
    at, tok = 0, []
    for t in learnt_from or tokens:
        a, b = shapes.compact_at(rs, at), shapes.compact_at(rs, at + len(t))
        tok.append((a, b - a))
        at += len(t) + 1
    line = b" ".join(tokens)
    assert shape(line) == shape(ref)
    tpl = Template(shape(line), _hash(kern, line), "items", tokens=tuple(tok))
    table = Table([tpl])
    body = line + b"\n"
    buf = np.frombuffer(body, dtype=np.uint8)
    _, tid, out, slow = native.shapes(kern, buf.ctypes.data, np.zeros(1, dtype=np.int64),
                                      np.array([len(line)], dtype=np.int64), np.zeros(1, dtype=np.int64), table,
                                      values=True)
    assert tid[0] == 0
    return out[0][:len(tokens)].tolist(), bool(slow[0])


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


@hypothesis.settings(max_examples=400, deadline=None, derandomize=True)
@hypothesis.given(x=st.floats(allow_nan=False, allow_infinity=False))
def test_repr_of_any_double_is_read_exactly(x) -> None:
    """What Python prints for a double (up to 17 significant digits, any exponent) is read bit for
    bit as float() reads it: short decimals by the exact path, the rest by strtod."""
    kern = native.kernels() if ensure_kernels() else None
    if kern is None:
        pytest.skip("no C compiler")
    tokens = [repr(x).encode(), f"{x:.20e}".encode(), f"{x:.17g}".encode()]
    tokens = [t for t in tokens if b"inf" not in t and b"nan" not in t]
    if any(t.lstrip(b"-").isdigit() and abs(int(t)) >= 2 ** 53 for t in tokens):
        assert _values(kern, tokens)[1]  # an integer a double may not hold: the line goes per line
        return
    got, slow = _values(kern, tokens)
    assert not slow
    for t, v in zip(tokens, got):
        assert _bits(v) == _bits(float(t)), t


@pytest.mark.parametrize("token", [b"0.12345678901234567890123", b"1e-320", b"4.9e-324", b"1e400", b"-0.0",
                                   b"123456789012345678901234567890.5", b"+1.5", b"1.", b".5", b"2.5E+300",
                                   b"123456789012345"])
def test_edge_decimals(kern, token) -> None:
    got, slow = _values(kern, [token])
    assert not slow
    assert _bits(got[0]) == _bits(float(token)) or (math.isinf(got[0]) and math.isinf(float(token)))


def test_a_long_integer_goes_per_line(kern) -> None:
    """An integer of 2^53 or more: a double may not hold what the parsers read (an int)."""
    assert _values(kern, [b"9007199254740991"]) == ([9007199254740991.0], False)
    assert _values(kern, [b"9007199254740993"])[1]
    assert _values(kern, [b"12", b"1234567890123456789"], learnt_from=[b"12", b"5"])[1]


@hypothesis.settings(max_examples=300, deadline=None, derandomize=True,
                     suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture])
@hypothesis.given(ref=st.lists(st.sampled_from(["1.5", "-2", "0.5", "3e-05", "7", "1.0E+00", "100"]), min_size=1,
                               max_size=6),
                  data=st.data())
def test_tokens_are_found_whatever_their_widths(kern, ref, data) -> None:
    """A shape learnt from one line reads every line of it: each token found where its numbers
    are (wider or narrower) and read as float() reads it."""
    def widen(tok: str) -> str:
        out = []
        for part in __import__("re").split(r"([0-9]+)", tok):
            if part.isdigit() and part.strip("0"):
                part = str(data.draw(st.integers(1, 10 ** 12)))
            out.append(part)
        return "".join(out)
    other = [widen(t) for t in ref]
    got, slow = _values(kern, [t.encode() for t in other], learnt_from=[t.encode() for t in ref])
    assert not slow
    assert [_bits(v) for v in got] == [_bits(float(t)) for t in other]


def _learn(lines: list[str], parsers=None) -> tuple[Shapes, list[list]]:
    """Feed `lines` through a dispatcher, learning each line's shape as the block reader does."""
    d = Dispatcher(parsers if parsers is not None else builtin_parsers())
    sh = Shapes(d)
    outs = []
    for n, text in enumerate(lines, 1):
        before = fingerprint(d.parsers)
        got = d.feed(text, n)
        outs.append(got)
        sh.learn(d, text.encode(), text, n, got, before, fingerprint(d.parsers), n)
    return sh, outs


def _row(tpl: Template, line: str) -> np.ndarray:
    """The token values of `line` (of the shape of `tpl`) as scan.c reads them."""
    raw = line.encode()
    assert shape(raw, tpl.zeros) == tpl.shape
    rs = shapes.runs(raw, tpl.zeros)
    return np.array([float(raw[shapes.locate(rs, at):shapes.locate(rs, at + n)]) for at, n in tpl.tokens] or [np.nan])


def test_what_is_learnt() -> None:
    lines = ["[rank0]:[titan] 2025-01-01 10:00:01,123 - root - INFO - step: 12  loss:  2.3456  grad_norm:  1.2345  "
             "memory: 11.11GiB(11.11%)  tps: 1,234  mfu: 1.2%",
             "  5%|▌         | 50/1000 [00:10<03:10,  5.00it/s]",  # moves the progress counter: per line
             "[2025-01-01 10:00:01,123] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 "
             "Skipping step. Attempted loss scale: 65536, reducing to 32768",
             "06/07/2024 10:00:01 [INFO|DP=0|PP=0|TP=0]: iteration: 3 / 10 | consumed_tokens: 4.71K | lm_loss: 2.5",
             "nothing to see here 123",
             "{'loss': 1.2345, 'grad_norm': 0.5, 'learning_rate': 1.5e-05, 'epoch': 0.12}"]
    sh, outs = _learn(lines)
    kinds = [t.kind for t in sh.templates]
    assert kinds[0] == "rows" and sh.templates[0].framework == "torchtitan"
    # the progress bar moves the HF parser's counter: a dynamic shape that sets it from the line
    tqdm = sh.templates[1]
    assert tqdm.dynamic and kinds[1] == "items" and not tqdm.items and len(tqdm.sets) == 2
    keeping = [p for p in Dispatcher(builtin_parsers()).parsers if not (p.pure or p.stateless)]
    hf = [type(p).__name__ for p in keeping].index("HfDictParser")
    state = shapes.leaves(tuple((7, 9) if j == hf else None for j in range(len(keeping))))
    after = shapes.next_state(tqdm, _row(tqdm, "  6%|▌         | 60/1200 [00:10<03:10,  5.00it/s]"), state)
    assert after[hf:hf + 2] == [60, 1200] and all(type(v) is int for v in after[hf:hf + 2])
    assert kinds[2] == "items" and not sh.templates[2].dynamic  # an event
    assert kinds[4] == "empty"
    # the HF dict line: a record without a step, dated by the counter the line before set
    dated = sh.templates[5]
    assert dated.dynamic and kinds[5] == "items"
    row = _row(dated, "{'loss': 2.5432, 'grad_norm': 0.2, 'learning_rate': 3.5e-05, 'epoch': 0.51}")
    rec = shapes.make_items(dated, 99, row, None, after)[0]
    assert isinstance(rec, Record) and rec.line == 99 and rec.step_hint == 60 and rec.extra["total_steps"] == 1200
    assert (rec.loss, rec.grad_norm, rec.lr, rec.extra["epoch"]) == (2.5432, 0.2, 3.5e-05, 0.51)
    # nanotron's 4.71K is 4710, not a token's value: that line is read per line if the record holds it
    nano = sh.templates[3]
    assert nano.kind in ("lines", "rows")
    if nano.kind == "rows":
        assert all(how[0] != "tok" or how[1] < len(nano.tokens) for how in nano.items[0][2].values())


def test_a_parser_that_looks_at_digits_learns_nothing(tmp_path: Path) -> None:
    """A declared format (its regex may test digit values) or any parser outside the built-in
    set turns shapes off for the file."""
    spec = tmp_path / "formats.yaml"
    spec.write_text("precdx_log_formats:\n  - name: mine\n    regex: 'it (?P<step>[1-5]\\d*) l=(?P<loss>\\S+)'\n    contains: 'it '\n")
    declared = [DeclaredParser(f) for f in load_declared_formats(spec)]
    assert blocks._Plan.of(builtin_parsers() + declared).shapes is False

    class Custom(LineParser):
        name, hints = "custom", ("x",)

        def feed(self, text, lineno):
            return None

    assert blocks._Plan.of(builtin_parsers() + [Custom()]).shapes is False
    assert blocks._Plan.of(builtin_parsers()).shapes is True


def test_learning_has_to_pay() -> None:
    """Past the first LEARN_FREE shapes, a shape seen twice is only learnt while lines read
    from learnt shapes outnumber LEARN_PAYS per shape learnt."""
    sh = Shapes(Dispatcher(builtin_parsers()))
    assert not sh.should_learn(7) and sh.should_learn(7)  # seen once, then again
    sh.learnt, sh.hits = shapes.LEARN_FREE, 0
    assert not sh.should_learn(7)
    sh.hits = shapes.LEARN_PAYS * sh.learnt
    assert sh.should_learn(7)
    sh.known.add(7)
    assert not sh.should_learn(7)


def test_literals_with_digits() -> None:
    assert shapes.shape_safe("t >= 0 && t < n_classes") and shapes.shape_safe("step:")
    assert not shapes.shape_safe("code 134 ") and not shapes.shape_safe("0x") and not shapes.shape_safe("t >= 0")

    class Digits(LineParser):
        name, hints = "digits", ("exit code 1 ",)

        def feed(self, text, lineno):
            return None

    formats_module = __import__("precdx.collectors.logs.formats", fromlist=["DIGIT_BLIND"])
    old = formats_module.DIGIT_BLIND
    try:
        blocks.DIGIT_BLIND = old + (Digits,)
        assert blocks._Plan.of(builtin_parsers() + [Digits()]).shapes is False
    finally:
        blocks.DIGIT_BLIND = old


def _write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("threads", [1, 2])
def test_state_and_zero_sensitive_lines(tmp_path: Path, kern, monkeypatch, threads) -> None:
    """HF dict lines of one shape dated by different progress counters; checkpoint lines at
    iteration 0 (a load) and later (a resume); DeepSpeed skip totals at zero and not: the block
    reader with shapes gives the per-line reader's result."""
    monkeypatch.setattr(blocks, "THREADS", threads)
    lines = []
    for k in range(1, 400):
        lines.append(f" {k % 100:2d}%|#         | {k * 10}/4000 [00:{k % 60:02d}<10:00,  1.{k % 10}0it/s]")
        lines.append(f"{{'loss': {1 + k / 1000:.4f}, 'grad_norm': {k / 100:.4f}, 'learning_rate': {k}e-06, "
                     f"'epoch': {k / 400:.2f}}}")
        lines.append(f"successfully loaded checkpoint from /ckpt at iteration {k % 3 * 7}")
        lines.append(f"[2025-01-01 10:00:{k % 60:02d},123] [INFO] [logging.py:96:log_dist] [Rank 0] "
                     f"step={k}, skipped={k % 2}, lr=[{k}.0e-05], mom=[(0.9, 0.95)]")
        lines.append(f"[titan] 2025-01-01 10:00:{k % 60:02d},123 - root - INFO - step: {k:3d}  loss: {k % 7}.1234  "
                     f"memory:  1.11GiB(1.11%)  wps: 1,234  mfu: 1.2%")
    path = _write(tmp_path, lines)
    for block in (1 << 22, 4096, 300):
        stats = _assert_same(path, block)
    assert stats.columnar > len(lines) // 3  # most lines were read from their shapes


def test_real_excerpts_learn_shapes(tmp_path: Path, kern, monkeypatch) -> None:
    """The real excerpts concatenated: shapes are learnt and used, and the result is the per-line
    reader's (test_logs_blocks checks the same with every block size and thread count)."""
    logs = sorted(REAL.glob("*/*.log")) if REAL.is_dir() else []
    if not logs:
        pytest.skip(f"{REAL} not found")
    learnt: list[Shapes] = []

    class Spy(Shapes):
        def __init__(self, d, kern=None) -> None:
            super().__init__(d, kern)
            learnt.append(self)

    monkeypatch.setattr(blocks, "Shapes", Spy)
    text = b"".join(p.read_bytes().rstrip(b"\n") + b"\n" for p in logs)
    path = tmp_path / "real.log"
    path.write_bytes(text * 4)
    stats = _assert_same(path, 1 << 22)
    kinds = [t.kind for t in learnt[-1].templates]
    assert kinds.count("rows") >= 20 and kinds.count("items") >= 5 and "quiet" in kinds
    # lines of a shape are read per line until it is seen twice: from the third copy on, most
    # records come from shapes
    assert stats.columnar > sum(stats.frameworks.values()) // 3
    _tables_grown_are_built(kern, learnt[-1].templates, text)


def _tables_grown_are_built(kern, templates: list[Template], text: bytes) -> None:
    """Tables grown a few shapes at a time (Table.grow, as learning publishes them) hold what a
    table built at once holds, and find the same shapes and numbers in `text`."""
    import random

    rng = random.Random(7)
    cuts = sorted(rng.sample(range(1, len(templates)), min(40, len(templates) - 1))) + [len(templates)]
    table = Table([])
    body = np.frombuffer(text, dtype=np.uint8)
    ends = np.flatnonzero(body == 10).astype(np.int64)
    starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64)
    idx = np.arange(ends.size, dtype=np.int64)
    grown_some = False
    for cut in cuts:
        grown = Table.grow(table, templates[:cut])
        grown_some |= table.templates != [] and grown.keys is not table.keys and grown.keys.size == table.keys.size
        built = Table(templates[:cut])
        for name in ("skel", "skel_off", "tok_off", "tok_at", "tok_len", "width", "extras", *Table._PER_SHAPE):
            assert np.array_equal(getattr(grown, name), getattr(built, name)), (cut, name)
        for name in ("src", "const", "flags"):
            a, b = getattr(grown, name), getattr(built, name)
            assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k], equal_nan=True) for k in a), (cut, name)
        got = native.shapes(kern, body.ctypes.data, starts, ends, idx, grown, values=True)
        want = native.shapes(kern, body.ctypes.data, starts, ends, idx, built, values=True)
        assert all(np.array_equal(x, y, equal_nan=True) for x, y in zip(got, want)), cut
        table = grown
    assert grown_some  # (some tables were grown, not built anew)


def test_shapes_off_without_kernels(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PRECDX_NATIVE", "0")
    lines = [f"[titan] 2025-01-01 10:00:01,123 - root - INFO - step: {k:3d}  loss: 2.1234  memory:  1.11GiB(1.11%)"
             for k in range(1, 50)]
    made: list = []
    monkeypatch.setattr(blocks, "Shapes", lambda d: made.append(d) or Shapes(d))
    _assert_same(_write(tmp_path, lines), 1 << 22)
    assert made == []



def test_lines_read_differently_when_a_number_is_zero_are_looked_up_by_zero_shapes() -> None:
    """A checkpoint line at iteration 0 is a load, later a resume: its shape is looked up by zero
    shapes from then on. A line holding a literal with digits (the event parser's "t >= 0 && t <
    n_classes") is too, quiet or not: another number there makes it another line."""
    lines = ["successfully loaded checkpoint from /ckpt at iteration 7",
             "successfully loaded checkpoint from /ckpt at iteration 0",
             "Assertion `t >= 0 && t < n_classes` failed.",
             "[2025-01-01 10:00:01,123] [INFO] [logging.py:96:log_dist] [Rank 0] step=5, skipped=0, lr=[1.0e-05]"]
    sh, outs = _learn(lines)
    assert [o[0].kind for o in outs[:3]] == ["checkpoint_resume", "checkpoint_load", "index_out_of_range"]
    kinds = [(t.kind, t.zeros) for t in sh.templates]
    assert kinds[:3] == [("zero", False), ("items", True), ("items", True)]  # resume, then load, by zero shape
    assert kinds[3:] == [("zero", False), ("items", True), ("rows", False)]  # (DeepSpeed: zero or not alike)
    assert shape(lines[0].encode()) in sh.zero_shapes and shape(lines[3].encode()) not in sh.zero_shapes
    # a line without triggers that holds a trigger's shape (the trigger holding digits)

    class Code(LineParser):
        name, hints = "code", ("code 0 ",)

        def feed(self, text, lineno):
            return None

    assert shapes.shape_safe("code 0 ")
    sh = Shapes(Dispatcher([Code()]))
    sh.quiet(b"exit code 5 here", 11)
    assert [(t.kind, t.zeros) for t in sh.templates] == [("zero", False), ("quiet", True)]
    assert sh.templates[1].shape == b"exit code 1 here"
    sh.quiet(b"nothing 5 here", 12)
    assert [(t.kind, t.zeros) for t in sh.templates][2:] == [("quiet", False)]


@pytest.mark.parametrize("threads", [1, 2])
def test_numbers_turning_zero_and_changing_width(tmp_path: Path, kern, monkeypatch, threads) -> None:
    """Lines of one shape whose numbers change width and turn zero, checkpoint lines at iteration
    0 and later, and assertion lines with other numbers than the event parser's literal, mixed:
    the block reader gives the per-line reader's result, reading most lines from their shapes."""
    monkeypatch.setattr(blocks, "THREADS", threads)
    lines = []
    for k in range(1, 600):
        lines.append(f"[titan] 2025-01-01 10:{k % 60:02d}:{k % 7:02d},{k % 1000:03d} - root - INFO - step: {k}  "
                     f"loss: {(k % 13) / 3:.{k % 4}f}  grad_norm: {k % 5}.{k % 3}  memory:  1.11GiB(1.11%)  mfu: 1.2%")
        if k % 5 == 0:
            lines.append(f"successfully loaded checkpoint from /ckpt at iteration {k % 3 * k}")
        if k % 7 == 0:
            lines.append(f"Assertion `t >= {k % 2} && t < n_classes` failed.")
        if k % 3 == 0:
            lines.append(f"  {k % 100:3d}%|#   | {k}/{600 * (k % 2)} [00:{k % 60:02d}<00:00, {k % 10}.00it/s]")
            lines.append(f"{{'loss': {k % 3}.{k}, 'grad_norm': {k % 2}.0, 'learning_rate': {k}e-0{k % 9}, "
                         f"'epoch': {k / 400:.2f}}}")
    path = _write(tmp_path, lines)
    for block in (1 << 22, 2048):
        stats = _assert_same(path, block)
    assert stats.columnar > len(lines) // 2


def _runs_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_runs", Path(__file__).resolve().parents[3] / "bench" / "runs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


RUNS = _runs_module()


@pytest.mark.parametrize("name", sorted(RUNS.RUNS))
def test_generated_long_runs(tmp_path: Path, kern, name) -> None:
    """bench/runs.py's long run of each framework (numbers of every width, zeros, events among the
    steps): the same as the per-line reader, in two block sizes, read mostly from shapes."""
    path = tmp_path / f"{name}.log"
    n = RUNS.write_run(name, path, 0.25)
    for block in (1 << 22, 8192):
        stats = _assert_same(path, block)
    if name in ("olmo", "megatron-deepspeed-wrapped"):  # (records span lines: read in bulk, counted once)
        fw = "olmo" if name == "olmo" else "megatron"
        assert stats.columnar > 0.9 * stats.frameworks[fw], (stats.columnar, stats.frameworks)
    else:
        assert stats.columnar > n // 2, (stats.columnar, n)


def test_the_lines_cache_reads_what_the_shapes_read(kern) -> None:
    """scan.c's lines' cache (lines by their bytes with digits made '1'): a block read through it,
    twice (the second time from it), gives the shapes, numbers and slow lines of the lookup
    without it; lines of zero shapes are never cached, and a line with its digits elsewhere is
    not taken for a cached one."""
    lines = ["step: 12 loss: 2.5 lr=3e-05", "step: 13 loss: 2.4 lr=3e-05", "step: 7 loss: 12.25 lr=1e-4",
             "step: 14 loss: 0.0 lr=3e-05", "step: 99999999999999999 loss: 1.5 lr=1e-5", "at iteration 0", "at iteration 5",
             "at iteration 00", "step: 15 loss: 2.3 lr=3e-05", "stepx 15 loss: 2.3 lr=3e-05"]
    raw = [x.encode() for x in lines]
    base = Template(shape(raw[0]), _hash(kern, raw[0]), "empty")
    rs = shapes.runs(raw[0])
    at = [(shapes.compact_at(rs, a), shapes.compact_at(rs, b)) for a, b in ((6, 8), (15, 18), (22, 27))]
    base.tokens = tuple((a, b - a) for a, b in at)
    it0, it5 = raw[5], raw[6]
    zero = Template(shape(it0), _hash(kern, it0), "zero")
    z0 = Template(shape(it0, True), int(kern.shape_hash(it0, len(it0), 1)), "empty", zeros=True)
    z5 = Template(shape(it5, True), int(kern.shape_hash(it5, len(it5), 1)), "empty", zeros=True, tokens=((13, 1),))
    table = Table([base, zero, z0, z5])
    body = b"".join(x + b"\n" for x in raw)
    buf = np.frombuffer(body, dtype=np.uint8)
    ends = np.flatnonzero(buf == 10).astype(np.int64)
    starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64)
    idx = np.arange(len(raw), dtype=np.int64)
    want = native.shapes(kern, buf.ctypes.data, starts, ends, idx, table, values=True)
    cache = native.Cache(table)
    for _ in range(2):
        got = native.shapes(kern, buf.ctypes.data, starts, ends, idx, table, values=True, cache=cache)
        assert got[1].tolist() == want[1].tolist() == [0, 0, 0, 0, 0, 2, 3, -1, 0, -1]
        assert got[0].tolist() == want[0].tolist()
        assert got[3].tolist() == want[3].tolist() == [False] * 4 + [True] + [False] * 5  # an int past 2^53: per line
        assert np.array_equal(got[2], want[2], equal_nan=True)
    assert got[2][2].tolist()[:3] == [7.0, 12.25, 1e-4]
    cached = {int(t) for t, k in zip(cache.tid, cache.key) if k}
    # zero shapes never; the shape of "at iteration N" looked up by them; lines of no shape as
    # such (stamped with the table's size: -2 - 4 shapes)
    assert cached == {0, -6}


def test_a_cache_outlives_a_grown_table(kern) -> None:
    """A thread's lines' cache is kept when the table it was filled for grows (shapes keep their
    numbers): lookups through it under the grown table are the lookups without it (a line of no
    shape then, cached as such, has the shape learnt since); a table whose tokens are laid out at
    another width, or not grown from the cache's, gets a new cache."""
    raw = [b"step: 12 loss: 2.5 lr=3e-05", b"step: 7 loss: 12.25 lr=1e-4", b"at iteration 5", b"x 1"]
    base = Template(shape(raw[0]), _hash(kern, raw[0]), "empty")
    rs = shapes.runs(raw[0])
    base.tokens = tuple((shapes.compact_at(rs, a), shapes.compact_at(rs, b) - shapes.compact_at(rs, a))
                        for a, b in ((6, 8), (15, 18), (22, 27)))
    it = Template(shape(raw[2]), _hash(kern, raw[2]), "empty", tokens=((13, 1),))
    wide = Template(shape(raw[3]), _hash(kern, raw[3]), "empty", tokens=((0, 1), (2, 1), (2, 1), (2, 1)))
    t1 = Table([base])
    t2 = Table.grow(t1, [base, it])
    body = b"".join(x + b"\n" for x in raw * 3)
    buf = np.frombuffer(body, dtype=np.uint8)
    ends = np.flatnonzero(buf == 10).astype(np.int64)
    starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64)
    idx = np.arange(ends.size, dtype=np.int64)
    plan = blocks._Plan.of(builtin_parsers(), True)
    reader = blocks._Reader(plan, ReadStats("x"), SeriesBuilder("r", "t"))
    cache = reader._cache(t1)
    first = native.shapes(kern, buf.ctypes.data, starts, ends, idx, t1, values=True, cache=cache)
    assert any(cache.key) and first[1].tolist() == [0, 0, -1, -1] * 3
    assert sorted({int(t) for t, k in zip(cache.tid, cache.key) if k}) == [-3, 0]  # (misses under 1 shape)
    assert reader._cache(t2) is cache and cache.table is t2
    want = native.shapes(kern, buf.ctypes.data, starts, ends, idx, t2, values=True)
    for _ in range(2):
        got = native.shapes(kern, buf.ctypes.data, starts, ends, idx, t2, values=True, cache=cache)
        assert got[1].tolist() == want[1].tolist() == [0, 0, 1, -1] * 3
        assert got[0].tolist() == want[0].tolist()
        assert np.array_equal(got[2], want[2], equal_nan=True)
    t3 = Table.grow(t2, [base, it, wide])  # (tokens at another width)
    assert t3.width != t2.width and reader._cache(t3) is not cache
    native.shapes(kern, buf.ctypes.data, starts, ends, idx, t2, values=True, cache=reader._cache(t2))
    swapped = Table([it, base])  # (as many shapes, and as wide, but numbered otherwise)
    other = reader._cache(swapped)
    assert other.table is swapped and not any(other.key)
    got = native.shapes(kern, buf.ctypes.data, starts, ends, idx, swapped, values=True, cache=other)
    assert got[1].tolist() == [1, 1, 0, -1] * 3


def test_digit_blind_parsers_count_no_digits() -> None:
    """Shapes hold whatever a number's length, which is sound only while no regex of a
    DIGIT_BLIND parser counts digits (\\d{n}, [0-9]{n}); the number grammar's thousands check
    counts them inside one comma-grouped number, which no shape reads as one token."""
    import inspect
    import re

    from precdx.collectors.logs.formats import DIGIT_BLIND

    counting = re.compile(r"(\\d|\[0-9\]|\\[dD]\])\{")
    for cls in DIGIT_BLIND:
        source = inspect.getsource(inspect.getmodule(cls))
        assert not counting.search(source), cls.__name__
    model = inspect.getsource(__import__("precdx.collectors.logs.model", fromlist=["x"]))
    assert len(counting.findall(model)) == 2  # r"\d{1,3}(?:,\d{3})+": parse_num's thousands


@hypothesis.settings(max_examples=60, deadline=None, derandomize=True)
@hypothesis.given(chunks=st.lists(st.tuples(st.booleans(), st.lists(st.tuples(
    st.integers(-3, 40), st.sampled_from([0.0, -0.0, 1.5, 2.5, float("nan"), float("inf"), None]),
    st.sampled_from([0.5, float("nan"), None]), st.sampled_from([1e-4, None]), st.sampled_from([0, 1, None])),
    min_size=1, max_size=300)), min_size=1, max_size=8), limit=st.sampled_from([16, 40, 10_000]),
    cumulative=st.booleans())
def test_columns_added_one_by_one_or_in_chunks_are_the_same(chunks, limit, cumulative) -> None:
    """A framework's columns fed record by record (`add`) and the same records fed as columns
    (`extend`, in any mixture of chunks) buffer the same points bit for bit, fold into the same
    windows (small limits fold often) and count the same restarts and duplicates."""
    from precdx.collectors.logs import series
    from precdx.collectors.logs.model import Record, Rows

    one = series._Columns("deepspeed", limit=limit)
    mixed = series._Columns("deepspeed", limit=limit)
    step = 0
    for as_rows, recs in chunks:
        made = []
        for d, loss, gn, lr, skipped in recs:
            step += d
            made.append(Record("deepspeed", "train", step=step, loss=loss, grad_norm=gn, lr=lr, skipped=skipped,
                               skipped_cumulative=cumulative))
        for r in made:
            one.add(r, 0)
        if as_rows:
            f = lambda v: np.array([np.nan if x is None else x for x in v], dtype=np.float64)  # noqa: E731
            mixed.extend(Rows("deepspeed", np.arange(len(made)), f([r.step for r in made]), f([r.loss for r in made]),
                              np.array([r.loss is not None for r in made]), np.zeros(len(made), dtype=bool),
                              f([r.grad_norm for r in made]), np.array([r.grad_norm is not None for r in made]),
                              f([r.lr for r in made]), f([None] * len(made)), f([r.skipped for r in made]),
                              f([None] * len(made)), cumulative, {}, None))
        else:
            for r in made:
                mixed.add(r, 0)
    for c in (one, mixed):
        if c.windows is not None:
            c.fold(final=True)
    assert (len(one), one.restarts, one.duplicates, one.with_loss) == (len(mixed), mixed.restarts, mixed.duplicates,
                                                                       mixed.with_loss)
    if one.windows is None:
        a, b = one.buffered(), mixed.buffered()
        assert _bits_list(a[0]) == _bits_list(b[0]) and _bits_list(a[1]) == _bits_list(b[1])
        assert all(_bits_list(a[2][k]) == _bits_list(b[2][k]) for k in a[2])
    else:
        assert one.windows.k == mixed.windows.k
        for f_ in series.Windows.FIELDS:
            assert _bits_list(one.windows.a[f_]) == _bits_list(mixed.windows.a[f_]), f_


@hypothesis.settings(max_examples=40, deadline=None, derandomize=True,
                     suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture])
@hypothesis.given(n=st.integers(1, 3000), k=st.sampled_from([1, 3, 8, 9, 16, 129, 256, 1024]),
                  seed=st.integers(0, 2 ** 32 - 1))
def test_the_compiled_fold_gives_numpys_windows_bit_for_bit(n, k, seed, kern) -> None:
    """scan.c's pdx_fold gives every window aggregate Windows' numpy fold gives, sums in the
    same order (their bits, signs of zero included), with NaN, infinities and zeros of both
    signs among the points."""
    from precdx.collectors.logs import native, series

    rng = np.random.default_rng(seed)

    def col(p_nan: float) -> np.ndarray:
        v = rng.standard_normal(n) * 10.0 ** int(rng.integers(-3, 6))
        v[rng.random(n) < p_nan] = np.nan
        v[rng.random(n) < 0.03] = np.inf
        v[rng.random(n) < 0.03] = -np.inf
        v[rng.random(n) < 0.05] = -0.0
        v[rng.random(n) < 0.05] = 0.0
        return v

    steps = np.cumsum(rng.integers(1, 3, n))
    cols = {"grad_norm": col(0.1), "skipped": col(0.5), "loss_bad": (rng.random(n) < 0.1).astype(float),
            "gn_bad": (rng.random(n) < 0.1).astype(float), "nan_iters": col(0.3), "lr": col(0.1),
            "loss_scale": col(0.1)}
    loss = col(0.1)
    got = native.fold(kern, steps, loss, cols, k)
    with np.errstate(over="ignore", invalid="ignore"):
        want = series.Windows._fold(steps, loss, cols, k)
    for f_ in series.Windows.FIELDS:
        assert got[f_].dtype == want[f_].dtype
        assert _bits_list(got[f_]) == _bits_list(want[f_]) if f_ not in ("loss_min", "loss_max", "gn_max") \
            else np.array_equal(got[f_], want[f_]), f_


def _bits_list(a) -> list[bytes]:
    return [_bits(float(v)) for v in np.asarray(a, dtype=np.float64)]


def test_a_long_run_read_in_columns_keeps_its_values(tmp_path: Path, kern) -> None:
    """A run of thousands of points whose grad norm changes every step: the block reader gives
    the per-line reader's series."""
    path = tmp_path / "titan.log"
    n = RUNS.write_run("torchtitan", path, 1.5)
    assert n > 8192
    _assert_same(path, 1 << 22)


@hypothesis.settings(max_examples=400, deadline=None, derandomize=True,
                     suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture])
@hypothesis.given(digits=st.text("0123456789", min_size=16, max_size=21), point=st.integers(0, 21),
                  exp=st.one_of(st.none(), st.integers(-40, 40)), neg=st.booleans(), x=st.floats(allow_nan=False,
                                                                                                allow_infinity=False))
def test_long_decimals_are_read_as_float_reads_them(digits, point, exp, neg, x, kern) -> None:
    """Tokens of 16 to 21 significant digits (what repr prints for most doubles), read by the
    extended-precision path or strtod, are float()'s value bit for bit, or left to the parsers;
    so are the repr of any double and decimals lying exactly halfway between two doubles (the
    case one extended rounding cannot settle)."""
    import decimal

    t = digits[:point] + "." + digits[point:] if point < len(digits) else digits
    t = ("-" if neg else "") + t + ("" if exp is None else f"e{exp}")
    for text in (t, repr(x)):
        got = native.token(kern, text.encode())
        if got is not None:
            assert _bits(got) == _bits(float(text)), text
    if x and math.isfinite(x) and 1e-20 < abs(x) < 1e20:
        with decimal.localcontext() as ctx:
            ctx.prec = 80
            mid = (decimal.Decimal(x) + decimal.Decimal(math.nextafter(x, math.inf))) / 2
        text = format(mid, "f")
        got = native.token(kern, text.encode())
        assert got is None or _bits(got) == _bits(float(text)), text


_TOKEN = __import__("re").compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


@pytest.mark.slow  # (3,000 examples: `make test` runs it, the fast lane does not)
@hypothesis.settings(max_examples=3000, deadline=None, derandomize=True,
                     suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture])
@hypothesis.given(text=st.lists(st.sampled_from(["0", "00", "1", "5", "9", "12345678", "0000000", "99999999", ".",
                                                 "e", "E", "+", "-", "x", " ", "_"]), max_size=9).map("".join)
                  | st.from_regex(_TOKEN, fullmatch=True))
def test_a_token_is_floats_value_or_left_to_the_parsers(text, kern) -> None:
    """Any token (digits in runs of every length around the eight read at once, leading zeros,
    points, marks, signs, and what is no number): read only when it is a plain decimal, then
    float()'s value bit for bit; a plain decimal of at most 15 significant digits and a power of
    ten within 10^+-22 is always read; an integer of 2^53 or more never is."""
    got = native.token(kern, text.encode())
    if not _TOKEN.fullmatch(text):
        assert got is None, text
        return
    want = float(text)
    mant, _, exp = text.lower().lstrip("+-").partition("e")
    whole, _, frac = mant.partition(".")
    digits = (whole + frac).lstrip("0")
    power = (int(exp) if exp else 0) - len(frac) + len(digits) - len(digits.rstrip("0"))
    if "." not in text and "e" not in text.lower() and abs(want) >= 2 ** 53:
        assert got is None, text
    elif len(digits.rstrip("0")) <= 15 and (not digits or -22 <= power <= 22):
        assert got is not None and _bits(got) == _bits(want), text
    else:
        assert got is None or _bits(got) == _bits(want), text


def test_long_decimals_mostly_take_the_fast_path(kern) -> None:
    """(the extended path does read such tokens: most reprs of doubles are read, and a token
    exactly halfway between two doubles is still read right)"""
    import random

    rng = random.Random(7)
    texts = [repr(rng.uniform(0.5, 2.0)) for _ in range(2000)]
    got = [native.token(kern, t.encode()) for t in texts]
    assert sum(g is not None for g in got) == len(texts)
    assert all(_bits(g) == _bits(float(t)) for g, t in zip(got, texts))
    half = "9007199254740993.0"  # 2^53 + 1: halfway between two doubles, ties to even
    assert native.token(kern, half.encode()) == float(half)


def test_shapes_of_one_block_that_print_different_constants(tmp_path: Path, kern) -> None:
    """Blocks holding lines of several learnt shapes of one framework, read in columns, that
    print a value as a word (a learning rate of nan in some, inf in others, a number in the rest,
    spelt with or without an exponent; for a while only nan and inf): each line keeps its own
    shape's constant or token, as the per-line reader reads it."""
    lines = []
    for s in range(1, 12001):
        lr = "nan" if s % 7 == 0 else "inf" if s % 11 == 0 else f"{s * 1.5e-7:.3g}"
        if 6000 <= s < 9000:  # (blocks whose every shape prints a word, not the same one)
            lr = "nan" if s % 3 else "inf"
        lines.append(f"Training epoch 0, iteration {s}/499999 | lr: {lr} | consumed_samples: {8 * s} | "
                     f"global_batch_size: 8 | global_step: {s} | reduced_train_loss: {round(2.5 - s / 1e4, 4)} | "
                     f"train_step_timing in s: 0.0{3100 + s % 97}")
    path = tmp_path / "nemo.log"
    path.write_text("\n".join(lines) + "\n")
    stats = _assert_same(path, 1 << 16)
    assert stats.columnar > len(lines) // 2  # (most lines were read from their shapes)
    b = SeriesBuilder("b", "t")
    read_into(path, ReadStats(str(path)), b, block=1 << 16, columns=True)
    lr = b.build().lr
    assert np.isinf(lr).sum() > 1500 and np.isnan(lr).sum() > 3000 and np.isfinite(lr).sum() > 6000


def test_lines_of_learnt_shapes_fed_while_a_record_is_pending(tmp_path: Path, kern) -> None:
    """A multi-line record (OLMo's) now and then among lines of a learnt shape (torchtitan's):
    the line that closes it, and any line while it is pending, go through the parsers; the
    records grouped on the scan thread leave those lines out (each record once, in order)."""
    lines = []
    for s in range(1, 8001):
        lines.append(f"[rank0]:[titan] 2026-05-18 10:00:{s % 60:02d},{s % 1000:03d} - root - INFO - step: {s:2d}  "
                     f"loss: {2.5 - s / 1e4:8.5f}  grad_norm: {1 + (s % 13) / 10:7.4f}  memory:  9.46GiB(64.99%)  "
                     f"tps: {7000 + s % 300:,}  tflops: 0.52  mfu: 0.17%")
        if s % 50 == 7:
            lines.append(f"2024-06-01 10:00:00.000 node-1:0  olmo.train:100  INFO    [step={s}/9000,epoch=0]")
            lines.append(f"    train/CrossEntropyLoss={3 - s / 1e4:.4f}")
            lines.append(f"    optim/total_grad_norm={0.5 + s % 7 / 10:.3f}")
    path = tmp_path / "mixed.log"
    path.write_text("\n".join(lines) + "\n")
    stats = _assert_same(path, 1 << 16)
    assert stats.columnar > len(lines) // 2
    b = SeriesBuilder("b", "t")
    read_into(path, ReadStats(str(path)), b, block=1 << 16, columns=True)
    assert b.frameworks() == {"torchtitan": 8000, "olmo": 160}
