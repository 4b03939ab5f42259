"""Turns one argument or result into msprobe's dump.json leaf encoding.

Tensors become ``{"type": "torch.Tensor", "dtype", "shape", "Max", "Min", "Mean", "Norm",
"requires_grad"}`` (+ ``"md5"``: CRC-32 of the raw bytes, in md5 mode); Python scalars become
``{"type": "int", "value": 3}``; ``None`` stays null; tuples and lists nest.
Statistics are computed in the tensor's own dtype, as msprobe does by default.
"""
from __future__ import annotations

import zlib
from typing import Any

import torch

SUMMARY_MODES = ("statistics", "md5")


def tensor_crc32(tensor: torch.Tensor) -> str:
    """msprobe's "md5": CRC-32 of the tensor's bytes in C order, 8 lower-case hex digits."""
    data = tensor.detach()
    if data.dtype in (torch.bfloat16,):
        # numpy has no bfloat16; the bit pattern is what identifies the value
        data = data.view(torch.int16)
    elif data.dtype.is_floating_point and data.dtype.itemsize == 1:
        data = data.view(torch.uint8)
    raw = data.cpu().contiguous().numpy().tobytes()
    return f"{zlib.crc32(raw) & 0xFFFFFFFF:08x}"


def tensor_summary(tensor: torch.Tensor, mode: str = "statistics") -> dict[str, Any]:
    """The dump.json body of one tensor."""
    with torch.no_grad():
        data = tensor.detach()
        entry: dict[str, Any] = {"type": "torch.Tensor", "dtype": str(data.dtype),
                                 "shape": list(data.shape)}
        if data.numel() == 0 or data.is_complex():
            entry.update(Max=None, Min=None, Mean=None, Norm=None)
        elif data.dtype == torch.bool:
            entry.update(Max=bool(data.any()), Min=bool(data.all()), Mean=None, Norm=None)
        elif not data.dtype.is_floating_point:
            entry.update(Max=int(data.max()), Min=int(data.min()), Mean=None, Norm=None)
        else:
            # one host transfer for all four numbers instead of four
            values = torch.stack([data.max(), data.min(), data.mean(), torch.linalg.vector_norm(data)])
            mx, mn, mean, norm = values.tolist()
            entry.update(Max=mx, Min=mn, Mean=mean, Norm=norm)
        entry["requires_grad"] = bool(tensor.requires_grad)
        if mode == "md5":
            entry["md5"] = tensor_crc32(data)
    return entry


def encode(value: Any, mode: str = "statistics") -> Any:
    """Encode any argument the way msprobe writes it into input_args/input_kwargs/output."""
    if isinstance(value, torch.Tensor):
        return tensor_summary(value, mode)
    if value is None:
        return None
    if isinstance(value, bool):
        return {"type": "bool", "value": value}
    if isinstance(value, (int, float, str)):
        return {"type": type(value).__name__, "value": value}
    if isinstance(value, torch.Size):
        return {"type": "torch.Size", "value": [int(x) for x in value]}
    if isinstance(value, (list, tuple)):
        return [encode(v, mode) for v in value]
    if isinstance(value, dict):
        return {str(k): encode(v, mode) for k, v in value.items()}
    if isinstance(value, torch.dtype):
        return {"type": "torch.dtype", "value": str(value)}
    if isinstance(value, torch.device):
        return {"type": "torch.device", "value": str(value)}
    if isinstance(value, slice):
        return {"type": "slice", "value": [_plain(value.start), _plain(value.stop), _plain(value.step)]}
    if value is Ellipsis:
        return {"type": "ellipsis", "value": "..."}
    return {"type": type(value).__name__, "value": str(value)}


def _plain(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.item()
    return value


def as_list(result: Any) -> list[Any]:
    """An API result as msprobe's ``output`` list (a tuple result is flattened one level)."""
    if isinstance(result, (tuple, list)) and not isinstance(result, torch.Size):
        return list(result)
    return [result]


def is_finite_value(value: Any) -> bool:
    """False if any tensor inside ``value`` holds NaN or ±inf."""
    if isinstance(value, torch.Tensor):
        if value.numel() == 0 or not (value.dtype.is_floating_point or value.is_complex()):
            return True
        with torch.no_grad():
            return bool(torch.isfinite(value.detach()).all())
    if isinstance(value, (list, tuple)):
        return all(is_finite_value(v) for v in value)
    if isinstance(value, dict):
        return all(is_finite_value(v) for v in value.values())
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    return True
