"""Benchmark of `precdx serve`: concurrent chat clients on 127.0.0.1, each with its own session,
answering the engine's questions turn by turn. Prints throughput and p50/p99 latency, against
/healthz measured in the same run as the reference, and fails (exit 1) if any response carries
another session's facts or any request gets a server error.

    python bench/serve [--clients 8] [--requests 400] [--seconds 60] [--workers 2] [--rules DIR]

Bounded in request count and time; it starts its own server on a free loopback port and stops it.
"""
from __future__ import annotations

import argparse
import os
import random
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"  # loopback only, by design


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[k]


class Budget:
    def __init__(self, requests: int, seconds: float) -> None:
        self.left = requests
        self.deadline = time.monotonic() + seconds
        self.lock = threading.Lock()

    def take(self) -> bool:
        with self.lock:
            if self.left <= 0 or time.monotonic() > self.deadline:
                return False
            self.left -= 1
            return True


def start_server(args, db: str) -> tuple[subprocess.Popen, str, object]:
    port = free_port()
    url = f"http://{HOST}:{port}"
    env = dict(os.environ)
    env.setdefault("PRECDX_RATE_LIMIT", "0")  # the benchmark's clients share one address: no per-client limit
    if args.rules:
        env["PRECDX_SERVICE_RULES"] = str(Path(args.rules).resolve())
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen([sys.executable, str(REPO / "cli.py"), "serve", "--host", HOST, "--port", str(port),
                             "--workers", str(args.workers), "--db", db], cwd=REPO, env=env, stdout=log,
                            stderr=subprocess.STDOUT)
    end = time.monotonic() + 60
    while time.monotonic() < end:
        if proc.poll() is not None:
            log.seek(0)
            sys.exit(f"bench/serve: server exited: {log.read().decode(errors='replace')[-2000:]}")
        try:
            if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                return proc, url, log
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    sys.exit("bench/serve: server did not come up within 60 s")


def main() -> int:
    parser = argparse.ArgumentParser(prog="bench/serve", description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=400, help="total request budget")
    parser.add_argument("--seconds", type=float, default=60.0, help="wall-time budget")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rules", default=None, help="rule pack for the server (default: the packaged one)")
    args = parser.parse_args()

    tmp = tempfile.mkdtemp(prefix="precdx-bench-")
    proc, url, log = start_server(args, f"sqlite:///{tmp}/sessions.sqlite3")
    markers = {i: f"bench-client-{i:03d}-{secrets.token_hex(6)}" for i in range(args.clients)}
    latencies: dict[str, list[float]] = {"healthz": [], "create": [], "turn": [], "get": []}
    problems: list[str] = []
    lock = threading.Lock()

    def timed(client: httpx.Client, kind: str, method: str, path: str, **kw) -> httpx.Response:
        started = time.perf_counter()
        r = client.request(method, url + path, timeout=120, **kw)
        with lock:
            latencies[kind].append(time.perf_counter() - started)
        if r.status_code >= 500:
            with lock:
                problems.append(f"{method} {path}: {r.status_code} {r.text[:200]}")
        return r

    def check_isolation(i: int, text: str, where: str) -> None:
        mine = markers[i]
        leaked = [m for j, m in markers.items() if j != i and m in text]
        if leaked or mine not in text:
            with lock:
                problems.append(f"client {i} {where}: {'saw ' + ', '.join(leaked) if leaked else 'lost its own facts'}")

    try:
        # reference: the cheapest request, measured alone, in this run
        with httpx.Client() as c:
            for _ in range(50):
                timed(c, "healthz", "GET", "/healthz")
        budget = Budget(args.requests, args.seconds)
        started = time.monotonic()

        def client(i: int) -> None:
            rng = random.Random(i)
            with httpx.Client() as c:
                if not budget.take():
                    return
                facts = [{"type": "run", "role": "target", "name": markers[i]},
                         {"type": "run", "role": "baseline", "name": f"{markers[i]}-base"}]
                r = timed(c, "create", "POST", "/v1/sessions", json={"facts": facts})
                if r.status_code != 201:
                    with lock:
                        problems.append(f"client {i}: create {r.status_code} {r.text[:200]}")
                    return
                state = r.json()
                sid = state["session_id"]
                check_isolation(i, r.text, "create")
                while budget.take():
                    question = state.get("next_question")
                    if question is None or rng.random() < 0.2:
                        r = timed(c, "get", "GET", f"/v1/sessions/{sid}")
                        if question is None:  # settled or nothing left: start over in a new session
                            check_isolation(i, r.text, "get")
                            if not budget.take():
                                return
                            r = timed(c, "create", "POST", "/v1/sessions", json={"facts": facts})
                            if r.status_code != 201:
                                return
                            sid = r.json()["session_id"]
                    else:
                        answer = rng.choice(["yes", "no", "no", "skip"])
                        r = timed(c, "turn", "POST", f"/v1/sessions/{sid}/turns",
                                  json={"answers": [{"question": question["id"], "answer": answer}]})
                    if r.status_code >= 400:
                        with lock:
                            problems.append(f"client {i}: {r.status_code} {r.text[:200]}")
                        return
                    check_isolation(i, r.text, "turn")
                    state = r.json()

        threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - started
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()

    session_lat = latencies["create"] + latencies["turn"] + latencies["get"]
    total = len(session_lat)
    ref50, ref99 = percentile(latencies["healthz"], 0.5), percentile(latencies["healthz"], 0.99)
    print(f"bench/serve: {args.clients} clients, {args.workers} workers, {total} session requests in {elapsed:.1f} s")
    print(f"  throughput      {total / elapsed:8.1f} req/s")
    for kind in ("create", "turn", "get"):
        vals = latencies[kind]
        if vals:
            print(f"  {kind:<7} n={len(vals):<5} p50 {percentile(vals, 0.5) * 1000:8.1f} ms   "
                  f"p99 {percentile(vals, 0.99) * 1000:8.1f} ms")
    p50, p99 = percentile(session_lat, 0.5), percentile(session_lat, 0.99)
    print(f"  all     n={total:<5} p50 {p50 * 1000:8.1f} ms   p99 {p99 * 1000:8.1f} ms   "
          f"(mean {statistics.fmean(session_lat) * 1000:.1f} ms)" if session_lat else "  no session requests")
    print(f"  reference /healthz p50 {ref50 * 1000:.2f} ms, p99 {ref99 * 1000:.2f} ms; "
          f"session p50 = {p50 / ref50:.0f}x healthz p50")
    if problems:
        print(f"FAIL: {len(problems)} problem(s):")
        for p in problems[:20]:
            print("  " + p)
        return 1
    print("ok: no response carried another session's facts; no server errors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
