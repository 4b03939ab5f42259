"""Issue 17: a dump pair compared on every core gives exactly what the one-pass comparison gave
before the performance work. Three layers, each against its reference:
- fastread.RangeReader against the ijson reader (`stream_kvitems`): the same (name, body) pairs,
  or `Unsupported` (never a different answer), on odd documents and at every cut point;
- the whole comparison: split into parts (split.compare_dumps_split) and one pass with the fast
  entry path, against the pre-issue-17 entry path (reference_impl), as full PassResult and
  TaskReport, on generated pairs with NaN, structure changes, shifted calls, other levels,
  md5 checksums, reruns, repeated names and entries whose partner lies in another part;
- compare_summary against compare_api on random tensor pairs.
"""
from __future__ import annotations

import dataclasses
import io
import json
import math
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from precdx.collectors.msprobe import jsonstream, split
from precdx.collectors.msprobe.comparison import compare_dumps
from precdx.collectors.msprobe.entries import EntryIssues, TensorInfo, build_entry
from precdx.collectors.msprobe.fastread import RangeReader, Unsupported
from precdx.collectors.msprobe.intindex import IntIndex
from precdx.collectors.msprobe.naming import parse_entry_name
from precdx.collectors.msprobe.tasks import DumpTask, run_task
from precdx.collectors.msprobe.verdicts import compare_api, compare_summary
from tests.collectors.msprobe import reference_impl


# ---------------------------------------------------------------- normalising results
def norm(x: Any) -> Any:
    """A comparable, order-preserving plain form (NaN-safe, IntIndex by content)."""
    if isinstance(x, IntIndex):
        if len(x) == 0:
            return ("index",)
        x._finalise()
        return ("index", x._sorted_keys.tolist(), x._sorted_vals.tolist())
    if isinstance(x, EntryIssues):
        return ("issues", list(x.counts.items()), list(x.first.items()))
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return (type(x).__name__, [(f.name, norm(getattr(x, f.name))) for f in dataclasses.fields(x)])
    if isinstance(x, dict):
        return ("dict", [(norm(k), norm(v)) for k, v in x.items()])
    if isinstance(x, (set, frozenset)):
        return ("set", sorted(repr(norm(v)) for v in x))
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [norm(v) for v in x])
    if isinstance(x, float):
        return ("float", repr(x))
    if isinstance(x, Path):
        return str(x)
    return x


# ---------------------------------------------------------------- generated dumps
def _tensor(rng: random.Random, shape=(4, 8), *, md5: bool = False, dtype: str = "torch.float32",
            scale: float = 1.0) -> dict:
    t = {"type": "torch.Tensor", "dtype": dtype, "shape": list(shape),
         "Max": scale * (1 + rng.random()), "Min": -scale * (1 + rng.random()),
         "Mean": scale * (rng.random() - 0.5) * 0.01, "Norm": scale * 10 * (1 + rng.random()),
         "requires_grad": rng.random() < 0.5}
    if md5:
        t["md5"] = f"{rng.getrandbits(32):08x}"
    return t


def _jitter(t: dict, rng: random.Random, amount: float) -> dict:
    t = dict(t)
    for k in ("Max", "Min", "Mean", "Norm"):
        if isinstance(t.get(k), float):
            t[k] = t[k] * (1 + rng.uniform(-amount, amount))
    return t


APIS = ("Functional.linear", "Torch.matmul", "Functional.gelu", "Tensor.__add__", "Functional.layer_norm",
        "Functional.softmax", "Torch.empty")


def _entries(n: int, seed: int, *, md5: bool = False, modules: bool = True, params: bool = True) -> list:
    rng = random.Random(seed)
    out = []
    counts: Counter = Counter()
    for i in range(n):
        if modules and i % 9 == 4:
            idx = counts["Module.layer.Linear"]
            counts["Module.layer.Linear"] += 1
            body = {"input_args": [_tensor(rng, md5=md5)], "input_kwargs": {}, "output": [_tensor(rng, md5=md5)]}
            out.append((f"Module.layers.{i % 3}.Linear.forward.{idx}", body))
            continue
        api = APIS[i % len(APIS)]
        idx = counts[api]
        counts[api] += 1
        body: dict = {"input_args": [_tensor(rng, md5=md5), 2 if i % 5 == 0 else None],
                      "input_kwargs": {"dim": -1, "mask": _tensor(rng, dtype="torch.bool")} if i % 4 == 0 else {},
                      "output": [_tensor(rng, md5=md5)]}
        if params and api == "Functional.linear":
            body["parameters"] = {"weight": _tensor(rng, (8, 8), md5=md5), "bias": _tensor(rng, (8,), md5=md5)}
        out.append((f"{api}.{idx}.forward", body))
        if i % 3 == 0:
            out.append((f"{api}.{idx}.backward", {"input": [_tensor(rng, md5=md5)], "output": [_tensor(rng, md5=md5)]}))
    return out


def _other(entries: list, seed: int, amount: float = 2e-4) -> list:
    rng = random.Random(seed)

    def walk(v):
        if isinstance(v, dict) and "Max" in v:
            return _jitter(v, rng, amount)
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v
    return [(name, walk(body)) for name, body in entries]


def _write(path: Path, entries: list, *, level: str = "L1", task: str = "statistics") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    items = ",\n".join(json.dumps({k: v}, indent=1)[2:-2] for k, v in entries)
    path.write_text('{\n "task": "%s",\n "level": "%s",\n "framework": "pytorch",\n "dump_data_dir": null,\n'
                    ' "data": {\n%s\n }\n}\n' % (task, level, items))
    return path


def _set_stat(entries: list, index: int, where: str, key: str, value) -> None:
    name, body = entries[index]
    body = json.loads(json.dumps(body))
    body[where][0][key] = value
    entries[index] = (name, body)


def _pairs() -> list[tuple[str, list, list, dict]]:
    """(case, run entries, other entries, options)."""
    cases = []
    base = _entries(400, 1)
    cases.append(("healthy", base, _other(base, 2), {}))
    bent = _other(base, 3)
    _set_stat(bent, 250, "output", "Norm", 999.0)
    cases.append(("divergence", base, bent, {}))
    # NaN: a module output first, then an API; the twin of the API is abnormal too
    nan_run = list(base)
    _set_stat(nan_run, 121, "output", "Max", math.nan)   # Module entry (index 121 -> see _entries)
    _set_stat(nan_run, 300, "output", "Norm", math.inf)
    twin = _other(base, 4)
    _set_stat(twin, 300, "output", "Norm", math.nan)
    cases.append(("nan", nan_run, twin, {}))
    cases.append(("nan-no-twin", nan_run, _other(base, 4), {}))
    only_module = list(base)
    _set_stat(only_module, 40, "output", "Min", -math.inf)
    _set_stat(only_module, 40, "output", "Max", math.inf)
    cases.append(("nan-module-only", only_module, _other(base, 5), {}))
    # an extra call on the run shifts later indices (fallback pairing); the other has an extra module
    extra = list(base)
    extra.insert(200, ("Functional.gelu.999.forward", {"input_args": [_tensor(random.Random(9))],
                                                        "output": [_tensor(random.Random(10))]}))
    other = _other(base, 6)
    other.insert(350, ("Module.extra.Dropout.forward.0", {"input_args": [], "output": []}))
    renamed = [(n.replace("Functional.gelu.3.", "Functional.gelu.77."), b) for n, b in other]
    cases.append(("structure", extra, renamed, {}))
    # entries whose partner lies far away (another part): a block moved to the end
    moved = _other(base, 7)
    moved = moved[:100] + moved[180:] + moved[100:180]
    cases.append(("moved-block", base, moved, {}))
    cases.append(("levels", base, _other(base, 8), {"level_b": "L0"}))
    md5 = _entries(300, 11, md5=True)
    cases.append(("md5", md5, _other(md5, 12), {}))
    cases.append(("rerun-exact", base, _other(base, 13, amount=0.0), {"exact": True}))
    rerun = _other(base, 14, amount=0.0)
    _set_stat(rerun, 222, "output", "Mean", 0.5)
    cases.append(("rerun-diff", base, rerun, {"exact": True}))
    dup = list(base)
    dup.insert(260, dup[30])   # a name repeated on one side
    cases.append(("repeated-name", dup, _other(base, 15), {}))
    odd = _entries(200, 16, modules=False)
    odd[50] = (odd[50][0], ["not", "an", "object"])
    _set_stat(odd, 60, "output", "Max", "n/a")
    cases.append(("odd-content", odd, _other(_entries(200, 16, modules=False), 17), {}))
    return cases


def _written(root: Path, names: set[str] | None = None) -> list[tuple[str, Path, Path, dict]]:
    out = []
    for name, run, other, opts in _pairs():
        if names is not None and name not in names:
            continue
        a = _write(root / name / "target" / "step0" / "rank0" / "dump.json", run)
        b = _write(root / name / "baseline" / "step0" / "rank0" / "dump.json", other,
                   level=opts.get("level_b", "L1"))
        out.append((name, a, b, opts))
    return out


@pytest.fixture(scope="module")
def pairs(tmp_path_factory) -> list[tuple[str, Path, Path, dict]]:
    return _written(tmp_path_factory.mktemp("pairs"))


QUICK = {"divergence", "nan", "structure"}


@pytest.fixture(scope="module")
def quick_pairs(tmp_path_factory) -> list[tuple[str, Path, Path, dict]]:
    return _written(tmp_path_factory.mktemp("quick"), QUICK)


def _check_split(pairs, monkeypatch, names=None, parts_list=(2, 3)) -> int:
    split_used = 0
    for name, a, b, opts in pairs:
        if names is not None and name not in names:
            continue
        exact = opts.get("exact", False)
        with reference_impl.reference_pipeline(monkeypatch):
            ref = norm(compare_dumps(a, b, exact=exact))
        assert norm(compare_dumps(a, b, exact=exact)) == ref, name
        for parts in parts_list:
            merged = split._try_split(a, b, exact, parts, split._fork_context())
            if merged is not None:
                split_used += 1
                assert norm(merged) == ref, (name, parts)
            assert norm(split.compare_dumps_split(a, b, exact=exact, parts=parts, min_bytes=0)) == ref, (name, parts)
    return split_used


def test_split_equals_the_reference_quick(quick_pairs, monkeypatch):
    assert _check_split(quick_pairs, monkeypatch, QUICK, (2,)) == 3
    _check_reports(quick_pairs, monkeypatch, {"nan"})


@pytest.mark.slow
def test_split_and_one_pass_equal_the_reference(pairs, monkeypatch):
    # the split really ran, and fell back only where it must (the repeated name)
    assert _check_split(pairs, monkeypatch) == 2 * (len(pairs) - 1)


def _check_reports(pairs, monkeypatch, names=None) -> None:
    monkeypatch.setattr(split, "SPLIT_MIN_BYTES", 0)
    for name, a, b, opts in pairs:
        if names is not None and name not in names:
            continue
        task = DumpTask(str(a), str(b), opts.get("exact", False))
        with reference_impl.reference_pipeline(monkeypatch):
            ref = run_task(task)
        got = run_task(dataclasses.replace(task, parts=3))
        got.task = ref.task
        assert norm(got) == norm(ref), name
        assert got.n_compared > 100


@pytest.mark.slow
def test_task_reports_equal_the_reference(pairs, monkeypatch):
    _check_reports(pairs, monkeypatch)


@pytest.mark.slow
def test_collector_facts_equal_with_parts(shared_dir, monkeypatch):
    """Every shared scenario with dumps: the facts with pairs split on 4 workers equal the facts
    of the reference one-pass path."""
    from precdx.collectors.msprobe import collect
    from precdx.errors import Warnings
    from precdx.pipeline import collect as collect_facts
    from precdx.pipeline import discover

    cases = [p for p in sorted((shared_dir / "scenarios").iterdir())
             if (p / "expected.yaml").is_file() and any(p.rglob("dump.json"))]
    assert cases
    monkeypatch.setattr(split, "SPLIT_MIN_BYTES", 0)
    for case in cases:
        with reference_impl.reference_pipeline(monkeypatch):
            w = Warnings()
            ref = [f.to_json() for f in collect_facts(discover(case, warnings=w), w)]
            ref_w = list(w.items)
        monkeypatch.setattr(collect, "cpu_count", lambda: 4)
        w = Warnings()
        got = [f.to_json() for f in collect_facts(discover(case, warnings=w), w)]
        assert got == ref and list(w.items) == ref_w, case.name


# ---------------------------------------------------------------- the range reader
def _ref_items(raw: bytes):
    try:
        return ("ok", [(k, norm(v)) for k, v in jsonstream.stream_kvitems(io.BytesIO(raw), "data")])
    except Exception as exc:  # noqa: BLE001 - any reference failure: the fast reader must not answer
        return ("error", type(exc).__name__)


def _fast_items(path: Path, start: int = 0, end: int | None = None):
    try:
        return ("ok", [(k, norm(v)) for k, v in RangeReader(path, start, end).entries()])
    except Unsupported:
        return ("unsupported", None)


ODD = [
    b'{"data": {"a": {"Max": NaN, "Min": -Infinity, "Norm": Infinity}, "b": [1, NaN]}}',
    b'{"data": {"a": {"v": "text, NaN inside", "w": ":Infinity"}}}',
    b'{"data": {"a": 1, "b": [1.5e-05, -0.0, 0, -0, 1E5, 2.5e-324, 1e-400]}}',
    b'{"data": {"a": 9223372036854775807}}', b'{"data": {"a": 9223372036854775808}}',
    b'{"data": {"a": -9223372036854775808}}', b'{"data": {"a": 1e400}}', b'{"data": {"a": 1.8e308}}',
    b'{"data": {"a": "\\ud800"}, "x": 1}', b'{"data": {"\\u00e9": 1}}', b'{"data": {"a": "\\u0000\\n\\"\\/"}}',
    b'{"data": {"a": "\xc3\xa9"}}', b'{"data": {"a": "\xff"}}', b'{"data": {"a": "\x01"}}',
    b'\xef\xbb\xbf{"data": {"a": 1}}', b'', b'   ', b'[]', b'{}', b'{"data": []}', b'{"data": null}',
    b'{"data": {}}', b'{"data": {"a": 1}, "data": {"b": 2}}', b'{"x": {"data": {"c": 1}}, "data": {"d": 2}}',
    b'{"data": {"a": 1},}', b'{"data": {"a": 1,}}', b'{"data": {"a": 1}} trailing', b'{"data": {"a": 1}}\n\n',
    b'{"data": {"a": {"b": [[[1]]]}}, "after": {"k": {"z": 1}}}', b'{"data": {"a": 1', b'{"data": {"a": tru',
    b'{"data": {"a": 01}}', b'{"data": {"a": .5}}', b'{"data": {"a": +1}}', b'{"data": {"a" 1}}',
    b'{"data":{"a":{"x":1},"b":{"y":[1,2,{"z":NaN}]}}}', b'{\t"data"\r:\n{"a"\t:\t1}}', b'{"data": {"a": 1}\x0c}',
    b'{"data": {"a": ' + b"[" * 1200 + b"]" * 1200 + b'}}', b'{"data": {"a": ' + b"9" * 5000 + b'}}',
    b'{"data": {"a": {"k": 1, "k": 2}}}', b'{"task": "x", "data": {"Torch.a.0.forward": {"output": []}}, "z": []}',
]


@pytest.mark.parametrize("chunk", [1 << 20, 7])
def test_range_reader_agrees_with_the_reference_or_declines(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(jsonstream, "_CHUNK", chunk)
    declined = 0
    for k, raw in enumerate(ODD):
        p = tmp_path / f"{k}.json"
        p.write_bytes(raw)
        fast = _fast_items(p)
        if fast[0] == "unsupported":
            declined += 1
            continue
        assert fast == _ref_items(raw), raw[:80]
    assert declined < len(ODD) - 10   # most documents are read here, not declined


def test_range_reader_on_every_cut(tmp_path, monkeypatch):
    """Cut a real-looking dump at every comma: a cut between two entries of `data` reads the same
    as the whole; any other cut is declined by one of the two ranges."""
    monkeypatch.setattr(jsonstream, "_CHUNK", 64)
    entries = _entries(6, 21)
    p = _write(tmp_path / "d.json", entries)
    raw = p.read_bytes()
    raw = raw.replace(b'"framework": "pytorch"', b'"framework": "pytorch", "extra": {"k": {"v": [1, 2]}, "w": 3}')
    raw = raw.rstrip()[:-1] + b', "after": {"Functional.x.0.forward": {"output": []}, "q": 1}}\n'
    p.write_bytes(raw)
    whole = _fast_items(p)
    assert whole == _ref_items(raw) and len(whole[1]) == len(entries)
    boundaries = 0
    for cut in (i for i, c in enumerate(raw) if c == ord(",")):
        first, second = _fast_items(p, 0, cut), _fast_items(p, cut + 1, None)
        if first[0] == "ok" and second[0] == "ok":
            boundaries += 1
            assert first[1] + second[1] == whole[1], cut
    assert boundaries == len(entries) - 1   # exactly the commas between two data entries


# ---------------------------------------------------------------- per-pair and per-entry paths
def _random_leaf(rng: random.Random, slot: str) -> TensorInfo:
    roll = rng.random()
    if roll < 0.08:
        return TensorInfo(slot, "none")
    if roll < 0.16:
        return TensorInfo(slot, "scalar", value=rng.choice(["1", "2", "-1", "True"]))
    vals = [rng.choice([1.0, -1.0, 0.5, 2.0, 1e-3, 0.0, 1e30, rng.uniform(-3, 3)]) for _ in range(4)]
    if rng.random() < 0.1:
        vals[rng.randrange(4)] = rng.choice([math.nan, math.inf, -math.inf, None, 3])
    t = TensorInfo(slot, "tensor", rng.choice(["torch.float32", "torch.float32", "torch.bfloat16"]),
                   rng.choice([(4, 8), (4, 8), (8,), (4, "x")]), *vals,
                   rng.choice([None, None, None, "ab12"]), rng.choice([True, False, None]))
    t.bad = t._classify()
    return t


def _twin(rng: random.Random, t: TensorInfo) -> TensorInfo:
    if rng.random() < 0.3:
        return dataclasses.replace(t)
    if t.kind != "tensor" or rng.random() < 0.1:
        return _random_leaf(rng, t.slot)
    u = dataclasses.replace(t, **{k: (v * (1 + rng.uniform(-0.05, 0.05)) if type(v) is float else v)
                                  for k, v in (("max", t.max), ("min", t.min), ("mean", t.mean), ("norm", t.norm))})
    if rng.random() < 0.05:
        u.dtype = "torch.float16"
    if rng.random() < 0.05:
        u.requires_grad = not u.requires_grad if u.requires_grad is not None else True
    u.bad = u._classify()
    return u


def test_compare_summary_equals_compare_api():
    from precdx.collectors.msprobe.entries import Entry
    rng = random.Random(5)
    quick = 0
    for i in range(6000):
        name = parse_entry_name(rng.choice(["Functional.linear.0.forward", "Torch.empty.1.forward",
                                            "Module.a.B.forward.0", "Tensor.to.2.backward"]))
        ins = [_random_leaf(rng, f"input.{k}") for k in range(rng.randint(0, 3))]
        prm = [_random_leaf(rng, f"parameters.{k}") for k in ("weight", "bias")[:rng.randint(0, 2)]]
        outs = [_random_leaf(rng, f"output.{k}") for k in range(rng.randint(0, 2))]
        a = Entry(name, i, ins, prm, outs)
        b = Entry(name, i, [_twin(rng, t) for t in ins], [_twin(rng, t) for t in prm], [_twin(rng, t) for t in outs])
        if rng.random() < 0.05:
            b.outputs.append(_random_leaf(rng, "output.9"))
        if rng.random() < 0.05:   # a statistic that overflowed (finite extremes, inf norm): NaN errors
            for t in (*a.inputs, *b.inputs):
                if t.kind == "tensor" and type(t.norm) is float:
                    t.norm = -math.inf
        for mode in ("statistics", "exact", "md5"):
            s = compare_summary(a, b, mode)
            if s is None:
                continue
            quick += 1
            d = compare_api(a, b, mode)
            assert norm(s) == norm((d.label, d.diverged, d.out_err, d.in_err)), (mode, a, b)
            assert not (d.input_reasons() & {"dtype", "shape", "scalar_arg", "md5", "nonfinite"})
    assert quick > 1500


def test_build_entry_equals_the_reference():
    rng = random.Random(8)
    bodies = [body for _, body in _entries(300, 31)] + [body for _, body in _entries(100, 32, md5=True)]
    odd = [{"input_args": [[[{"dtype": "x", "shape": [1, "2", 3.0], "Max": True, "Min": "nan", "Mean": 2 ** 70,
                              "Norm": None}]]], "input_kwargs": {"a": {"b": {"c": 1}}, "0": None}},
           {"args": [1, "s", {"type": "int", "value": 7.7e-321}], "output": {"x": {"value": None, "type": "t"}}},
           {"output": [{"Max": 7.7e-321, "Min": -8.8e-321, "Mean": 8.8e-321, "Norm": 1.0, "shape": [],
                        "dtype": "torch.bool"}, {"Max": True, "Min": False, "dtype": "torch.bool", "shape": [2]}]},
           "not a dict", {"parameters": {"w": {"dtype": "f", "Max": [1], "shape": None}}}, {}]
    deep: Any = 1
    for _ in range(70):
        deep = [deep]
    odd.append({"input_args": [deep], "output": [{"x": deep}]})
    names = ["Functional.linear.0.forward", "Module.a.Linear.parameters_grad.0", "Module.b.C.forward.1",
             "weird", "Cell.x.Y.backward.2", "Tensor.x.3.debug"]
    for i, body in enumerate(bodies + odd * 3):
        name = rng.choice(names)
        i1, i2 = EntryIssues(), EntryIssues()
        assert norm(build_entry(name, body, i, i1)) == norm(reference_impl.build_entry(name, body, i, i2)), body
        assert norm(i1) == norm(i2)
