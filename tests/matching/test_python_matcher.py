"""Reference semantics of the Python matcher."""
import textwrap

from precdx.facts import parse_fact
from precdx.matching.python_engine import PythonMatcher, near_misses
from precdx.rulepack.compiler import compile_rules
from precdx.rulepack.loader import load_rules


def _pack(tmp_path, when: str):
    head = "schema_version: 1\nid: TST-001\nname: t\nfailure_modes: [x.y]\nwhen:\n"
    tail = "title: {en: t}\nexplanation: {en: t}\n"
    (tmp_path / "r.yaml").write_text(head + textwrap.indent(textwrap.dedent(when), "  ") + tail)
    return compile_rules(load_rules(tmp_path))


def F(**kw):
    return parse_fact(kw)


def obs(name, value=None, number=None):
    d = {"type": "observation", "name": name}
    if value is not None:
        d["value"] = value
    if number is not None:
        d["number"] = number
    return parse_fact(d)


def test_missing_field_makes_ne_and_not_in_false(tmp_path):
    pack = _pack(tmp_path, """\
        all:
          - fact: observation
            where: {number: {ne: 1.0}}
        """)
    m = PythonMatcher(pack)
    assert m.run([obs("sgd_aligns", number=2.0)])
    assert not m.run([obs("sgd_aligns", value=True)])          # number missing
    assert not m.run([obs("sgd_aligns", number="nan")])        # non-finite counts as missing


def test_nonfinite_and_exists(tmp_path):
    pack = _pack(tmp_path, """\
        all:
          - fact: observation
            where: {number: {nonfinite: true}}
        """)
    m = PythonMatcher(pack)
    assert m.run([obs("sgd_aligns", number="inf")])
    assert not m.run([obs("sgd_aligns", number=1e-05)])


def test_join_distinct_and_scale(tmp_path):
    pack = _pack(tmp_path, """\
        all:
          - fact: observation
            as: a
            where: {name: sgd_aligns}
          - fact: observation
            as: b
            where: {number: {gt: {ref: a.number, scale: 2}}}
        """)
    m = PythonMatcher(pack)
    assert m.run([obs("sgd_aligns", number=1.0), obs("lr_zero_aligns", number=3.0)])
    assert not m.run([obs("sgd_aligns", number=1.0), obs("lr_zero_aligns", number=1.5)])
    # a fact never binds two patterns: a lone fact cannot satisfy a > 2a
    assert not m.run([obs("sgd_aligns", number=-1.0)])


def test_none_with_same_type_is_order_independent(tmp_path):
    pack = _pack(tmp_path, """\
        all:
          - fact: observation
            where: {name: stress_test_failed, value: true}
        none:
          - fact: observation
            where: {name: reproduces_on_rerun, value: true}
        """)
    m = PythonMatcher(pack)
    a, b = obs("stress_test_failed", True), obs("reproduces_on_rerun", True)
    assert not m.run([a, b]) and not m.run([b, a])
    assert m.run([a, obs("reproduces_on_rerun", False)])


def test_any_alternatives_and_regex(tmp_path):
    pack = _pack(tmp_path, """\
        any:
          - fact: run
            where: {name: {matches: 'group0[0-9]'}}
          - fact: observation
            where: {name: stress_test_failed}
        """)
    m = PythonMatcher(pack)
    assert m.run([F(type="run", role="target", name="group03")])
    assert not m.run([F(type="run", role="target", name="group13")])
    fired = m.run([F(type="run", role="target", name="group03"), obs("stress_test_failed", True)])
    assert {f.alternative for f in fired} == {0, 1}


def test_near_miss_names_the_missing_condition(tmp_path):
    pack = _pack(tmp_path, """\
        all:
          - fact: run
            where: {role: target, steps: {gt: 100}}
        """)
    misses = near_misses(pack, [F(type="run", role="target", steps=50)], fired=set())
    assert misses and "steps > 100" in misses[0].missing
