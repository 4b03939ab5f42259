"""The fact vocabulary, declared once: every module in this package registers its fact types.

Importing `precdx.facts` loads them all; `REGISTRY` maps a type name to its spec.
"""
from __future__ import annotations

import importlib
import pkgutil

from precdx.facts.base import (  # noqa: F401
    REGISTRY, Bool, F, Fact, FactSpec, FieldSpec, Int, Num, NONFINITE_SUFFIX,
    fact_type, make, match_dict, parse_fact,
)
from precdx.facts.factset import FactSet, load_fact_files  # noqa: F401
from precdx.vocabulary import ROLES  # noqa: F401 (declared there)

for _mod in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if _mod not in ("base", "factset"):
        importlib.import_module(f"{__name__}.{_mod}")
