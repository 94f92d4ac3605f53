from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferslice.common.sse import ChunkKind, SseParser, parse_chunk
from inferslice.errors import ParseError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-0.32.0-api"


def _events(raw: bytes, cuts: list[int] | None = None) -> list[str]:
    parser = SseParser()
    out: list[str] = []
    pos = 0
    for cut in sorted(cuts or []):
        out += parser.feed(raw[pos:cut])
        pos = cut
    out += parser.feed(raw[pos:])
    return [*out, *parser.close()]


@pytest.fixture(scope="module")
def chat_stream() -> bytes:
    return (FIXTURES / "chat-stream.txt").read_bytes()


def test_captured_chat_stream_has_one_token_event_per_completion_token(chat_stream: bytes) -> None:
    chunks = [parse_chunk(e) for e in _events(chat_stream)]
    kinds = [c.kind for c in chunks]
    assert kinds[0] is ChunkKind.PREAMBLE
    assert kinds.count(ChunkKind.TOKEN) == 12
    usage = [c for c in chunks if c.kind is ChunkKind.USAGE]
    assert usage[0].completion_tokens == 12 and usage[0].prompt_tokens == 16
    assert kinds[-1] is ChunkKind.DONE
    assert [c.finish_reason for c in chunks if c.kind is ChunkKind.TOKEN][-1] == "length"


def test_captured_completions_stream() -> None:
    chunks = [parse_chunk(e) for e in _events((FIXTURES / "completions-stream.txt").read_bytes())]
    assert [c.kind for c in chunks].count(ChunkKind.TOKEN) == 12
    assert chunks[-1].kind is ChunkKind.DONE
    assert "".join(c.text for c in chunks).startswith("' laz")


def test_sse_line_endings_multiline_data_and_comments() -> None:
    raw = b": keep-alive\r\ndata: a\r\ndata:b\r\nevent: x\r\n\r\ndata: c\r\rdata: d\n\n"
    assert _events(raw) == ["a\nb", "c", "d"]
    # \r\n split between reads is one line end, not an empty line
    assert _events(b"data: x\r\ndata: y\r\n\r\n", cuts=[7, 8]) == ["x\ny"]


def test_parse_chunk_rejects_garbage_and_reports_server_errors() -> None:
    with pytest.raises(ParseError):
        parse_chunk("{not json")
    with pytest.raises(ParseError):
        parse_chunk("[1, 2]")
    err = parse_chunk('{"error": {"message": "engine died", "code": 500}}')
    assert err.kind is ChunkKind.ERROR and err.error == "engine died"


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_any_chunking_of_a_valid_stream_parses_identically(data: st.DataObject) -> None:
    raw = (FIXTURES / "chat-stream.txt").read_bytes()
    crlf = data.draw(st.booleans())
    if crlf:
        raw = raw.replace(b"\n", b"\r\n")
    raw = raw.replace(b'"content":"a"', '"content":"é€😀"'.encode())  # multibyte characters to split
    cuts = data.draw(st.lists(st.integers(min_value=0, max_value=len(raw)), max_size=40))
    assert _events(raw, cuts) == _events(raw)
    assert len(_events(raw)) == 15
