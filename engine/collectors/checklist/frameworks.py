"""Which training framework a run was launched with, from its recognised artefacts."""
from __future__ import annotations

from precdx.collectors.base import RunDir

FRAMEWORKS = ("mindspeed", "megatron_deepspeed", "megatron", "hf_trainer", "torchtitan", "deepspeed")
# Words other collectors may use in an artefact's detail (e.g. a log recognised as "megatron").
_DETAIL_WORDS = {
    "mindspeed": "mindspeed", "mindspeed-llm": "mindspeed", "megatron_deepspeed": "megatron_deepspeed",
    "megatron-deepspeed": "megatron_deepspeed", "megatron": "megatron", "hf": "hf_trainer",
    "hf_trainer": "hf_trainer", "transformers": "hf_trainer", "torchtitan": "torchtitan",
    "deepspeed": "deepspeed",
}


def detect_framework(run: RunDir) -> str:
    """mindspeed | megatron_deepspeed | megatron | hf_trainer | torchtitan | deepspeed | unknown."""
    kinds = {(a.kind, a.detail) for a in run.artefacts}
    launch = {d for k, d in kinds if k == "config.launch"}
    has_ds_json = ("config.json", "deepspeed") in kinds
    for flavour in ("mindspeed", "megatron_deepspeed", "megatron"):
        if flavour in launch:
            if flavour == "megatron" and has_ds_json:
                return "megatron_deepspeed"
            if flavour == "megatron" and _npu_stack(run):
                return "mindspeed"
            return flavour
    if ("config.toml", "torchtitan") in kinds or "torchtitan" in launch:
        return "torchtitan"
    if any(k.startswith("config.") and d == "hf_trainer" for k, d in kinds) or "hf_trainer" in launch:
        return "hf_trainer"
    if has_ds_json or "deepspeed" in launch:
        return "deepspeed"
    for kind, detail in kinds:
        if kind.startswith("log"):
            for word in detail.lower().replace("/", " ").replace(",", " ").split():
                if word in _DETAIL_WORDS:
                    return _DETAIL_WORDS[word]
    return "unknown"


def _npu_stack(run: RunDir) -> bool:
    """MindSpeed is installed (pip) or on PYTHONPATH (env)."""
    for art in run.artefacts:
        if art.kind not in ("pip", "env"):
            continue
        try:
            with art.path.open("rb") as fh:
                head = fh.read(1024 * 1024).lower()
        except OSError:
            continue
        if b"mindspeed" in head:
            return True
    return False
