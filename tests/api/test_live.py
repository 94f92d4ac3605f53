"""The real thing end to end: ``inferslice api`` under uvicorn, fed by a real Alertmanager.

Alertmanager (Debian ``prometheus-alertmanager``) runs on loopback with its webhook pointed at the API;
an alert posted to Alertmanager must arrive in ``GET /v1/alerts``. Skipped when the binary is absent.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from inferslice.bottleneck import classify
from inferslice.common.ports import free_port
from inferslice.service.store import Store
from inferslice.snapshot import snapshot_from_dict

from .conftest import READY_TIMEOUT_S, wait_ready

AM_BIN = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
TOKEN = "live-test-token-9f2c"  # distinctive, so a leak into the logs is found


AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    port = free_port()
    db = tmp_path / "api.db"
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    log = tmp_path / "api.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "inferslice.cli", "api", "--port", str(port), "--db", str(db), "--token-file", str(token_file),
             "--log-level", "info"],
            stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(base + "/readyz", proc, log)
        yield base, db
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_api_command_serves_and_persists(api: tuple[str, Path]) -> None:
    base, db = api
    body = {"slice": "free", "ttft_p99_s": 5, "tpot_p50_s": 0.026, "ref_tpot_p50_s": 0.025, "link_rx_bps": 9e5, "link_cap_bps": 1e7}
    r = httpx.post(base + "/v1/snapshots", json=body, headers=AUTH, timeout=5)
    assert r.status_code == 201 and r.json()["diagnosis"]["regime"] == "queue_limited"
    assert httpx.get(base + "/v1/topology", timeout=5).json()["links"]
    # Another connection (a second process could do the same) reads what the server wrote: WAL mode.
    reader = Store(db)
    try:
        assert reader.latest_diagnosis("free")["regime"] == "queue_limited"  # type: ignore[index]
    finally:
        reader.close()


def test_mutations_need_the_token_reads_do_not_and_it_is_never_logged(api: tuple[str, Path], tmp_path: Path) -> None:
    base, _ = api
    body = {"slice": "free", "ttft_p99_s": 0.1}
    ref = {"tpot_p50_s": 0.025}
    hook = {"version": "4", "groupKey": "g", "status": "firing", "receiver": "r", "alerts": []}
    for method, path, payload in (("POST", "/v1/snapshots", body), ("PUT", "/v1/slices/free/reference", ref), ("POST", "/v1/alerts", hook)):
        assert httpx.request(method, base + path, json=payload, timeout=5).status_code == 401, path
        wrong = {"Authorization": "Bearer not-the-token"}
        r = httpx.request(method, base + path, json=payload, headers=wrong, timeout=5)
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer", path
        assert httpx.request(method, base + path, json=payload, headers=AUTH, timeout=5).status_code in (200, 201), path
    for path in ("/v1/slices", "/v1/slices/free", "/v1/alerts", "/v1/topology", "/metrics"):
        assert httpx.get(base + path, timeout=5).status_code == 200, path
    assert TOKEN not in (tmp_path / "api.log").read_text()


@pytest.mark.skipif(AM_BIN is None, reason="prometheus-alertmanager is not installed")
def test_alertmanager_delivers_to_the_webhook(api: tuple[str, Path], tmp_path: Path) -> None:
    base, _ = api
    am_port = free_port()
    cfg = tmp_path / "am.yml"
    cfg.write_text(
        "route: {receiver: inferslice, group_by: [alertname, slice], group_wait: 1s, group_interval: 1s, repeat_interval: 1h}\n"
        f"receivers: [{{name: inferslice, webhook_configs: [{{url: '{base}/v1/alerts', send_resolved: true,"
        f" http_config: {{authorization: {{type: Bearer, credentials_file: '{tmp_path / 'token'}'}}}}}}]}}]\n"
    )
    assert AM_BIN is not None
    am = subprocess.Popen(
        [
            AM_BIN,
            f"--config.file={cfg}",
            f"--storage.path={tmp_path / 'am-data'}",
            f"--web.listen-address=127.0.0.1:{am_port}",
            "--cluster.listen-address=",
            "--log.level=warn",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        am_base = f"http://127.0.0.1:{am_port}"
        wait_ready(am_base + "/-/ready", am)
        alert = {
            "labels": {"alertname": "InferSliceTTFTBurnRateHigh", "slice": "standard", "severity": "page"},
            "annotations": {"summary": "standard burns its TTFT budget"},
        }
        assert httpx.post(am_base + "/api/v2/alerts", json=[alert], timeout=5).status_code == 200
        deadline = time.monotonic() + READY_TIMEOUT_S  # group_wait is 1 s; the rest is a loaded machine
        got: list[dict[str, object]] = []
        while time.monotonic() < deadline and not got:
            got = httpx.get(base + "/v1/alerts", params={"slice": "standard"}, timeout=5).json()
            time.sleep(0.3)
        assert got, "Alertmanager never delivered the alert"
        assert got[0]["status"] == "firing" and got[0]["receiver"] == "inferslice" and got[0]["fingerprint"]
    finally:
        am.terminate()
        am.wait(timeout=10)


def test_store_is_safe_across_threads(tmp_path: Path) -> None:
    store = Store(tmp_path / "threads.db")
    errors: list[BaseException] = []

    def writer(k: int) -> None:
        try:
            for i in range(40):
                snap = snapshot_from_dict({"slice": f"s{k}", "ttft_p99_s": 0.1 + i / 1000})
                store.record(snap, classify(snap), ts=float(i))
                store.latest_diagnoses()
        except Exception as err:  # noqa: BLE001 - any failure in a thread must fail the test
            errors.append(err)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(store.slices()) == ["s0", "s1", "s2", "s3"]
    assert all(len(store.diagnoses(f"s{k}")) == 40 for k in range(4))
    store.close()
