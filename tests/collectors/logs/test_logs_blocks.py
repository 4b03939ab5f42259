"""The block reader (engine/collectors/logs/blocks.py, issue 17) gives what the per-line reader
gives: the same series (every framework's, folded or not), events, counters and read statistics,
on every real excerpt, on the excerpts concatenated, and on generated logs built to hit its edges
(layouts, block cuts, lines only the per-line parsers can read, multi-line records, restarts,
skipped and non-finite iterations, DeepSpeed skip borrowing, declared formats, over-long lines)."""
from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path

import pytest

from precdx.collectors.logs import blocks
from precdx.collectors.logs.blocks import read_into
from precdx.collectors.logs.formats import builtin_parsers
from precdx.collectors.logs.formats.declared import DeclaredParser, load_declared_formats
from precdx.collectors.logs.reader import ReadStats, iter_log
from precdx.collectors.logs.series import SeriesBuilder
from tests.collectors.logs.conftest import ensure_kernels

REAL = Path(os.environ.get("PRECDX_SHARED", Path(__file__).resolve().parents[3].parent / "shared")) / "real-logs"
BLOCKS = (1 << 22, 4096, 97)


def _snapshot(stats: ReadStats, b: SeriesBuilder) -> dict:
    out = {"stats": {k: v for k, v in dataclasses.asdict(stats).items() if k != "columnar"},
           "bad_steps": b.bad_steps, "evals": b.evals, "frameworks": b.frameworks(), "primary": b.primary()}
    for fw in b.frameworks():
        s = b.build(fw)
        d = {k: getattr(s, k) for k in ("framework", "windowed", "step_inferred", "restarts", "duplicate_lines",
                                         "eval_records", "event_counts", "tracked", "n_points", "first_step",
                                         "log_interval", "has_grad_norm", "has_loss_scale")}
        d["events"] = [dataclasses.asdict(e) for e in s.events]
        # repr: NaN equals NaN, 0.0 and -0.0 differ
        for k in ("steps", "loss", "loss_bad", "grad_norm", "gn_bad", "lr", "loss_scale", "skipped", "nan_iters"):
            d[k] = repr(getattr(s, k).tolist())
        if s.windows is not None:
            d["windows"] = {k: repr(v.tolist()) for k, v in s.windows.a.items()}
        out[fw] = d
    return out


def _both(path: Path, block: int = 1 << 22, parsers=None) -> tuple[dict, dict, ReadStats]:
    """(per-line snapshot, block-reader snapshot, block reader's stats)."""
    s1, b1 = ReadStats(str(path)), SeriesBuilder("r", "target")
    for item in iter_log(path, s1, parsers() if parsers else None, block=block):
        b1.add(item)
    s2, b2 = ReadStats(str(path)), SeriesBuilder("r", "target")
    read_into(path, s2, b2, parsers() if parsers else None, block=block, columns=True)
    return _snapshot(s1, b1), _snapshot(s2, b2), s2


def _assert_same(path: Path, block: int = 1 << 22, parsers=None) -> ReadStats:
    a, b, stats = _both(path, block, parsers)
    for key in a:
        assert a[key] == b.get(key), (path.name, block, key)
    assert a == b
    return stats


def _same_and_read(tmp_path: Path, lines: list[str], blocks_: tuple[int, ...]) -> SeriesBuilder:
    """`lines` written as a log, read the same by both readers in blocks of each size; the
    builder the block reader filled (in columns, its own blocks)."""
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    for block in blocks_:
        _assert_same(path, block)
    b = SeriesBuilder("r", "target")
    read_into(path, ReadStats(str(path)), b, columns=True)
    return b


@pytest.fixture(params=[(1, "native"), (2, "native"), (1, "numpy"), (2, "numpy")],
                ids=["1-thread", "2-threads", "1-thread-numpy", "2-threads-numpy"])
def threads(request, monkeypatch):
    """Thread count, and which path reads the Megatron lines: the compiled kernels (scan.c, when a
    C compiler is there) or numpy (PRECDX_NATIVE=0): both must give the per-line reader's result."""
    n, path = request.param
    if path == "native" and not ensure_kernels():
        pytest.skip("no C compiler: the kernels cannot be built (the numpy variant runs)")
    monkeypatch.setattr(blocks, "THREADS", n)
    monkeypatch.setenv("PRECDX_NATIVE", "1" if path == "native" else "0")
    return n


def _excerpts() -> list[Path]:
    return sorted(REAL.glob("*/*.log")) if REAL.is_dir() else []


@pytest.mark.parametrize("log", _excerpts(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_real_excerpt(log: Path, threads: int) -> None:
    for block in BLOCKS:
        _assert_same(log, block)


def test_real_excerpts_concatenated(tmp_path: Path, threads: int) -> None:
    logs = _excerpts()
    assert logs
    text = b"".join(p.read_bytes().rstrip(b"\n") + b"\n" for p in logs)
    path = tmp_path / "real.log"
    path.write_bytes(text * 3)
    for block in (1 << 22, 5000, 333):
        stats = _assert_same(path, block)
    assert stats.columnar > 0.8 * stats.frameworks["megatron"]  # most Megatron lines were read in columns


MEG = (" [2025-03-24 17:50:{sec:02d}] iteration {s:8d}/ {total:7d} | consumed samples: {c:12d} | elapsed time per "
       "iteration (ms): {ms} | learning rate: {lr:.6E} | global batch size: {gbs:5d} | {loss}loss scale: {scale} | "
       "{gn}number of skipped iterations: {sk:3d} | number of nan iterations: {nan:3d} |")


def _meg(s: int, *, loss: str | None = None, gn: str | None = "1.234", sk: int = 0, nan: int = 0,
         scale: str = "65536.0", lr: float = 3e-4, total: int = 100000, ms: str = "61.3") -> str:
    loss_field = "" if loss == "" else f"lm loss: {loss if loss is not None else format(3.0 - s / 1e4, '.6E')} | "
    gn_field = "" if gn is None else f"grad norm: {gn} | "
    return MEG.format(sec=s % 60, s=s, total=total, c=8 * s, ms=ms, lr=lr, gbs=8, loss=loss_field, scale=scale,
                      gn=gn_field, sk=sk, nan=nan)


def _tricky_megatron() -> list[str]:
    lines = ["Megatron training starts", "arguments:", "  lr ........ 0.0003", ""]
    for s in range(1, 400):
        if s == 50:
            lines.append("[Rank 0] (after 50 iterations) memory (MB) | allocated: 21.85 | reserved: 96.00")
        if s == 60:  # skipped iteration: the loss key dropped
            lines.append(_meg(s, loss="", gn=None, sk=1, scale="32768.0"))
            continue
        if s in (70, 71):
            lines.append(_meg(s, loss="nan", gn="nan", nan=1))
            continue
        if s == 72:
            lines.append(_meg(s, loss="inf", gn="-inf"))
            continue
        if s == 80:
            lines.append("WARNING:megatron.core.rerun_state_machine:Unexpected result nan at iteration 80, rerunning")
        if s == 90:  # a value the bulk cast does not take, and one holding an event needle
            lines.append(_meg(s, gn="1,234.5"))
            lines.append(_meg(s, ms="spike?"))
            continue
        if s == 100:  # hard-wrapped record
            full = _meg(s)
            cut = full.index("| learning rate")
            lines.append(full[:cut + 9].rstrip())
            lines.append("  " + full[cut + 9:].lstrip())
            continue
        if s == 110:
            lines.append(" validation loss at iteration 110 | lm loss value: 2.345678E+00 | lm loss PPL: 10.4 |")
        if s == 120:  # odd counters: leading zero, plus sign; a non-ASCII prefix; a tab; CRLF
            lines.append(_meg(s).replace("iteration      120", "iteration 00000120"))
            lines.append(_meg(s).replace(" [2025", " [2025\u00e9"))
            lines.append(_meg(s).replace("lm loss:", "lm\tloss:"))
            lines.append(_meg(s) + "\r")
            continue
        if s == 130:
            lines.append(_meg(s).replace("iteration      130", "iteration " + "9" * 17))  # beyond 2^53
            lines.append(_meg(s).replace("iteration      130", "iteration 99999999999999999999"))
            continue
        if s == 140:  # another layout (no grad norm), a rank prefix, and a key holding a literal of events
            lines.append("[default0]:" + _meg(s, gn=None))
            lines.append(_meg(s).replace("elapsed time per iteration", "SilentCheck time per iteration"))
            continue
        if 200 <= s < 210:  # a restart re-logs steps 150..159
            lines.append(_meg(s - 50, loss=format(2.0 + s / 1e4, ".6E")))
            continue
        if s == 250:
            lines.append(_meg(s))
            lines.append(_meg(s))  # duplicate
            continue
        if s == 300:
            lines.append("Traceback (most recent call last):")
            lines.append('  File "pretrain_gpt.py", line 10, in <module>')
            lines.append("torch.OutOfMemoryError: CUDA out of memory.")
        lines.append(_meg(s))
    return lines


def test_generated_megatron_edges(tmp_path: Path, threads: int) -> None:
    path = tmp_path / "train.log"
    path.write_text("\n".join(_tricky_megatron()) + "\n", encoding="utf-8")
    for block in (1 << 22, 4096, 1000, 211):
        stats = _assert_same(path, block)
    assert stats.columnar > 300


def test_generated_folded(tmp_path: Path, monkeypatch, threads: int) -> None:
    monkeypatch.setenv("PRECDX_LOG_MAX_POINTS", "64")
    path = tmp_path / "train.log"
    path.write_text("\n".join(_tricky_megatron() * 3) + "\n", encoding="utf-8")
    for block in (1 << 22, 3000):
        _assert_same(path, block)


def _wrap(line: str) -> list[str]:
    """A Megatron record hard-wrapped in three lines, each of the first two ending mid-field."""
    a = line.index("| learning rate") + 9
    b = line.index("| number of skipped") + 11
    return [line[:a].rstrip(), "  " + line[a:b].strip(), "  " + line[b:].lstrip()]


def test_hard_wrapped_records_in_bulk(tmp_path: Path, threads: int) -> None:
    """A long run of hard-wrapped records (what is looked at in their lines is worked out once per
    line shape in scan.c), some of whose lines hold what makes them not one: a literal another
    parser acts on in the first or a later line, a byte that is not printable, another header;
    and CRLF line ends."""
    lines = []
    for s in range(1, 3000):
        rec = _wrap(_meg(s, gn=format(0.5 + (s % 7) * 3.1, ".3f")))
        if s % 97 == 0:
            rec[0] = rec[0].replace("consumed samples", "consumed step= samples")
        elif s % 89 == 0:
            rec[1] = rec[1].replace("global batch size", "global batch rerun size")
        elif s % 83 == 0:
            rec[2] = rec[2].replace("number of nan", "number of\x07nan")
        elif s % 79 == 0:
            rec[1] = rec[1] + " iteration 5/ 10 |"
        elif s % 7 == 0:  # CRLF line ends, and trailing blanks before them
            rec = [rec[0] + "\r", rec[1] + "  \r", rec[2] + "\r"]
        lines.extend(rec)
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for block in (1 << 22, 50_000):
        stats = _assert_same(path, block)
        if os.environ["PRECDX_NATIVE"] == "1":  # (the numpy path reads such records per line)
            assert stats.columnar > 2800, (block, stats.columnar)  # records read in bulk


def test_evaluation_records_counted_by_shape(tmp_path: Path, monkeypatch, threads: int) -> None:
    """nanoGPT's evaluation lines (records the builder only counts) are counted by shape once
    their shape is learnt: the same count, series and statistics as the per-line reader."""
    seen = []
    real = blocks._evals_only
    monkeypatch.setattr(blocks, "_evals_only", lambda tpl: seen.append(real(tpl)) or seen[-1])
    lines = []
    for s in range(0, 40_000, 10):
        lines.append(f"iter {s}: loss {3.0 - s / 1e5:.4f}, time {100 + s % 7:.2f}ms, mfu {15 + s % 3:.2f}%")
        if s % 200 == 0:
            lines.append(f"step {s}: train loss {3.1 - s / 1e5:.4f}, val loss {3.2 - s / 1e5:.4f}")
    b = _same_and_read(tmp_path, lines, (1 << 22, 5000))
    assert b.evals == 200
    if os.environ["PRECDX_NATIVE"] == "1":  # (shapes are learnt with the kernels only)
        assert any(got == ("nanogpt", 1) for got in seen)


def test_deepspeed_skip_borrowing(tmp_path: Path, threads: int) -> None:
    """Megatron-DeepSpeed client lines without skip counters beside the DeepSpeed engine's running
    total: the curve borrows the engine's per-step skips."""
    lines = []
    for s in range(1, 200):
        lines.append(_meg(s).replace(" number of skipped iterations:   0 | number of nan iterations:   0 |", ""))
        skipped = s // 40
        lines.append(f"[2025-03-24 17:50:01,000] [INFO] [logging.py:96:log_dist] [Rank 0] step={s}, "
                     f"skipped={skipped}, lr=[0.0003], mom=[(0.9, 0.95)]")
        if s % 40 == 0:
            lines.append("[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768")
    s = _same_and_read(tmp_path, lines, (1 << 22, 2048)).build()
    assert s.framework == "megatron" and float(s.skipped[~(s.skipped != s.skipped)].sum()) == 4.0


def test_mixed_formats_and_multiline_records(tmp_path: Path, threads: int) -> None:
    """HF dicts dated by tqdm counters, OLMo records over several lines, torchtitan and nanoGPT
    lines, interleaved with Megatron lines (a mixed-format file): block cuts inside records."""
    lines = []
    for s in range(1, 120):
        lines.append(_meg(s))
        if s % 7 == 0:
            lines.append(f" {s}/500 [00:10<00:20, 1.2it/s]{{'loss': {2.0 - s / 1000:.4f}, 'grad_norm': 0.5, "
                         f"'learning_rate': 1e-05, 'epoch': {s / 500:.3f}}}")
        if s % 11 == 0:
            lines.append(f"2024-01-01 00:00:00.000 INFO [step={s}/500,epoch=0]")
            lines.append(f"    train/CE loss={2.0 + s / 1000:.4f}")
            lines.append("    optim/total grad norm=1.0")
        if s % 13 == 0:
            lines.append(f"[rank0]:[titan] step: {s}  loss:  8.0277  grad_norm:  1.4604  memory:  1.21GiB")
            lines.append(f"iter {s}: loss 4.1234, time 120.00ms, mfu 10.00%")
    path = tmp_path / "mixed.log"
    path.write_text("\n".join(lines) + "\n")
    for block in (1 << 22, 1500, 300):
        _assert_same(path, block)


def test_step_less_records_a_few_at_a_time(tmp_path: Path, monkeypatch, threads: int) -> None:
    """HF dicts dated by their tqdm counters, two or three at a time between lines of other
    formats (a mixed file): the few of a shape met in each run go in columns at the block's end,
    with the counter each one follows, and read as the per-line reader reads them."""
    made: list[int] = []
    real = blocks._Reader._deferred_rows

    def spy(self, first, columns):
        made.append(sum(int(d[0].size) for d in self.deferred))
        real(self, first, columns)

    monkeypatch.setattr(blocks._Reader, "_deferred_rows", spy)
    lines = []
    for s in range(1, 1500):
        if s % 3 == 0:
            lines.append(f"[rank0]:[titan] step: {s}  loss:  8.0277  grad_norm:  1.4604  memory:  1.21GiB")
            lines.append(f"iter {s}: loss 4.1234, time 120.00ms, mfu 10.00%")
            continue
        lines.append(f"  {s // 15}%|          | {s}/1500 [07:54<14:12:16, 41.81s/it]")
        more = "".join(f", '{w}': {s % 7}.5" for w in ("alpha", "beta", "gamma", "delta", "eps", "zeta")[:s % 7])
        lines.append(f"{{'loss': {2.0 - s / 10000:.4f}, 'grad_norm': {0.5 + (s % 5) / 10:.2f}, "
                     f"'learning_rate': {s * 1e-7:.3e}, 'epoch': {s / 1500:.3f}{more}}}")  # (7 shapes)
    path = tmp_path / "mixed.log"
    path.write_text("\n".join(lines) + "\n")
    for block in (1 << 22, 20000):
        _assert_same(path, block)
    if os.environ["PRECDX_NATIVE"] == "1":  # (shapes are learnt with the kernels only)
        assert sum(made) > 200  # (records met a few at a time were put in columns)


NANO = ("08/31/2024 00:00:{sec:02d} [INFO|DP=0|PP=0|TP=0]: iteration: {s} / 500000 | consumed_tokens: {tok} | "
        "elapsed_time_per_iteration_ms: {ms} | tokens_per_sec: 43.9K | global_batch_size: 2 | {loss}lr: {lr} | "
        "grad_norm: {gn} | cuda_memory_allocated: 67.4M | hd_free_memory_tb: 568G")


def test_nanotron_lines_in_columns(tmp_path: Path, threads: int) -> None:
    """nanotron iteration lines (%.3g numbers, SI suffixes on the metrics nobody reads) are read in
    columns from the first block on, and every line the kernel cannot read exactly as the parser
    does is left to it: a suffixed, NaN, signed or missing metric, a key printed twice (the last
    wins), blanks and tabs around a value, a second `iteration`, a Megatron header or an event
    literal in the line, bytes that are not ASCII, CRLF ends, a step of 16 digits."""
    odd = {
        7: lambda t: t.replace("| lr:", "| lm_loss: 1.2K | lr:"),
        11: lambda t: t.replace("grad_norm: 30.5", "grad_norm: nan"),
        13: lambda t: t.replace("| lr: ", "| lr: +"),
        17: lambda t: t.replace("lm_loss: 11.1 | ", ""),
        19: lambda t: t + " | lm_loss: 9.75",
        23: lambda t: t.replace("lr: ", "lr:\t  ").replace("grad_norm: 30.5", "grad_norm: 30.5\t "),
        29: lambda t: t + " | note: iteration 5/ 10 |",
        31: lambda t: t + " | see: NaN detected",
        37: lambda t: t.replace("INFO", "INF\u00d6"),
        41: lambda t: t + "\r",
        43: lambda t: t.replace("iteration: 43 /", "iteration: 1234567890123456 /"),
        47: lambda t: t.replace("grad_norm: 30.5", "grad_norm: 3_0.5"),
        53: lambda t: t + " | validation loss at iteration 53 | lm loss value: 2.0",
        59: lambda t: t.replace("| consumed", "| iteration: 7 / 9 | consumed"),
    }
    lines = ["nanotron starting", "Config: lr=1e-4"]
    for s in range(1, 2400):
        loss = f"{11.1 - s / 300:.3g}"
        text = NANO.format(sec=s % 60, s=s, tok=f"{512 * s / 1000:.3g}K", ms=f"{12 + (s % 7) / 10:.3g}",
                           loss=f"lm_loss: {loss} | ", lr=f"{1.5e-7 * s:.3g}", gn="30.5" if s % 61 in odd else
                           f"{30 + (s % 9) / 10:.3g}")
        if s % 61 in odd:
            text = NANO.format(sec=s % 60, s=s, tok="1.02K", ms="12", loss="lm_loss: 11.1 | ", lr="3e-07",
                               gn="30.5")
            text = odd[s % 61](text)
        lines.append(text)
        if s % 97 == 0:
            lines.append("[rank0] some warning about iteration timing")
    path = tmp_path / "nanotron.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8", newline="")
    for block in (1 << 22, 30000, 777):
        stats = _assert_same(path, block)
    if os.environ["PRECDX_NATIVE"] == "1":
        assert stats.columnar > 0.9 * stats.frameworks["nanotron"]  # (read in columns)


def test_declared_formats(tmp_path: Path, threads: int) -> None:
    fmt = tmp_path / "formats.yaml"
    fmt.write_text("precdx_log_formats:\n"
                   "  - name: mine\n    regex: 'train_step=(?P<step>\\d+) loss=(?P<loss>\\S+)'\n"
                   "  - name: megalike\n    contains: 'iteration'\n"
                   "    regex: 'iteration\\s+(?P<step>\\d+)/\\s*\\d+ \\| consumed samples:\\s*(?P<samples>\\d+)'\n")
    formats = load_declared_formats(fmt)
    lines = []
    for s in range(1, 100):
        lines.append(_meg(s))
        lines.append(f"train_step={s} loss={1.0 + s / 100}")
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    parsers = lambda: [DeclaredParser(f) for f in formats] + builtin_parsers()  # noqa: E731
    for block in (1 << 22, 999):
        stats = _assert_same(path, block, parsers)
    assert stats.frameworks.get("megalike") == 99 and stats.columnar == 0  # the declared format claims them
    anywhere = [DeclaredParser(f) for f in load_declared_formats(_write(tmp_path / "any.yaml",
               "precdx_log_formats:\n  - name: any\n    regex: '(?P<loss>\\d+\\.\\d+)$'\n"))]
    _assert_same(path, 999, lambda: anywhere + builtin_parsers())  # no literal: read line by line


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_over_long_lines_and_cut_tail(tmp_path: Path, threads: int) -> None:
    body = "\n".join(_meg(s) for s in range(1, 30))
    long_line = "x" * (1 << 20) + " iteration"
    path = tmp_path / "train.log"
    path.write_bytes((body + "\n" + long_line + "\n" + body + "\n" + "y" * (3 << 20) + "\n" + _meg(31)
                      + "\n" + _meg(32)[:40]).encode())
    for block in (1 << 22, 1 << 20, 70000):
        stats = _assert_same(path, block)
    assert stats.cut_lines == 2 and stats.truncated_last_line


def _safe_by_bytes(head: bytes, wild: list[str], keys: list[str], relevant: list[bytes]) -> bool:
    """blocks._safe worked out byte by byte (the reference)."""
    for t in relevant:
        if b"|" in t or set(t) <= blocks._VALUE_CHARS:
            return False
        for off in range(len(head) - len(t) + 1):
            if all(wild[off + j] == "d" and 48 <= c <= 57 or wild[off + j] == "s" and (48 <= c <= 57 or c == 32)
                   or not wild[off + j] and head[off + j] == c for j, c in enumerate(t)):
                return False
        for key in keys:
            kb = key.encode("ascii")
            if t in kb or any(kb.endswith(t[:j]) for j in range(1, len(t))):
                return False
    return True


def test_layout_safety_is_the_byte_by_byte_answer() -> None:
    """Whether a literal another parser needs can show up in a Megatron layout's head (digits and
    counter windows as wildcards) or in or across its keys: the compiled patterns give the
    byte-by-byte answer, on random heads, keys and literal sets (the parsers' own among them)."""
    import random

    relevant = blocks._Plan.of(builtin_parsers()).relevant
    rnd = random.Random(0)
    alpha = b"ab iteration0123456789:[]=.-/ {}'stepSkipverflow"
    seen = set()
    for _ in range(4000):
        head = bytes(rnd.choice(alpha) for _ in range(rnd.randint(0, 40)))
        wild = [rnd.choice(["", "", "d", "s"]) if 48 <= c <= 57 or c == 32 else "" for c in head]
        keys = [" " + "".join(chr(rnd.choice(alpha)) for _ in range(rnd.randint(1, 12))) + ":"
                for _ in range(rnd.randint(0, 4))]
        lits = rnd.sample(relevant, rnd.randint(0, 6)) + [bytes(rnd.choice(alpha) for _ in range(rnd.randint(1, 4)))
                                                           for _ in range(rnd.randint(0, 3))]
        want = _safe_by_bytes(head, wild, keys, lits)
        assert blocks._safe(head, wild, keys, lits) == want, (head, wild, keys, lits)
        seen.add(want)
    assert seen == {True, False}


def test_short_lines_shaped_like_a_layout(tmp_path: Path, threads: int) -> None:
    """Lines with as many pipes as a learnt layout but too short for its keys, at the very end of
    a block: not read in columns, and no crash."""
    short = " iteration 1/ 10 | lm loss: 2.0 |"
    lines = [short.replace("1/", f"{s}/") for s in range(1, 9)] + ["a |b|", "|x|", "||"]
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    for block in (1 << 22, 40, 7):
        _assert_same(path, block)
    long_head = " " * 3000 + short  # a layout with a long head, then blocks shorter than it
    path.write_text("\n".join([long_head] * 3 + ["|a:|", "x|b: 1|"] * 50) + "\n")
    for block in (1 << 22, 3100, 50):
        _assert_same(path, block)


def test_invalid_utf8_and_nul_bytes(tmp_path: Path, threads: int) -> None:
    lines = [_meg(s).encode() for s in range(1, 60)]
    lines[10] = lines[10].replace(b"[2025", b"[\xff\xfe2025")
    lines[20] = lines[20].replace(b"grad norm: 1.234", b"grad norm: 1.2\xc3")
    lines[30] = b"\x00\x01 iteration 5 pike \xe9\x80"
    path = tmp_path / "train.log"
    path.write_bytes(b"\n".join(lines) + b"\n")
    for block in (1 << 22, 777):
        _assert_same(path, block)


def test_fast_path_reads_megatron_in_columns(tmp_path: Path) -> None:
    """The point of the block reader: a Megatron log's iteration lines never reach the per-line
    parsers (a regression that sends them there would keep results right and lose the speed)."""
    path = tmp_path / "train.log"
    path.write_text("\n".join(_meg(s) for s in range(1, 2001)) + "\n")
    stats = ReadStats(str(path))
    b = SeriesBuilder("r", "target")
    read_into(path, stats, b, columns=True)
    assert stats.columnar == 2000 and stats.frameworks == {"megatron": 2000}
    s = b.build()
    assert s.n_points == 2000 and math.isclose(float(s.loss[-1]), 3.0 - 2000 / 1e4)
    small = ReadStats(str(path))  # by default only big files: the bulk cast's set-up costs more below
    read_into(path, small, SeriesBuilder("r", "target"))
    assert small.columnar == 0 and small.frameworks == {"megatron": 2000}


_POOL = [
    lambda s: _meg(s),
    lambda s: _meg(s, loss="", gn=None, sk=1),
    lambda s: _meg(s, loss="nan", gn="nan", nan=1),
    lambda s: "[default0]:" + _meg(s, gn=None),
    lambda s: _meg(s).replace(" |", " | ", 1),
    lambda s: _meg(s)[: len(_meg(s)) // 2],
    lambda s: _meg(s).replace("lm loss", "lm  loss"),
    lambda s: _meg(s).replace("grad norm: 1.234", "grad norm: 1.2K"),
    lambda s: _meg(s).replace("learning rate", "Learning Rate"),
    lambda s: _meg(s) + " extra: 5 |",
    lambda s: f" validation loss at iteration {s} | lm loss value: 2.5E+00 | lm loss PPL: 12.1 |",
    lambda s: f"[Rank 0] (after {s} iterations) memory (MB) | allocated: 21.85 | reserved: 96.00",
    lambda s: f"Unexpected result nan at iteration {s}",
    lambda s: f"[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1024, reducing to 512",
    lambda s: f"{s}/900 [00:01<00:02, 3.1it/s]{{'loss': 1.5, 'grad_norm': 0.3, 'learning_rate': 1e-05}}",
    lambda s: f"{{'loss': {s / 300:.3f}, 'grad_norm': 0.3, 'learning_rate': 1e-05, 'epoch': {s / 900:.3f}}}",
    lambda s: "successfully loaded checkpoint from /ckpt at iteration 100",
    lambda s: f"[step={s}/900,epoch=0]",
    lambda s: "    train/CE loss=1.25",
    lambda s: f"iteration: {s} / 900 | lm_loss: 4.71K | lr: 1e-3 |",
    lambda s: f"loss: {s / 7:.3f} | lr: 1e-4 | grad_norm: 0.9 | epoch: 0.1",
    lambda s: "",
    lambda s: "|||",
    lambda s: "\r",
]


@pytest.mark.slow  # many small files through both readers
def test_random_mixtures(tmp_path: Path) -> None:
    """Random mixtures of Megatron lines (and near misses) with every other kind of line, cut in
    random blocks: the block reader always gives what the per-line reader gives."""
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies
    ensure_kernels()  # (without a compiler both draws take the numpy path)

    @hypothesis.settings(max_examples=60, deadline=None, derandomize=True,
                         suppress_health_check=list(hypothesis.HealthCheck))
    @hypothesis.given(picks=st.lists(st.tuples(st.integers(0, len(_POOL) - 1), st.integers(1, 400)),
                                     min_size=1, max_size=120),
                      block=st.sampled_from([64, 200, 1000, 1 << 22]), threads=st.sampled_from([1, 2]),
                      end=st.sampled_from(["\n", ""]), compiled=st.booleans())
    def check(picks, block, threads, end, compiled):
        path = tmp_path / "mix.log"
        path.write_text("\n".join(_POOL[i](s) for i, s in picks) + end, encoding="utf-8")
        old, old_env = blocks.THREADS, os.environ.get("PRECDX_NATIVE")
        blocks.THREADS = threads
        os.environ["PRECDX_NATIVE"] = "1" if compiled else "0"
        try:
            _assert_same(path, block)
        finally:
            blocks.THREADS = old
            if old_env is None:
                os.environ.pop("PRECDX_NATIVE", None)
            else:
                os.environ["PRECDX_NATIVE"] = old_env

    check()
