"""Server-sent events as OpenAI-compatible servers stream them, parsed incrementally and purely.

Shared mechanism: whoever times a stream (the load generator in testbed.loadgen, the vLLM
fixtures' tests) parses it here, so every reader counts tokens identically.

``SseParser.feed(bytes)`` accepts arbitrary slices of the byte stream (an event, a line, even a
UTF-8 character may be split across TCP reads) and returns the ``data`` of every event completed
so far, following the WHATWG rules that matter here: ``\\n``, ``\\r\\n`` and ``\\r`` line ends,
several ``data:`` lines joined by ``\\n``, one optional space after the colon, comments (``:``)
and other fields ignored, an event dispatched on a blank line.

``parse_chunk(data)`` turns one event's data into a ``Chunk`` (token, role preamble, usage, done,
error). A chunk with ``choices`` counts as one token even when its text is empty: vLLM sends one
event per generated token and holds back text that ends inside a UTF-8 sequence, so empty deltas
are real tokens (the captured fixture has 12 token events for ``completion_tokens: 12``). The
chat role preamble (``delta`` with ``role`` and empty content) is not a token, so TTFT is the
time to the first *token* event rather than to the preamble.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass

from inferslice.errors import ParseError


class SseParser:
    def __init__(self) -> None:
        self._buf = b""
        self._data: list[bytes] = []
        self._skip_lf = False  # the previous read ended in \r: a leading \n now belongs to that \r\n

    def feed(self, chunk: bytes) -> list[str]:
        if self._skip_lf and chunk:
            self._skip_lf = False
            if chunk.startswith(b"\n"):
                chunk = chunk[1:]
        buf = self._buf + chunk
        if b"\r" in buf:
            if buf.endswith(b"\r"):
                buf = buf[:-1] + b"\n"  # ends the line now; remember to swallow a following \n
                self._skip_lf = True
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = buf.split(b"\n")
        self._buf = lines.pop()
        events: list[str] = []
        for line in lines:
            if not line:
                if self._data:
                    events.append(b"\n".join(self._data).decode("utf-8", errors="replace"))
                    self._data = []
            elif line.startswith(b"data"):
                name, _, value = line.partition(b":")
                if name == b"data":
                    self._data.append(value[1:] if value.startswith(b" ") else value)
            # comments (":...") and other fields (event, id, retry) carry nothing we use
        return events

    def close(self) -> list[str]:
        """End of stream: a last line without terminator still counts, and an event missing its
        final blank line is dispatched too (lenient: some proxies drop the last empty line)."""
        events = self.feed(b"\n\n") if (self._buf or self._data) else []
        self._buf = b""
        self._data = []
        return events


class ChunkKind(enum.Enum):
    TOKEN = "token"
    PREAMBLE = "preamble"  # chat role announcement, or a chunk with no choices and no usage
    USAGE = "usage"
    DONE = "done"
    ERROR = "error"


@dataclass(frozen=True)
class Chunk:
    kind: ChunkKind
    text: str = ""
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str | None = None


DONE = Chunk(ChunkKind.DONE)


def parse_chunk(data: str) -> Chunk:
    """One event's data -> Chunk; raises ParseError for anything that is not an OpenAI stream chunk."""
    if data == "[DONE]":
        return DONE
    try:
        obj = json.loads(data)
    except ValueError as err:
        raise ParseError(f"stream event is not JSON: {data[:80]!r}") from err
    if not isinstance(obj, dict):
        raise ParseError(f"stream event is not a JSON object: {data[:80]!r}")
    if "error" in obj:
        err_obj = obj["error"]
        message = err_obj.get("message", str(err_obj)) if isinstance(err_obj, dict) else str(err_obj)
        return Chunk(ChunkKind.ERROR, error=str(message))
    usage = obj.get("usage")
    usage_fields: dict[str, int | None] = {}
    if isinstance(usage, dict):
        usage_fields = {"prompt_tokens": _int_or_none(usage.get("prompt_tokens")),
                        "completion_tokens": _int_or_none(usage.get("completion_tokens"))}
    choices = obj.get("choices")
    if choices:
        if not isinstance(choices, list) or not isinstance(choices[0], dict):
            raise ParseError(f"stream event has malformed choices: {data[:80]!r}")
        choice = choices[0]
        delta = choice.get("delta")
        if isinstance(delta, dict):  # chat.completion.chunk
            text = delta.get("content") or ""
            if "role" in delta and not text and choice.get("finish_reason") is None:
                return Chunk(ChunkKind.PREAMBLE, **usage_fields)  # type: ignore[arg-type]
        else:  # text_completion
            text = choice.get("text") or ""
        return Chunk(ChunkKind.TOKEN, text=str(text), finish_reason=choice.get("finish_reason"), **usage_fields)  # type: ignore[arg-type]
    if usage_fields:
        return Chunk(ChunkKind.USAGE, **usage_fields)  # type: ignore[arg-type]
    return Chunk(ChunkKind.PREAMBLE)


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class StreamTimer:
    """Token timing of one streamed response: feed each read with its arrival time (seconds since
    the request was sent). Events from one read share that time: it is when the reader saw them.
    ``feed`` raises ParseError on a malformed event."""

    def __init__(self) -> None:
        self._parser = SseParser()
        self.ttft_s: float | None = None
        self.itl_s: list[float] = []
        self.tokens = 0
        self.prompt_tokens: int | None = None
        self.completion_tokens: int | None = None
        self.error: str | None = None
        self.done = False
        self._last = 0.0

    @property
    def finished(self) -> bool:
        return self.done or self.error is not None

    def feed(self, data: bytes, now_s: float) -> None:
        self._handle(self._parser.feed(data), now_s)

    def close(self, now_s: float) -> None:
        self._handle(self._parser.close(), now_s)

    def _handle(self, events: list[str], now_s: float) -> None:
        for event in events:
            chunk = parse_chunk(event)
            kind = chunk.kind
            if kind is ChunkKind.TOKEN:
                self.tokens += 1
                if self.ttft_s is None:
                    self.ttft_s = now_s
                else:
                    self.itl_s.append(now_s - self._last)
                self._last = now_s
            elif kind is ChunkKind.DONE:
                self.done = True
            elif kind is ChunkKind.ERROR:
                self.error = chunk.error or "error event"
            if chunk.completion_tokens is not None:
                self.completion_tokens = chunk.completion_tokens
            if chunk.prompt_tokens is not None:
                self.prompt_tokens = chunk.prompt_tokens

    def failure(self) -> str | None:
        """Why the stream does not count as a success (``"<type>: <detail>"``), or None."""
        if self.error is not None:
            return f"server_error: {self.error}"
        if not self.done:
            return "incomplete_stream: the stream ended before [DONE]"
        if self.ttft_s is None:
            return "incomplete_stream: no token before [DONE]"
        return None
