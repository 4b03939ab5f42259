"""Keys of the loss-mask, packing, rotary-embedding and fused-kernel failure modes: the same
switch under Megatron, MindSpeed and Hugging Face spellings lands on one canonical name, and
Megatron's negative flags (--no-rope-fusion, --disable-bias-linear) keep their meaning."""
from __future__ import annotations

import pytest

from precdx.collectors.checklist import aliases
from precdx.facts.checklist import UNSET

from .conftest import GPU_ENV, GPU_PIP, NPU_ENV, NPU_PIP, one


@pytest.mark.parametrize("raw, canon, category", [
    ("--rope-theta", "rotary_base", "model"),
    ("partial_rotary_factor", "rotary_percent", "model"),
    ("rope_scaling.factor", "rope_scaling_factor", "model"),
    ("--rotary-scaling-factor", "rope_scaling_factor", "model"),
    ("rope_scaling.rope_type", "rope_scaling_type", "model"),
    ("--use-fused-moe-token-permute-and-unpermute", "moe_permute_fusion", "framework_option"),
    ("enable_liger_kernel", "use_liger_kernel", "framework_option"),
    ("--no-persist-layer-norm", "no_persist_layer_norm", "framework_option"),
    ("train_on_inputs", "train_on_prompt", "data"),
    ("--neat-pack", "neat_packing", "data"),
    ("neat_packing", "neat_packing", "data"),  # not plain packing: documents stay isolated
])
def test_mode_keys_have_one_canonical_name(raw, canon, category):
    name, inverted = aliases.canonical(raw)
    assert (name, inverted) == (canon, False)
    assert aliases.category(name) == category


@pytest.mark.parametrize("raw, canon", [
    ("--no-rope-fusion", "use_fused_rotary_pos_emb"),
    ("--disable-bias-linear", "add_bias_linear"),
    ("--no-initialization", "perform_initialization"),
])
def test_megatron_negative_flags_are_inverted(raw, canon):
    assert aliases.canonical(raw) == (canon, True)


MEGATRON = r'''#!/bin/bash
GPT_ARGS="
    --tensor-model-parallel-size 2 \
    --lr 3e-4 \
    --seed 1234 \
    --position-embedding-type rope \
    --rotary-base 10000 \
    --no-rope-fusion \
    --disable-bias-linear {extra}
"
torchrun --nproc_per_node 8 pretrain_gpt.py $GPT_ARGS --data-path /data/wiki_text_document
'''


def test_rope_and_fusion_switches_become_differences(make_case):
    target = MEGATRON.format(extra="\\\n    --rotary-base 1000000 \\\n    --use-fused-rotary-pos-emb \\\n"
                                   "    --reset-attention-mask")
    facts, _, _ = make_case({
        "baseline": {"pretrain_gpt.sh": MEGATRON.format(extra=""), "env.txt": GPU_ENV, "pip_freeze.txt": GPU_PIP},
        "target": {"pretrain_gpt.sh": target, "env.txt": NPU_ENV, "pip_freeze.txt": NPU_PIP},
    })
    rope = one(facts, "config_diff", name="rotary_base")
    assert (rope.category, rope.baseline, rope.target, rope.relevant) == ("model", "10000", "1000000", True)
    fused = one(facts, "config_diff", name="use_fused_rotary_pos_emb")
    assert (fused.category, fused.baseline, fused.target) == ("framework_option", "false", "true")
    assert one(facts, "config_value", role="baseline", name="add_bias_linear").flag is False
    mask = one(facts, "config_diff", name="reset_attention_mask")
    assert (mask.target, mask.presence) == ("true", "target_only") and mask.relevant
    assert mask.baseline in (UNSET, "false (default)")  # Megatron's default may be spelled out
