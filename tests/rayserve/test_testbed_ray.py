"""A real Ray Serve in the real netns testbed (CI's real-Ray testbed test): ``testbed up --serving premium=ray``.

Premium is served by a Ray 2.60 Serve application (one replica proxying to slot 0's engine at its PoP),
free and standard stay on TierFronts. Checked: the load generator, from the client namespace through
premium's client edge, gets every request answered; the exporter (root namespace, following the
registry) re-exports premium's engine families read from the real Ray metrics agent, with the slice
label, and Serve's own; premium's edge class carries that traffic (free's does not) and a cap cut on it
binds (the HTB class goes over its limit); the replica count set through the tier's admin API (as
the testbed actuator does) starts a second Serve replica on the next slot's engine; ``down`` leaves no
Ray process. Needs root (namespaces) and the ``ray`` extra; skipped with the reason otherwise. About 1-2
minutes on 2 cores, plus the wait for the testbed lock.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from inferslice.common.exposition import parse_exposition
from inferslice.common.registry import read_registry
from inferslice.testbed import lock  # not `testbed_lock` itself: pytest would collect it as a test

pytestmark = [pytest.mark.root, pytest.mark.slow]

PREFIX = f"isl-r{os.getpid() % 10000:04d}-"  # <prefix>mgmt must fit in 15 characters
EXPORTER = "http://127.0.0.1:9470/metrics"
SCRAPE_WAIT_S = 60.0  # Ray's agent exports every few seconds; the exporter scrapes on request
SCALE_WAIT_S = 90.0  # a new Serve replica: Ray worker start + the engine's cold start at its PoP, on 2 busy cores


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root: network namespaces, TUN devices and qdiscs"
    if importlib.util.find_spec("ray") is None:
        return "ray is not installed: pip install -e '.[ray]'"
    return None


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    d = tmp_path / "state"
    with lock.testbed_lock():
        yield d
        from inferslice.testbed.net import down

        down(d, prefix=PREFIX)  # even when the test failed halfway


def _load(url: str, netns: str, out: Path, seconds: int) -> dict[str, object]:
    """The project's load generator, inside the client namespace, a few short requests at a time."""
    argv = [sys.executable, "-m", "inferslice.cli", "load", "--url", url, "--slice", "premium", "--netns", netns,
            "--concurrency", "2", "--duration-s", str(seconds), "--drain-timeout-s", "10", "--dataset-name", "random",
            "--random-input-len", "64", "--random-output-len", "32", "--save-result", str(out), "--quiet"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    result: dict[str, object] = json.loads(out.read_text())
    return result


def _exporter_samples() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(EXPORTER, timeout=10) as r:
        expo = parse_exposition(r.read().decode())
    return {(s.name, tuple(sorted(s.labels))): s.value for f in expo.families for s in f.samples}


def _premium(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str) -> float:
    return sum(v for (n, labels), v in samples.items() if n == name and ("slice", "premium") in labels)


def _ray_pids(temp_dir: Path) -> list[int]:
    """Live processes of this testbed's Ray session (their command lines name its temp dir)."""
    out = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                cmd = Path(entry.path, "cmdline").read_bytes()
            except OSError:
                continue
            if str(temp_dir).encode() in cmd:
                out.append(int(entry.name))
    return out


@pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))
def test_premium_on_real_ray_serve_in_the_netns_testbed(state_dir: Path, tmp_path: Path) -> None:
    from inferslice.testbed.net import edge_counters, set_cap, up
    from inferslice.testbed.rayserve.services import RAY_READY_TIMEOUT_S, ray_services, resolve_serving
    from inferslice.testbed.rayserve.serving import ray_temp_dir

    topo = tmp_path / "topology.yaml"
    text = (Path(__file__).parents[2] / "testbed" / "topology.yaml").read_text()
    topo.write_text(text.replace("cold_start_s: 8 ", "cold_start_s: 1 "))  # a short cold start keeps the test short
    serving = resolve_serving(["premium=ray"], ["free", "standard", "premium"])
    t0 = time.monotonic()
    reg = up(str(topo), state_dir, prefix=PREFIX, service_factory=ray_services(serving), ready_timeout_s=RAY_READY_TIMEOUT_S)
    print(f"testbed up with premium on Ray Serve: {time.monotonic() - t0:.0f} s")
    front = reg.front("premium")
    assert front is not None and front.url.endswith(":8001/premium")
    ray_dir = ray_temp_dir(str(state_dir.resolve()))
    assert _ray_pids(ray_dir), "no Ray processes of this testbed"
    placed = read_registry(state_dir).replicas_of("premium")
    assert [(r.id, r.state) for r in placed] == [("premium-0", "ready")] and placed[0].ray_replica_id

    before = edge_counters(state_dir)
    result = _load(front.url, reg.client_netns(), tmp_path / "calm.json", 4)
    after = edge_counters(state_dir)
    print(f"calm: {result['completed']} completed, {result['failed']} failed")
    assert int(str(result["completed"])) > 0 and result["failed"] == 0
    # The requests crossed premium's client-edge class, and not free's.
    assert after["premium"].receive_bytes > before["premium"].receive_bytes
    assert after["premium"].transmit_bytes > before["premium"].transmit_bytes
    assert after["free"].receive_bytes == before["free"].receive_bytes

    # The exporter read premium's engine (through Ray's agent) and Serve's router metrics.
    completed = int(str(result["completed"]))
    t1 = time.monotonic()
    deadline = t1 + SCRAPE_WAIT_S
    samples = _exporter_samples()
    while time.monotonic() < deadline and _premium(samples, "inferslice_engine_time_to_first_token_seconds_count") < completed:
        time.sleep(2)
        samples = _exporter_samples()
    print(f"exporter caught up with the agent after {time.monotonic() - t1:.0f} s")
    assert _premium(samples, "inferslice_engine_time_to_first_token_seconds_count") >= completed
    assert _premium(samples, "inferslice_serve_target_replicas") == 1.0
    ups = {dict(labels).get("replica"): v for (n, labels), v in samples.items()
           if n == "inferslice_target_up" and dict(labels).get("target") == front.metrics_url}  # fmt: skip
    assert ups == {"premium-0": 1.0, "front": 1.0}

    # The replica count through the tier's admin API (what the testbed actuator calls): Serve's config
    # rewritten, the second replica claims slot 1 and its engine starts at that slot's PoP.
    from inferslice.testbed.ops import set_replicas

    t4 = time.monotonic()
    assert set_replicas("premium", 2, state_dir)["target"] == 2
    placed = []
    while time.monotonic() - t4 < SCALE_WAIT_S:
        placed = [(r.id, r.pop, r.url, r.state) for r in read_registry(state_dir).replicas_of("premium")]
        if [x[3] for x in placed] == ["ready", "ready"]:
            break
        time.sleep(1)
    print(f"scaled premium to 2 in {time.monotonic() - t4:.0f} s: {placed}")
    assert placed == [
        ("premium-0", "bristol", "http://10.203.0.10:8000", "ready"),
        ("premium-1", "bristol", "http://10.203.0.11:8000", "ready"),
    ]

    # A cap cut on premium binds on premium's class.
    set_cap("premium", 50e3, "receive", state_dir)
    cut_before = edge_counters(state_dir)["premium"].receive
    t2 = time.monotonic()
    _load(front.url, reg.client_netns(), tmp_path / "cut.json", 3)
    cut_after = edge_counters(state_dir)["premium"].receive
    print(f"cap cut load: {time.monotonic() - t2:.0f} s")
    print(f"cap cut: overlimits {cut_before.overlimits} -> {cut_after.overlimits}, bytes +{cut_after.bytes - cut_before.bytes}")
    assert cut_after.rate_bps == pytest.approx(50e3, rel=0.05)
    assert cut_after.overlimits > cut_before.overlimits

    from inferslice.testbed.net import down

    t3 = time.monotonic()
    down(state_dir, prefix=PREFIX)
    print(f"down: {time.monotonic() - t3:.0f} s")
    deadline = time.monotonic() + 10
    while _ray_pids(ray_dir) and time.monotonic() < deadline:
        time.sleep(0.2)  # killed ones are reaped by init
    assert _ray_pids(ray_dir) == []
    left = subprocess.run(["pgrep", "-af", "raylet"], capture_output=True, text=True).stdout
    print(f"after down: Ray temp dir {'left' if ray_dir.exists() else 'removed'}; raylets on the machine: {left.strip() or 'none'}")
