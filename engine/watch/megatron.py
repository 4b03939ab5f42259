"""precdx watch for Megatron-LM / MindSpeed training loops: a hook called once per iteration,
e.g. at the end of ``training_log`` (which has all four values)::

    hook = megatron_hook(model, optimizer, baseline="gpu_run/", out="precdx-watch")
    ...
    if hook(iteration, loss_dict["lm loss"], grad_norm, loss_scale):
        break                                   # on_breach="stop" wants out
    ...
    hook.close()                                # end of training: finishes the case folder

``model`` is the model chunk list Megatron builds (one chunk) or the module; ``optimizer`` the
Megatron optimizer (its ``param_groups`` and ``state_dict`` are used at a capture only). With a
log interval > 1 the reference's points are window averages and the hook averages the
iterations' losses the same way (on the device: no extra synchronisation).
"""
from __future__ import annotations

from typing import Any, Callable

from precdx.watch.watcher import Watcher


def megatron_hook(model: Any = None, optimizer: Any = None, *, baseline: Any = None,
                  **watch_kwargs: Any) -> Callable[..., bool]:
    """Returns ``hook(iteration, loss, grad_norm=None, loss_scale=None, skipped=False) -> bool``
    (True: stop training); ``hook.watcher`` is the Watcher, ``hook.close()`` finishes the case."""
    watch_kwargs.setdefault("framework", "megatron")
    w = Watcher(model, optimizer, baseline=baseline, **watch_kwargs)

    def hook(iteration: int, loss: Any, grad_norm: Any = None, loss_scale: Any = None,
             skipped: bool = False) -> bool:
        stop = w.observe(int(iteration), loss, grad_norm, loss_scale=loss_scale, skipped=bool(skipped))
        w.end_step()
        return stop

    hook.watcher = w  # type: ignore[attr-defined]
    hook.close = w.close  # type: ignore[attr-defined]
    return hook
