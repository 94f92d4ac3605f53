"""``RequestRecord``: one client-side request as the load generator (or edge proxy) saw it.

The load generator emits these to observers; the client-perceived latency exporter
(``inferslice.exporters.requests``) records them with OpenTelemetry. Neither imports the other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class RequestRecord:
    slice: str
    start_s: float  # wall-clock (time.time()) when the request was sent
    success: bool
    ttft_s: float | None = None  # first content chunk
    e2e_s: float | None = None
    prompt_tokens: int = 0
    output_tokens: int = 0
    itl_s: tuple[float, ...] = field(default=(), repr=False)  # gaps between content chunks
    error: str | None = None
    model: str = ""
    server_address: str = ""
    # HTTP body bytes received (after transfer decoding): what the client read, for comparing
    # against link counters that also count framing and headers. 0 when unknown (older records).
    response_bytes: int = 0

    @property
    def tpot_s(self) -> float | None:
        """vLLM bench's per-request TPOT: (e2e - ttft) / (output_tokens - 1)."""
        if self.ttft_s is None or self.e2e_s is None or self.output_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)

    @property
    def error_type(self) -> str:
        """Low-cardinality failure class (OTel ``error.type``): ``error`` up to its first ':'
        (the load generator writes ``"<type>: <detail>"``, e.g. ``"500: ..."``, ``"timeout: ..."``)."""
        if self.success:
            return ""
        head = (self.error or "").partition(":")[0].strip()
        return head if head and len(head) <= 64 and " " not in head else "_OTHER"


RecordObserver = Callable[[RequestRecord], None]


@runtime_checkable
class StreamObserver(Protocol):
    """Told about a stream while it runs, so telemetry sees a stalled request's first token (or a
    slow chunk) when it happens rather than when the request ends, seconds later."""

    def first_chunk(self, slice: str, model: str, server_address: str, ttft_s: float) -> None: ...

    def next_chunk(self, slice: str, model: str, server_address: str, gap_s: float) -> None: ...
