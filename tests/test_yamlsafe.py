"""The strict YAML loader's bounds: aliases that expand to more nodes than allowed are refused
(few aliases can still nest into billions), scalars the constructors cannot build are
PrecdxErrors, small shared anchors and merge keys (`<<: *base` then an override) stay fine."""
from __future__ import annotations

import pytest

from precdx.errors import PrecdxError
from precdx.yamlsafe import MAX_NODES, _expanded_size, load_yaml_text


def _nested_aliases(levels: int, fan: int) -> str:
    rows = ["l0: &l0 [" + ", ".join(["x"] * fan) + "]"]
    rows += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * fan) + "]" for i in range(1, levels)]
    return "\n".join(rows) + "\n"


def test_few_aliases_that_expand_to_billions_are_refused() -> None:
    text = _nested_aliases(12, 9)  # 99 aliases (below the alias count bound), 9**12 nodes
    with pytest.raises(PrecdxError, match="aliases expand to more than"):
        load_yaml_text(text, "bomb.yaml")


def test_small_shared_anchors_load() -> None:
    data = load_yaml_text("base: &b {lr: 1, seed: 2}\nrun1: *b\nrun2: {<<: *b, seed: 3}\n", "ok.yaml")
    assert data["run1"] == {"lr": 1, "seed": 2} and data["run2"]["seed"] == 3
    assert _expanded_size(data) < MAX_NODES
    with pytest.raises(PrecdxError, match="duplicate key 'lr'"):  # a merge allows one override only
        load_yaml_text("base: &b {lr: 1}\nrun: {<<: *b, lr: 2, lr: 3}\n", "dup.yaml")


def test_expanded_size_counts_every_use() -> None:
    data = load_yaml_text(_nested_aliases(3, 4), "x.yaml")
    # l0: 1 + 4; l1: 1 + 4 + 4*5; l2: 1 + 4 + 4*25; root: 1 + 3 keys + the three lists
    assert _expanded_size(data) == 1 + 3 + 5 + 25 + 105


@pytest.mark.parametrize("text, message", [
    ("a: " + "9" * 5000, "invalid YAML value: Exceeds the limit"),
    ("a: 2001-02-30", "invalid YAML value: day is out of range for month"),
    ("a: !!float abc", "invalid YAML value: could not convert string to float"),
    ("a: !!int ''", "invalid YAML value: an empty value under a type tag"),
])
def test_unbuildable_scalars_are_precdx_errors(text: str, message: str) -> None:
    with pytest.raises(PrecdxError) as info:
        load_yaml_text(text, "v.yaml")
    assert message in info.value.message and info.value.path == "v.yaml"
