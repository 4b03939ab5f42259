"""The Lightning callback with the real lightning package on a tiny random module: a baseline
run watched on its own, then one with 5x the learning rate watched against it; the breach is
the first logged step, the next step is captured and replayed with the same calls."""
from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.slow  # trains with the real Lightning Trainer: outside the fast lane (pytest -m 'not slow')

from precdx.watch import replay


@pytest.fixture
def torch():
    """torch and lightning are imported when the test runs, not when the module is collected
    (lightning alone takes seconds to import)."""
    pytest.importorskip("lightning")
    return pytest.importorskip("torch")


def _fit(tmp_path, name, lr, **watch):
    import lightning.pytorch as pl

    from precdx.watch import LightningWatchCallback
    from tests.watch.lightning_parts import Tiny, loader

    cb = LightningWatchCallback(out=tmp_path / name, quiet=True, **watch)
    trainer = pl.Trainer(callbacks=[cb], max_steps=5, accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, log_every_n_steps=1,
                         default_root_dir=str(tmp_path / f"{name}_pl"))
    trainer.fit(Tiny(lr), loader())
    return cb.watcher


def test_lightning_watch_capture_and_replay(tmp_path, torch):
    from precdx.watch.lightning import lightning_step
    from tests.watch.lightning_parts import make_module

    torch.set_num_threads(1)
    base = _fit(tmp_path, "base", 1e-2)
    assert base.breach is None
    log = (tmp_path / "base" / "target" / "train.log").read_text()
    assert log.count(" iteration ") == 5 and "grad norm:" in log
    w = _fit(tmp_path, "case", 5e-2, baseline=tmp_path / "base" / "target")
    assert (w.breach.step, w.breach.check) == (1, "lr_mismatch")
    status = json.loads((tmp_path / "case" / "watch.json").read_text())
    assert [c["iteration"] for c in status["captured"]] == [2]
    assert json.loads((tmp_path / "case" / "target" / "training_config.json").read_text())["lr"] == 5e-2
    dump = replay(tmp_path / "case", 2, model_fn=make_module, step_fn=lightning_step, quiet=True)
    live = json.loads((tmp_path / "case/target/msprobe_dump/step1/rank0/dump.json").read_text())["data"]
    again = json.loads((dump / "dump.json").read_text())["data"]
    assert list(again) == list(live)
    # same weights and batch: the forward of the replay matches the live step exactly
    assert again["Functional.linear.0.forward"]["output"] == live["Functional.linear.0.forward"]["output"]
