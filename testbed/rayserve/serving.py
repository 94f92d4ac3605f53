"""The netns testbed's Ray Serve (``inferslice testbed up --serving ray``): one service in the gateway namespace.

    python -m inferslice.testbed.rayserve.serving --topology PATH --tier premium [--tier ...] --state-dir DIR
        --relay HOST:PORT [--http-port 8001] [--metrics-port 8080]

It starts a one-node Ray cluster (cluster.py: auth off, dashboard on 127.0.0.1, inside this private
namespace), deploys one Serve application per named tier (config.py, ``fixed`` at the tier's
replicas_min: the platform owns the count), each replica proxying to its slot's engine at the tier's
PoP (pop_engine.py). Serve's one HTTP proxy listens on 0.0.0.0:``http-port`` of the gateway namespace,
so each Ray tier is reached at ``http://<tier's front IP>:<http-port>/<tier>``: traffic to it still
crosses that tier's client-edge class (the edge classifies by the tier's subnet).

The relay (on ``--relay``, the gateway's management address) is all the root namespace sees of Ray:
``GET /metrics``, the node metrics agent's ``ray_serve_*`` and ``ray_vllm_*`` families as the agent
wrote them (the other ~1 MB of Ray-internal families dropped), ``GET /healthz`` (200 once every
application runs its replicas) and, under ``/tiers/<tier>``, each Ray tier's TierFront-compatible admin
API (admin.py: replica count and autoscaling through Serve's config). Ray's own ports (GCS, raylet,
dashboard, the agent) listen on this namespace's loopback only (node IP 127.0.0.1) and are not relayed.
Every second the service joins Serve's replica list with the slot claims and publishes each Ray
tier's replicas as its registry fragment, with the relay as their metrics URL and Serve's replica id.
On SIGTERM it stops Ray (exactly the processes ``ray start`` started) and removes its temp dir.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import logging
import shutil
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from aiohttp import web

from inferslice.common.registry import ReplicaEntry, write_replicas_fragment
from inferslice.testbed.engine.host import split_hostport
from inferslice.testbed.rayserve.admin import TIERS_PATH, RayTierControl
from inferslice.testbed.rayserve.cluster import RayCluster
from inferslice.testbed.rayserve.config import Mode, serve_config
from inferslice.testbed.rayserve.pop_engine import SlotClaim, read_claims
from inferslice.testbed.service import run_service, wait_for_stop_signal
from inferslice.testbed.serving.admin import add_admin_routes
from inferslice.topology import Topology, load_topology

log = logging.getLogger(__name__)

HTTP_PORT = 8001  # Serve's proxy: beside the TierFronts' 8000 on the other tiers' front IPs (0.0.0.0:8000 would clash)
METRICS_PORT = 8080  # Ray's node metrics agent; must lie outside Ray's worker port range (10002-19999)
RELAY_PORT = 8266  # next to the dashboard's 8265, on the gateway's management address
PUBLISH_PERIOD_S = 1.0
RUNNING_TIMEOUT_S = 300.0  # Ray start (~15 s) + replicas' engines cold-starting at their PoPs, on 2 busy cores
AGENT_TIMEOUT_S = 5.0
STOP_GRACE_S = 1.5  # Ray's own shutdown, then SIGKILL: the lifecycle allows a service 3 s after SIGTERM
KEPT_PREFIXES = ("ray_serve_", "ray_vllm_")
_STATES = {"RUNNING": "ready", "STARTING": "starting", "STOPPING": "stopping", "PENDING_MIGRATION": "stopping"}


# -- pure --------------------------------------------------------------------------------------
def filter_exposition(text: str, prefixes: Iterable[str] = KEPT_PREFIXES) -> str:
    """The lines (HELP, TYPE, samples) of the families whose names start with one of ``prefixes``."""
    keep = tuple(prefixes)
    out: list[str] = []
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            name = line[7:].split(" ", 1)[0]
        elif line.startswith("#") or not line.strip():
            continue
        else:
            name = line.split("{", 1)[0].split(" ", 1)[0]
        if name.startswith(keep):
            out.append(line)
    return "\n".join(out) + "\n" if out else ""


def serve_replicas(apps: Mapping[str, Any], application: str) -> dict[str, str]:
    """{replica_id: state} of one application in Serve's ``GET /api/serve/applications/`` answer."""
    app = (apps.get("applications") or {}).get(application) or {}
    return {str(r.get("replica_id", "")): str(r.get("state", ""))
            for d in (app.get("deployments") or {}).values() for r in d.get("replicas") or []}  # fmt: skip


def tier_entries(top: Topology, tier: str, serve: Mapping[str, str], claims: Iterable[SlotClaim], metrics_url: str) -> list[ReplicaEntry]:
    """A Ray tier's registry replicas: each Serve replica (``{replica_id: state}``) whose engine is
    claimed, named by its slot's engine."""
    t = top.tier(tier)
    out: list[ReplicaEntry] = []
    for c in claims:
        state = serve.get(c.serve_replica_id)
        if state is None:
            continue  # a claim Serve no longer lists (its replica is going away)
        out.append(ReplicaEntry(id=c.engine_id, tier=tier, pop=c.pop, gpu=c.gpu, gpu_fraction=t.gpu_per_replica, gpu_share=1.0,
                                url=c.url, state=_STATES.get(state, "starting"), pid=c.pid, metrics_url=metrics_url,
                                ray_replica_id=c.serve_replica_id))  # fmt: skip
    return sorted(out, key=lambda e: e.id)


def ray_temp_dir(state_dir: str) -> Path:
    """Short on purpose: Ray's session sockets must fit in 107 bytes below it."""
    return Path(tempfile.gettempdir()) / f"inferslice-ray-{hashlib.sha1(state_dir.encode()).hexdigest()[:8]}"


# -- service ----------------------------------------------------------------------------------
class RayServing:
    def __init__(self, top: Topology, topology_path: str, tiers: list[str], state_dir: str, relay_url: str,
                 http_port: int = HTTP_PORT, metrics_port: int = METRICS_PORT) -> None:  # fmt: skip
        self.top = top
        self.topology_path = topology_path
        self.tiers = tiers
        self.state_dir = state_dir
        self.metrics_url = f"{relay_url}/metrics"
        self.http_port = http_port
        self.cluster = RayCluster(ray_temp_dir(state_dir), metrics_port=metrics_port)
        self.ready = False
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        # What the admin API set (admin.py); the Serve config is rebuilt from these on every change.
        self.modes: dict[str, Mode] = dict.fromkeys(tiers, "fixed")
        self.targets: dict[str, int] = {t: max(1, top.tier(t).replicas_min) for t in tiers}
        self.entries: dict[str, list[ReplicaEntry]] = {t: [] for t in tiers}  # as last published

    def start(self) -> None:
        """Blocking: Ray up and the applications deployed (not yet running)."""
        shutil.rmtree(self.cluster.temp_dir, ignore_errors=True)  # a previous run's, if it was killed
        self.cluster.start()
        self.apply()

    def apply(self) -> None:
        """PUT the whole Serve config for the current modes and targets (Serve leaves unchanged applications be)."""
        cfg = serve_config(self.top, http_host="0.0.0.0", http_port=self.http_port, tiers=self.tiers, replicas=self.targets,
                           modes=self.modes, pop_engines={"topology": self.topology_path, "state_dir": self.state_dir})  # fmt: skip
        self.cluster.put(cfg)

    def wait_running(self) -> None:
        self.cluster.wait_running(self.tiers, RUNNING_TIMEOUT_S, dict(self.targets))
        self.publish()
        self.ready = True

    def publish(self) -> None:
        apps = self.cluster.get()
        for t in self.tiers:
            entries = tier_entries(self.top, t, serve_replicas(apps, t), read_claims(self.state_dir, t), self.metrics_url)
            write_replicas_fragment(self.state_dir, t, entries)
            self.entries[t] = entries

    def agent_metrics(self) -> str:
        url = f"http://127.0.0.1:{self.cluster.metrics_port}/metrics"
        with self._opener.open(url, timeout=AGENT_TIMEOUT_S) as r:
            return filter_exposition(r.read().decode())

    def stop(self) -> None:
        # Within the lifecycle's grace before it SIGKILLs this service; Ray processes still left are
        # ended by `testbed down`, which stops every process in the testbed's namespaces.
        self.cluster.stop(grace_s=STOP_GRACE_S)
        shutil.rmtree(self.cluster.temp_dir, ignore_errors=True)


def relay_app(rs: RayServing) -> web.Application:
    async def healthz(request: web.Request) -> web.Response:
        return web.json_response({"ready": rs.ready, "tiers": rs.tiers}, status=200 if rs.ready else 503)

    async def metrics(request: web.Request) -> web.Response:
        try:
            text = await asyncio.to_thread(rs.agent_metrics)
        except (urllib.error.URLError, OSError) as err:
            return web.Response(status=502, text=f"ray metrics agent: {err}\n")
        return web.Response(text=text, content_type="text/plain", charset="utf-8")

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics)
    for t in rs.tiers:  # each Ray tier's TierFront-compatible admin API (admin.py)
        sub = web.Application()
        add_admin_routes(sub, RayTierControl(rs, t))
        app.add_subapp(f"{TIERS_PATH}/{t}", sub)
    return app


async def _publish_loop(rs: RayServing) -> None:
    try:
        await asyncio.to_thread(rs.wait_running)
    except (TimeoutError, urllib.error.URLError, OSError, ValueError) as err:
        log.error("ray serving: the applications did not come up (healthz stays 503): %s", err)
        return
    log.info("ray serving: %s running", ", ".join(rs.tiers))
    while True:
        await asyncio.sleep(PUBLISH_PERIOD_S)
        try:
            await asyncio.to_thread(rs.publish)
        except (urllib.error.URLError, OSError, ValueError) as err:
            log.warning("ray serving: cannot read Serve's replicas: %s", err)


async def _serve(args: argparse.Namespace) -> int:
    top = load_topology(args.topology)
    host, port = split_hostport(args.relay)
    rs = RayServing(top, str(Path(args.topology).resolve()), args.tier, str(Path(args.state_dir).resolve()), f"http://{host}:{port}",
                    args.http_port, args.metrics_port)  # fmt: skip
    runner = web.AppRunner(relay_app(rs), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    task: asyncio.Task[None] | None = None
    try:
        await asyncio.to_thread(rs.start)
        task = asyncio.get_running_loop().create_task(_publish_loop(rs))
        await wait_for_stop_signal()
    finally:
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await runner.cleanup()
        await asyncio.to_thread(rs.stop)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m inferslice.testbed.rayserve.serving", description=__doc__.splitlines()[0])
    ap.add_argument("--topology", required=True)
    ap.add_argument("--tier", action="append", required=True, help="a tier served by Ray Serve (repeatable)")
    ap.add_argument("--state-dir", required=True)
    ap.add_argument("--relay", required=True, help="HOST:PORT of the relay (the gateway's management address)")
    ap.add_argument("--http-port", type=int, default=HTTP_PORT)
    ap.add_argument("--metrics-port", type=int, default=METRICS_PORT)
    return run_service(_serve(ap.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
