"""Environment switches (NPU/GPU equivalents, script exports, binary listings) and library
versions (freeze / list formats, local suffixes, device packages)."""
from __future__ import annotations

from precdx.facts.checklist import UNSET

from .conftest import GPU_ENV, GPU_PIP, NPU_ENV, NPU_PIP, of, one

SCRIPT = "#!/bin/bash\n{exports}\ntorchrun --nproc_per_node 8 pretrain_gpt.py --lr 1e-4 --seed 1\n"


def run(env: str, pip: str, exports: str = "") -> dict[str, str | bytes]:
    return {"pretrain_gpt.sh": SCRIPT.format(exports=exports), "env.txt": env, "pip_freeze.txt": pip}


def test_device_equivalents_are_not_differences(make_case):
    facts, warnings, _ = make_case({
        "baseline": run(GPU_ENV + "NCCL_DETERMINISTIC=1\nCUDA_LAUNCH_BLOCKING=1\n", GPU_PIP),
        "target": run(NPU_ENV + "HCCL_DETERMINISTIC=true\nASCEND_LAUNCH_BLOCKING=1\n", NPU_PIP),
    })
    assert not list(warnings)
    assert of(facts, "env_diff") == []  # same visible devices, same determinism, same blocking
    gpu = one(facts, "env_switch", role="baseline", name="HCCL_DETERMINISTIC")
    assert gpu.raw_name == "NCCL_DETERMINISTIC" and gpu.enabled and gpu.device == "gpu"
    npu = one(facts, "env_switch", role="target", name="ASCEND_LAUNCH_BLOCKING")
    assert npu.is_set and npu.enabled and npu.value == "1"


def test_missing_switch_on_one_side_is_a_difference(make_case):
    facts, _, _ = make_case({
        "baseline": run(GPU_ENV + "CUDA_LAUNCH_BLOCKING=1\n", GPU_PIP),
        "target": run(NPU_ENV, NPU_PIP),
    })
    diff = one(facts, "env_diff", name="ASCEND_LAUNCH_BLOCKING")
    assert (diff.baseline, diff.target, diff.baseline_name, diff.category) == (
        "1", UNSET, "CUDA_LAUNCH_BLOCKING", "synchronisation")


def test_npu_only_switches_compare_between_npu_runs_and_script_exports_count(make_case):
    facts, _, _ = make_case({
        "baseline": run(GPU_ENV, GPU_PIP),
        "target": run(NPU_ENV + "INF_NAN_MODE_ENABLE=1\n", NPU_PIP),
        "target_rerun": run(NPU_ENV + "INF_NAN_MODE_ENABLE=1\n", NPU_PIP,
                            exports="export CLOSE_MATMUL_K_SHIFT=1\nexport HCCL_DETERMINISTIC=true"),
    })
    # cross-device: CLOSE_MATMUL_K_SHIFT exists on NPU only, so target~baseline does not list it
    assert of(facts, "env_diff", pair="target~baseline") == []
    rerun = {f.name: f for f in of(facts, "env_diff", pair="target_rerun~target")}
    assert set(rerun) == {"CLOSE_MATMUL_K_SHIFT", "HCCL_DETERMINISTIC"}
    assert (rerun["CLOSE_MATMUL_K_SHIFT"].baseline, rerun["CLOSE_MATMUL_K_SHIFT"].target) == (UNSET, "1")
    kshift = one(facts, "env_switch", run="target_rerun", name="CLOSE_MATMUL_K_SHIFT")
    assert kshift.deterministic_setting is True
    assert "pretrain_gpt.sh" in kshift.source
    gpu_view = one(facts, "env_switch", role="baseline", name="CLOSE_MATMUL_K_SHIFT")
    assert gpu_view.applies is False and gpu_view.is_set is False
    infnan = one(facts, "env_switch", role="target", name="INF_NAN_MODE_ENABLE")
    assert infnan.enabled is True


def test_inf_nan_mode_unset_and_force_disabled(make_case):
    facts, _, _ = make_case({
        "baseline": run(GPU_ENV, GPU_PIP),
        "target": run(NPU_ENV, NPU_PIP),
        "target_rerun": run(NPU_ENV + "INF_NAN_MODE_ENABLE=1\nINF_NAN_MODE_FORCE_DISABLE=1\n", NPU_PIP),
    })
    unset = one(facts, "env_switch", role="target", name="INF_NAN_MODE_ENABLE")
    assert unset.is_set is False and unset.enabled is None and unset.applies
    forced = one(facts, "env_switch", role="target_rerun", name="INF_NAN_MODE_ENABLE")
    assert forced.is_set and forced.enabled is False


def test_binary_env_listing_warns_and_pip_is_still_used(make_case):
    facts, warnings, case = make_case({
        "baseline": run(GPU_ENV, GPU_PIP),
        "target": {"pretrain_gpt.sh": SCRIPT.format(exports=""), "env.txt": b"\x7fELF\x00\x01\x02" * 50,
                   "pip_freeze.txt": NPU_PIP},
    })
    target = next(r for r in case.runs if r.role == "target")
    assert [a.kind for a in target.artefacts if a.path.name == "env.txt"] == ["env"]
    msgs = [w for w in warnings if w["path"].endswith("target/env.txt")]
    assert msgs and "binary" in msgs[0]["message"]
    assert of(facts, "env_switch", role="target") == []
    assert one(facts, "library_version", role="target", package="torch-npu").version == "2.1.0.post10"


PIP_LIST = """Package            Version
------------------ ------------
torch              2.1.0
torch-npu          2.1.0.post10
transformers       4.40.0
tokenizers         0.19.1
numpy              1.26.4
six                1.16.0
"""
FREEZE = """apex==0.1
flash-attn==2.5.8
nvidia-nccl-cu12==2.21.5
six==1.17.0
tokenizers==0.19.1
torch==2.1.0+cu121
transformers==4.46.3
numpy==1.26.4
megatron-core @ git+https://github.com/NVIDIA/Megatron-LM.git@core_r0.8.0
"""


def test_library_diff_ignores_device_suffix_and_device_packages(make_case):
    target_pip = PIP_LIST + "apex           0.1+ascend\n"
    facts, warnings, case = make_case({
        "baseline": run(GPU_ENV, FREEZE),
        "target": run(NPU_ENV, target_pip),
    })
    assert not list(warnings)
    kinds = {a.detail for r in case.runs for a in r.artefacts if a.kind == "pip"}
    assert kinds == {"freeze", "list"}
    diffs = {f.package: f for f in of(facts, "library_diff")}
    assert "torch" not in diffs and "apex" not in diffs and "tokenizers" not in diffs
    assert "flash-attn" not in diffs and "nvidia-nccl-cu12" not in diffs and "torch-npu" not in diffs
    tf = diffs["transformers"]
    assert (tf.baseline, tf.target, tf.key_library, tf.category) == ("4.46.3", "4.40.0", True, "framework")
    assert diffs["six"].key_library is False and diffs["six"].category == "other"
    mc = diffs["megatron-core"]
    assert (mc.baseline, mc.target) == ("git:core_r0.8.0", UNSET)
    torch_gpu = one(facts, "library_version", role="baseline", package="torch")
    assert (torch_gpu.version, torch_gpu.raw) == ("2.1.0", "2.1.0+cu121")


def test_device_package_versions_differ_between_npu_runs(make_case):
    facts, _, _ = make_case({
        "baseline": run(GPU_ENV, FREEZE),
        "target": run(NPU_ENV, NPU_PIP),
        "target_rerun": run(NPU_ENV, NPU_PIP.replace("post10", "post8")),
    })
    diff = one(facts, "library_diff", pair="target_rerun~target", package="torch-npu")
    assert (diff.baseline, diff.target, diff.category) == ("2.1.0.post10", "2.1.0.post8", "device")
