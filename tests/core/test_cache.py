"""The on-disk cache of the knowledge base, the compiled rule pack and its durable program
(engine/cache.py): a hit gives what a build gives, an edited input is never served stale, and a
cache that cannot be used steps aside without a word."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from precdx import cache, diagnosis, kb
from precdx.api import diagnose_case
from precdx.errors import Warnings

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(cache.ENV, str(folder))
    diagnosis.reset_cache()
    kb.clear_cache()
    yield folder
    diagnosis.reset_cache()
    kb.clear_cache()


def _entries(folder: Path, kind: str) -> list[Path]:
    return sorted(folder.glob(f"{kind}-*.json"))


def _rule_copy(tmp_path: Path) -> Path:
    rules = tmp_path / "rules"
    shutil.copytree(REPO / "rules", rules)
    return rules


def _title(pack, rule_id: str) -> str:
    return pack.by_id()[rule_id].rule.title.en


def _fresh() -> None:
    """A new process, as far as the caches are concerned: only the disk remains."""
    diagnosis.reset_cache()
    kb.clear_cache()


def test_an_edited_rule_is_picked_up_not_served_from_the_cache(cache_dir, tmp_path):
    rules = _rule_copy(tmp_path)
    pack, _ = diagnosis.get_matcher("durable", str(rules))
    assert _title(pack, "CFG-003") == "The compute dtype policy differs"
    assert len(_entries(cache_dir, "pack")) == len(_entries(cache_dir, "durable")) == 1

    _fresh()
    again, _ = diagnosis.get_matcher("durable", str(rules))
    assert again.version == pack.version and len(_entries(cache_dir, "pack")) == 1  # a hit

    # Same size, same second: only the content tells the two files apart.
    path = rules / "checklist" / "config.precision_mismatch.yaml"
    stat = path.stat()
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("The compute dtype policy differs", "The compute dtype policy DIFFERS"),
                    encoding="utf-8")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size

    _fresh()
    edited, _ = diagnosis.get_matcher("durable", str(rules))
    assert _title(edited, "CFG-003") == "The compute dtype policy DIFFERS"
    assert edited.version != pack.version
    assert len(_entries(cache_dir, "pack")) == 2


def test_an_edited_threshold_changes_the_matcher_too(cache_dir, tmp_path):
    """The durable program is cached beside the pack, under the same inputs."""
    rules = _rule_copy(tmp_path)
    path = rules / "checklist" / "config.precision_mismatch.yaml"
    before = diagnosis.load_pack(str(rules))
    program = diagnosis.get_matcher("durable", str(rules))[1].program
    path.write_text(path.read_text(encoding="utf-8").replace("precision: 0.8", "precision: 0.6"), encoding="utf-8")
    _fresh()
    after = diagnosis.load_pack(str(rules))
    assert before.by_id()["CFG-003"].rule.precision == 0.8
    assert after.by_id()["CFG-003"].rule.precision == 0.6
    assert diagnosis.get_matcher("durable", str(rules))[1].program is not program


def test_a_removed_rule_file_is_gone_from_the_next_pack(cache_dir, tmp_path):
    rules = _rule_copy(tmp_path)
    assert "CFG-003" in diagnosis.load_pack(str(rules)).by_id()
    (rules / "checklist" / "config.precision_mismatch.yaml").unlink()
    _fresh()
    assert "CFG-003" not in diagnosis.load_pack(str(rules)).by_id()


def test_an_edited_kb_entry_is_picked_up(cache_dir, tmp_path):
    copy = tmp_path / "kb"
    shutil.copytree(REPO / "kb", copy)
    entry = copy / "verdict" / "aligned.within_noise.yaml"
    assert kb.load_kb(copy)["aligned.within_noise"].thresholds["mean_rel_err"] == 0.01
    assert len(_entries(cache_dir, "kb")) == 1
    entry.write_text(entry.read_text(encoding="utf-8").replace("mean_rel_err: 0.01 ", "mean_rel_err: 0.02 "),
                     encoding="utf-8")
    kb.clear_cache()
    assert kb.load_kb(copy)["aligned.within_noise"].thresholds["mean_rel_err"] == 0.02


def test_skipped_rule_warnings_come_back_with_a_cached_pack(cache_dir, tmp_path):
    rules = _rule_copy(tmp_path)
    path = rules / "checklist" / "config.precision_mismatch.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace("schema_version: 1", "schema_version: 99", 1),
                    encoding="utf-8")
    for _ in range(2):  # built, then read from the cache
        _fresh()
        found = Warnings()
        pack = diagnosis.load_pack(str(rules), warnings=found)
        assert "CFG-003" not in pack.by_id()
        assert any("CFG-003 skipped" in w["message"] for w in found)
    assert len(_entries(cache_dir, "pack")) == 1


def test_a_cached_diagnosis_is_the_built_one(cache_dir, shared_dir):
    case = shared_dir / "scenarios" / "case-01"
    built = diagnose_case(case).diagnosis.model_dump_json()
    assert _entries(cache_dir, "pack") and _entries(cache_dir, "durable") and _entries(cache_dir, "kb")
    _fresh()
    assert diagnose_case(case).diagnosis.model_dump_json() == built


def test_a_broken_entry_is_rebuilt(cache_dir, tmp_path):
    rules = _rule_copy(tmp_path)
    version = diagnosis.load_pack(str(rules)).version
    for entry in _entries(cache_dir, "pack"):
        entry.write_bytes(entry.read_bytes()[:100])
    _fresh()
    assert diagnosis.load_pack(str(rules)).version == version
    names, body = _entries(cache_dir, "pack")[0].read_text().split("\n")
    assert json.loads(names) and json.loads(body)  # written again, whole


@pytest.mark.parametrize("where", ["not a folder", "others may write", "off"])
def test_an_unusable_cache_folder_is_left_alone(where, tmp_path, monkeypatch):
    if where == "not a folder":
        (tmp_path / "file").write_text("x")
        folder = tmp_path / "file" / "cache"
        monkeypatch.setenv(cache.ENV, str(folder))
    elif where == "others may write":
        folder = tmp_path / "shared-cache"
        folder.mkdir()
        folder.chmod(0o777)
        monkeypatch.setenv(cache.ENV, str(folder))
    else:
        folder = None
        monkeypatch.setenv(cache.ENV, "off")
    assert cache.cached("probe", "k", lambda: {"built": 1}) == {"built": 1}
    assert cache.load("probe", "k") is None
    if where == "others may write":
        assert list(folder.iterdir()) == []


def test_the_default_folder_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv(cache.ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.cache_dir() == tmp_path / "precdx"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")  # not absolute: ignored, as the spec says
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.cache_dir() == tmp_path / "home" / ".cache" / "precdx"


def test_no_home_directory_means_no_cache(monkeypatch):
    from pathlib import Path

    def nowhere(cls=None):
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.delenv(cache.ENV, raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr(Path, "home", classmethod(nowhere))
    assert cache.cache_dir() is None
    assert cache.cached("probe", "k", lambda: 1) == 1


def test_old_entries_are_pruned(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.ENV, str(tmp_path))
    for i in range(cache.KEEP + 3):
        cache.store("probe", f"k{i}", i)
        os.utime(tmp_path / f"probe-k{i}.json", ns=(i * 10**9, i * 10**9))
    kept = sorted(int(p.stem.split("-k")[1]) for p in tmp_path.glob("probe-*.json"))
    assert kept == list(range(3, cache.KEEP + 3))  # the newest KEEP


def test_cached_values_equal_the_built_ones(cache_dir):
    """What a hit returns is equal, object for object, to what the build made (the encoding
    keeps tuples, regexes, dataclasses and pydantic models; nothing is validated again)."""
    from precdx.matching.durable_compile import compile_program

    built = diagnosis.load_pack()
    kb_built = kb.load_kb()
    assert _entries(cache_dir, "pack") and _entries(cache_dir, "kb")
    _fresh()
    again = diagnosis.load_pack()
    assert again == built and again is not built
    assert [type(r.rule) for r in again.rules] == [type(r.rule) for r in built.rules]
    assert kb.load_kb() == kb_built
    program = diagnosis.get_matcher("durable")[1].program  # built from the cached pack, then stored
    _fresh()
    assert diagnosis.get_matcher("durable")[1].program == program == compile_program(built).without_paths()


@pytest.mark.parametrize("name", [
    "os:system",                      # a module the caller did not name
    "precdx.kb:load_kb",              # a named module, but not a class
    "precdx.kb:Path",                 # a class the module imports, not its own
    "precdx.kb:KbEntry.__init__",
])
def test_an_entry_naming_another_class_is_a_miss(name, tmp_path, monkeypatch):
    monkeypatch.setenv(cache.ENV, str(tmp_path))
    (tmp_path / "probe-k.json").write_text(json.dumps([name]) + "\n" + json.dumps({"\u0000o": [0, []]}))
    assert cache.load("probe", "k", modules=("precdx.kb",)) is None
    assert cache.cached("probe", "k", lambda: "built", modules=("precdx.kb",)) == "built"


def test_values_round_trip_through_the_encoding(tmp_path, monkeypatch):
    import re

    monkeypatch.setenv(cache.ENV, str(tmp_path))
    value = {"t": (1, 2.5, "x", (None, True)), "s": {1, 2}, "f": frozenset({"a"}), "r": re.compile(r"a+b", re.I),
             "\u0000t": "a key like a tag", 3: "an int key", "l": [float("inf"), -0.0, {"nested": ()}]}
    cache.store("probe", "k", value)
    assert cache.load("probe", "k") == value
