"""Isolation of the durable back end: concurrent requests never see each other's facts, and
many sequential requests leave no threads, engine sessions or memory behind."""
from __future__ import annotations

import threading

import pytest

from precdx.matching.durable_engine import DurableMatcher
from precdx.matching.python_engine import PythonMatcher
from tests.matching.vocab import facts, make_pack


def _rss_kb() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS in /proc/self/status")


def _pack():
    return make_pack(
        # fires only if an alpha and a beta meet in one request
        {"all": [{"fact": "tdx_alpha", "as": "a"}, {"fact": "tdx_beta", "as": "b"}]},
        # an alpha with no beta anywhere in the request
        {"all": [{"fact": "tdx_alpha", "as": "a", "where": {"x": {"ge": 0.0}}}],
         "none": [{"fact": "tdx_beta"}]},
        # two facts of one request joined on a per-request marker
        {"all": [{"fact": "tdx_beta", "as": "b", "where": {"k": "p"}},
                 {"fact": "tdx_beta", "as": "c", "where": {"n": {"eq": {"ref": "b.n"}}}}]},
    )


def _request(k: int) -> list:
    """Even requests hold only alphas, odd ones only betas, each with its own marker `k`."""
    if k % 2 == 0:
        return facts(*({"type": "tdx_alpha", "x": float(k), "n": k} for _ in range(1 + k % 3)))
    return facts({"type": "tdx_beta", "k": "p", "n": k}, {"type": "tdx_beta", "k": "q", "n": k},
                 *({"type": "tdx_beta", "k": "r", "n": k + 1000} for _ in range(k % 4)))


def test_interleaved_requests_never_see_each_others_facts():
    pack = _pack()
    durable, python = DurableMatcher(pack), PythonMatcher(pack)
    requests = [_request(k) for k in range(8)]
    expected = [python.run(fs) for fs in requests]
    assert all(expected) and not any(f.rule_id == "TDX-001" for e in expected for f in e)
    errors: list[str] = []
    start = threading.Barrier(len(requests))

    def worker(k: int) -> None:
        start.wait()
        for i in range(150):
            got = durable.run(requests[k])
            if got != expected[k]:
                errors.append(f"thread {k} request {i}: {got} != {expected[k]}")
                return

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(len(requests))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert not errors, errors[:3]
        assert durable.live_sessions() == 0
    finally:
        durable.close()


@pytest.mark.slow  # a stress test: ten thousand requests
def test_ten_thousand_requests_leave_no_threads_sessions_or_memory():
    pack = _pack()
    durable, python = DurableMatcher(pack), PythonMatcher(pack)
    requests = [_request(k) for k in range(4)]
    expected = [python.run(fs) for fs in requests]
    try:
        for i in range(400):  # warm-up: allocator pools and id/session tables reach size
            durable.run(requests[i % 4])
        threads, rss = threading.active_count(), _rss_kb()
        for i in range(10_000):
            got = durable.run(requests[i % 4])
            if i % 997 == 0:
                assert got == expected[i % 4]
        assert threading.active_count() == threads
        assert durable.live_sessions() == 0 and durable.retired_sessions() == 0
        grown = _rss_kb() - rss
        assert grown < 8 * 1024, f"RSS grew by {grown} kB over 10,000 requests"
    finally:
        durable.close()


def test_matchers_come_and_go_without_threads_or_rulesets_left():
    pack = _pack()
    fs = _request(0)
    threads = threading.active_count()
    for _ in range(200):
        m = DurableMatcher(pack)
        assert m.run(fs)
        m.close()
    assert threading.active_count() == threads
