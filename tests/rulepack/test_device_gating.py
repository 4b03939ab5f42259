"""Device gating of next steps: an NPU run never gets a GPU-only command and vice versa.

Every rule's next steps are rendered for an NPU, a GPU and a CPU target, once directly through
the gating function and once end to end through diagnose() on the rule's positive test cases
with a `run` fact naming the device. Commands must not carry the other device family's
switches or tools (HCCL_*, ascend-dmi, npu-smi ... / CUDA_*, NCCL_*, nvidia-smi, dcgmi ...);
action texts may name both only when they map one side onto the other ("set X like the
baseline's Y"). kb commands with a device-specific word must carry a matching `device` key.
"""
from __future__ import annotations

import pytest

from precdx.diagnosis import diagnose, get_matcher
from precdx.facts import FactSet, parse_fact
from precdx.kb import load_kb
from precdx.paths import rules_dir
from precdx.planner.answers import question_applies, question_text
from precdx.rulepack.devices import applies, device_words, run_device
from precdx.rulepack.ruletest import load_cases

DEVICES = ("npu", "gpu", "cpu")


def _pack():
    pack, _ = get_matcher("python")
    return pack


def _foreign(text: str, device: str, allow_mapping: bool) -> set[str]:
    """Words of the other device family in `text` that a run on `device` must not get."""
    npu, gpu = device_words(text)
    if allow_mapping and npu and gpu:
        return set()  # "set the NPU flag like the GPU baseline's flag": names both on purpose
    if device == "npu":
        return gpu
    if device == "gpu":
        return npu
    return npu | gpu  # a CPU run has neither family


@pytest.mark.parametrize("device", DEVICES)
def test_no_foreign_device_step_in_any_rule(device):
    bad = []
    for rule in _pack().rules:
        for i, st in enumerate(rule.rule.next_steps):
            if not applies(st.device, device):
                continue
            words = _foreign(st.command or "", device, allow_mapping=False)
            words |= _foreign(st.action.en, device, allow_mapping=True)
            if words:
                bad.append(f"{rule.id} next_steps[{i}] reaches a {device} run with {sorted(words)}")
    assert not bad, "\n".join(bad)


def test_device_specific_steps_have_counterparts():
    """A rule that gives an NPU-only step also gives the GPU something to do (and vice versa),
    unless the rule can only fire on that device (it tests device: npu)."""
    missing = []
    for rule in _pack().rules:
        steps = rule.rule.next_steps
        tested = {t.value for alt in rule.alternatives for p in alt.positives for t in p.tests
                  if t.field == "device" and t.op == "eq"}
        # a rule that fires only on the answer to a question the planner asks on one device only
        asked = {t.value for alt in rule.alternatives for p in alt.positives if p.fact_type == "observation"
                 for t in p.tests if t.field == "name" and t.op == "eq"}
        for dev, other in (("npu", "gpu"), ("gpu", "npu")):
            only = [s for s in steps if s.device and dev in s.device and other not in s.device]
            reach_other = [s for s in steps if applies(s.device, other)]
            only_asked_on_dev = asked and not any(question_applies(n, other) for n in asked)
            if only and not reach_other and tested != {dev} and not only_asked_on_dev:
                missing.append(f"{rule.id}: {dev}-only steps and nothing for a {other} target")
    assert not missing, "\n".join(missing)


def _positive_cases():
    return [c for c in load_cases(rules_dir()) if c.kind == "positive" and c.error is None]


@pytest.mark.parametrize("device", ("npu", "gpu"))
def test_diagnosis_renders_only_own_device_steps(device):
    """End to end: the positive case of every rule, run as a target on `device`."""
    bad = []
    seen_gated = 0
    for case in _positive_cases():
        facts = [f for f in case.facts if not (f.type == "run" and getattr(f, "role", None) == "target")]
        facts.append(parse_fact({"type": "run", "role": "target", "name": "target", "device": device}))
        diag = diagnose(FactSet(facts), engine="python", with_near_misses=False)
        # names that come from the case's own facts (e.g. an NPU API name) are data, not advice
        from_facts = " ".join(str(v) for f in facts for v in f.model_dump().values() if isinstance(v, str))
        for h in diag.hypotheses:
            for st in h.next_steps:
                words = _foreign(st.command or "", device, allow_mapping=False)
                words |= _foreign(st.action, device, allow_mapping=True)
                words = {w for w in words if w not in from_facts}
                if words:
                    bad.append(f"{case.case_id}: {st.rule} gives a {device} run {sorted(words)}")
        seen_gated += 1
    assert seen_gated > 50
    assert not bad, "\n".join(bad[:20])


def test_audit_f4_gpu_target_gets_nccl_not_hccl():
    facts = FactSet([parse_fact(d) for d in (
        {"type": "run", "role": "target", "name": "target", "device": "gpu"},
        {"type": "rerun_compare", "role": "target", "run": "target", "rerun": "target_rerun", "steps_compared": 120,
         "identical": False, "first_step_identical": True, "first_diff_step": 14, "max_rel_diff": 0.0004,
         "mean_rel_diff": 0.00011},
        {"type": "determinism_status", "role": "target", "run": "target", "seed": "1234", "seed_fixed": True,
         "deterministic_algorithms": True, "comm_deterministic": False, "matmul_deterministic": True,
         "dropout_off": True, "fully_deterministic": False},
    )])
    diag = diagnose(facts, engine="python")
    top = diag.hypotheses[0]
    assert top.failure_mode == "determinism.communication_nondeterministic"
    commands = [s.command or "" for s in top.next_steps]
    assert any("NCCL_ALGO" in c for c in commands), commands
    assert not any("HCCL" in c or "LCCL" in c for c in commands), commands
    assert "?" not in " ".join(e.text for e in top.evidence)


def test_unknown_device_keeps_every_step():
    assert applies(["npu"], None) and applies(None, "gpu") and not applies(["npu"], "gpu")
    assert run_device([]) is None


def test_kb_commands_with_device_words_carry_a_device_key():
    bad = []
    for mode, entry in load_kb().items():
        for cmd in entry.commands:
            npu, gpu = device_words(cmd.command)
            if npu and gpu:
                continue  # a command that maps one side onto the other
            need = "npu" if npu else "gpu" if gpu else None
            if need and list(cmd.device or []) != [need]:
                bad.append(f"{mode}: {cmd.command!r} names {sorted(npu or gpu)} but says device {cmd.device}")
    assert not bad, "\n".join(bad)


def test_planner_does_not_ask_npu_switches_on_gpu():
    assert question_applies("vanishes_with_launch_blocking", "gpu")
    assert "CUDA_LAUNCH_BLOCKING" in question_text("vanishes_with_launch_blocking", "en", "gpu")
    assert "ASCEND" not in question_text("vanishes_with_launch_blocking", "en", "gpu")
    assert "ASCEND_LAUNCH_BLOCKING" in question_text("vanishes_with_launch_blocking", "en", "npu")
    assert not question_applies("kshift_off_fixes", "gpu")
    assert not question_applies("vanishes_with_launch_blocking", "cpu")


def test_planner_gpu_nan_run_is_not_asked_ascend_launch_blocking():
    from precdx.planner.nextbest import plan

    facts = [parse_fact(d) for d in (
        {"type": "run", "role": "target", "name": "target", "device": "gpu"},
        {"type": "nan_compare", "run": "target", "role": "target", "against": "baseline", "target_nan_count": 6,
         "baseline_nan_count": 0, "target_skipped_count": 0, "baseline_skipped_count": 0, "target_first_nan_step": 3,
         "target_max_nan_50": 6, "baseline_max_nan_50": 0, "target_max_skipped_50": 0, "baseline_max_skipped_50": 0,
         "target_overflow_events": 0, "baseline_overflow_events": 0},
    )]
    suggestions = plan(facts, limit=None)
    texts = " ".join(s.text + " " + (s.command or "") for s in suggestions)
    assert "ASCEND_LAUNCH_BLOCKING" not in texts
    assert "CLOSE_MATMUL_K_SHIFT" not in texts



@pytest.mark.parametrize("device", ("npu", "gpu"))
def test_kb_steps_of_differential_hypotheses_are_gated(device):
    """Hypotheses raised only by the symptom differential take their next steps from kb commands:
    only the commands meant for the target's device."""
    from precdx.diagnosis import _kb_steps

    kb = load_kb()
    bad = []
    for mode in kb:
        for st in _kb_steps(mode, kb, "en", device):
            if _foreign(st.command or "", device, allow_mapping=False):
                bad.append(f"{mode}: {st.command}")
    assert not bad, bad
    stomping = [st.command for st in _kb_steps("memory.stomping_multistream", kb, "en", device)]
    assert any(("CUDA_LAUNCH_BLOCKING" if device == "gpu" else "ASCEND_LAUNCH_BLOCKING") in (c or "") for c in stomping)


def test_a_kb_command_that_writes_a_rerun_script_costs_a_rerun():
    """A kb command that only writes the script of a rerun (mkdir target_rerun && sed ...) reads
    like a file operation; the step it stands for is a rerun, and is labelled so (kb `cost`)."""
    from precdx.diagnosis import _kb_steps

    kb = load_kb()
    steps = {st.command: st for st in _kb_steps("framework.overlap_param_gather", kb, "en", "npu")}
    script = next(c for c in steps if c.startswith("mkdir -p target_rerun"))
    assert steps[script].cost == "rerun" and steps[script].cost_label == "rerun a step"
    checkpoints = next(c for c in steps if c.startswith("msprobe config_check"))
    assert steps[checkpoints].cost == "read"  # (no cost given: judged from the command)
    # every kb command writing into target_rerun/ says what following it costs
    for mode, entry in kb.items():
        for c in entry.commands or []:
            if "target_rerun" in c.command and c.command.startswith("mkdir"):
                assert c.cost == "rerun", (mode, c.command)
