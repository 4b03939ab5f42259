"""The HF Trainer callback with the real transformers package on a tiny random GPT-2: a
baseline run watched on its own (sanity only), then a run with 4x the learning rate watched
against it: caught at the first logged step, next step captured, replayed, diagnosed."""
from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.slow  # trains with the real transformers Trainer: outside the fast lane (pytest -m 'not slow')

from precdx.diagnosis import diagnose
from precdx.errors import Warnings
from precdx.pipeline import collect, discover
from precdx.watch import replay

STEPS = 6


@pytest.fixture
def torch():
    """torch and transformers are imported when the test runs, not when the module is collected
    (transformers alone takes seconds to import)."""
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    return pytest.importorskip("torch")


def _train(tmp_path, name, lr, **watch):
    from transformers import Trainer, TrainingArguments

    from precdx.watch import HFWatchCallback
    from tests.watch.hf_parts import Sequences, make_model

    args = TrainingArguments(output_dir=str(tmp_path / f"{name}_out"), max_steps=STEPS, logging_steps=1,
                             learning_rate=lr, per_device_train_batch_size=4, report_to=[], use_cpu=True,
                             save_strategy="no", seed=7, data_seed=7, max_grad_norm=1.0,
                             dataloader_num_workers=0, disable_tqdm=True, lr_scheduler_type="constant")
    cb = HFWatchCallback(out=tmp_path / name, quiet=True, **watch)
    Trainer(model=make_model(), args=args, train_dataset=Sequences(), callbacks=[cb]).train()
    return cb.watcher


def test_hf_trainer_watch_capture_replay_diagnose(tmp_path, torch):
    from tests.watch.hf_parts import make_model

    torch.set_num_threads(1)
    base = _train(tmp_path, "base", 1e-3)
    assert base.breach is None and (tmp_path / "base" / "target" / "train.log").is_file()
    w = _train(tmp_path, "case", 4e-3, baseline=tmp_path / "base" / "target")
    assert w.breach is not None and w.breach.step == 1 and w.breach.check == "lr_mismatch"
    status = json.loads((tmp_path / "case" / "watch.json").read_text())
    assert [c["iteration"] for c in status["captured"]] == [2]
    assert (tmp_path / "case" / "target" / "msprobe_dump" / "step1" / "rank0" / "dump.json").is_file()
    # both sides of the captured step, through the same calls as the Trainer's training_step
    dump = replay(tmp_path / "case", 2, model_fn=make_model, step_fn="precdx.watch.hf:trainer_step", quiet=True)
    target = json.loads((tmp_path / "case" / "target" / "msprobe_dump" / "step1" / "rank0" / "dump.json").read_text())
    base_dump = json.loads((dump / "dump.json").read_text())
    assert list(base_dump["data"]) == list(target["data"])  # same calls recorded on both sides
    warnings = Warnings()
    diag = diagnose(collect(discover(tmp_path / "case"), warnings), engine="python", warnings=warnings)
    assert diag.verdict == "misaligned"
    assert diag.hypotheses[0].failure_mode == "config.hyperparameter_mismatch", \
        [(h.failure_mode, h.score) for h in diag.hypotheses[:3]]
