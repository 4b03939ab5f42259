"""msprobe entry names: splitting `Functional.gelu.0.forward` / `Module.a.b.Class.forward.0`
into API name, call index and direction, and sorting APIs into operator families."""
from __future__ import annotations

import re
from dataclasses import dataclass

_API = re.compile(r"^(?P<base>.+)\.(?P<index>\d+)\.(?P<dir>forward|backward)$")
_MODULE = re.compile(r"^(?P<base>(?:Module|Cell)\..+)\.(?P<dir>forward|backward|parameters_grad)\.(?P<index>\d+)$")
_DEBUG = re.compile(r"^(?P<base>.+)\.(?P<index>\d+)\.debug$")
_MODULE_PREFIXES = ("Module.", "Cell.")


@dataclass(frozen=True)
class EntryName:
    """One dump entry name, taken apart."""

    full: str
    base: str          # Functional.gelu, or Module.decoder.layers.0.mlp.MLP
    index: int
    direction: str     # forward | backward | parameters_grad | debug | unknown
    is_module: bool

    @property
    def module_path(self) -> str | None:
        """`decoder.layers.0.mlp` for `Module.decoder.layers.0.mlp.MLP` (class dropped)."""
        if not self.is_module:
            return None
        parts = self.base.split(".")[1:-1]
        while len(parts) > 1 and parts[0] == "module":
            parts = parts[1:]  # DDP/Float16Module wrappers add "module." levels users never write
        return ".".join(parts) or None


def parse_entry_name(name: str) -> EntryName:
    """Split a dump entry name; unknown shapes keep the whole name as the base."""
    m = _MODULE.match(name) if name.startswith(_MODULE_PREFIXES) else None   # _MODULE needs the prefix
    if m:
        return EntryName(name, m["base"], int(m["index"]), m["dir"], True)
    m = _API.match(name)
    if m:
        return EntryName(name, m["base"], int(m["index"]), m["dir"], m["base"].startswith(("Module.", "Cell.")))
    m = _DEBUG.match(name)
    if m:
        return EntryName(name, m["base"], int(m["index"]), "debug", False)
    return EntryName(name, name, 0, "unknown", name.startswith(("Module.", "Cell.")))


def module_path_of(module_entry: str) -> str | None:
    """Module path (no prefix, no class, no direction) of a construct.json module node."""
    parsed = parse_entry_name(module_entry)
    return parsed.module_path if parsed.is_module else None


# Ordered: the first pattern that matches the lower-cased API name (without prefix) wins.
_FAMILY_PATTERNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("fused_attention", ("fusion_attention", "flash_attention", "flash_attn", "scaled_dot_product",
                         "npu_fusion_attention", "prompt_flash", "incre_flash", "ring_attention")),
    # torch.gather/scatter are indexing ops: only collective names count as communication
    ("communication", ("all_reduce", "allreduce", "all_gather", "allgather", "reduce_scatter",
                       "all_to_all", "alltoall", "broadcast", "isend", "irecv", "send", "recv",
                       "hcom", "hccl")),
    ("softmax", ("softmax", "softmin")),
    ("norm", ("layer_norm", "layernorm", "rms_norm", "rmsnorm", "group_norm", "batch_norm",
              "instance_norm", "normalize", "npu_rms_norm", "add_rms_norm")),
    ("loss", ("cross_entropy", "nll_loss", "mse_loss", "l1_loss", "kl_div", "binary_cross_entropy",
              "smooth_l1", "huber", "ctc_loss", "margin")),
    ("embedding", ("embedding", "rotary", "rope")),
    ("attention", ("attention", "baddbmm")),
    ("matmul", ("matmul", "linear", "bmm", "addmm", "mm", "einsum", "conv", "grouped_matmul",
                "gmm", "__matmul__", "dot", "mv", "outer", "tensordot", "quant_matmul")),
    ("activation", ("gelu", "relu", "silu", "swiglu", "sigmoid", "tanh", "mish", "elu", "selu",
                    "softplus", "hardswish", "leaky_relu", "glu", "fast_gelu", "swish")),
    ("dropout", ("dropout",)),
    ("optimizer", ("adam", "sgd", "lerp", "addcdiv", "addcmul", "clip_grad", "foreach", "lamb",
                   "_fused_adamw")),
)
_ELEMENTWISE = ("add", "sub", "mul", "div", "truediv", "pow", "sqrt", "rsqrt", "exp", "log", "neg",
                "abs", "masked_fill", "where", "clamp", "max", "min", "mean", "sum", "cumsum", "sign",
                "square", "reciprocal", "erf", "cos", "sin", "or", "and", "eq", "ne", "lt", "gt",
                "le", "ge", "fill", "zero", "copy", "cat", "stack", "split", "chunk", "triu", "tril",
                "norm", "var", "std", "prod", "floor", "ceil", "round", "iadd", "imul", "isub")


def _words(name: str) -> list[str]:
    return [w for w in re.split(r"[^a-z0-9]+", name.lower()) if w]


def api_family(api_name: str) -> str:
    """Operator family of an API name such as `Functional.gelu` or `NPU.npu_fusion_attention`."""
    if api_name.startswith(("Module.", "Cell.")):
        return "module"
    prefix, _, rest = api_name.partition(".")
    lowered = (rest or prefix).lower()
    if prefix == "Distributed":
        return "communication"
    words = _words(lowered)
    joined = "_".join(words)
    for family, patterns in _FAMILY_PATTERNS:
        for pattern in patterns:
            p = pattern.strip("_")
            if family in ("communication", "matmul") and len(p) <= 4:
                # short names (mm, dot, send, recv) only as whole words, not inside others
                if p in words:
                    return family
                continue
            if p in joined:
                return family
    stripped = [w for w in words if w not in ("npu", "torch", "tensor", "functional")]
    if any(w.strip("_") in _ELEMENTWISE or w.rstrip("_") in _ELEMENTWISE for w in stripped):
        return "elementwise"
    return "other"


def param_family(param: str) -> str:
    """Kind of a model parameter from its name (monitor tables, checkpoints)."""
    p = param.lower()
    if "embed" in p or "wte" in p or "wpe" in p:
        return "embedding"
    if "norm" in p or re.search(r"(^|\.)ln(_?\w*)?(\.|$)", p):
        return "norm"
    if "attn" in p or "attention" in p or "qkv" in p or "q_proj" in p or "k_proj" in p \
            or "v_proj" in p or "o_proj" in p or "linear_proj" in p:
        return "attention"
    if "mlp" in p or "fc1" in p or "fc2" in p or "ffn" in p or "gate" in p or "up_proj" in p \
            or "down_proj" in p or "expert" in p:
        return "mlp"
    if "output_layer" in p or "lm_head" in p or p.startswith("head") or ".head." in p:
        return "output"
    return "other"
