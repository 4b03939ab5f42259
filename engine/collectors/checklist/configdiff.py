"""Config facts: the effective value of each recognised setting per run (`config_value`) and
the settings whose effective values differ between two runs (`config_diff`)."""
from __future__ import annotations

import math
from typing import Iterator

from precdx.collectors.checklist import aliases
from precdx.collectors.checklist.runconfig import RunConfig, Setting
from precdx.facts import Fact
from precdx.facts.checklist import ConfigDiff, ConfigSummary, ConfigValue, UNSET

_NOT_CAUSES = ("logging", "device")


def _float(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def same_value(a: str, b: str) -> bool:
    fa, fb = _float(a), _float(b)
    if fa is not None and fb is not None:
        if math.isnan(fa) or math.isnan(fb):
            return math.isnan(fa) and math.isnan(fb)
        return fa == fb or math.isclose(fa, fb, rel_tol=1e-9, abs_tol=0.0)
    return a.lower() == b.lower()


def _effective_missing(present: Setting, missing: RunConfig,
                       versions: dict[str, str] | None = None) -> tuple[str | None, bool]:
    """What a side that does not set the key uses: (value, from the framework-defaults table).
    None when unknown, and then the key is not compared."""
    from precdx.collectors.checklist import defaults

    found = defaults.lookup(missing.framework, present.name, versions)
    if found is not None:
        values, _ = found
        if len(values) == 1:
            return next(iter(values)), True
        # the default changed between versions and the version is unknown: only a value that
        # equals every candidate (no difference whatever the version) is settled
        if all(same_value(v, present.value) for v in values):
            return present.value, True
        return None, False
    if missing.log_complete and not missing.has_config:
        # a full argument dump without the key: another argument set, no value -- except a
        # framework option switched on (a fused kernel, an overlap): a framework without that
        # switch does not do it, so the side without it runs with it off
        if present.value == "true" and (present.category or aliases.category(present.name)) == "framework_option":
            return "false", False
        return None, False
    if present.from_log:
        return None, False  # a full dump's key against a script that leaves it to an unknown default
    if present.absent_default is not None:
        return present.absent_default, False
    if present.value == "false":
        return "false", False  # boolean options default to off in every framework we read
    return None, False


def _path_only(a: str, b: str) -> bool:
    if "/" not in a or "/" not in b or " " in a or " " in b:
        return False
    return a.rstrip("/").rsplit("/", 1)[-1] == b.rstrip("/").rsplit("/", 1)[-1]


# MindSpeed is Megatron with an NPU adaptor: same argument set, so the same family.
_FAMILY = {"mindspeed": "megatron"}


def same_family(a: str, b: str) -> bool:
    return _FAMILY.get(a, a) == _FAMILY.get(b, b)


def config_diffs(cfg: RunConfig, ref: RunConfig, pair: str,
                 versions: tuple[dict[str, str], dict[str, str]] | None = None) -> Iterator[ConfigDiff]:
    """`versions`: (compared run's, reference run's) library versions, for version-dependent
    framework defaults."""
    same_fw = same_family(cfg.framework, ref.framework)
    both_complete = cfg.complete and ref.complete
    my_versions, ref_versions = versions or ({}, {})
    for name in sorted(set(cfg.settings) | set(ref.settings)):
        mine, theirs = cfg.settings.get(name), ref.settings.get(name)
        default_side = None
        if mine is not None and theirs is not None:
            if same_value(mine.value, theirs.value):
                continue
            presence = "both"
            tval, bval = mine.value, theirs.value
        else:
            present = mine or theirs
            assert present is not None
            if not both_complete or not present.explicit:
                # a key missing from a half-read file, or a value we derived on one side only
                # (the other side lacks its inputs), is not a difference
                continue
            missing = ref if mine is not None else cfg
            assumed, is_default = _effective_missing(present, missing,
                                                     ref_versions if mine is not None else my_versions)
            if assumed is not None and same_value(assumed, present.value):
                continue
            if assumed is None and (present.from_log or (missing.log_complete and not missing.has_config)):
                continue
            presence = "target_only" if mine is not None else "baseline_only"
            shown = UNSET if assumed is None or not is_default else assumed
            if is_default:
                default_side = "baseline" if mine is not None else "target"
            tval = mine.value if mine else shown
            bval = theirs.value if theirs else shown
        cat = (mine or theirs).category or aliases.category(name)  # type: ignore[union-attr]
        path_only = presence == "both" and _path_only(bval, tval)
        fb, ft = _float(bval), _float(tval)
        if default_side == "baseline":
            bval = f"{bval} (default)"
        elif default_side == "target":
            tval = f"{tval} (default)"
        rel = None
        if fb is not None and ft is not None:
            rel = (ft - fb) / abs(fb) if fb != 0 else (math.inf if ft > 0 else -math.inf)
        sources = sorted({s.source for s in (mine, theirs) if s is not None and s.source != "derived"})
        yield ConfigDiff.of(
            pair=pair, role=cfg.run.role, against_role=ref.run.role, name=name,
            category=cat, baseline=bval, target=tval, presence=presence, rel_change=rel,
            # across framework families a one-sided key only says the other framework has no
            # such argument, not that it behaves differently
            relevant=(cat not in _NOT_CAUSES and not path_only
                      and (same_fw or presence == "both" or default_side is not None)),
            path_only=path_only,
            same_framework=same_fw,
            default_side=default_side,
            from_log=bool((mine is None or mine.from_log) and (theirs is None or theirs.from_log)),
            baseline_name=theirs.raw_name if theirs else None,
            target_name=mine.raw_name if mine else None,
            source=", ".join(sources) or None)


MAX_LISTED = 12


def summary(diffs: list[ConfigDiff], pair: str, role: str, against_role: str) -> ConfigSummary:
    """One config_summary of a pair's config_diff facts."""
    rel = [d for d in diffs if d.relevant]
    cats = sorted({d.category for d in rel})
    flips = [f"{d.name}: {d.baseline} -> {d.target}" for d in rel[:MAX_LISTED]]
    sources = sorted({p for d in rel for p in (d.source or "").split(", ") if p})
    return ConfigSummary.of(pair=pair, role=role, against_role=against_role, n_relevant=len(rel),
                            n_categories=len(cats), only_category=cats[0] if len(cats) == 1 else None,
                            n_other=sum(1 for d in rel if d.category == "other"),
                            names=", ".join(d.name for d in rel[:MAX_LISTED]) or None,
                            flips="; ".join(flips) or None,
                            from_log=bool(rel) and all(d.from_log for d in rel),
                            source=", ".join(sources) or None)


def config_values(cfg: RunConfig) -> Iterator[Fact]:
    for name, s in sorted(cfg.settings.items()):
        if not aliases.is_known(name) and s.category is None:
            continue
        number = _float(s.value)
        flag = {"true": True, "false": False}.get(s.value.lower())
        yield ConfigValue.of(role=cfg.run.role, run=cfg.run.name, name=name,
                             category=s.category or aliases.category(name), value=s.value, number=number, flag=flag,
                             explicit=s.explicit, framework=cfg.framework, raw_name=s.raw_name,
                             source=s.source if s.source != "derived" else None)
