"""A tiny OpenAI-compatible SSE server on 127.0.0.1 replaying vLLM 0.32's chunk format with
controlled timing: the first token ``ttft_s`` after the request, then one every ``itl_s``
(scheduled on absolute times so sleeps do not drift)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web


@dataclass
class ServerBehaviour:
    ttft_s: float = 0.0
    itl_s: float = 0.0
    mode: str = "ok"  # ok | http500 | garbage | cut | error_event | no_usage
    crlf: bool = False
    model: str = "tiny"
    in_flight: int = 0
    max_in_flight: int = 0
    arrivals: list[float] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    token_walls: list[list[float]] = field(default_factory=list)  # per request: time.time() of each token write


def _chunk(model: str, delta: dict[str, Any] | None = None, text: str | None = None, finish: str | None = None) -> dict[str, Any]:
    if text is not None:
        return {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": model,
                "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "stop_reason": None}]}
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish, "token_ids": None}]}


def make_app(b: ServerBehaviour) -> web.Application:
    async def handle(request: web.Request) -> web.StreamResponse:
        t0 = time.perf_counter()
        b.arrivals.append(t0)
        body = await request.json()
        b.bodies.append(body)
        b.headers.append(dict(request.headers))
        if b.mode == "http500":
            return web.json_response({"error": {"message": "boom", "type": "InternalServerError", "code": 500}}, status=500)
        chat = request.path.endswith("/chat/completions")
        n = int(body["max_tokens"])
        prompt = body["messages"][0]["content"] if chat else body["prompt"]
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        sep = "\r\n\r\n" if b.crlf else "\n\n"
        b.in_flight += 1
        walls: list[float] = []
        b.token_walls.append(walls)
        b.max_in_flight = max(b.max_in_flight, b.in_flight)
        try:
            if b.mode == "garbage":
                await resp.write(b"data: {not json at all\n\n")
                return resp
            if chat:
                await _at(t0 + b.ttft_s)
                await resp.write(f"data: {json.dumps(_chunk(b.model, delta={'role': 'assistant', 'content': ''}))}{sep}".encode())
            for k in range(n):
                await _at(t0 + b.ttft_s + k * b.itl_s)
                finish = "length" if k == n - 1 else None
                c = _chunk(b.model, delta={"content": "ab"}, finish=finish) if chat else _chunk(b.model, text="ab", finish=finish)
                walls.append(time.time())
                await resp.write(f"data: {json.dumps(c)}{sep}".encode())
                if b.mode == "cut" and k == 1:
                    return resp  # the stream ends cleanly but without [DONE]
                if b.mode == "error_event" and k == 1:
                    await resp.write(f"data: {json.dumps({'error': {'message': 'engine died', 'code': 500}})}{sep}".encode())
                    return resp
            if b.mode != "no_usage":
                usage = {"prompt_tokens": (len(prompt) + 3) // 4, "completion_tokens": n, "total_tokens": 0}
                tail = {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": b.model, "choices": [], "usage": usage}
                await resp.write(f"data: {json.dumps(tail)}{sep}".encode())
            await resp.write(f"data: [DONE]{sep}".encode())
            return resp
        finally:
            b.in_flight -= 1

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    app.router.add_post("/v1/completions", handle)
    return app


async def _at(when: float) -> None:
    delay = when - time.perf_counter()
    if delay > 0:
        await asyncio.sleep(delay)


@pytest.fixture
async def sse_server() -> AsyncIterator[tuple[str, ServerBehaviour]]:
    behaviour = ServerBehaviour()
    runner = web.AppRunner(make_app(behaviour), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}", behaviour
    finally:
        await runner.cleanup()
