"""Rule loading and compiling: every problem names file:line."""
import textwrap

import pytest

from precdx.errors import PrecdxError
from precdx.rulepack.compiler import compile_rules
from precdx.rulepack.loader import load_rules

GOOD = """\
schema_version: 1
id: TST-001
name: stress-flags-node
failure_modes: [hardware.faulty_node]
when:
  all:
    - fact: observation
      as: o
      where: {name: stress_test_failed, value: true}
title: {en: Stress test failed, zh: 压测失败}
explanation: {en: "stress test said {o.value}"}
next_steps:
  - action: {en: Run the stress test}
    cost: cluster
"""


def _write(tmp_path, text, name="r.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def _load(tmp_path, text):
    _write(tmp_path, text)
    return compile_rules(load_rules(tmp_path), known_modes={"hardware.faulty_node", "x.y"})


def test_good_rule_compiles(tmp_path):
    pack = _load(tmp_path, GOOD)
    assert [r.id for r in pack.rules] == ["TST-001"]


@pytest.mark.parametrize("old, new, line, msg", [
    ("name: stress-flags-node\n", "name: stress-flags-node\nname: again\n", 4, "duplicate key 'name'"),
    ("title:", "colour: red\ntitle:", 10, "unknown key 'colour'"),
    ("schema_version: 1", "schema_version: 7", 1, "unsupported schema_version"),
    ("where: {name: stress_test_failed, value: true}", "where: {nam: stress_test_failed}", 9, "no field 'nam'"),
    ("fact: observation", "fact: observatio", 7, "unknown fact type"),
    ("value: true}", "value: {gtt: 1}}", 9, "unknown operator 'gtt'"),
    ("value: true}", "value: {gt: 1}}", 9, "needs a numeric field"),
    ("name: stress_test_failed,", "name: not_a_question,", 9, "is not one of"),
    ("[hardware.faulty_node]", "[hardware.faulty_nod]", 4, "unknown failure mode"),
    ("{o.value}", "{q.value}", 11, "not bound"),
    ("{o.value}", "{o.colour}", 11, "has no field 'colour'"),
    ("    cost: cluster", "    cost: forever", 14, "cost"),
])
def test_errors_name_file_and_line(tmp_path, old, new, line, msg):
    assert old in GOOD
    with pytest.raises(PrecdxError) as exc:
        _load(tmp_path, GOOD.replace(old, new, 1))
    assert msg in exc.value.message, exc.value.render()
    assert exc.value.path.endswith("r.yaml")
    assert exc.value.line == line, exc.value.render()


def test_duplicate_rule_ids_across_files(tmp_path):
    _write(tmp_path, GOOD, "a.yaml")
    _write(tmp_path, GOOD, "b.yaml")
    with pytest.raises(PrecdxError) as exc:
        load_rules(tmp_path)
    assert "duplicate rule id 'TST-001'" in exc.value.message


def test_test_files_are_not_rules(tmp_path):
    _write(tmp_path, GOOD)
    _write(tmp_path, "cases: []\n", "r.test.yaml")
    assert len(load_rules(tmp_path)) == 1


def test_bad_regex_and_reference(tmp_path):
    with pytest.raises(PrecdxError, match="bad regex"):
        _load(tmp_path, GOOD.replace("value: true}", "value: true}\n    - fact: run\n      where: {name: {matches: '('}}"))
    with pytest.raises(PrecdxError, match="unbound alias"):
        _load(tmp_path, GOOD.replace("value: true}", "value: true}\n    - fact: run\n      where: {name: {eq: {ref: zz.name}}}"))


def test_runtime_skips_rules_of_another_schema_version(tmp_path):
    from precdx.errors import Warnings
    two = GOOD.replace("id: TST-001", "id: TST-002").replace("name: stress-flags-node", "name: other")
    (tmp_path / "r.yaml").write_text("rules:\n" + "\n".join(
        "  - " + "\n    ".join(doc.splitlines()) for doc in (GOOD, two.replace("schema_version: 1", "schema_version: 9"))))
    w = Warnings()
    loaded = load_rules(tmp_path, warnings=w, tolerant=True)
    assert [lr.rule.id for lr in loaded] == ["TST-001"]
    assert "TST-002 skipped" in w.items[0]["message"] and w.items[0]["line"]
    with pytest.raises(PrecdxError, match="unsupported schema_version"):
        load_rules(tmp_path)  # lint / strict loading still refuses it
