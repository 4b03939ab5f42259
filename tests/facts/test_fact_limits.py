"""Fact input bounds: integers beyond 64 bits are rejected when the fact is parsed (they cannot be
printed or matched), an empty facts file says so."""
from __future__ import annotations

from pathlib import Path

import pytest

from precdx.errors import PrecdxError
from precdx.facts import load_fact_files, parse_fact

LC = {"type": "loss_compare", "run": "target", "role": "target", "against": "baseline"}


@pytest.mark.parametrize("value, ok", [(2 ** 63 - 1, True), (-(2 ** 63 - 1), True), (2 ** 63, False),
                                       (16 ** 5000, False), (1e300, False), (20.0, True)],
                         ids=["max", "min", "max+1", "20000-bit", "1e300", "float-20"])
def test_int_fields_hold_64_bit_integers(value, ok: bool) -> None:
    if ok:
        assert parse_fact({**LC, "steps_compared": value}).steps_compared == int(value)
    else:
        with pytest.raises(PrecdxError, match="steps_compared: Value error, integer out of range"):
            parse_fact({**LC, "steps_compared": value})


def test_empty_facts_file(tmp_path: Path) -> None:
    path = tmp_path / "facts.yaml"
    path.write_text("# nothing yet\n")
    with pytest.raises(PrecdxError) as info:
        load_fact_files([path])
    assert info.value.message.startswith("facts file is empty") and info.value.path == str(path)
