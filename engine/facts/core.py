"""Fact types not tied to one artefact: the runs being compared, and observations a person
reports (answers to the engine's questions, results of experiments they ran)."""
from __future__ import annotations

from typing import Literal, Optional

from precdx.facts.base import Bool, F, Fact, Int, Num, fact_type
from precdx.vocabulary import Role, RunDevice



@fact_type("run", collectors=("discovery",), identity=("role", "name"))
class Run(Fact):
    """One training run that takes part in the comparison, and what was found in it."""

    role: Role = F("which side of the comparison this run is")
    name: str = F("run name (folder name, or group name for grouped runs)", default="")
    device: RunDevice = F("accelerator the run used", default="unknown")
    framework: str = F("training framework detected from its log or scripts", default="unknown")
    has_log: Bool = F("a training log was parsed", default=False)
    has_dump: Bool = F("an msprobe-format dump was found", default=False)
    has_compare: Bool = F("an msprobe compare result was found", default=False)
    has_monitor: Bool = F("msprobe monitor output was found", default=False)
    has_config: Bool = F("a launch script or config was found", default=False)
    has_env: Bool = F("an environment listing was found", default=False)
    grouped: Bool = F("the run folder holds several grouped runs (node groups)", default=False)
    group_count: Int = F("number of grouped runs", unit="count", default=0)
    steps: Int | None = F("last iteration logged", unit="steps")
    group: Optional[str] = F("group folder of a grouped run, e.g. group03")
    host_count: Int = F("number of hosts listed in the run's hostfile", unit="count", default=0)
    hosts: Optional[str] = F("hosts of the run (comma-separated, from hosts.txt)", match=False)
    artefacts: Int = F("number of recognised artefacts", unit="count", default=0)


# Questions the engine may ask and people may answer (chat, `precdx ask`, --facts).
# name -> (kind, English question, Chinese question)
OBSERVATIONS: dict[str, tuple[str, str, str]] = {
    "vanishes_with_launch_blocking": (
        "bool", "Does the problem disappear when the target runs with ASCEND_LAUNCH_BLOCKING=1?",
        "设置 ASCEND_LAUNCH_BLOCKING=1 后问题是否消失？"),
    "vanishes_with_dump": (
        "bool", "Does the problem disappear when the msprobe dump (or another hook tool) is attached?",
        "挂上 msprobe dump（或其他 hook 工具）后问题是否消失？"),
    "reproduces_on_rerun": (
        "bool", "Does rerunning the same target job from the same checkpoint reproduce the same losses?",
        "从同一 checkpoint 重跑目标任务，loss 能否复现？"),
    "reproduces_with_determinism": (
        "bool", "With seeds fixed and deterministic computing/communication on, do two target runs match bit for bit?",
        "固定随机种子并开启确定性计算与通信后，两次目标运行是否逐位一致？"),
    "stress_test_failed": (
        "bool", "Did an accelerator stress test (e.g. ascend-dmi -dg / aicore stress) flag a card or node?",
        "硬件压测（如 ascend-dmi 诊断）是否发现故障卡或节点？"),
    "tied_to_specific_nodes": (
        "bool", "Does the deviation follow specific nodes or cards when the job is placed on other machines?",
        "更换机器后，异常是否跟随特定节点或卡？"),
    "fp32_upcast_fixes": (
        "bool", "Does running the suspect operator in fp32 (or on the CPU) bring the loss back in line?",
        "将可疑算子升精度到 fp32（或放到 CPU 上）后 loss 是否恢复？"),
    "small_ops_fix": (
        "bool", "Does replacing the fused operator by its small-operator implementation fix the loss?",
        "将融合算子替换为小算子实现后 loss 是否恢复？"),
    "sgd_aligns": (
        "bool", "With the optimizer swapped for plain SGD (or the optimizer step disabled), do the curves align?",
        "将优化器换成 SGD（或关闭优化器更新）后曲线是否对齐？"),
    "lr_zero_aligns": (
        "bool", "With learning rate 0, do loss and grad norm stay aligned over ~1000 steps?",
        "学习率设为 0 时，约 1000 步内 loss 与梯度范数是否对齐？"),
    "kshift_off_fixes": (
        "bool", "Does CLOSE_MATMUL_K_SHIFT=1 on the target bring the curves together?",
        "目标侧设置 CLOSE_MATMUL_K_SHIFT=1 后曲线是否对齐？"),
    "overlap_off_fixes": (
        "bool", "Does dropping --overlap-param-gather / --overlap-grad-reduce fix the divergence?",
        "去掉 --overlap-param-gather / --overlap-grad-reduce 后是否恢复？"),
    "same_checkpoint": (
        "bool", "Do both sides start from the same checkpoint (same weights file, same conversion)?",
        "两侧是否从同一份权重（同一转换结果）启动？"),
    "same_data_order": (
        "bool", "Do both sides feed identical token batches at step 1 (checked by dump or print)?",
        "第 1 步两侧输入的 token 是否完全一致（通过 dump 或打印确认）？"),
    "downstream_metric_gap": (
        "bool", "Is a downstream evaluation metric clearly worse on the target although training loss is close?",
        "训练 loss 接近，但下游评测指标是否明显更差？"),
    # behaviour people report from using the trained model or watching the curve
    "generation_never_stops": (
        "bool", "Does the trained model keep generating past the end of its answer (it never emits the end token)?",
        "训练后的模型生成时是否停不下来（不输出结束符）？"),
    "wrong_first_token": (
        "bool", "Is the first generated token wrong or odd (a repeated BOS, a template marker, a stray space)?",
        "生成的第一个 token 是否异常（重复 BOS、模板标记、多余空格）？"),
    "loss_plateau_suspicious": (
        "bool", "Does the loss flatten at a suspicious value (about ln(vocabulary size), ln 2, or exactly 0)?",
        "loss 是否停在可疑的值上（约 ln(词表大小)、ln 2 或恰好为 0）？"),
    # what kind of job it is, where the artefacts do not tell (the differential's scopes)
    "model_is_moe": (
        "bool", "Is the model a mixture-of-experts (MoE) model, a router sending each token to some experts?",
        "模型是否为 MoE（混合专家）模型，由 router 把每个 token 分给部分专家？"),
    "trains_in_fp16": (
        "bool", "Does the target train in fp16 with a dynamic loss scale (rather than in bf16)?",
        "目标侧是否以 fp16（动态 loss scale）而非 bf16 训练？"),
    "sequence_parallel_on": (
        "bool", "Is sequence parallelism on, with a tensor-parallel size above 1?",
        "是否开启了序列并行，且张量并行（TP）大于 1？"),
    "several_cards": (
        "bool", "Does the job run on more than one card?",
        "任务是否在多张卡上运行？"),
    "instruction_tuning": (
        "bool", "Is it instruction tuning (SFT), with prompt or padding tokens masked out of the loss, rather than "
                "pretraining on plain text?",
        "是否为指令微调（SFT），prompt 或 padding token 不计入 loss，而非在纯文本上预训练？"),
    # what the user sees (the symptom classes), asked when no artefact shows it
    "target_loss_nan": (
        "bool", "Does the target's loss or grad norm turn NaN/Inf (or do its steps get skipped for overflow) "
                "where the baseline's does not?",
        "目标侧 loss 或 grad norm 是否出现 NaN/Inf（或因溢出而跳过 step），而标杆没有？"),
    "first_step_loss_off": (
        "bool", "Is the target's loss already off from the baseline's by more than 1% at the first step?",
        "第 1 步时目标侧 loss 与标杆的相对偏差是否已超过 1%？"),
    "loss_drifts_later": (
        "bool", "Do the two loss curves agree at first and drift apart later (by more than 1%)?",
        "两条 loss 曲线是否开始一致、之后逐渐偏离（超过 1%）？"),
    "target_loss_spikes": (
        "bool", "Does the target's loss spike where the baseline's does not?",
        "目标侧 loss 是否出现标杆没有的尖刺？"),
}


@fact_type("observation", collectors=("user",), identity=("name",))
class Observation(Fact):
    """Something a person checked and reported (an answer to a question the engine asked)."""

    name: Literal[tuple(OBSERVATIONS)] = F("what was observed (see the observation catalogue)")  # type: ignore[valid-type]
    value: Bool | None = F("yes/no answer")
    number: Num | None = F("numeric answer, where the question asks for one")


@fact_type("declared_change", collectors=("user",), identity=("name",))
class DeclaredChange(Fact):
    """A difference between the runs that the user made on purpose (`--changed KEY`, or `changed:` in
    the case folder's case.yaml): the experiment's trigger, not a root cause to report."""

    name: str = F("canonical key (config_diff.name, env_diff.name or library_diff.package) as normalised "
                  "from what the user wrote")
    raw: Optional[str] = F("the key as the user wrote it", match=False)
