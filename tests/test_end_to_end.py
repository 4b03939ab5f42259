"""End to end on the shared scenarios (read in place): the expected failure mode ranks first,
the verdict matches, and the named API / host / configuration key appears in the evidence of the
top hypothesis. A regression net for the whole pipeline, not a tuning target: no code path
knows any case."""
import json

import pytest
import yaml
from click.testing import CliRunner

from precdx.cli import main


def _cases(shared_dir):
    root = shared_dir / "scenarios"
    return sorted(p for p in root.iterdir() if (p / "expected.yaml").is_file())


def test_scenarios(shared_dir):
    runner = CliRunner()
    failures = []
    cases = _cases(shared_dir)
    assert cases
    for case in cases:
        exp = yaml.safe_load((case / "expected.yaml").read_text())
        res = runner.invoke(main, ["diagnose", str(case), "--format", "json"])
        assert res.exit_code == 0, (case.name, res.output[-500:])
        out = json.loads(res.output)
        top = out["hypotheses"][0] if out["hypotheses"] else None
        if top is None or top["failure_mode"] not in exp["failure_modes"]:
            failures.append(f"{case.name}: expected {exp['failure_modes']}, got {top and top['failure_mode']}")
            continue
        if out["verdict"] != exp["verdict"]:
            failures.append(f"{case.name}: verdict {out['verdict']} != {exp['verdict']}")
        text = json.dumps(top["evidence"], ensure_ascii=False)
        for key in ("api", "node", "key"):
            if exp.get(key) and str(exp[key]) not in text:
                failures.append(f"{case.name}: {key} {exp[key]!r} not named in the top hypothesis evidence")
    assert not failures, "\n".join(failures)


def test_json_output_matches_schema(shared_dir):
    from precdx.diagnosis import Diagnosis
    runner = CliRunner()
    case = _cases(shared_dir)[0]
    res = runner.invoke(main, ["diagnose", str(case), "--format", "json"])
    Diagnosis.model_validate_json(res.output)
    schema = json.loads(runner.invoke(main, ["schema"]).output)
    assert {"verdict", "hypotheses", "facts", "warnings", "symptoms"} <= set(schema["properties"])


@pytest.mark.slow  # the rule cases run under both matchers in the fast lane
def test_engines_agree_on_scenarios(shared_dir):
    """The durable-rules matcher and the Python reference evaluator rank the same modes with the
    same scores on every scenario."""
    from precdx.diagnosis import diagnose
    from precdx.errors import Warnings
    from precdx.pipeline import collect, discover
    for case in _cases(shared_dir):
        w = Warnings()
        facts = collect(discover(case, warnings=w), w)
        a = diagnose(facts, engine="durable", warnings=w, with_near_misses=False)
        b = diagnose(facts, engine="python", warnings=w, with_near_misses=False)
        assert a.engine != b.engine
        assert [(h.failure_mode, h.score) for h in a.hypotheses] == [(h.failure_mode, h.score) for h in b.hypotheses], \
            case.name
