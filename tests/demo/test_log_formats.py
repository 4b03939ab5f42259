"""The demo lab's log lines look like the real ones (issue 14): each generated line of the five
trainer formats of the evaluation matrix is parsed by the same log collectors as a real line of
that format from ../shared/real-logs (or, for MindSpeed-LLM's FSDP2 path, of which no real log
was found, the real line quoted in ../shared/log-formats.md), and both must come out with the same
shape: the same parser, the same fields present, the same kind of record or event. No torch."""
from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from precdx.collectors.logs.model import Event, Record
from precdx.collectors.logs.reader import parse_lines
from precdx.demo import artefacts
from precdx.demo.catalogue import LOG_FORMATS

SHARED = Path(__file__).resolve().parents[3] / "shared"
REAL = SHARED / "real-logs"


def _real_line(rel: str, pattern: str) -> str:
    path = REAL / rel if not rel.endswith(".md") else SHARED / rel
    for line in path.read_text(encoding="utf-8").splitlines():
        if re.search(pattern, line):
            return line.strip()
    raise AssertionError(f"no line matching {pattern!r} in {path}")


def _train(fp16: bool = False):
    model = SimpleNamespace(num_layers=2, hidden_size=32, ffn_hidden_size=128, num_attention_heads=4, seq_length=32,
                            vocab_size=64, init_method_std=0.02, norm_epsilon=1e-5, dropout=0.0)
    return SimpleNamespace(model=model, micro_batch_size=8, global_batch_size=8, lr=5e-3, min_lr=5e-4,
                           lr_warmup_iters=3, train_iters=24, weight_decay=0.01, adam_beta1=0.9, adam_beta2=0.95,
                           adam_eps=1e-8, clip_grad=1.0, seed=1234, seed_fixed=True, fp16=fp16, bf16=False,
                           initial_loss_scale=65536, min_loss_scale=1.0, loss_scale_window=100, hysteresis=2,
                           data_path="synth_text_document", load="ckpt/tinygpt-mcore")


def _result(skips: tuple[int, ...] = ()):
    recs, scale = [], 65536.0
    for it in range(1, 13):
        skipped = int(it in skips)
        if skipped and it != skips[0]:
            scale /= 2
        recs.append(SimpleNamespace(iteration=it, consumed_samples=8 * it, elapsed_ms=12.5, lr=5e-3 * min(1, it / 3),
                                    loss=None if skipped else 4.1 - 0.05 * it, loss_scale=scale,
                                    grad_norm=None if skipped else 1.5 - 0.02 * it, skipped=skipped, nan=0,
                                    timestamp=1_767_225_600.0 + it))
    return SimpleNamespace(iterations=recs, failed_at=None, num_parameters=30000)


def _items(lines: list[str]) -> list:
    return list(parse_lines(lines))


def _shape(item) -> tuple:
    if isinstance(item, Record):
        fields = ("step", "loss", "grad_norm", "lr", "loss_scale", "skipped", "nan_iters")
        return ("record", item.framework, item.kind, item.skipped_cumulative,
                tuple(f for f in fields if getattr(item, f) is not None))
    assert isinstance(item, Event)
    return ("event", item.kind, item.attempted is not None, item.reduced_to is not None,
            item.hysteresis_to is not None)


def _generated(fmt: str, side: str, pattern: str, fp16: bool = False, skips: tuple[int, ...] = ()) -> str:
    log = artefacts.render_log(fmt, _train(fp16), side, _result(skips), 1_767_225_600.0)
    return _real_line_in(log, pattern)


def _real_line_in(text: str, pattern: str) -> str:
    for line in text.splitlines():
        if re.search(pattern, line):
            return line
    raise AssertionError(f"the generated log has no line matching {pattern!r}:\n{text[-2000:]}")


# (format, side, real source, pattern in the real source, pattern in the generated log, fp16 run)
CASES = [
    ("megatron", "gpu", "megatron-lm/fixstars-mdk-core080-loss-scale.log", r"iteration\s+20/.*lm loss", r"iteration\s+5/", False),
    ("megatron", "npu", "megatron-lm/fixstars-mdk-core080-loss-scale.log", r"iteration\s+20/.*lm loss", r"iteration\s+5/", False),
    ("mindspeed", "npu", "log-formats.md", r">>  iteration\s+1/", r">>  iteration\s+5/", False),
    ("mindspeed", "gpu", "megatron-lm/fixstars-mdk-core080-loss-scale.log", r"iteration\s+20/.*lm loss", r"iteration\s+5/", False),
    ("deepspeed", "npu", "deepspeed/dschat-sft-overflow-hysteresis.log", r"\[Rank 0\] step=10,", r"\[Rank 0\] step=5,", False),
    ("deepspeed", "npu", "deepspeed/dschat-sft-overflow-hysteresis.log", r"Attempted loss scale: 65536, but hysteresis",
     r"but hysteresis", True),
    ("deepspeed", "npu", "deepspeed/dschat-sft-overflow-hysteresis.log", r"Attempted loss scale: 32768, reducing to",
     r"reducing to", True),
    ("hf", "gpu", "llama-factory/lf-9147-extra-keys.log", r"\{'loss': 1\.8349", r"\{'loss'", False),
    ("hf", "npu", "hf-transformers/pink-6-loss-zero-gradnorm-nan.log", r"'grad_norm': nan", r"\{'loss'", False),
    ("torchtitan", "npu", "torchtitan/pr3393-rank0-prefix.log", r"step: 14 ", r"step:  5 ", False),
]


@pytest.mark.parametrize("fmt, side, source, real_pat, gen_pat, fp16", CASES,
                         ids=[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_generated_line_has_the_shape_of_a_real_one(fmt, side, source, real_pat, gen_pat, fp16):
    real = _real_line(source, real_pat)
    gen = _generated(fmt, side, gen_pat, fp16=fp16, skips=(4, 5, 6) if fp16 else ())
    real_items, gen_items = _items([real]), _items([gen])
    assert real_items and gen_items, (real, gen)
    if "'grad_norm': nan" in real:
        # the real line is a NaN step: compare with a generated NaN step of the same format
        nan_run = _result()
        nan_run.failed_at = 13
        log = artefacts.render_log(fmt, _train(), side, nan_run, 1_767_225_600.0)
        gen_items = _items([log.splitlines()[-1]])
    assert [_shape(x) for x in gen_items] == [_shape(x) for x in real_items], (real, gen)


def test_every_log_format_is_covered():
    assert {c[0] for c in CASES} == set(LOG_FORMATS)


def test_each_format_logs_every_iteration_with_the_collectors():
    """A whole generated log: every iteration parsed once, losses as printed."""
    for fmt in LOG_FORMATS:
        for side in ("gpu", "npu"):
            log = artefacts.render_log(fmt, _train(), side, _result(), 1_767_225_600.0)
            records = [x for x in _items(log.splitlines()) if isinstance(x, Record) and x.loss is not None]
            if all(r.step is None for r in records):   # HF logs carry no step: one dict per logging step
                assert len(records) == 12, (fmt, side, len(records))
                first = records[0]
            else:
                steps = sorted({int(r.step) for r in records if r.step is not None})
                assert steps == list(range(1, 13)), (fmt, side, steps)
                first = next(r for r in records if r.step == 1)
            assert first.loss == pytest.approx(4.05, rel=1e-3), (fmt, side)
