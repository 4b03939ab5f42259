"""Multi-line records read in bulk (issue 17): OLMo's (engine/collectors/logs/records.py) and
hard-wrapped Megatron ones (blocks._Reader._wrapped). The block reader gives what the per-line
reader gives on logs built to hit every way a record can end or be left to the parsers (odd
bytes, keys and values, other formats' lines and literals inside and between records, headers the
other parsers act on, more lines than the parser joins, records cut by blocks), and reads the
records of a plain run in bulk."""
from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from precdx.collectors.logs import blocks, native
from precdx.collectors.logs.formats import builtin_parsers
from precdx.collectors.logs.formats.olmo import BODY, FIELDS, HEADER, OlmoParser
from precdx.collectors.logs.reader import Dispatcher, parse_lines
from precdx.collectors.logs.records import OlmoRecords
from tests.collectors.logs.test_logs_blocks import _assert_same


VALUES = ["12.18", "1.7872662283480167e-06", "0.0", "nan", "NaN", "inf", "-inf", "1,048,576", "4.71K", "1_0",
          "0.0002", "-3.5", "1e400", "x", "7", "12.", ".5", "+2", "0x10", "9007199254740993", "1.0E+02"]
KEYS = ["train/CE loss", "train/CrossEntropyLoss", "optim/total grad norm", "optim/total_grad_norm",
        "optim/LR (group 0)", "optim/LR", "optim/LRx", "optim/step skipped", "spike/SpikeScore", "train/Perplexity",
        "throughput/total_tokens", "System/Peak GPU Memory (MB)", " train/CE loss ", "train/CE  loss"]


TAILS = ["", "", "  ", "\t", "\r"]


def _header(rng: random.Random, step: int) -> str:
    total = rng.choice(["739328", "???", "12"])
    head = f"2024-08-06 10:00:{step % 60:02d}.{rng.randrange(1000):03d} host:0  olmo.train:908  INFO    "
    tail = rng.choice(["", "", " done", " loss", " step=3, skipped=0, lr=[0.1]", " Traceback", "\r"])
    if rng.random() < 0.03:
        return f"{head}[step={step}/{total},epoch=12345678901234567]"  # a counter too long for the kernel
    return f"{head}[step={step}/{total},epoch={rng.choice([0, 0, 1, 2])}]{tail}"


def _body(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.04:
        return rng.choice(["  =1", "   a b=1 2", "\t\tkey=val\t ", "  k=v=w", "  \u3000key=1", "\u2003 key=1",
                           "  key=1\x1c", "  iteration 3=1", "  flag=[step=1/2,epoch=0]", "  noequals",
                           "  key=", "  key= 1", "  out of memory=1", "  k={'a':1}", "  k=x{'", "  spike=1",
                           "  k=/it]", "  k=xpike", "  k=ispike", "  train/step=1", "  k=iteratio"])
    pad = rng.choice(["    ", "  ", "\t\t", " \t "])
    end = rng.choice(TAILS)
    return f"{pad}{rng.choice(KEYS)}={rng.choice(VALUES)}{end}"


OTHER = [
    "some unrelated line",
    "",
    "[2025-01-01 10:00:00,123] [INFO] [logging.py:96:log_dist] [Rank 0] step=5, skipped=0, lr=[1.0e-05], mom=[0.9]",
    " iteration      100/    1000 | consumed samples: 800 | lm loss: 2.5E+00 | grad norm: 1.0 | learning",
    " rate: 3.0E-04 | number of skipped iterations:   0 |",
    "{'loss': 1.25, 'grad_norm': 0.5, 'learning_rate': 1e-05, 'epoch': 0.1}",
    "NaN detected in loss",
    "  indented but not a record line",
]


def _olmo_log(seed: int, records: int) -> list[str]:
    rng = random.Random(seed)
    lines = []
    step = 0
    for _ in range(records):
        step += rng.choice([1, 1, 1, 0, -3, 10])
        lines.append(_header(rng, max(step, 0)))
        for _ in range(rng.choice([0, 1, 3, 6, 9])):
            lines.append(_body(rng))
        if rng.random() < 0.15:
            lines.append(rng.choice(OTHER))
    return lines


def _read_alike(tmp_path: Path, monkeypatch, seed: int, lines: list[str], sizes: tuple) -> object:
    """The block reader (on 1 or 2 threads by seed) gives the per-line reader's result at every
    block size; its stats at the last one."""
    monkeypatch.setattr(blocks, "THREADS", 1 + seed % 2)
    path = tmp_path / "train.log"
    path.write_bytes("\n".join(lines).encode("utf-8") + b"\n")
    for block in sizes:
        stats = _assert_same(path, block)
    return stats


@pytest.mark.parametrize("seed", range(6))
def test_odd_olmo_logs_read_as_per_line(tmp_path: Path, kern, monkeypatch, seed: int) -> None:
    _read_alike(tmp_path, monkeypatch, seed, _olmo_log(seed, 1500), (1 << 22, 3000, 211))


def _plain_run(records: int) -> list[str]:
    lines = []
    for s in range(1, records + 1):
        lines.append(f"2024-08-06 10:00:{s % 60:02d}.{s % 1000:03d} host:0  olmo.train:908  INFO    [step={s}/739328,epoch=0]")
        lines += [f"    optim/total_grad_norm={1 + s % 7 / 10}", f"    train/CrossEntropyLoss={3 - s / records:.4f}",
                  f"    train/Perplexity={s * 1.5:,.3f}", f"    throughput/total_tokens={s * 1048576:,}"]
        if s % 97 == 0:
            lines.append("Saving checkpoint")
    return lines


def test_a_run_is_read_in_bulk(tmp_path: Path, kern, monkeypatch) -> None:
    """Nearly every record of a plain run is read in bulk (not per line), with the same result."""
    fed = []
    orig = Dispatcher.feed

    def feed(self, text, lineno):
        fed.append(lineno)
        return orig(self, text, lineno)

    path = tmp_path / "olmo.log"
    path.write_text("\n".join(_plain_run(6000)) + "\n", encoding="utf-8")
    for block in (1 << 22, 5000):
        stats = _assert_same(path, block)
        assert stats.frameworks["olmo"] == 6000
    monkeypatch.setattr(Dispatcher, "feed", feed)
    n = len(path.read_text().splitlines())
    # (small blocks cut records: their tails are fed per line, and must not make the shapes of
    # body lines quiet, which would keep them out of later chains)
    for block in (1 << 22, 20000):
        fed.clear()
        _assert_same(path, block)
        per_line = len(fed) - n  # (the per-line reader feeds every line once)
        assert 0 < per_line < n // 20, (block, per_line)


def test_a_header_the_others_act_on_is_read_per_line(tmp_path: Path, kern) -> None:
    """A header that another parser reads (a DeepSpeed progress line holding an OLMo header)
    is never taken in bulk: the records around it still are, and the result is the per-line one."""
    lines = _plain_run(300)
    at = lines.index(next(x for x in lines if "[step=150/" in x))
    lines[at] = lines[at].replace("INFO    [step=150/739328,epoch=0]",
                                  "INFO step=150, skipped=1, lr=[0.1] [step=150/739328,epoch=0]")
    path = tmp_path / "olmo.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for block in (1 << 22, 1000):
        _assert_same(path, block)


def test_kernel_sorts_lines_as_the_regexes_do(kern) -> None:
    """pdx_olmo's kinds, counters, keys and values against the parser's own regular expressions."""
    rng = random.Random(5)
    texts = [_body(rng) for _ in range(6000)] + [_header(rng, rng.randrange(10 ** 6)) for _ in range(500)]
    texts += [x for x in OTHER] + ["[step=1/2,epoch=3", "x[step=/2,epoch=1] [step=4/???,epoch=5]", "[step=1/2,epoch="]
    body = "\n".join(texts).encode("utf-8") + b"\n"
    a = np.frombuffer(body, dtype=np.uint8)
    starts, nl, _, _ = native.lines(kern, body, a.ctypes.data)
    rec = OlmoRecords.of(Dispatcher(builtin_parsers()), kern)
    kind, step, epoch, _, field, val, vok, lit = native.olmo(kern, a.ctypes.data, starts, nl, np.arange(nl.size), rec.keys)
    literals = [t for p in builtin_parsers() if p.name != "olmo" and not p.fallback for t in p.triggers]
    assert "{'" in literals and "pike" in literals  # (short and long ones)
    codes = {"loss": 1, "grad_norm": 2, "lr": 3, "skipped": 4, "spike_score": 5}
    seen = set()
    for i, raw in enumerate(body[:-1].split(b"\n")):
        text = raw.decode("utf-8")
        text = text[:-1] if text.endswith("\r") else text
        k = int(kind[i])
        seen.add(k)
        clean = all(c == "\t" or " " <= c <= "~" for c in text)
        if k == 3 or (k == 0 and not clean):  # (left to the parsers: what the regexes make of it is theirs)
            continue
        m, b = HEADER.search(text), BODY.match(text)
        assert (k == 1) == bool(m) and (k == 2) == bool(b), repr(text)
        if m:
            assert step[i] == int(m.group(1)) and epoch[i] == float(m.group(2))
        if b:
            assert lit[i] == any(t in text for t in literals), repr(text)
            key = b.group(1).strip()
            got = next((codes[f] for name, f, p in FIELDS if (key.startswith(name) if p else key == name)), 0)
            assert field[i] == got, repr(text)
            if got and vok[i]:
                assert val[i] == float(b.group(2)), repr(text)
    assert seen == {0, 1, 2, 3}


def test_records_are_the_parsers(kern) -> None:
    """Every record of the chains (closed or held) is the one the parser makes of those lines,
    field by field (a printed NaN and an unset field differ; extra values too)."""
    lines = [x for x in _olmo_log(11, 800) if "\r" not in x]
    body = "\n".join(lines).encode("utf-8") + b"\n"
    a = np.frombuffer(body, dtype=np.uint8)
    starts, nl, _, _ = native.lines(kern, body, a.ctypes.data)
    rec = OlmoRecords.of(Dispatcher([OlmoParser()]), kern)
    chains = rec.scan(body, a.ctypes.data, starts, nl, np.arange(nl.size))
    assert chains is not None and chains.head.size > 500
    want = {r.line: r for r in parse_lines(lines, [OlmoParser()])}
    held = 0
    for k in range(chains.head.size):
        got = chains.record(k, 1)
        if k + 1 == chains.head.size or chains.end[k + 1] != chains.end[k]:  # held at the chain's end:
            after = int(chains.end[k]) + 1  # the parser may take more lines (those the kernel left to it)
            if after < len(lines) and BODY.match(lines[after]):
                continue
            held += 1
        assert got == want[got.line] or repr(got) == repr(want[got.line]), (got, want[got.line])
    assert held > 10


# -- Megatron records hard-wrapped over several lines (blocks._Reader._wrapped, scan.c: pdx_wrapped)

def _wrapped_record(rng: random.Random, it: int, width: int, first: int | None = None) -> list[str]:
    """A record as a terminal `width` wide wraps it (fields of fixed width: the cuts fall at the
    same places of every record), sometimes made odd."""
    full = (f"[default7]: iteration {it:7d}/ 115311 | consumed samples: {it * 2048:11d} | elapsed time per "
            f"iteration (s): {100 + rng.random():.2f} | learning rate: 4.475E-05 | global batch size: 2048 | lm loss: "
            f"{2 + rng.random():.6E} | grad norm: {rng.random():.3f} | num zeros: 0.0 | number of skipped "
            f"iterations: {rng.choice([0, 0, 1]):2d} | number of nan iterations: 0 |")
    first = first or width
    parts = [full[:first]] + [full[a:a + width] for a in range(first, len(full), width)]
    r = rng.random()
    if r < 0.04:
        parts[-1] = parts[-1].replace("|", "", 1) if parts[-1].count("|") > 1 else parts[-1]
    elif r < 0.08:
        parts.insert(1, rng.choice(["  ", "", "\t", " iteration 5/ 10 | x", " Traceback here", " loss here",
                                    " \u00a0odd", " step=5, skipped=0, lr=[1]", "more", "and more |",
                                    "iter 5: loss 2.5000, time 10.00ms, mfu 1.00%"]))
    elif r < 0.10:
        parts[0] += rng.choice(["\r", "  ", "\t", " 12", ":", " word:"])
    elif r < 0.11:
        parts[0] = "iter 7: loss 2.5000, time 10.00ms, mfu 1.00% " + parts[0]
    elif r < 0.12:
        parts = [p + "\r" for p in parts]
    elif r < 0.14:
        parts = [full]
    return parts


def _wrapped_log(seed: int, records: int) -> list[str]:
    rng = random.Random(seed)
    lines = []
    full = _wrapped_record(random.Random(0), 1, 10 ** 4)[0]  # (a first line cut inside a word: wrapped)
    # (no "loss" on the first line: the key-value reader would read that line, which keeps it per line)
    cuts = [w for w in range(40, full.index("loss")) if full[w - 1].isalpha() and full[w].isalpha()]
    if seed == 3:  # one line more than the parser joins, the last holding the number of nan iterations
        first = cuts[0]
        width = -(-(len(full) - first) // 4)
    else:
        first = width = rng.choice([w for w in cuts if -(-len(full) // w) <= 4])
    for it in range(1, records + 1):
        lines += _wrapped_record(rng, it, width, first)
        if rng.random() < 0.08:
            lines.append(rng.choice(OTHER))
        if rng.random() < 0.05:
            lines += [_header(rng, it), _body(rng)]
    return lines


@pytest.mark.parametrize("seed", range(4))
def test_wrapped_megatron_records_read_as_per_line(tmp_path: Path, kern, monkeypatch, seed: int) -> None:
    stats = _read_alike(tmp_path, monkeypatch, seed, _wrapped_log(seed, 1200), (4000, 257, 1 << 22))
    if seed != 3:  # (seed 3 wraps records over more lines than the parser joins)
        assert stats.columnar > 0.7 * stats.frameworks["megatron"]  # most records were read in columns


@pytest.mark.parametrize("seed", range(2))
def test_wrapped_records_after_other_formats(tmp_path: Path, kern, monkeypatch, seed: int) -> None:
    """Hard-wrapped Megatron records that start several blocks into a file of other lines (they are
    looked for in bulk in a file's first blocks and once a Megatron record is seen): read as per line."""
    lines = [f"[2023-04-18 00:00:07,190] [INFO] [logging.py:96:log_dist] [Rank 0] step={s}, skipped=0, "
             f"lr=[1.5e-06, 1.5e-06], mom=[(0.9, 0.95), (0.9, 0.95)]" for s in range(1, 400)]
    _read_alike(tmp_path, monkeypatch, seed, lines + _wrapped_log(seed, 300), (4000, 1 << 22))


def test_events_past_the_cap_are_counted_alike(tmp_path: Path, kern, monkeypatch) -> None:
    """Once the builder keeps no more events (MAX_EVENTS), lines of shapes that make events are
    counted by shape (no event made): the same counts, kept events and steps as per line; re-run
    verdicts are still made one by one (they date later ones)."""
    from precdx.collectors.logs import series

    monkeypatch.setattr(series, "MAX_EVENTS", 40)
    lines = []
    for s in range(1, 3000):
        lines.append(f"[2023-04-18 00:00:07,190] [INFO] [logging.py:96:log_dist] [Rank 0] step={s}, skipped={s // 7}, "
                     f"lr=[1.5e-06, 1.5e-06], mom=[(0.9, 0.95), (0.9, 0.95)]")
        if s % 3 == 0:
            lines.append(f"[2023-04-18 00:00:07,190] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! "
                         f"Rank 0 Skipping step. Attempted loss scale: {2 ** (s % 20)}, reducing to {2 ** (s % 20 - 1)}")
        if s % 50 == 0:
            lines.append("NaN detected in loss")
    path = tmp_path / "events.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for block in (1 << 22, 5000):
        _assert_same(path, block)


def test_counter_moving_events_past_the_cap_are_counted_alike(tmp_path: Path, kern, monkeypatch) -> None:
    """Past MAX_EVENTS, events of lines that also move a parser's state (a DeepSpeed overflow after
    a tqdm counter on one line) are counted by shape where the state is carried in bulk: the same
    counts, steps and series as per line."""
    from precdx.collectors.logs import series

    monkeypatch.setattr(series, "MAX_EVENTS", 40)
    counted: list[int] = []
    real = series.SeriesBuilder.count_event

    def spy(self, kind, n=1):
        counted.append(n)
        real(self, kind, n)

    monkeypatch.setattr(series.SeriesBuilder, "count_event", spy)
    lines = []
    for s in range(1, 2500):
        lines.append(f"  {s // 25}%|\u2588\u258d        | {s}/2500 [00:01<00:10, 1.2s/it][2023-05-01 10:00:00,123] "
                     f"[INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
                     f"Attempted loss scale: {2 ** (s % 17 + 1)}, reducing to {2 ** (s % 17)}")
        if s % 2:
            lines.append(f"{{'loss': {2.0 - s / 10000:.4f}, 'grad_norm': 0.5, 'learning_rate': 1e-05, "
                         f"'epoch': {s / 2500:.3f}}}")
        if s % 5 == 0:
            lines.append(f"[rank0]:[titan] step: {s}  loss:  8.0277  grad_norm:  1.4604  memory:  1.21GiB")
    path = tmp_path / "overflow.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for block in (1 << 22, 20000):
        _assert_same(path, block)
    assert any(n > 1 for n in counted)  # (counted by shape)


@pytest.mark.parametrize("seed", range(3))
def test_records_among_shuffled_real_excerpts(tmp_path: Path, kern, monkeypatch, seed: int) -> None:
    """Runs of lines of every real excerpt, OLMo records and wrapped Megatron records, shuffled
    together (records cut, formats switching mid-record): read as per line."""
    from tests.collectors.logs.test_logs_blocks import REAL

    real = [line for p in sorted(REAL.glob("*/*.log")) for line in p.read_text(errors="replace").splitlines()]
    if not real:
        pytest.skip("no real excerpts")
    rng = random.Random(seed)
    chunks = [real[i:i + rng.randrange(1, 40)] for i in range(0, len(real), 20)]
    chunks += [_olmo_log(seed, 30)[i:i + 25] for i in range(0, 200, 25)]
    chunks += [_wrapped_log(seed, 40)[i:i + 15] for i in range(0, 120, 15)]
    rng.shuffle(chunks)
    _read_alike(tmp_path, monkeypatch, seed, [line for c in chunks for line in c], (1 << 22, 3001))
