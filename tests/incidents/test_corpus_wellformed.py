"""The public incident corpus (tests/incidents/<id>/) is well-formed: canonical ids, links, splits, sizes,
and every incident parses with `precdx facts` without a fatal error. Accuracy is measured by
bench/incidents, never asserted here.

Splits: `tune` (the rules were tuned on it), `score` (scored, and looked at) and `holdout` (written and
frozen after the rules were tuned, scored once to measure generalisation)."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from precdx.cli import main as cli_main

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
FAILURE_MODES = REPO.parent / "shared" / "failure-modes.yaml"
SPLITS = ("tune", "score", "holdout")
REQUIRED = ("id", "link", "title", "cause", "failure_modes", "verdict", "form", "split", "changed",
            "quoted", "reconstructed")
INCIDENTS = sorted(p.parent for p in HERE.glob("*/incident.yaml"))


def _meta(folder: Path) -> dict:
    return yaml.safe_load((folder / "incident.yaml").read_text(encoding="utf-8")) or {}


@pytest.fixture(scope="module")
def canonical_ids() -> set[str]:
    if not FAILURE_MODES.is_file():
        pytest.skip("../shared/failure-modes.yaml not present")
    return {m["id"] for m in yaml.safe_load(FAILURE_MODES.read_text(encoding="utf-8"))}


@pytest.mark.parametrize("folder", INCIDENTS, ids=[p.name for p in INCIDENTS])
def test_incident_metadata(folder: Path, canonical_ids: set[str]):
    meta = _meta(folder)
    missing = [k for k in REQUIRED if k not in meta]
    assert not missing, f"{folder.name}: incident.yaml lacks {missing}"
    assert meta["id"] == folder.name
    assert str(meta["link"]).startswith("https://github.com/"), meta["link"]
    modes = meta["failure_modes"]
    assert isinstance(modes, list) and modes, "failure_modes must be a non-empty list"
    unknown = [m for m in modes if m not in canonical_ids]
    assert not unknown, f"{folder.name}: non-canonical failure modes {unknown}"
    assert meta["verdict"] in ("misaligned", "aligned")
    if meta["verdict"] == "aligned":
        assert "aligned.within_noise" in modes, "healthy incidents must accept aligned.within_noise"
    else:
        assert "aligned.within_noise" not in modes
    assert meta["split"] in SPLITS, f"{folder.name}: split {meta['split']!r} not one of {SPLITS}"
    assert isinstance(meta["changed"], list)
    has_facts = (folder / "facts.yaml").is_file()
    has_runs = (folder / "target").is_dir() and (folder / "baseline").is_dir()
    expected_form = "mixed" if has_facts and has_runs else "facts" if has_facts else "logs" if has_runs else None
    assert expected_form is not None, f"{folder.name}: neither facts.yaml nor baseline/ + target/ runs"
    assert meta["form"] == expected_form, f"{folder.name}: form {meta['form']} but content is {expected_form}"
    for key in ("title", "cause", "quoted", "reconstructed"):
        assert str(meta[key]).strip(), f"{folder.name}: empty {key}"


def test_corpus_size_and_coverage(canonical_ids: set[str]):
    metas = [_meta(f) for f in INCIDENTS]
    faulty = [m for m in metas if m["verdict"] == "misaligned"]
    healthy = [m for m in metas if m["verdict"] == "aligned"]
    assert len(faulty) >= 30, f"only {len(faulty)} faulty incidents"
    assert len(healthy) >= 5, f"only {len(healthy)} healthy incidents"
    modes = {m["failure_modes"][0] for m in faulty}
    assert len(modes) >= 15, f"faulty incidents cover only {len(modes)} modes: {sorted(modes)}"
    splits = {m["split"] for m in metas}
    assert {"tune", "score"} <= splits <= set(SPLITS), f"tune and score must be non-empty, got {splits}"
    links = [m["link"] for m in metas]
    assert len(links) == len(set(links)), "an incident link is used twice"


def test_holdout_split_size_and_coverage():
    metas = [m for m in (_meta(f) for f in INCIDENTS) if m.get("split") == "holdout"]
    if not metas:
        pytest.skip("no holdout incidents")
    faulty = [m for m in metas if m["verdict"] == "misaligned"]
    healthy = [m for m in metas if m["verdict"] == "aligned"]
    assert len(faulty) >= 14, f"holdout has only {len(faulty)} faulty incidents"
    assert len(healthy) >= 3, f"holdout has only {len(healthy)} healthy incidents"
    modes = {m["failure_modes"][0] for m in faulty}
    assert len(modes) >= 8, f"holdout faulty incidents cover only {len(modes)} modes: {sorted(modes)}"


@pytest.mark.parametrize("folder", INCIDENTS, ids=[p.name for p in INCIDENTS])
def test_incident_parses(folder: Path):
    args = ["facts", "--format", "json"]
    if (folder / "target").is_dir():
        args.append(str(folder))
    if (folder / "facts.yaml").is_file():
        args += ["--facts", str(folder / "facts.yaml")]
    result = CliRunner().invoke(cli_main, args)
    assert result.exit_code == 0, f"{folder.name}: precdx facts exit {result.exit_code}: {result.output[-400:]}"
    if (folder / "target").is_dir():
        assert '"loss_compare"' in result.output, f"{folder.name}: the run logs yield no loss_compare"
