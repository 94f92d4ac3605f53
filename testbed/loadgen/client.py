"""One streamed request against an OpenAI-compatible server, timed the way ``vllm bench`` times it.

Timing starts just before the request is written (``perf_counter``), TTFT is the arrival of the
first token event, ITLs are the gaps between successive token events (events that arrive in the
same TCP read share a timestamp: that is what the client saw), e2e ends at ``[DONE]``. Token
counts come from the usage chunk (``stream_options.include_usage``) when the server sends one,
else from the token events and the workload's prompt length.

Every failure becomes a failed ``RequestRecord`` whose ``error`` is ``"<type>: <detail>"`` with a
low-cardinality type (an HTTP status such as ``500``, ``timeout``, ``malformed_stream``,
``incomplete_stream``, ``server_error`` or the aiohttp exception class), never an exception.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import aiohttp

from inferslice.common.sse import StreamTimer
from inferslice.errors import ParseError
from inferslice.records import RequestRecord, StreamObserver

from .workload import SampledRequest

ENDPOINT_PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}


@dataclass(frozen=True)
class RequestSettings:
    base_url: str  # http://host:port
    model: str
    slice: str
    endpoint: str = "chat"  # chat -> /v1/chat/completions (the brief's workload), completions -> /v1/completions
    ignore_eos: bool = True  # like vllm bench: the output length is the workload's, not the model's
    server_address: str = ""
    prompt_tokens_hint: bool = False  # X-Prompt-Tokens: the engine emulator then counts the prompt exactly
    stream_observers: tuple[StreamObserver, ...] = ()  # told of each chunk as it arrives

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + ENDPOINT_PATHS[self.endpoint]


def build_payload(settings: RequestSettings, request: SampledRequest) -> bytes:
    body: dict[str, Any] = {
        "model": settings.model,
        "max_tokens": request.output_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": settings.ignore_eos,
    }
    if settings.endpoint == "chat":
        body["messages"] = [{"role": "user", "content": request.prompt}]
    else:
        body["prompt"] = request.prompt
    return json.dumps(body).encode()


_HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream"}
PROMPT_HINT_HEADER = "X-Prompt-Tokens"  # the engine emulator's extension; a real vLLM ignores unknown headers


def _error_message(status: int, body: bytes) -> str:
    try:
        obj = json.loads(body)
        message = obj["error"]["message"] if isinstance(obj.get("error"), dict) else obj.get("detail", obj.get("message"))
    except (ValueError, KeyError, TypeError, AttributeError):
        message = body[:200].decode("utf-8", errors="replace")
    return f"{status}: {str(message)[:200] if message is not None else ''}".rstrip()


async def send_request(session: aiohttp.ClientSession, settings: RequestSettings, request: SampledRequest) -> RequestRecord:
    """Send one streamed request and time it; never raises for anything the server or network does."""
    payload = build_payload(settings, request)
    start_wall = time.time()
    t0 = time.perf_counter()
    timer = StreamTimer()
    received = 0

    def record(error: str | None) -> RequestRecord:
        e2e = time.perf_counter() - t0
        ok = error is None
        prompt = timer.prompt_tokens if timer.prompt_tokens is not None else (request.prompt_tokens if ok else 0)
        return RequestRecord(
            slice=settings.slice, start_s=start_wall, success=ok, ttft_s=timer.ttft_s, e2e_s=e2e, prompt_tokens=prompt,
            output_tokens=timer.completion_tokens if timer.completion_tokens is not None else timer.tokens,
            itl_s=tuple(timer.itl_s), error=error, model=settings.model, server_address=settings.server_address,
            response_bytes=received,
        )

    try:
        headers = {**_HEADERS, PROMPT_HINT_HEADER: str(request.prompt_tokens)} if settings.prompt_tokens_hint else _HEADERS
        async with session.post(settings.url, data=payload, headers=headers) as resp:
            if resp.status != 200:
                body = await resp.content.read(4096)
                received = len(body)
                return record(_error_message(resp.status, body))
            notified = -1  # chunks already reported to stream observers (-1: not even the first)
            async for data in resp.content.iter_any():
                received += len(data)
                timer.feed(data, time.perf_counter() - t0)
                if settings.stream_observers and timer.ttft_s is not None:
                    notified = _notify(settings, timer, notified)
                if timer.finished:
                    break
            if not timer.finished:
                timer.close(time.perf_counter() - t0)
    except TimeoutError:
        return record("timeout: no complete response within the request timeout")
    except ParseError as err:
        return record(f"malformed_stream: {err}")
    except (aiohttp.ClientError, OSError) as err:
        return record(f"{type(err).__name__}: {err}")
    return record(timer.failure())


def _notify(settings: RequestSettings, timer: StreamTimer, notified: int) -> int:
    """Report the chunks that arrived since the last call; returns how many gaps are reported."""
    if notified < 0 and timer.ttft_s is not None:
        for obs in settings.stream_observers:
            obs.first_chunk(settings.slice, settings.model, settings.server_address, timer.ttft_s)
        notified = 0
    for gap in timer.itl_s[notified:]:
        for obs in settings.stream_observers:
            obs.next_chunk(settings.slice, settings.model, settings.server_address, gap)
    return len(timer.itl_s)


def make_session(connect_timeout_s: float, request_timeout_s: float) -> aiohttp.ClientSession:
    # limit=0: concurrency is bounded by the load generator itself, not by the connection pool.
    connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
    timeout = aiohttp.ClientTimeout(total=request_timeout_s, sock_connect=connect_timeout_s)
    return aiohttp.ClientSession(connector=connector, timeout=timeout, auto_decompress=False)


__all__ = ["ENDPOINT_PATHS", "RequestSettings", "build_payload", "make_session", "send_request"]
