"""Tests for engine/kb.py and the kb/ entries: completeness against the canonical failure
modes, bilingual runbook quality, and loader errors that name file and line."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from precdx.errors import PrecdxError
from precdx.kb import KbEntry, clear_cache, find_kb_dir, kb_dir, load_kb
from precdx.yamlsafe import load_yaml_file

CJK = re.compile(r"[\u4e00-\u9fff]")
RUNBOOK = ("meaning", "impact", "diagnosis", "mitigation")
MSPROBE_SUBCOMMANDS = {"compare", "graph_visualize", "config_check", "overflow_check", "acc_check",
                       "multi_acc_check", "data2db", "merge_result"}


@pytest.fixture(scope="module")
def kb() -> dict[str, KbEntry]:
    return load_kb()


@pytest.fixture(scope="module")
def canonical(shared_dir: Path) -> dict[str, dict]:
    modes = load_yaml_file(str(shared_dir / "failure-modes.yaml"))
    return {m["id"]: m for m in modes}


# --- completeness against ../shared/failure-modes.yaml -------------------------------------

def test_canonical_ids_are_unique(shared_dir, canonical):
    modes = load_yaml_file(str(shared_dir / "failure-modes.yaml"))
    assert len(modes) == len(canonical) >= 40


def test_every_canonical_id_has_a_matching_entry(kb, canonical):
    missing = sorted(set(canonical) - set(kb))
    assert not missing, f"no kb entry for {missing}"
    for mode_id, mode in canonical.items():
        entry = kb[mode_id]
        assert entry.canonical, mode_id
        assert entry.title.en == mode["title"], mode_id
        assert entry.area == mode["area"], mode_id
        assert entry.verdict == mode.get("verdict", "misaligned"), mode_id
        assert entry.sources == list(mode["sources"]), mode_id


def test_every_canonical_entry_has_a_presentation(kb, canonical):
    """The symptom differential reads how each canonical mode presents (issue 16 item 6)."""
    missing = sorted(m for m in canonical if kb[m].presentation is None)
    assert not missing, f"no presentation block for {missing}"
    for mode_id in canonical:
        pres = kb[mode_id].presentation
        assert pres.symptoms, mode_id
        if pres.note is not None:
            assert not CJK.search(pres.note.en) and CJK.search(pres.note.zh), mode_id


# what a presentation's note says of the jobs a mode occurs in, and the scope that says it in a
# form the differential reads (differential.SCOPES)
SCOPE_WORDS = {"moe": r"\bMoE\b", "multi_card": r"(?i)multi-card", "fp16": r"(?i)\bfp16 runs only",
               "sequence_parallel": r"(?i)only with sequence parallelism", "sft": r"(?i)instruction-tuning mode"}


def test_a_note_that_limits_the_jobs_has_the_scope(kb):
    for mid, entry in kb.items():
        pres = getattr(entry, "presentation", None)
        note = pres.note.en if pres is not None and pres.note is not None else ""
        for scope, words in SCOPE_WORDS.items():
            if re.search(words, note):
                assert pres.scope == scope, f"{mid}: the note limits it to {scope} jobs but scope is {pres.scope}"


def test_extra_entries_are_marked_non_canonical(kb, canonical):
    for kb_id, entry in kb.items():
        assert entry.canonical == (kb_id in canonical), kb_id


# --- shape of the kb directory -------------------------------------------------------------

def test_file_name_is_id_and_ids_unique(kb):
    files = sorted(kb_dir().glob("*/*.yaml"))
    stems = [p.stem for p in files]
    assert len(stems) == len(set(stems))
    assert set(stems) == set(kb)
    for path in files:
        assert kb[path.stem].id == path.stem
        assert kb[path.stem].area == path.parent.name


def test_kb_dir_is_the_checkout_kb(repo_dir):
    assert kb_dir() == (repo_dir / "kb").resolve()


def test_kb_dir_prefers_the_wheel_pack(tmp_path):
    pkg = tmp_path / "site" / "precdx"  # the installed package
    (pkg / "_pack" / "kb").mkdir(parents=True)
    assert find_kb_dir(pkg) == pkg / "_pack" / "kb"
    checkout = tmp_path / "repo"
    (checkout / "engine").mkdir(parents=True)  # the source folder of a checkout
    (checkout / "kb").mkdir()
    assert find_kb_dir(checkout / "engine") == checkout / "kb"
    with pytest.raises(PrecdxError, match="knowledge base not found"):
        find_kb_dir(tmp_path / "nowhere" / "engine")


def test_load_kb_is_cached(kb):
    first = load_kb()
    second = load_kb()
    assert first == second
    assert first is not second  # callers get their own dict
    assert all(first[k] is second[k] for k in first)  # but the same parsed entries


# --- quality of the text -------------------------------------------------------------------

def test_runbook_sections_are_bilingual(kb):
    for kb_id, entry in kb.items():
        for field in ("title",) + RUNBOOK:
            en, zh = entry.text(field, "en"), entry.text(field, "zh")
            assert en.strip() and zh.strip(), (kb_id, field)
            assert not CJK.search(en), f"{kb_id}.{field}.en contains Chinese"
            assert CJK.search(zh), f"{kb_id}.{field}.zh is not Chinese"
        for symptom in entry.symptoms:
            assert not CJK.search(symptom.en) and CJK.search(symptom.zh), kb_id
        for cmd in entry.commands:
            assert not CJK.search(cmd.why.en) and CJK.search(cmd.why.zh), kb_id


def test_runbooks_are_substantial(kb):
    for kb_id, entry in kb.items():
        assert len(entry.diagnosis.en) >= 200, f"{kb_id}: diagnosis too thin"
        assert len(entry.mitigation.en) >= 120, f"{kb_id}: mitigation too thin"
        assert entry.commands, f"{kb_id}: no runnable next step"
        assert entry.references, kb_id


# Related ids and DK-only confidence are rules of the loader itself (load_kb refuses a kb that
# breaks them), so they are tested on bad input below (test_dangling_related_id_is_rejected,
# test_dk_only_entry_must_be_low_confidence), not by re-checking the kb the loader accepted.

def test_msprobe_commands_use_real_subcommands(kb):
    for kb_id, entry in kb.items():
        for cmd in entry.commands:
            for match in re.finditer(r"\bmsprobe\s+(?:-f\s+\w+\s+)?([a-z0-9_]+)", cmd.command):
                assert match.group(1) in MSPROBE_SUBCOMMANDS, (kb_id, cmd.command)


def test_text_accessor():
    entry = load_kb()["operator.matmul_kshift"]
    assert "CLOSE_MATMUL_K_SHIFT" in entry.text("mitigation")
    assert entry.text("meaning", "zh") == entry.meaning.zh
    with pytest.raises(PrecdxError, match="unknown language"):
        entry.text("meaning", "fr")
    with pytest.raises(PrecdxError, match="unknown kb text field"):
        entry.text("sources")


# --- loader errors name file and line -------------------------------------------------------

VALID = """\
id: verdict.sample_mode
title: {en: A sample mode, zh: 示例故障模式}
area: verdict
sources: [G3.1.1]
confidence: high
meaning: {en: It means something., zh: 含义。}
impact: {en: It matters., zh: 影响。}
diagnosis: {en: Look at it., zh: 查看。}
mitigation: {en: Fix it., zh: 修复。}
symptoms:
  - {en: loss differs, zh: loss 不一致}
commands:
  - command: export HCCL_DETERMINISTIC=true
    why: {en: fix reduction order, zh: 固定归约顺序}
references: [guide 3.1.1]
related: []
presentation:
  symptoms: {first_step_difference: typical}
  runs: target_only
  onset: step1
  step1_magnitude: large
  error_shape: one_sided
  frequency: rare
"""
PRESENTATION = VALID[VALID.index("presentation:"):]
WITHOUT_PRESENTATION = VALID.replace(PRESENTATION, "")


def _write(tmp_path: Path, text: str, name: str = "verdict.sample_mode", area: str = "verdict") -> Path:
    folder = tmp_path / area
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    clear_cache()
    return path


def _error(tmp_path: Path) -> PrecdxError:
    with pytest.raises(PrecdxError) as info:
        load_kb(tmp_path)
    return info.value


def test_valid_sample_loads(tmp_path):
    _write(tmp_path, VALID)
    entry = load_kb(tmp_path)["verdict.sample_mode"]
    assert entry.verdict == "misaligned" and entry.canonical
    assert entry.commands[0].why.get("zh") == "固定归约顺序"


def test_duplicate_key_names_file_and_line(tmp_path):
    path = _write(tmp_path, VALID + "confidence: low\n")
    err = _error(tmp_path)
    assert err.path == str(path) and err.line == 24 and "duplicate key" in err.message


def test_unknown_key_names_file_and_line(tmp_path):
    path = _write(tmp_path, VALID.replace("impact:", "severity: high\nimpact:"))
    err = _error(tmp_path)
    assert err.path == str(path) and err.line == 7 and "unknown key 'severity'" in err.message


def test_unknown_nested_key_names_its_line(tmp_path):
    _write(tmp_path, VALID.replace("    why: {en: fix", "    cost: cheap\n    why: {en: fix"))
    err = _error(tmp_path)
    assert err.line == 14 and "commands.0.cost" in err.message


def test_missing_field_names_file_and_line(tmp_path):
    path = _write(tmp_path, VALID.replace("mitigation: {en: Fix it., zh: 修复。}\n", ""))
    err = _error(tmp_path)
    assert err.path == str(path) and err.line == 1 and "missing required field 'mitigation'" in err.message


def test_missing_chinese_names_the_line(tmp_path):
    _write(tmp_path, VALID.replace("impact: {en: It matters., zh: 影响。}", "impact: {en: It matters.}"))
    err = _error(tmp_path)
    assert err.line == 7 and "impact.zh" in err.message


def test_bad_yaml_names_file_and_line(tmp_path):
    path = _write(tmp_path, VALID.replace("sources: [G3.1.1]", "sources: [G3.1.1"))
    err = _error(tmp_path)
    assert err.path == str(path) and err.line is not None and "invalid YAML" in err.message


def test_bad_enum_value_names_the_line(tmp_path):
    _write(tmp_path, VALID.replace("confidence: high", "confidence: certain"))
    err = _error(tmp_path)
    assert err.line == 5 and "confidence" in err.message


def test_unknown_source_tag_is_rejected(tmp_path):
    _write(tmp_path, VALID.replace("[G3.1.1]", "[G3.1.1, blog]"))
    err = _error(tmp_path)
    assert err.line == 4 and "unknown source tag" in err.message


def test_canonical_entry_without_presentation_is_rejected(tmp_path):
    path = _write(tmp_path, WITHOUT_PRESENTATION)
    err = _error(tmp_path)
    assert err.path == str(path) and err.line == 1 and "presentation" in err.message


def test_non_canonical_entry_may_omit_presentation(tmp_path):
    _write(tmp_path, WITHOUT_PRESENTATION + "canonical: false\n")
    entry = load_kb(tmp_path)["verdict.sample_mode"]
    assert not entry.canonical and entry.presentation is None


def test_presentation_names_known_symptom_classes_only(tmp_path):
    _write(tmp_path, VALID.replace("{first_step_difference: typical}", "{loss_goes_up: typical}"))
    err = _error(tmp_path)
    assert err.line == 18 and "unknown symptom class" in err.message


def test_presentation_values_are_checked(tmp_path):
    _write(tmp_path, VALID.replace("frequency: rare", "frequency: sometimes"))
    err = _error(tmp_path)
    assert err.line == 23 and "presentation.frequency" in err.message


def test_dk_only_entry_must_be_low_confidence(tmp_path):
    _write(tmp_path, VALID.replace("[G3.1.1]", "[DK]"))
    assert "confidence: low" in _error(tmp_path).message


def test_file_name_must_be_the_id(tmp_path):
    path = _write(tmp_path, VALID, name="verdict.other_name")
    err = _error(tmp_path)
    assert err.path == str(path) and err.line == 1 and "file name" in err.message


def test_folder_must_be_the_area(tmp_path):
    _write(tmp_path, VALID, area="hardware")
    err = _error(tmp_path)
    assert err.line == 3 and "folder" in err.message


def test_dangling_related_id_is_rejected(tmp_path):
    path = _write(tmp_path, VALID.replace("related: []", "related: [verdict.nowhere]"))
    err = _error(tmp_path)
    assert err.path == str(path) and err.line == 16 and "verdict.nowhere" in err.message


def test_duplicate_id_is_rejected(tmp_path):
    first = _write(tmp_path, VALID)
    shutil.copy(first, first.with_suffix(".yml"))
    clear_cache()
    err = _error(tmp_path)
    assert "duplicate kb id 'verdict.sample_mode'" in err.message


def test_top_level_must_be_a_mapping(tmp_path):
    _write(tmp_path, "- just\n- a list\n")
    assert "YAML mapping" in _error(tmp_path).message


def test_empty_kb_is_an_error(tmp_path):
    clear_cache()
    assert "empty" in _error(tmp_path).message


def test_area_folders_are_vocabulary_areas():
    """kb/<area>/ and rules/<area>/ folders use the areas declared once in precdx.vocabulary
    (rules/symptoms/ holds the symptom rules, which belong to no area)."""
    from precdx.paths import rules_dir
    from precdx.vocabulary import AREAS

    kb_areas = {p.name for p in kb_dir().iterdir() if p.is_dir()}
    rule_areas = {p.name for p in Path(rules_dir()).iterdir() if p.is_dir()} - {"symptoms"}
    assert kb_areas and kb_areas <= set(AREAS), sorted(kb_areas - set(AREAS))
    assert rule_areas and rule_areas <= set(AREAS), sorted(rule_areas - set(AREAS))


def test_thresholds_are_named_numbers(tmp_path):
    _write(tmp_path, VALID.replace("related: []", "related: []\nthresholds: {step_rel_err: 0.01, big_gap: 5}"))
    clear_cache()
    entry = load_kb(tmp_path)["verdict.sample_mode"]
    assert entry.thresholds == {"step_rel_err": 0.01, "big_gap": 5.0}


@pytest.mark.parametrize("text, expected", [
    ("thresholds: {Big-Gap: 5}", "snake_case"),
    ("thresholds: {big_gap: lots}", "thresholds.big_gap"),
])
def test_bad_thresholds_name_file_and_line(tmp_path, text, expected):
    path = _write(tmp_path, VALID.replace("related: []", "related: []\n" + text))
    err = _error(tmp_path)
    assert err.path == str(path) and expected in err.message and err.line == 17
