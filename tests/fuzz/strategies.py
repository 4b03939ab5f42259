"""Shared pieces of the property-based tests: bounded settings (the whole fuzz suite stays well
under a minute in CI; set PRECDX_FUZZ_SCALE=20 and PRECDX_FUZZ_RANDOM=1 for a long exploratory
run), and strategies that produce near-valid inputs (real line shapes with hostile values), which
reach much deeper than random bytes alone."""
from __future__ import annotations

import json
import os

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

SCALE = max(1, int(os.environ.get("PRECDX_FUZZ_SCALE", "1")))
EXPLORE = os.environ.get("PRECDX_FUZZ_RANDOM") == "1"


def bounded(examples: int, *, known_failure: bool = False) -> settings:
    """Settings of one property: `examples` per CI run, no per-example deadline, the same examples
    on every CI run (so an expected failure stays expected) unless exploring. A known failure
    (an xfail awaiting its fix) is not shrunk: that would only cost time."""
    phases = [Phase.explicit, Phase.reuse, Phase.generate] if known_failure else list(Phase)
    return settings(max_examples=examples * SCALE, deadline=None, derandomize=not EXPLORE,
                    database=None, print_blob=True, phases=phases,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much, HealthCheck.function_scoped_fixture])


# ------------------------------------------------------------------ hostile scalars
NUMBER_TOKENS = ["nan", "NaN", "-nan", "inf", "-inf", "Infinity", "-Infinity", "1e999", "-1e999", "1e-400",
                 "9" * 400, "9" * 5000, "0x" + "f" * 40, "1.2K", "3.4M", "1,024", "", "-", "+", ".", "1e",
                 "E+00", "0", "-0", "1_000", "٣", "１２", "N/A", "None", "null", "true", "\x00", "1.0.0"]
numbers_as_text = st.one_of(
    st.sampled_from(NUMBER_TOKENS),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.floats(width=32).map(lambda f: f"{f:.6E}"),
    st.integers(min_value=-(10 ** 30), max_value=10 ** 30).map(str),
)
junk_text = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=40)

# ------------------------------------------------------------------ log lines
# One example line per built-in format (shapes from shared/log-formats.md); {} marks numbers.
LOG_TEMPLATES = [
    " [2026-01-16 07:32:24] iteration {}/ {} | consumed samples: {} | elapsed time per iteration (ms): {} | "
    "learning rate: {} | global batch size: {} | lm loss: {} | loss scale: {} | grad norm: {} | "
    "number of skipped iterations: {} | number of nan iterations: {} |",
    " iteration {}/ {} | consumed samples: {} | consumed tokens: {} | learning rate: {} | lm loss: {} | "
    "loss scale: {} | grad norm: {} | num zeros: {} |",
    "[INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank {} Skipping step. Attempted loss scale: {}, "
    "reducing to {}",
    "[Rank 0] Overflow detected. Skipping step. Attempted loss scale: {}, reducing to {}",
    "[Rank 0] step={}, skipped={}, lr=[{}], mom=[(0.9, 0.95)]",
    "steps: {} loss: {} iter time (s): {} samples/sec: {}",
    "{{'loss': {}, 'grad_norm': {}, 'learning_rate': {}, 'epoch': {}}}",
    "{{'loss': '{}', 'grad_norm': '{}', 'learning_rate': '{}', 'epoch': '{}'}}",
    " {}%|██| {}/{} [00:09<00:41, 2.86it/s] {{'loss': {}, 'epoch': {}}}",
    "[rank0]:[titan] 2025-11-25 19:45:01,441 - root - INFO - step: {}  loss: {}  grad_norm: {}  memory: {}GiB(0.86%)",
    "Training epoch {}, iteration {}/{} | lr: {} | global_step: {} | reduced_train_loss: {} | val_loss: {}",
    "Epoch 0: 100%|██| {}/{} [00:31<00:00,  1.27it/s, loss={}, reduced_train_loss={}, global_step={}]",
    "[step={}/{},epoch={},eta=…]",
    "    train/CE loss={}",
    "iter {}: loss {}, time {}ms, mfu {}%",
    "iteration: {} / {} | lm_loss: {} | lr: {} | grad_norm: {}",
    "Epoch(train) [{}][{}/{}]  lr: {}  loss: {}  grad_norm: {}",
    "[step {}], loss: {}, grad_norm: {}, lr: {}",
    "Traceback (most recent call last):",
    "RuntimeError: CUDA out of memory. Tried to allocate {} GiB",
    "HCCL error {} timeout",
    "WARNING: loss scale {} reached the minimum",
]


@st.composite
def log_line(draw) -> str:
    """A line of some format with hostile numbers, sometimes cut or glued to junk."""
    if draw(st.integers(0, 9)) == 0:
        return draw(junk_text)
    template = draw(st.sampled_from(LOG_TEMPLATES))
    n = template.count("{}")
    line = template.format(*[draw(numbers_as_text) for _ in range(n)])
    cut = draw(st.one_of(st.none(), st.integers(0, len(line))))
    if cut is not None:
        line = line[:cut]
    if draw(st.booleans()):
        line = draw(junk_text) + line + draw(junk_text)
    return line


log_lines = st.lists(log_line(), max_size=40)

# ------------------------------------------------------------------ JSON values
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
                         st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(NUMBER_TOKENS), junk_text)
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(junk_text, inner, max_size=4)), max_leaves=12)


def dumps(value) -> str:
    """Python's JSON (bare NaN/Infinity, as msprobe and HF write them)."""
    return json.dumps(value)


# ------------------------------------------------------------------ shell text
SHELL_PIECES = ["$", "{", "}", "(", ")", "((", "))", '"', "'", "`", "\\", "\n", " ", "\t", "=", "+=", "A", "B",
                "$A", "${A}", "${A:-x}", "${A[@]}", "${#A}", "$((A+1))", "$(echo x)", "<<EOF", "<<-EOF", "EOF",
                "<<<", ";", "|", "&&", "||", "&", ">", "2>&1", "#", "export ", "declare -x ", "A=(x y)", "A=",
                "torchrun ", "python ", "pretrain_gpt.py ", "--lr ", "3e-4 ", "--seed ", "eval ", "source ",
                "if ", "then", "fi", "for i in 1 2; do ", "done", "\\\n", "=(", "[", "]", "*", "?", "~", "!"]
shell_text = st.one_of(
    st.lists(st.sampled_from(SHELL_PIECES), max_size=60).map("".join),
    st.text(alphabet="$(){}[]\"'`\\\n =;|&<>#-AB0", max_size=120),
)
