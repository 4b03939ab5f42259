"""End to end: every fault of the demo catalogue is diagnosed with its failure mode ranked first."""
import pytest

pytest.importorskip("torch")

from precdx import demo  # noqa: E402
from precdx.diagnosis import diagnose  # noqa: E402
from precdx.errors import Warnings  # noqa: E402
from precdx.pipeline import collect, discover  # noqa: E402

pytestmark = pytest.mark.slow  # trains, dumps or fuzzes: outside the fast lane (pytest -m 'not slow')


@pytest.mark.parametrize("fault", sorted(demo.FAULTS))
def test_fault_ranked_first(fault, tmp_path):
    case = demo.run_demo(fault, tmp_path / fault, steps=24)
    warnings = Warnings()
    diag = diagnose(collect(discover(case), warnings), engine="python", warnings=warnings)
    expected = demo.FAULTS[fault].failure_mode
    assert diag.hypotheses, f"{fault}: no hypothesis"
    assert diag.hypotheses[0].failure_mode == expected, [(h.failure_mode, h.score) for h in diag.hypotheses[:3]]
    assert diag.verdict == "misaligned"
    assert diag.hypotheses[0].next_steps, "the top hypothesis must say what to do next"
