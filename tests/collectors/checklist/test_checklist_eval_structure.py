"""Evaluation gaps, model structure listings and determinism status."""
from __future__ import annotations

import json
import math

from precdx.facts.checklist import UNSET

from .conftest import GPU_ENV, NPU_ENV, of, one

SCRIPT = "#!/bin/bash\ntorchrun --nproc_per_node 8 pretrain_gpt.py {args}\n"


def test_eval_gaps_are_direction_aware(make_case):
    base = {"epoch": 1.0, "eval_loss": 2.46, "eval_accuracy": 0.323, "perplexity": 11.74,
            "eval_runtime": 4.05, "eval_samples_per_second": 39.6}
    tgt = {**base, "eval_loss": 2.66, "eval_accuracy": 0.316, "perplexity": "nan", "eval_runtime": 3.0}
    facts, warnings, case = make_case({
        "baseline": {"eval.json": json.dumps(base), "env.txt": GPU_ENV},
        "target": {"eval.json": json.dumps(tgt), "env.txt": NPU_ENV},
    })
    assert not list(warnings)
    assert {a.kind for a in case.runs[0].artefacts} == {"eval", "env"}
    gaps = {f.metric: f for f in of(facts, "eval_gap")}
    assert set(gaps) == {"eval_loss", "eval_accuracy", "perplexity"}  # runtime etc. are not metrics
    loss = gaps["eval_loss"]
    assert loss.higher_is_better is False and loss.target_worse is True
    assert math.isclose(loss.rel_gap, 0.2 / 2.46)
    acc = gaps["eval_accuracy"]
    assert acc.higher_is_better is True and acc.target_worse is True and acc.abs_gap < 0
    ppl = gaps["perplexity"]
    assert math.isnan(ppl.target) and ppl.target_worse is True
    assert ppl.to_json()["target"] == "nan"


def test_lm_eval_results_and_malformed_eval_file(make_case):
    results = {"results": {"hellaswag": {"acc,none": 0.40, "acc_stderr,none": 0.01}}}
    facts, warnings, _ = make_case({
        "baseline": {"eval.json": json.dumps(results), "env.txt": GPU_ENV},
        "target": {"eval.json": json.dumps(results)[:-5] + ', "eval_loss": 2.1}', "env.txt": NPU_ENV},
    })
    target_warn = [w for w in warnings if w["path"].endswith("target/eval.json")]
    assert target_warn and "not valid JSON" in target_warn[0]["message"]
    assert of(facts, "eval_gap") == []
    assert of(facts, "env_switch", role="target")


PRINTED = """GPTModel(
  (embedding): LanguageModelEmbedding(
    (word_embeddings): VocabParallelEmbedding()
    (position_embeddings): Embedding(64, 64)
    (embedding_dropout): Dropout(p=0.0, inplace=False)
  )
  (decoder): TransformerBlock(
    (layers): ModuleList(
      (0-1): 2 x TransformerLayer(
        (input_layernorm): FusedLayerNorm()
        (self_attention): SelfAttention(
          (core_attention): DotProductAttention(
            (scale_mask_softmax): FusedScaleMaskSoftmax()
          )
          (linear_proj): RowParallelLinear()
        )
        (mlp): MLP(
          (linear_fc1): ColumnParallelLinear()
          (linear_fc2): RowParallelLinear()
        )
      )
    )
    (final_layernorm): FusedLayerNorm()
  )
  (output_layer): ColumnParallelLinear()
)
"""
PARAMS = """module.embedding.word_embeddings.weight torch.Size([256, 64])
module.embedding.position_embeddings.weight torch.Size([64, 64])
module.decoder.layers.0.mlp.linear_fc1.weight torch.Size([256, 64])
module.decoder.layers.0.mlp.linear_fc2.weight torch.Size([64, 256])
module.decoder.final_layernorm.weight torch.Size([64])
"""


def test_printed_model_and_parameter_listing_differences(make_case):
    target_print = (PRINTED.replace("(input_layernorm): FusedLayerNorm()", "(input_layernorm): RMSNorm()")
                    .replace("Dropout(p=0.0, inplace=False)", "Dropout(p=0.1, inplace=False)")
                    .replace("        (mlp): MLP(\n          (linear_fc1): ColumnParallelLinear()\n"
                             "          (linear_fc2): RowParallelLinear()\n        )\n", ""))
    target_params = PARAMS.replace("word_embeddings.weight torch.Size([256, 64])",
                                   "word_embeddings.weight torch.Size([251, 64])").replace(
        "module.decoder.final_layernorm.weight torch.Size([64])\n", "")
    facts, warnings, case = make_case({
        "baseline": {"model_print.txt": PRINTED, "params.txt": PARAMS, "env.txt": GPU_ENV},
        "target": {"model.txt": target_print, "param_shapes.log": target_params, "env.txt": NPU_ENV},
    })
    assert not list(warnings)
    kinds = {a.kind for a in case.runs[1].artefacts}
    assert {"model.print", "model.params"} <= kinds
    diffs = {f.item: f for f in of(facts, "structure_diff")}
    norm = diffs["decoder.layers.0-1.input_layernorm"]
    assert (norm.change, norm.baseline, norm.target) == ("type", "FusedLayerNorm", "RMSNorm")
    drop = diffs["embedding.embedding_dropout"]
    assert drop.change == "args" and drop.target == "Dropout(p=0.1, inplace=False)"
    mlp = diffs["decoder.layers.0-1.mlp"]
    assert (mlp.change, mlp.target) == ("only_baseline", UNSET)
    assert "decoder.layers.0-1.mlp.linear_fc1" not in diffs  # children of a missing module
    emb = diffs["embedding.word_embeddings.weight"]
    assert (emb.kind, emb.change, emb.baseline, emb.target) == ("parameter", "shape", "256x64", "251x64")
    assert diffs["decoder.final_layernorm.weight"].change == "only_baseline"
    summary = one(facts, "structure_summary", role="baseline", listing="parameters")
    assert summary.modules == 5 and summary.elements == 256 * 64 + 64 * 64 + 2 * 256 * 64 + 64


def test_determinism_status(make_case):
    det = ("--seed 1234 --deterministic-mode --hidden-dropout 0.0 --attention-dropout 0.0")
    loose = "--seed ${SEED:-$RANDOM} --hidden-dropout 0.1"
    facts, _, _ = make_case({
        "baseline": {"pretrain_gpt.sh": SCRIPT.format(args=det),
                     "env.txt": GPU_ENV + "CUBLAS_WORKSPACE_CONFIG=:4096:8\nNCCL_ALGO=Ring\n"},
        "target": {"pretrain_gpt.sh": SCRIPT.format(args=det.replace("--deterministic-mode", "--use-deter-comp")),
                   "env.txt": NPU_ENV + "HCCL_DETERMINISTIC=true\nCLOSE_MATMUL_K_SHIFT=1\n"},
        "target_rerun": {"pretrain_gpt.sh": SCRIPT.format(args=loose), "env.txt": NPU_ENV},
    })
    base = one(facts, "determinism_status", role="baseline")
    assert base.fully_deterministic and base.comm_deterministic and base.matmul_deterministic
    tgt = one(facts, "determinism_status", role="target")
    assert tgt.fully_deterministic and tgt.deterministic_algorithms and tgt.seed == "1234"
    rerun = one(facts, "determinism_status", role="target_rerun")
    assert rerun.seed == "<random>" and rerun.seed_fixed is False
    assert rerun.dropout_off is False and rerun.comm_deterministic is False
    assert rerun.fully_deterministic is False
    assert one(facts, "config_diff", pair="target_rerun~target", name="seed").target == "<random>"
