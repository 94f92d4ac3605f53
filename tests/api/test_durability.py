"""What ``POST /v1/snapshots`` acknowledges is stored: the group commit answers 201 only after the
transaction holding the snapshot committed, so a ``kill -9`` of the API loses nothing it acknowledged.

A real ``inferslice api`` (uvicorn, SQLite file) takes concurrent POSTs from several threads; once a
few hundred are acknowledged it is killed with SIGKILL while requests are still in flight. Every
window the API answered 201 for must be in the database afterwards, with its diagnosis; requests
that never got an answer may or may not be there.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from inferslice.common.ports import free_port
from inferslice.service.store import Store

from .conftest import wait_ready

TOKEN = "durability-test-token"


def test_nothing_acknowledged_is_lost_when_the_api_is_killed(tmp_path: Path) -> None:
    db = tmp_path / "api.db"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "inferslice.cli", "api", "--port", str(port), "--db", str(db), "--log-level", "warning"],
        env={**os.environ, "INFERSLICE_API_TOKEN": TOKEN},
    )
    acknowledged: dict[str, set[float]] = {"free": set(), "standard": set(), "premium": set()}
    lock = threading.Lock()
    stop = threading.Event()

    def writer(k: int, slice_name: str) -> None:
        i = 0
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5.0) as client:
            while not stop.is_set():
                ts = 1_800_000_000.0 + k * 1_000_000 + i
                i += 1
                body = {"slice": slice_name, "window_end_s": ts, "ttft_p99_s": 0.2, "tpot_p50_s": 0.026, "link_rx_bps": 1e5}
                try:
                    r = client.post("/v1/snapshots", json=body)
                except httpx.HTTPError:
                    return  # the server is gone: this request was never acknowledged
                if r.status_code == 201:
                    with lock:
                        acknowledged[slice_name].add(ts)

    try:
        wait_ready(base + "/readyz", proc)
        threads = [threading.Thread(target=writer, args=(k, name)) for k, name in enumerate(["free", "standard", "premium"] * 2)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 60
        while sum(len(v) for v in acknowledged.values()) < 300 and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)  # mid-stream: requests in flight, a commit perhaps half done
        proc.wait(timeout=10)
        stop.set()
        for t in threads:
            t.join(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    total = sum(len(v) for v in acknowledged.values())
    assert total >= 300, f"only {total} POSTs were acknowledged before the deadline"
    store = Store(db)
    try:
        for slice_name, windows in acknowledged.items():
            stored = {row["ts"] for row in store.snapshots(slice_name, limit=100_000)}
            diagnosed = {row["ts"] for row in store.diagnoses(slice_name, limit=100_000)}
            assert windows <= stored, f"{slice_name}: {len(windows - stored)} acknowledged snapshots lost"
            assert windows <= diagnosed, f"{slice_name}: {len(windows - diagnosed)} acknowledged diagnoses lost"
    finally:
        store.close()
