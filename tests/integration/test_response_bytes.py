"""``RequestRecord.response_bytes`` (what the exporter test divides the link bytes by) is the HTTP
body the client read after chunked decoding: checked against a stream of known bytes. No root."""

from __future__ import annotations

import json

from aiohttp import web

from inferslice.testbed.loadgen import LoadConfig, run_load


def _events(n: int) -> list[bytes]:
    chunk = {"choices": [{"index": 0, "delta": {"content": "x"}}], "model": "tiny"}
    usage = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": n}}
    return [b"data: " + json.dumps(chunk).encode() + b"\n\n" for _ in range(n)] + [
        b"data: " + json.dumps(usage).encode() + b"\n\n",
        b"data: [DONE]\n\n",
    ]


async def test_response_bytes_count_the_decoded_body() -> None:
    events = _events(5)

    async def stream(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        for e in events:
            await resp.write(e)
        await resp.write_eof()
        return resp

    async def refuse(request: web.Request) -> web.Response:
        return web.json_response({"error": {"message": "nope"}}, status=400)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", stream)
    app.router.add_post("/v1/completions", refuse)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        ok = await run_load(LoadConfig(url=url, model="tiny", concurrency=1, num_prompts=2))
        bad = await run_load(LoadConfig(url=url, model="tiny", endpoint="completions", concurrency=1, num_prompts=1))
    finally:
        await runner.cleanup()
    assert [r.success for r in ok.records] == [True, True]
    assert [r.response_bytes for r in ok.records] == [sum(map(len, events))] * 2  # body only: no chunk sizes, no headers
    assert not bad.records[0].success
    assert bad.records[0].response_bytes == len(json.dumps({"error": {"message": "nope"}}))
