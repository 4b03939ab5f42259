"""`precdx ask`: scripted consultations reach the expected hypothesis with fewer questions than
the full case has facts; answers may be corrected, skipped, or piped in on stdin."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from precdx.planner.consult import consult
from tests.planner.conftest import CASES, PACK, RUNS, facts_of


def oracle(full: list[dict]):
    """Answers each question as the full case says; 'skip' for what the case does not know."""
    truth = {d["name"]: d["value"] for d in full if d["type"] == "observation"}
    return lambda s: ("yes" if truth[s.id] else "no") if s.id in truth else "skip"


@pytest.mark.parametrize("case", sorted(CASES))
def test_consultation_reaches_the_expected_top_hypothesis_with_fewer_questions_than_facts(case):
    full, expected = CASES[case]
    lines: list[str] = []
    result = consult(facts_of(RUNS), rules_path=str(PACK), prompt=oracle(full), echo=lines.append)
    assert result.reason == "dominant"
    assert result.diagnosis.hypotheses[0].failure_mode == expected
    assert len(result.asked) < len(full), result.asked
    assert len(set(result.asked)) == len(result.asked)  # never the same question twice
    assert any("dominates" in line for line in lines)


def test_the_cheapest_decisive_question_comes_first():
    result = consult(facts_of(RUNS), rules_path=str(PACK), prompt=oracle(CASES["kshift"][0]), echo=lambda _: None)
    assert result.asked == ["same_checkpoint", "kshift_off_fixes"]


def test_skipping_everything_ends_when_nothing_useful_is_left():
    asked: list[str] = []

    def skip(s):
        asked.append(s.id)
        return "skip"
    result = consult(facts_of(RUNS), rules_path=str(PACK), prompt=skip, echo=lambda _: None, max_questions=50)
    assert result.reason == "exhausted"
    assert len(asked) == len(set(asked)) > 5
    assert not result.diagnosis.hypotheses


def test_a_bad_answer_is_asked_again_and_quit_stops():
    answers = iter(["maybe", "yes", "quit"])
    lines: list[str] = []
    result = consult(facts_of(RUNS), rules_path=str(PACK), prompt=lambda s: next(answers), echo=lines.append)
    assert result.reason == "quit"
    assert result.asked == ["same_checkpoint"] and result.answers == {"same_checkpoint": "yes"}
    assert any("takes yes, no or skip" in line for line in lines)
    assert any(line == "Stopped." for line in lines)


def test_question_budget():
    result = consult(facts_of(RUNS), rules_path=str(PACK), prompt=lambda s: "yes", echo=lambda _: None,
                     max_questions=1)
    assert result.reason == "budget" and result.asked == ["same_checkpoint"]


def test_chinese_consultation():
    lines: list[str] = []
    full, expected = CASES["kshift"]
    result = consult(facts_of(RUNS), rules_path=str(PACK), lang="zh", prompt=oracle(full), echo=lines.append)
    assert result.diagnosis.hypotheses[0].failure_mode == expected
    text = "\n".join(lines)
    assert "两侧是否从同一份权重" in text and "占主导" in text


def test_precdx_ask_reads_answers_from_stdin(tmp_path, repo_dir):
    """The CLI consultation, scripted: answers piped in, one per line, in the order the engine
    asks (taken from an in-process run of the same consultation)."""
    full, expected = CASES["nondeterministic_op"]
    plan_run = consult(facts_of(RUNS), rules_path=str(PACK), prompt=oracle(full), echo=lambda _: None)
    truth = {d["name"]: d["value"] for d in full if d["type"] == "observation"}
    script = "".join({True: "yes", False: "no", None: "skip"}[truth.get(q)] + "\n" for q in plan_run.asked)
    facts_file = tmp_path / "runs.yaml"
    facts_file.write_text("facts:\n" + "".join(
        f"  - {{type: run, role: {r['role']}, name: {r['name']}, device: {r['device']}}}\n" for r in RUNS))
    env = dict(os.environ, PRECDX_RULES_DIR=str(PACK))
    proc = subprocess.run([sys.executable, str(repo_dir / "cli.py"), "ask", "--facts", str(facts_file)],
                          input=script, capture_output=True, text=True, env=env, cwd=repo_dir, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"({expected}) dominates" in proc.stdout
    assert f"{len(plan_run.asked)} question(s) asked." in proc.stdout
    assert len(plan_run.asked) < len(full)


def test_precdx_ask_stops_cleanly_at_end_of_input(tmp_path, repo_dir):
    facts_file = tmp_path / "runs.yaml"
    facts_file.write_text("- {type: run, role: target, name: target}\n")
    env = dict(os.environ, PRECDX_RULES_DIR=str(PACK))
    proc = subprocess.run([sys.executable, str(repo_dir / "cli.py"), "ask", "--facts", str(facts_file)],
                          input="yes\n", capture_output=True, text=True, env=env, cwd=repo_dir, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Stopped." in proc.stdout and "1 question(s) asked." in proc.stdout


def test_one_run_alone_opens_with_the_reference_before_any_question():
    lines: list[str] = []
    alone = [{"type": "run", "role": "target", "name": "target", "framework": "megatron", "device": "npu",
              "has_log": True}]
    result = consult(facts_of(alone), rules_path=str(PACK), prompt=lambda s: "quit", echo=lines.append)
    assert result.reason == "quit"
    head = lines[:lines.index(next(line for line in lines if line.startswith("First add the reference")))]
    assert head[1].startswith("One run and nothing to compare it with") and len(head) >= 3
    assert any("Add the baseline run's training log" in line for line in lines)
    # with the baseline's run there as well (a consultation from no artefact), questions come first
    lines.clear()
    consult(facts_of(RUNS), rules_path=str(PACK), prompt=lambda s: "quit", echo=lines.append)
    assert not any(line.startswith(("One run and nothing", "First add the reference")) for line in lines)


def test_a_consultation_from_nothing_classifies_the_symptom_first():
    """Only what a person says (no run, no log): the procedure starts from the symptom class, so
    the first questions are the symptom ones (NaN, first-step gap, later drift, spikes, a worse
    downstream metric), not a question about one failure mode. A 'yes' establishes the symptom:
    the verdict follows from it and the differential ranks the modes that present that way;
    further questions are then about causes."""
    from precdx.differential import SYMPTOM_QUESTIONS

    classify = {*SYMPTOM_QUESTIONS, "downstream_metric_gap"}
    skipped = consult(facts_of([]), prompt=lambda s: "skip", echo=lambda _: None, max_questions=5)
    assert set(skipped.asked) == classify
    nan = consult(facts_of([]), prompt=lambda s: "yes" if s.id == "target_loss_nan" else "skip",
                  echo=lambda _: None, max_questions=6)
    assert "target_loss_nan" in nan.asked and set(nan.asked[:nan.asked.index("target_loss_nan")]) <= classify
    later = nan.asked[nan.asked.index("target_loss_nan") + 1:]
    # the symptom is known: the rest asks about causes, not about what the model does downstream
    assert later and not set(later) & (classify | {"generation_never_stops", "wrong_first_token"})
    d = nan.diagnosis
    assert d.verdict == "misaligned" and "nan_overflow" in d.profile.symptoms
    assert d.hypotheses and d.hypotheses[0].failure_mode.startswith(("nan.", "numerics.", "memory."))
    # a first-step gap reported: a step-1 profile, the modes that present at step 1
    s1 = consult(facts_of([]), prompt=lambda s: "yes" if s.id == "first_step_loss_off" else "skip",
                 echo=lambda _: None, max_questions=2)
    assert s1.diagnosis.profile.onset == "step1" and s1.diagnosis.hypotheses
    # with runs or curves collected, the symptom questions are not asked (the artefacts tell)
    assert not set(consult(facts_of(RUNS), rules_path=str(PACK), prompt=lambda s: "skip",
                           echo=lambda _: None, max_questions=50).asked) & set(SYMPTOM_QUESTIONS)
