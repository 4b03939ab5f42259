"""Small rule packs and knowledge bases written to tmp_path for the rulepack, lint and audit tests.

`use_kb` points the engine at a tiny knowledge base so these tests never depend on the
state of the real kb/; `rule_doc` is a rule that passes every lint check, and `good_cases`
its positive, negative and insufficient-evidence cases.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

# id -> (area folder, canonical, verdict)
KB_MODES: dict[str, tuple[str, bool, str]] = {
    "config.hyperparameter_mismatch": ("checklist", True, "misaligned"),
    "config.precision_mismatch": ("checklist", True, "misaligned"),
    "operator.precision_defect": ("operator", True, "misaligned"),
    "aligned.within_noise": ("verdict", True, "aligned"),
    "rl.train_infer_mismatch": ("framework", False, "misaligned"),
}


def _text(s: str) -> dict[str, str]:
    return {"en": s, "zh": s + "（中文）"}


def write_kb(root: Path, modes: dict[str, tuple[str, bool, str]] | None = None) -> Path:
    for mid, (area, canonical, verdict) in (modes or KB_MODES).items():
        entry = {
            "id": mid, "title": _text(f"Title of {mid}"), "area": area, "verdict": verdict,
            "sources": ["G2.2"], "canonical": canonical, "confidence": "high",
            "meaning": _text("meaning"), "impact": _text("impact"), "diagnosis": _text("diagnosis"),
            "mitigation": _text("mitigation"), "symptoms": [_text("symptom")], "references": ["G2.2"],
            "presentation": {"symptoms": {"first_step_difference": "typical"}, "runs": "target_only",
                             "onset": "step1", "step1_magnitude": "small", "error_shape": "one_sided",
                             "frequency": "common"},
        }
        folder = root / area
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{mid}.yaml").write_text(yaml.safe_dump(entry, allow_unicode=True, sort_keys=False),
                                           encoding="utf-8")
    return root


def clear_engine_caches() -> None:
    from precdx import kb, modes
    from precdx.diagnosis import reset_cache

    kb.clear_cache()
    modes.mode_catalog.cache_clear()
    reset_cache()


def use_kb(monkeypatch, root: Path) -> Path:
    """Make `load_kb()` (and so the mode catalogue and diagnose) read the kb at `root`."""
    import precdx.kb

    monkeypatch.setattr(precdx.kb, "kb_dir", lambda: root)
    clear_engine_caches()
    return root


BASE_RULE: dict[str, Any] = {
    "schema_version": 1,
    "id": "TST-001",
    "name": "hyperparameter-differs",
    "failure_modes": ["config.hyperparameter_mismatch"],
    "precision": 0.8,
    "when": {"all": [{"fact": "config_diff", "as": "d",
                      "where": {"category": "hyperparameter", "relevant": True, "rel_change": {"gt": 0.1}}}]},
    "title": {"en": "A hyperparameter differs", "zh": "超参数不一致"},
    "explanation": {"en": "{d.name} differs by {d.rel_change:.1%}", "zh": "{d.name} 相差 {d.rel_change:.1%}"},
    "next_steps": [{"action": {"en": "Align the setting", "zh": "对齐该配置"},
                    "command": "grep -n {d.name} train.sh", "cost": "read"}],
    "false_positives": [{"en": "An intended change", "zh": "有意的修改"}],
    "references": ["G2.2"],
}


def rule_doc(**overrides: Any) -> dict[str, Any]:
    doc = copy.deepcopy(BASE_RULE)
    for key, value in overrides.items():
        if value is None:
            doc.pop(key, None)
        else:
            doc[key] = value
    return doc


def diff_fact(name: str = "lr", rel_change: float = 1.0, category: str = "hyperparameter",
              relevant: bool = True) -> dict[str, Any]:
    return {"type": "config_diff", "pair": "target~baseline", "role": "target", "ref_role": "baseline",
            "name": name, "category": category, "baseline": "1", "target": str(1 + rel_change),
            "presence": "both", "rel_change": rel_change, "relevant": relevant}


def good_cases(rule_id: str = "TST-001", top: str | None = "config.hyperparameter_mismatch") -> list[dict]:
    pos: dict[str, Any] = {"id": "positive-lr-doubled", "rule": rule_id, "kind": "positive", "facts": [diff_fact()]}
    if top:
        pos["top"] = top
    return [
        pos,
        {"id": "negative-lr-within-tolerance", "rule": rule_id, "kind": "negative",
         "facts": [diff_fact(rel_change=0.01)]},
        {"id": "insufficient-no-config", "rule": rule_id, "kind": "insufficient", "facts": []},
    ]


def write_rule(folder: Path, doc: dict[str, Any] | list[dict[str, Any]], name: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if isinstance(doc, list):
        body, stem = {"rules": doc}, name or doc[0]["id"].lower()
    else:
        body, stem = doc, name or doc["id"].lower()
    path = folder / f"{stem}.yaml"
    path.write_text(yaml.safe_dump(body, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


def write_cases(folder: Path, cases: list[dict[str, Any]], name: str = "tst-001") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.test.yaml"
    path.write_text(yaml.safe_dump({"cases": cases}, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


def good_pack(folder: Path) -> Path:
    write_rule(folder, rule_doc())
    write_cases(folder, good_cases())
    return folder
