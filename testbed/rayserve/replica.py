"""The Serve deployment whose replicas wrap an engine (one vLLM-compatible engine per replica).

Each Serve replica proxies the tier's OpenAI API to its engine, streaming SSE through. The engine is
either in-process (EngineModel + EngineDriver + the OpenAI-compatible ReplicaServer on an ephemeral
loopback port inside the Ray worker: the Ray checks and the timeline) or, on the netns testbed
(``--serving ray``), the replica of a placement slot at the tier's PoP (pop_engine.py; emulated or a
real vLLM, whatever that PoP's engine host runs), read over HTTP. The engine's vLLM families are
re-recorded through Ray's metrics agent (mirror.py), so Ray's agent serves ``ray_vllm_*`` with the
replica's ``ReplicaId``, as under Ray Serve LLM. ``record_autoscaling_stats`` reports the engine's finished requests and queue, which the
queue policy (control/actuators/rayserve_policy.py) turns into a service rate.

The deployment is named ``LLMServer`` like Ray Serve LLM's, so dashboards and the exporter's
deployment filter work the same on both.
"""

from __future__ import annotations

import asyncio
import contextlib
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import aiohttp
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families

from inferslice.common.ports import free_port
from inferslice.testbed.engine.driver import EngineDriver
from inferslice.testbed.engine.model import EngineConfig, EngineModel
from inferslice.testbed.engine.server import ReplicaServer
from inferslice.testbed.rayserve.mirror import RayMirror
from inferslice.testbed.rayserve.pop_engine import PopEngine
from inferslice.topology import load_topology

DEPLOYMENT = "LLMServer"  # Ray Serve LLM's deployment class name
MIRROR_PERIOD_S = 1.0  # Ray's agent exports every few seconds anyway; finer syncing buys nothing
METRICS_TIMEOUT_S = 3.0  # one scrape of a PoP engine across the WAN (tens of ms RTT)
DELETE_TIMEOUT_S = 10.0  # the host drains the engine first; Serve already drained the replica
FORWARDED = ("/v1/chat/completions", "/v1/completions", "/v1/models", "/tokenize", "/metrics", "/health")
MIRRORED = frozenset({
    "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
    "vllm:prompt_tokens", "vllm:generation_tokens", "vllm:request_success", "vllm:num_preemptions",
    "vllm:prefix_cache_queries", "vllm:prefix_cache_hits",
    "vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds", "vllm:request_time_per_output_token_seconds",
    "vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds",
})



class EngineReplica:
    """Serve replica body; ``build_deployment`` wraps it with ``serve.deployment``."""

    async def __init__(  # type: ignore[misc]  # Serve awaits an async constructor
        self,
        model_name: str,
        cold_start_s: float = 0.0,
        seed: int = 0,
        engine: dict[str, Any] | None = None,
        pop: dict[str, str] | None = None,
    ) -> None:
        from ray import serve

        self.replica_id = serve.get_replica_context().replica_id.unique_id
        self.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None), auto_decompress=False)
        self.model: EngineModel | None = None
        self.pop_engine: PopEngine | None = None
        self._families: list[Metric] = []  # the PoP engine's last /metrics, parsed
        collect: Callable[[], Iterable[Metric]]
        if pop:
            # The engine is the slot's replica at its PoP (testbed up --serving ray): requests cross the
            # tier's overlay and WAN as they do from a TierFront; its cold start is the host's.
            self.pop_engine = PopEngine(load_topology(pop["topology"]), pop["tier"], pop["state_dir"], self.replica_id)
            self.base = (await self.pop_engine.start(self.session)).url
            await self._fetch_families()
            collect = lambda: self._families  # noqa: E731
        else:
            self.model = EngineModel(seed=seed, default_config=EngineConfig(**(engine or {})))
            self.driver = EngineDriver(self.model)
            self.driver.start()
            # The cold start happens inside the constructor: Serve counts the replica STARTING until it returns.
            await asyncio.sleep(cold_start_s)
            self.model.add_replica(self.replica_id, ("ray", 0), now_s=self.driver.now(), cold_start_s=0.0)
            self.server = ReplicaServer(self.driver, self.replica_id, model_name)
            self.port = free_port()
            await self.server.start("127.0.0.1", self.port)
            self.base = f"http://127.0.0.1:{self.port}"
            collect = self.server.registry.collect
        self.mirror = RayMirror(collect, self.replica_id, MIRRORED)
        self._mirror_task = asyncio.get_running_loop().create_task(self._mirror_loop())

    async def _fetch_families(self) -> None:
        """The PoP engine's own /metrics (its vLLM names), for the mirror."""
        try:
            async with self.session.get(self.base + "/metrics", timeout=aiohttp.ClientTimeout(total=METRICS_TIMEOUT_S)) as r:
                text = await r.text()
            self._families = list(text_string_to_metric_families(text))
        except (aiohttp.ClientError, TimeoutError, ValueError):
            pass  # keep the last reading; the next sync catches up (counters are re-recorded as increases)

    async def _mirror_loop(self) -> None:
        while True:
            if self.pop_engine is not None:
                await self._fetch_families()
            self.mirror.sync()
            await asyncio.sleep(MIRROR_PERIOD_S)

    def record_autoscaling_stats(self) -> dict[str, float]:
        """Custom autoscaling metrics (Ray averages them over look_back_period_s per replica)."""
        if self.model is None:
            return engine_load(self._families)
        st = self.model.stats(self.replica_id)
        return {
            "finished_requests": float(sum(st.success.values())),
            "waiting": float(self.model.num_waiting(self.replica_id)),
            "running": float(self.model.num_running(self.replica_id)),
        }

    async def check_health(self) -> None:
        if self.model is not None and self.server.stopping:
            raise RuntimeError("engine stopping")

    async def __call__(self, request: Any) -> Any:
        from starlette.responses import Response, StreamingResponse

        path = request.url.path
        root = request.scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :] or "/"  # Serve keeps the route prefix in the path
        if path not in FORWARDED:
            return Response(b'{"detail":"Not Found"}', status_code=404, media_type="application/json")
        body = await request.body()
        headers = {k: v for k, v in request.headers.items() if k.lower() in ("content-type", "x-prompt-tokens")}
        cm = self.session.request(request.method, self.base + path, data=body or None, headers=headers)
        up = await cm.__aenter__()
        ctype = up.headers.get("Content-Type", "application/json")
        if not ctype.startswith("text/event-stream"):
            try:
                data = await up.read()
            finally:
                await cm.__aexit__(None, None, None)
            return Response(data, status_code=up.status, media_type=ctype.split(";")[0], headers={"Content-Type": ctype})

        async def chunks() -> AsyncIterator[bytes]:
            try:
                async for chunk in up.content.iter_any():
                    yield chunk
            finally:
                await cm.__aexit__(None, None, None)

        return StreamingResponse(chunks(), status_code=up.status, headers={"Content-Type": ctype, "Cache-Control": "no-cache"})

    def __del__(self) -> None:
        """Serve's graceful shutdown: stop mirroring; a PoP engine is deleted at its host and the slot freed."""
        task = getattr(self, "_mirror_task", None)
        if task is not None:
            with contextlib.suppress(RuntimeError):
                task.cancel()
        pop_engine = getattr(self, "pop_engine", None)
        if pop_engine is not None:
            url = pop_engine.delete_url()
            if url is not None:
                opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
                with contextlib.suppress(OSError, ValueError):
                    opener.open(urllib.request.Request(url, method="DELETE"), timeout=DELETE_TIMEOUT_S).read()
            pop_engine.release()


def engine_load(families: Iterable[Metric]) -> dict[str, float]:
    """finished/waiting/running of one engine from its parsed vLLM families (what the queue policy reads)."""
    out = {"finished_requests": 0.0, "waiting": 0.0, "running": 0.0}
    names = {"vllm:request_success": ("finished_requests", "vllm:request_success_total"),
             "vllm:num_requests_waiting": ("waiting", "vllm:num_requests_waiting"),
             "vllm:num_requests_running": ("running", "vllm:num_requests_running")}  # fmt: skip
    for fam in families:
        if fam.name in names:
            key, sample = names[fam.name]
            out[key] += sum(float(s.value) for s in fam.samples if s.name == sample)
    return out


def app_builder(args: dict[str, Any]) -> Any:
    """Serve application builder (import path ``inferslice.testbed.rayserve.replica:app_builder``):
    ``args`` = {model, cold_start_s, seed, engine: EngineConfig fields, pop?: {topology, tier, state_dir}}
    (with ``pop`` each replica proxies to its slot's engine at the tier's PoP instead of an in-process
    one). Replica counts, autoscaling and max_ongoing_requests come from the Serve config's deployment
    options, not from here."""
    from ray import serve

    dep = serve.deployment(name=DEPLOYMENT, ray_actor_options={"num_cpus": 0})(EngineReplica)
    pop = args.get("pop")
    return dep.bind(str(args.get("model", "tiny")), float(args.get("cold_start_s", 0.0)), int(args.get("seed", 0)),
                    dict(args.get("engine") or {}), {str(k): str(v) for k, v in pop.items()} if pop else None)
