"""A compact int -> int index for the producer look-up of big dumps: 16 bytes per entry in two
typed arrays instead of ~100 bytes per dict item, sorted once on first look-up. Keeps, for every
key, the smallest value added (the earliest producer), like dict.setdefault in execution order."""
from __future__ import annotations

from array import array

import numpy as np


class IntIndex:
    def __init__(self) -> None:
        self._keys = array("q")
        self._vals = array("q")
        self._sorted_keys: np.ndarray | None = None
        self._sorted_vals: np.ndarray | None = None

    def add(self, key: int, value: int = 0) -> None:
        self._keys.append(key)
        self._vals.append(value)
        self._sorted_keys = None

    def _finalise(self) -> None:
        keys = np.frombuffer(self._keys, dtype=np.int64) if len(self._keys) else np.empty(0, np.int64)
        vals = np.frombuffer(self._vals, dtype=np.int64) if len(self._vals) else np.empty(0, np.int64)
        order = np.lexsort((vals, keys))
        keys, vals = keys[order], vals[order]
        uniq, first = np.unique(keys, return_index=True)
        self._sorted_keys, self._sorted_vals = uniq, vals[first]

    def get(self, key: int, default: int | None = None) -> int | None:
        if self._sorted_keys is None:
            self._finalise()
        i = int(np.searchsorted(self._sorted_keys, key))
        if i < len(self._sorted_keys) and int(self._sorted_keys[i]) == key:
            return int(self._sorted_vals[i])
        return default

    def __contains__(self, key: int) -> bool:
        return self.get(key) is not None

    def __len__(self) -> int:
        if self._sorted_keys is None:
            self._finalise()
        return len(self._sorted_keys)
