"""Turning a discovered case into checklist facts: per-run states first, then one comparison
per pair of runs (target~baseline, reruns~original, groups~first group)."""
from __future__ import annotations

from precdx.collectors.base import Case
from precdx.collectors.checklist import configdiff, determinism, envswitches, evals, libraries, structure
from precdx.collectors.checklist.pairs import comparison_pairs, pair_name
from precdx.collectors.checklist.runconfig import RunConfig, build
from precdx.collectors.checklist.runs import guess_device
from precdx.errors import Warnings
from precdx.facts import Fact


def run_versions(cfg: RunConfig) -> dict[str, str]:
    """Library versions of a run: its pip listing, else what its logs print."""
    out = dict(cfg.log_versions)
    pkgs = cfg.packages
    if pkgs:
        out.update({k: v for k, (v, _) in pkgs.items()})
    return out


def collect(case: Case, warnings: Warnings) -> list[Fact]:
    facts: list[Fact] = []
    configs: dict[str, RunConfig] = {}
    devices: dict[str, str] = {}
    packages: dict[str, tuple[dict | None, str | None]] = {}
    metrics: dict[str, tuple[dict | None, str | None]] = {}
    listings: dict[str, dict] = {}
    for run in case.runs:
        cfg = build(run, warnings)
        configs[run.name] = cfg
        devices[run.name] = device = guess_device(run)
        facts.extend(configdiff.config_values(cfg))
        facts.extend(envswitches.switch_facts(cfg, device))
        status = determinism.status_fact(cfg, device)
        if status is not None:
            facts.append(status)
        packages[run.name] = libraries.run_packages(run, warnings)
        pkgs, src = packages[run.name]
        cfg.packages = pkgs
        if pkgs:
            facts.extend(libraries.version_facts(run, pkgs, src))
        elif cfg.log_versions:
            facts.extend(libraries.version_facts(run, libraries.from_log(cfg.log_versions),
                                                 ", ".join(cfg.log_sources) or _log_paths(run)))
        metrics[run.name] = evals.run_metrics(run, warnings)
        listings[run.name] = structure.run_listings(run, warnings)
        facts.extend(structure.summary_facts(run, listings[run.name]))

    for run, ref in comparison_pairs(case):
        pair = pair_name(run, ref)
        cfg, rcfg = configs[run.name], configs[ref.name]
        if cfg.has_any_config and rcfg.has_any_config:
            diffs = list(configdiff.config_diffs(cfg, rcfg, pair, (run_versions(cfg), run_versions(rcfg))))
            facts.extend(diffs)
            facts.append(configdiff.summary(diffs, pair, run.role, ref.role))
        elif cfg.has_any_config or rcfg.has_any_config:
            missing = ref if cfg.has_any_config else run
            warnings.add(f"no launch script, training config or configuration echo in the log found for "
                         f"{missing.name}; configuration of {pair} not compared", path=str(missing.root))
        facts.extend(envswitches.env_diffs(cfg, devices[run.name], rcfg, devices[ref.name], pair))
        (mine, src), (theirs, rsrc) = packages[run.name], packages[ref.name]
        if mine is None and theirs is None and cfg.log_versions and rcfg.log_versions:
            # only what both logs print: a version a log does not mention is unknown, not absent
            common = set(cfg.log_versions) & set(rcfg.log_versions)
            mine = libraries.from_log({k: v for k, v in cfg.log_versions.items() if k in common})
            theirs = libraries.from_log({k: v for k, v in rcfg.log_versions.items() if k in common})
            src, rsrc = _log_paths(run), _log_paths(ref)
        if mine is not None and theirs is not None:
            cross = devices[run.name] != devices[ref.name] or "unknown" in (devices[run.name], devices[ref.name])
            facts.extend(libraries.library_diffs(run, mine, ref, theirs, pair, cross,
                                                 ", ".join(s for s in (src, rsrc) if s)))
        (m_mine, msrc), (m_theirs, mrsrc) = metrics[run.name], metrics[ref.name]
        if m_mine is not None and m_theirs is not None:
            facts.extend(evals.eval_gaps(run, m_mine, ref, m_theirs, pair,
                                         ", ".join(s for s in (msrc, mrsrc) if s)))
        facts.extend(structure.structure_diffs(run, listings[run.name], ref, listings[ref.name],
                                               pair, warnings))
    return facts


def _log_paths(run) -> str | None:
    return ", ".join(str(a.path) for a in run.artefacts if a.kind == "log") or None
