"""An OpenAI-compatible edge proxy: real clients (an SDK, a chat UI, ``vllm bench``) point at it,
it forwards to the tier's serving front and streams the response back unchanged, and it emits the
same ``RequestRecord`` the load generator would for each ``/v1/chat/completions`` or
``/v1/completions`` request, to any observers (e.g. ``ClientMetricsRecorder``).

The timings are the proxy's view: from receiving the request to receiving upstream events. Run
the proxy on the client side of the tier's edge link (in the client namespace on the testbed) so
that view includes the capped link. The proxy never alters the body: without
``stream_options.include_usage`` from the client, output tokens are counted from token events
and the prompt token count is 0 (unknown).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web

from inferslice.errors import ParseError
from inferslice.records import RecordObserver, RequestRecord
from inferslice.sse import StreamTimer

log = logging.getLogger(__name__)

TIMED_PATHS = ("/v1/chat/completions", "/v1/completions")
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "te", "trailer", "upgrade",
               "proxy-authorization", "proxy-authenticate", "content-encoding"}


class EdgeProxy:
    def __init__(
        self,
        upstream_url: str,
        slice_name: str,
        observers: Sequence[RecordObserver] = (),
        *,
        request_timeout_s: float = 300.0,  # as the load generator: queued requests on a saturated tier wait long
        connect_timeout_s: float = 10.0,
    ) -> None:
        self.upstream = upstream_url.rstrip("/")
        self.slice = slice_name
        self.observers = list(observers)
        self.server_address = urlsplit(self.upstream).hostname or ""
        self._timeout = aiohttp.ClientTimeout(total=request_timeout_s, sock_connect=connect_timeout_s)
        self._session: aiohttp.ClientSession | None = None

    def make_app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024**2)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        app.on_startup.append(self._start)
        app.on_cleanup.append(self._stop)
        return app

    async def _start(self, _app: web.Application) -> None:
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=self._timeout,
                                              auto_decompress=False)

    async def _stop(self, _app: web.Application) -> None:
        if self._session is not None:
            await self._session.close()

    def _emit(self, record: RequestRecord) -> None:
        for observer in self.observers:
            observer(record)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None, "app not started"
        body = await request.read()
        timed = request.method == "POST" and request.path in TIMED_PATHS
        model = ""
        if timed:
            try:
                model = str(json.loads(body).get("model", ""))
            except (ValueError, AttributeError):
                timed = False  # not JSON: let the upstream answer with its own 400, don't time it
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        start_wall, t0 = time.time(), time.perf_counter()
        timer = StreamTimer()
        response: web.StreamResponse | None = None

        def record(error: str | None) -> None:
            if timed:
                ok = error is None
                self._emit(RequestRecord(
                    slice=self.slice, start_s=start_wall, success=ok, ttft_s=timer.ttft_s, e2e_s=time.perf_counter() - t0,
                    prompt_tokens=timer.prompt_tokens or 0,
                    output_tokens=timer.completion_tokens if timer.completion_tokens is not None else timer.tokens,
                    itl_s=tuple(timer.itl_s), error=error, model=model, server_address=self.server_address))

        try:
            async with self._session.request(request.method, self.upstream + request.path_qs, data=body, headers=headers) as up:
                response = web.StreamResponse(status=up.status, headers={k: v for k, v in up.headers.items()
                                                                         if k.lower() not in _HOP_BY_HOP})
                await response.prepare(request)
                streaming = up.status == 200 and up.headers.get("Content-Type", "").startswith("text/event-stream")
                parse_error: str | None = None
                async for data in up.content.iter_any():
                    now = time.perf_counter() - t0
                    await response.write(data)  # forward first: the client must see exactly what upstream sent
                    if streaming and parse_error is None:
                        try:
                            timer.feed(data, now)
                        except ParseError as err:
                            parse_error = f"malformed_stream: {err}"
                    elif timed and up.status == 200:
                        self._note_plain(timer, data)
                if streaming and parse_error is None:
                    try:
                        timer.close(time.perf_counter() - t0)
                    except ParseError as err:
                        parse_error = f"malformed_stream: {err}"
                await response.write_eof()
            if up.status != 200:
                record(f"{up.status}: upstream error")
            elif streaming:
                record(parse_error or timer.failure())
            else:
                record(None)
            return response
        except TimeoutError:
            record("timeout: no complete upstream response within the request timeout")
        except (aiohttp.ClientError, OSError) as err:  # upstream down, or the client went away mid-stream
            record(f"{type(err).__name__}: {err}")
        if response is None:
            return web.json_response({"error": {"message": "upstream unavailable", "type": "BadGateway", "code": 502}},
                                     status=502)
        return response  # headers already sent: the client sees a truncated stream

    @staticmethod
    def _note_plain(timer: StreamTimer, data: bytes) -> None:
        """A non-streamed completion: usage from the JSON body once complete (best effort)."""
        timer.done = True
        try:
            usage = json.loads(data).get("usage") or {}
        except (ValueError, AttributeError):
            return  # body split over reads: token counts stay unknown
        timer.prompt_tokens = usage.get("prompt_tokens")
        timer.completion_tokens = usage.get("completion_tokens")


async def start_edge_proxy(proxy: EdgeProxy, host: str, port: int) -> web.AppRunner:
    """Listen on host:port; returns the runner (``await runner.cleanup()`` to stop)."""
    runner = web.AppRunner(proxy.make_app(), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
