"""First-NaN locator and determinism self-check on tiny models with injected faults."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

from precdx.probe import check_determinism, locate_first_nan  # noqa: E402
from tests.probe.tiny_models import TinyLM, make_step  # noqa: E402


def test_locator_finds_injected_nan_op(monkeypatch):
    torch.manual_seed(0)
    model = TinyLM()
    original = F.softmax

    def broken_softmax(input, dim=None, _stacklevel=3, dtype=None):
        out = original(input, dim=dim, _stacklevel=_stacklevel, dtype=dtype)
        out.data[0, 0, 0, 0] = float("nan")
        return out

    monkeypatch.setattr(F, "softmax", broken_softmax)
    origin = locate_first_nan(model, make_step(model), step=5)
    assert origin is not None
    assert origin.api == "Functional.softmax.0.forward" and origin.step == 5
    assert origin.inputs_finite is True
    assert origin.module == "Module.attn.Attn.forward.0"
    assert "tiny_models.py" in origin.code_line and "F.softmax" in origin.code_line
    assert origin.entry["input_args"][0]["type"] == "torch.Tensor"
    # the step stopped there: nothing after the softmax ran, so no weight got a gradient
    assert all(p.grad is None for p in model.parameters())
    assert F.softmax is broken_softmax  # probe restored what it found


def test_locator_reports_nan_coming_from_a_weight():
    torch.manual_seed(0)
    model = TinyLM()
    with torch.no_grad():
        model.ln.weight[3] = float("inf")
    origin = locate_first_nan(model, make_step(model))
    assert origin.api == "Functional.layer_norm.0.forward" and origin.inputs_finite is False


def test_locator_returns_none_on_a_healthy_step():
    torch.manual_seed(0)
    model = TinyLM()
    assert locate_first_nan(model, make_step(model)) is None
    assert model.head.weight.grad is not None


@pytest.mark.slow  # trains the model several times over (the injected-fault check stays in the fast lane)
def test_determinism_passes_a_deterministic_model():
    torch.manual_seed(0)
    model = TinyLM()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    step = make_step(model)

    def train_step():
        step()
        opt.step()
        opt.zero_grad()

    before = {k: v.clone() for k, v in model.state_dict().items()}
    report = check_determinism(model, train_step, opt)
    assert report.deterministic and report.first_api is None and report.compared > 40
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_determinism_flags_injected_nondeterministic_op(monkeypatch):
    torch.manual_seed(0)
    model = TinyLM()
    original = torch.matmul
    calls = {"n": 0}

    def racy_matmul(input, other, *, out=None):
        result = original(input, other)
        calls["n"] += 1
        if calls["n"] > 2 and result.shape[-1] == result.shape[-2]:
            # the second launch accumulates in another order: a last-bit change
            result.data.view(-1)[0] = torch.nextafter(result.data.view(-1)[0], torch.tensor(1e9))
        return result

    monkeypatch.setattr(torch, "matmul", racy_matmul)
    report = check_determinism(model, make_step(model))
    assert not report.deterministic
    assert report.first_api == "Torch.matmul.0.forward"
    assert "Functional.softmax.0.forward" in report.differing
