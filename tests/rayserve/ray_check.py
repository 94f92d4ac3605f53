"""Run inside a private network namespace (``unshare --net``): a real Ray Serve testbed, exercised.

    unshare --net python tests/rayserve/ray_check.py OUTDIR

Starts a one-node Ray cluster with one Serve application per tier wrapping the engine emulator
(free: fixed 1 replica; standard: Ray's default autoscaling policy; premium: the inferslice queue
policy as a Ray custom policy), sends requests, loads premium past its replicas' capacity, sets
standard's replicas through the Ray Serve actuator (its autoscaler off), and writes what it saw to OUTDIR (facts.json, the
Serve REST answer, the Ray agent's /metrics and the engine's own /metrics) for the test to judge.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp

from inferslice.actions import Action, ActionKind
from inferslice.control.actuators.rayserve import RayServeActuator
from inferslice.testbed.rayserve.cluster import RayCluster, running_replicas
from inferslice.testbed.rayserve.config import serve_config
from inferslice.topology import load_topology, topology_from_dict

HTTP_PORT = 8000
METRICS_PORT = 8080


def topology() -> Any:
    data = load_topology().model_dump(mode="json")
    data["model"] = "tiny"
    data["timing"] = {"cold_start_s": 1.0, "upscale_delay_s": 1.0, "downscale_delay_s": 600.0, "look_back_period_s": 2.0,
                      "scrape_interval_s": 1.0}
    for t in data["tiers"]:  # free may have 1 (its quota); free's bound for the actuator is raised in the check
        t.update({"replicas_min": 1, "max_ongoing_requests": 2, "target_ongoing_requests": 2.0})
        t["replicas_max"] = min(t["replicas_max"], 3)
    return topology_from_dict(data)


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as r:
        return bytes(r.read())


async def stream(s: aiohttp.ClientSession, tier: str, tokens: int) -> tuple[int, str]:
    body = {"model": "tiny", "messages": [{"role": "user", "content": "the cat sat on the mat"}], "max_tokens": tokens,
            "stream": True, "stream_options": {"include_usage": True}, "ignore_eos": True}
    async with s.post(f"http://127.0.0.1:{HTTP_PORT}/{tier}/v1/chat/completions", json=body) as r:
        return r.status, await r.text()


async def load(tier: str, n: int, tokens: int) -> list[tuple[int, str]]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as s:
        return list(await asyncio.gather(*(stream(s, tier, tokens) for _ in range(n))))


def main(out: Path) -> int:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    out.mkdir(parents=True, exist_ok=True)
    top = topology()
    facts: dict[str, Any] = {}
    t0 = time.monotonic()
    # Ray's session sockets must have short paths (AF_UNIX: 107 bytes): not under pytest's tmp_path.
    ray_tmp = Path(tempfile.mkdtemp(prefix="isray-", dir="/tmp"))
    cluster = RayCluster(ray_tmp, metrics_port=METRICS_PORT)
    cluster.start()
    facts["ray_start_s"] = time.monotonic() - t0
    try:
        kwargs = {"premium": {"sample_s": 1.0, "scale_in_after_s": 600.0, "queue_drain_s": 5.0}}
        cfg = serve_config(top, http_host="127.0.0.1", http_port=HTTP_PORT,
                           modes={"free": "fixed", "standard": "ray-default", "premium": "inferslice-queue"}, policy_kwargs=kwargs)
        cluster.put(cfg)
        cluster.wait_running(top.tier_names, timeout_s=180)
        facts["first_running_s"] = time.monotonic() - t0
        first = {tier: asyncio.run(load(tier, 1, 8))[0] for tier in top.tier_names}
        facts["first_status"] = {t: st for t, (st, _) in first.items()}
        facts["first_done"] = {t: txt.rstrip().endswith("data: [DONE]") for t, (_, txt) in first.items()}
        # Free: a few requests, then the engine's own exposition and the Ray agent's must agree.
        asyncio.run(load("free", 6, 16))
        time.sleep(12.0)  # mirror sync (1 s) + Ray's metrics export period
        (out / "free-engine-metrics.txt").write_bytes(get(f"http://127.0.0.1:{HTTP_PORT}/free/metrics"))
        (out / "ray-agent-metrics.txt").write_bytes(get(f"http://127.0.0.1:{METRICS_PORT}/metrics"))
        (out / "serve-applications.json").write_text(json.dumps(cluster.get(), indent=1))
        # Premium: 12 long requests on 1 replica x 2 slots -> a standing queue at the handle.
        before = cluster.get()["applications"]["premium"]["deployments"]["LLMServer"]["target_num_replicas"]
        statuses = asyncio.run(load("premium", 12, 300))
        after = cluster.get()["applications"]["premium"]
        facts["premium_target_before"] = before
        facts["premium_target_after"] = after["deployments"]["LLMServer"]["target_num_replicas"]
        facts["premium_statuses"] = sorted({st for st, _ in statuses})
        # The actuator: free fixed at 2 through Serve's REST API, twice (idempotent).
        free_before = sorted(r["replica_id"] for r in cluster.get()["applications"]["free"]["deployments"]["LLMServer"]["replicas"])
        act = RayServeActuator(f"http://127.0.0.1:{cluster.dashboard_port}", bounds={"standard": (1, 3)})
        action = Action(ActionKind.SET_REPLICAS, "standard", 2, reason="test", id="t-1")
        facts["apply_1"] = act.apply(action).status.value
        cluster.wait_running(["standard"], timeout_s=120, replicas={"standard": 2})
        facts["apply_2"] = act.apply(action).status.value
        obs = act.observe()
        facts["observe"] = {k: v.to_dict() for k, v in obs.items()}
        free_after = sorted(r["replica_id"] for r in cluster.get()["applications"]["free"]["deployments"]["LLMServer"]["replicas"])
        facts["free_untouched"] = free_before == free_after  # the other applications are sent back as deployed
        facts["standard_running"] = running_replicas(cluster.get()["applications"]["standard"])
        facts["total_s"] = time.monotonic() - t0
    finally:
        cluster.stop()
        shutil.copy(ray_tmp / "ray-start.log", out / "ray-start.log")
        shutil.rmtree(ray_tmp, ignore_errors=True)
    (out / "facts.json").write_text(json.dumps(facts, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1])))
