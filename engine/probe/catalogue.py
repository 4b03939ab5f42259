"""Which torch callables the probe wraps, and under which msprobe prefix and name.

Built from torch's own list of ``__torch_function__``-overridable callables, so it follows
the installed torch instead of a hand-kept list. Also owns the "low risk" set: shape, cast
and creation ops that msprobe's default ``risk_level: FOCUS`` keeps out of dump.json but
still names in construct.json.
"""
from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any, Callable

# Tensor members that read metadata, convert to Python or manage autograd: they are not
# numerical operators, and wrapping them would dump noise (and slow every attribute access).
_TENSOR_SKIP = frozenset({
    "__array__", "__array_wrap__", "__bool__", "__complex__", "__contains__", "__deepcopy__",
    "__dlpack__", "__dlpack_device__", "__float__", "__format__", "__hash__", "__index__",
    "__int__", "__iter__", "__len__", "__long__", "__nonzero__", "__reduce_ex__", "__repr__",
    "__reversed__", "__setstate__", "__torch_function__", "__torch_dispatch__",
    "backward", "register_hook", "register_post_accumulate_grad_hook", "retain_grad",
    "requires_grad_", "data_ptr", "const_data_ptr", "dim", "dim_order", "element_size",
    "get_device", "is_coalesced", "is_complex", "is_conj", "is_contiguous", "is_distributed",
    "is_floating_point", "is_inference", "is_neg", "is_nonzero", "is_pinned", "is_same_size",
    "is_set_to", "is_shared", "is_signed", "item", "tolist", "numpy", "numel", "nelement",
    "size", "stride", "storage", "storage_offset", "untyped_storage", "storage_type",
    "type", "share_memory_", "pin_memory", "map_", "apply_", "record_stream",
    "_is_view", "ndimension", "has_names", "refine_names", "rename", "rename_", "align_to",
    "dense_dim", "sparse_dim", "hash_tensor", "module_load", "cpu", "cuda", "ipu", "xpu",
    # copies, views and allocations msprobe does not wrap either: keeping them out keeps the
    # construct.json of both tools the same
    "view", "contiguous", "detach", "detach_", "__getitem__", "clone", "new_zeros", "new_ones",
    "new_empty", "new_full", "new_tensor", "zero_", "copy_",
})

_TORCH_SKIP = frozenset({
    "is_tensor", "is_storage", "is_complex", "is_floating_point", "is_nonzero", "numel",
    "is_same_size", "is_signed", "is_inference", "is_conj", "is_neg", "result_type",
    "can_cast", "promote_types", "get_device", "broadcast_shapes", "typename",
    # random draws and plain allocations carry no computed value worth comparing
    "rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "randperm",
    "zeros", "ones", "empty", "zeros_like", "ones_like", "empty_like", "empty_strided",
    "tensor", "as_tensor", "from_numpy", "manual_seed", "seed",
})

# Shape, cast and creation ops: msprobe's default FOCUS level names them in construct.json only.
LOW_RISK = frozenset({
    "squeeze", "unsqueeze", "reshape", "reshape_as", "view", "view_as", "flatten", "unflatten",
    "expand", "expand_as", "repeat", "repeat_interleave", "tile", "transpose", "permute",
    "moveaxis", "movedim", "swapaxes", "swapdims", "chunk", "unsafe_chunk", "split",
    "split_with_sizes", "unsafe_split", "unsafe_split_with_sizes", "tensor_split", "hsplit",
    "vsplit", "dsplit", "unbind", "stack", "cat", "concat", "concatenate", "hstack", "vstack",
    "dstack", "column_stack", "row_stack", "align_as", "align_to", "atleast_1d", "atleast_2d",
    "atleast_3d", "ravel", "clamp", "unfold", "type_as", "to", "float", "double", "int", "long",
    "half", "bfloat16", "byte", "char", "bool", "cfloat", "numpy", "empty", "empty_like",
    "zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "arange", "linspace",
    "logspace", "eye", "identity", "diag", "diagflat", "diag_embed", "triu", "tril",
    "triu_indices", "tril_indices", "clone", "__bool__", "stride",
})


@dataclass(frozen=True)
class WrapTarget:
    """One attribute to wrap: ``owner.attr`` is reported as ``{prefix}.{attr}``."""

    owner: Any
    attr: str
    prefix: str
    original: Callable
    owned: bool  # True if the attribute lives in owner.__dict__ (restore) else inherited (delete)


def _is_routine(obj: Any) -> bool:
    return isinstance(obj, (types.FunctionType, types.BuiltinFunctionType,
                            types.MethodDescriptorType, types.WrapperDescriptorType,
                            types.BuiltinMethodType))


def _wrappable_names() -> dict[str, list[str]]:
    """Names (not objects) per prefix, read from torch's pristine namespaces.

    Computed once at import, before anything (the demo's emulated device, another tool) has
    replaced a callable: a replaced ``F.gelu`` is still wrapped, under its real name.
    """
    import torch
    import torch.nn.functional as F
    from torch.overrides import get_overridable_functions

    overridable = get_overridable_functions()
    names: dict[str, list[str]] = {"Functional": [], "Torch": [], "Tensor": []}
    functional_ids: set[int] = set()
    f_ids = {id(f) for f in overridable.get(F, [])}
    for name in sorted(dir(F)):
        obj = getattr(F, name)
        if name.startswith("_") or not _is_routine(obj):
            continue
        module = getattr(obj, "__module__", "") or ""
        if module not in ("torch.nn.functional", "torch._C._nn") and id(obj) not in f_ids:
            continue
        if name.startswith(("has_torch_function", "handle_torch_function", "boolean_dispatch",
                            "assert_int_or_pair")):
            continue
        names["Functional"].append(name)
        functional_ids.add(id(obj))

    torch_ids = {id(f) for f in overridable.get(torch, [])}
    for name in sorted(dir(torch)):
        if name.startswith("_") or name in _TORCH_SKIP:
            continue
        obj = getattr(torch, name, None)
        if obj is not None and id(obj) in torch_ids and id(obj) not in functional_ids:
            names["Torch"].append(name)

    tensor_ids = {id(f) for f in overridable.get(torch.Tensor, [])}
    for name in sorted(dir(torch.Tensor)):
        if name in _TENSOR_SKIP or (name.startswith("_") and not name.startswith("__")):
            continue
        raw = torch.Tensor.__dict__.get(name)
        if isinstance(raw, property) or (raw is not None and not callable(raw)):
            continue
        obj = getattr(torch.Tensor, name, None)
        if obj is not None and callable(obj) and id(obj) in tensor_ids:
            names["Tensor"].append(name)
    return names


_NAMES = _wrappable_names()


def build_targets() -> list[WrapTarget]:
    """Every API the probe wraps (Functional, Torch, Tensor), bound to what is installed now."""
    import torch
    import torch.nn.functional as F

    owners = {"Functional": F, "Torch": torch, "Tensor": torch.Tensor}
    targets: list[WrapTarget] = []
    for prefix, names in _NAMES.items():
        owner = owners[prefix]
        for name in names:
            obj = getattr(owner, name, None)
            if obj is None:
                continue
            owned = name in owner.__dict__ if prefix == "Tensor" else True
            targets.append(WrapTarget(owner, name, prefix, obj, owned))
    return targets


def is_low_risk(api_name: str) -> bool:
    """True for ops msprobe's FOCUS level leaves out of dump.json (``api_name`` without prefix)."""
    return api_name in LOW_RISK
