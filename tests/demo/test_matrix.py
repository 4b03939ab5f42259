"""A small slice of the evaluation matrix (bench/matrix): one demo fault in every evidence form.
The NaN fault is chosen because each form can name it: the whole case, the dumps only, msprobe's
compare CSVs only (skipped with a reason without mindstudio-probe) and the target's dump alone."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow  # trains the demo model in every evidence form: outside the fast lane (pytest -m 'not slow')

pytest.importorskip("torch")

import importlib.util  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

_SPEC = importlib.util.spec_from_file_location(
    "evalmatrix", Path(__file__).resolve().parents[2] / "bench" / "evalmatrix.py")
evalmatrix = importlib.util.module_from_spec(_SPEC)
sys.modules["evalmatrix"] = evalmatrix   # (dataclasses look their module up there)
_SPEC.loader.exec_module(evalmatrix)
FORMS, msprobe_cli, run_matrix, summarise = (evalmatrix.FORMS, evalmatrix.msprobe_cli, evalmatrix.run_matrix,
                                             evalmatrix.summarise)


def test_nan_fault_in_every_evidence_form(tmp_path):
    cells = run_matrix(["nan_op"], [1234], FORMS, tmp_path, steps=24)
    assert [c.form for c in cells] == list(FORMS)
    for c in cells:
        if c.form == "compare_csv" and msprobe_cli() is None:
            assert c.skipped and "mindstudio-probe" in c.skipped
            continue
        assert c.skipped is None and c.top1 and c.verdict_ok, (c.form, c.top, c.verdict)
    text = summarise(cells)
    assert "per form" in text and "per fault" in text and "nan_op" in text
    assert text.splitlines()[-1].startswith("top1=")
