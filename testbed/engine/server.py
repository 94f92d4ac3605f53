"""One emulated vLLM replica's OpenAI-compatible HTTP server (aiohttp), driven by the shared model.

Endpoints as vLLM serves them: POST /v1/chat/completions and /v1/completions (SSE streaming or
not), GET /v1/models, /health (503 while the replica cold-starts), /metrics, /version. Every SSE
event is its own write; aiohttp sets TCP_NODELAY, so each token leaves as its own segment, as from
a real deployment.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from inferslice.testbed.engine import openai_api as api
from inferslice.testbed.engine.driver import EngineDriver
from inferslice.testbed.engine.metrics import VllmCollector
from inferslice.testbed.engine.model import EngineRequest, TokenEvent

log = logging.getLogger(__name__)

# stop() comes after the host drained (or cut) the replica: handlers still running then are cancelled
# after this, not after aiohttp's 60 s default (which outlasted the front's DELETE deadline)
STOP_GRACE_S = 1.0
SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}


class ReplicaServer:
    def __init__(self, driver: EngineDriver, replica_id: str, model_name: str, model_root: str | None = None) -> None:
        self.driver = driver
        self.replica_id = replica_id
        self.model_name = model_name
        self.model_root = model_root or model_name
        self.stopping = False
        self.in_flight = 0
        self.created = int(time.time())
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(VllmCollector(driver.model, replica_id, model_name))
        self._runner: web.AppRunner | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self._transports: set[asyncio.Transport] = set()

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        return not self.stopping and self.driver.model.is_ready(self.replica_id, self.driver.now())

    @property
    def state(self) -> str:
        if self.stopping:
            return "stopping"
        return "ready" if self.ready else "starting"

    def app(self) -> web.Application:
        app = web.Application(client_max_size=16 * 1024**2)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/completions", self._completions)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/health", self._health)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/version", self._version)
        return app

    async def start(self, host: str, port: int) -> None:
        """Bind now (a cold-starting replica answers /health with 503, like a loading vLLM pod)."""
        runner = web.AppRunner(self.app(), access_log=None, handle_signals=False, shutdown_timeout=STOP_GRACE_S)
        await runner.setup()
        site = web.TCPSite(runner, host, port, reuse_address=True)
        try:
            await site.start()
        except OSError:
            await runner.cleanup()
            raise
        self._runner = runner

    async def drain(self, timeout_s: float) -> bool:
        """Stop taking requests and wait for in-flight ones to finish; True if they all did."""
        self.stopping = True
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    async def kill(self) -> None:
        """Die like a crashed pod: cut every open stream at once, then close the listener."""
        self.stopping = True
        for transport in list(self._transports):
            transport.abort()
        await self.stop()

    async def stop(self) -> None:
        self.stopping = True
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- handlers ----------------------------------------------------------------------------
    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(status=200 if self.ready else 503)

    async def _version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": api.VLLM_VERSION}, dumps=api.dumps)

    async def _metrics(self, request: web.Request) -> web.Response:
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _models(self, request: web.Request) -> web.Response:
        body = api.models_response(
            self.model_name,
            self.model_root,
            self.driver.model.config(self.replica_id).max_model_len,
            self.created,
            f"modelperm-{secrets.token_hex(8)}",
        )
        return web.json_response(body, dumps=api.dumps)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, api.ChatCompletionRequest, "chatcmpl-")

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, api.CompletionRequest, "cmpl-")

    async def _stream(
        self,
        resp: web.StreamResponse,
        stream: api.ChatStream | api.CompletionStream,
        queue: asyncio.Queue[TokenEvent],
        rid: str,
        plan: api.Plan,
    ) -> None:
        n = 0
        while True:
            ev = await queue.get()
            if ev.index < 0:
                await resp.write(api.sse(api.dumps(api.error_body("request aborted", "Service Unavailable", None, 503))))
                break
            if n == 0 and isinstance(stream, api.ChatStream):
                await resp.write(stream.role())
            n += 1
            await resp.write(stream.token(api.token_piece(rid, ev.index), ev.finish_reason))
            if ev.finish_reason is not None:
                break
        if plan.include_usage and n:
            await resp.write(stream.usage(plan.prompt_tokens, n))
        await resp.write(api.DONE)
        await resp.write_eof()

    async def _generate(self, request: web.Request, kind: type[api._Sampling], prefix: str) -> web.StreamResponse:
        if not self.ready:
            err = api.ApiError("The replica is not ready (starting or stopping).", 503, "Service Unavailable")
            return _error(err)
        raw = await request.read()
        model = self.driver.model
        max_len = model.config(self.replica_id).max_model_len
        try:
            req = api.parse_body(raw, kind)
            plan = api.plan_request(req, self.model_name, max_len, request.headers.get(api.PROMPT_HINT_HEADER))
        except api.ApiError as err:
            return _error(err)
        if plan.output_tokens is not None:
            output, finish = plan.output_tokens, "length"
        else:
            output, finish = model.draw_output_tokens(max_len - plan.prompt_tokens), "stop"
        rid = prefix + secrets.token_hex(8)
        ereq = EngineRequest(rid, plan.prompt_tokens, output, self.driver.now(), plan.prefix_hashes, finish, plan.max_tokens_param)
        try:
            queue = self.driver.submit(self.replica_id, ereq)
        except (ValueError, KeyError) as err:
            return _error(api.ApiError(str(err)))
        self.in_flight += 1
        self._idle.clear()
        transport = request.transport
        if transport is not None:
            self._transports.add(transport)
        finished = False
        created = int(time.time())
        try:
            if plan.stream:
                stream: api.ChatStream | api.CompletionStream = (
                    api.ChatStream(rid, created, self.model_name)
                    if prefix == "chatcmpl-"
                    else api.CompletionStream(rid, created, self.model_name)
                )
                resp = web.StreamResponse(headers=SSE_HEADERS)
                await resp.prepare(request)
                try:
                    await self._stream(resp, stream, queue, rid, plan)
                    finished = True
                except ConnectionResetError:
                    pass  # the client (or the front) went away; the finally clause aborts the request
                return resp
            pieces: list[str] = []
            while True:
                ev = await queue.get()
                if ev.index < 0:
                    finished = True
                    return _error(api.ApiError("request aborted", 503, "Service Unavailable"))
                pieces.append(api.token_piece(rid, ev.index))
                if ev.finish_reason is not None:
                    finished = True
                    break
            build = api.chat_response if prefix == "chatcmpl-" else api.completion_response
            body: dict[str, Any] = build(rid, created, self.model_name, "".join(pieces), finish, plan.prompt_tokens, len(pieces))
            return web.json_response(body, dumps=api.dumps)
        finally:
            if not finished:
                self.driver.abort(rid)  # the client went away mid-request
            if transport is not None:
                self._transports.discard(transport)
            self.in_flight -= 1
            if self.in_flight == 0:
                self._idle.set()


def _error(err: api.ApiError) -> web.Response:
    return web.json_response(err.body(), status=err.status, dumps=api.dumps)
