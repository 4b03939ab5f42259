"""The launch-script reader: variables, expansion, continuations, arrays, broken scripts."""
from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from precdx.collectors.checklist.shell import RANDOM, read_script
from precdx.collectors.checklist.sniff import sniff

MEGATRON = r'''#!/bin/bash
export CUDA_DEVICE_MAX_CONNECTIONS=1
GPUS_PER_NODE=8
NNODES=2
WORLD_SIZE=$(($GPUS_PER_NODE*$NNODES))
MASTER_ADDR=${MASTER_ADDR:-localhost}
DATA_PATH=/data/my_text_document   # trailing comment
SEED=${SEED:-$RANDOM}
GPT_ARGS="
    --num-layers 2 \
    --lr 3e-4 \
    --seed ${SEED}
"
EXTRA=(--use-flash-attn "--split" "949,50,1")
EXTRA+=(--bf16)
cat > /tmp/notes.txt <<NOTES
--this-is-not-an-arg 1
NOTES
torchrun --nproc_per_node $GPUS_PER_NODE --master_addr $MASTER_ADDR pretrain_gpt.py \
    $GPT_ARGS \
    "${EXTRA[@]}" \
    --data-path $DATA_PATH --world $WORLD_SIZE \
    2>&1 | tee logs/train.log
'''


def test_expands_variables_arrays_arithmetic_and_continuations():
    script = read_script(MEGATRON, {"MASTER_ADDR": "node-1"})
    assert script.error is None
    assert script.exports == {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    argv = next(c.argv for c in script.commands if c.argv[0] == "torchrun")
    assert argv[:6] == ["torchrun", "--nproc_per_node", "8", "--master_addr", "node-1", "pretrain_gpt.py"]
    rest = argv[6:]
    assert rest[:6] == ["--num-layers", "2", "--lr", "3e-4", "--seed", RANDOM]
    assert rest[6:11] == ["--use-flash-attn", "--split", "949,50,1", "--bf16", "--data-path"]
    assert "/data/my_text_document" in rest and rest[-1] == "16"
    assert not any("--this-is-not-an-arg" in c.argv for c in script.commands)  # heredoc body is data
    assert not any("2>&1" in c.argv or "2" == c.argv[-1] for c in script.commands)


def test_default_expansion_uses_environment_when_set():
    script = read_script('S=${SEED:-7}\nU=${UNSET:-fallback}\npython train.py --seed $S --x $U --y $NOPE\n',
                         {"SEED": "42"})
    argv = script.commands[0].argv
    assert argv == ["python", "train.py", "--seed", "42", "--x", "fallback", "--y", "$NOPE"]


def test_quoted_values_are_not_split_and_single_quotes_are_literal():
    script = read_script("""A="x y"\nB='$A'\npython t.py --a "$A" --b $B --c $A\n""")
    assert script.commands[0].argv == ["python", "t.py", "--a", "x y", "--b", "$A", "--c", "x", "y"]


def test_unterminated_quote_reports_line_and_keeps_earlier_statements():
    text = 'export HCCL_DETERMINISTIC=true\nLR=1e-4\nGPT_ARGS="--lr $LR\ntorchrun pretrain_gpt.py $GPT_ARGS\n'
    script = read_script(text)
    assert script.error is not None and script.error.line == 3
    assert "unterminated" in str(script.error)
    assert script.exports == {"HCCL_DETERMINISTIC": "true"}
    assert script.variables["LR"] == "1e-4"


def test_command_prefix_assignments_are_recorded_as_command_env():
    script = read_script("ASCEND_LAUNCH_BLOCKING=1 python train.py --lr 1\n")
    assert script.commands[0].env == {"ASCEND_LAUNCH_BLOCKING": "1"}
    assert script.commands[0].argv[0] == "python"


SHELLISH = 'ab$"\'{}()[]\\\n =-#<>|&;`:+@*0123456789 \t'


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=SHELLISH, max_size=200))
def test_any_text_reads_without_exceptions(text):
    script = read_script(text, {"A": "1"})
    assert all(isinstance(w, str) for c in script.commands for w in c.argv)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_sniff_never_raises_on_bytes(data):
    for name in ("env.txt", "pip_freeze.txt", "run.sh", "cfg.yaml", "x.json"):
        sniff(Path(name), data)
