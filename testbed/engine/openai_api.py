"""vLLM 0.32's OpenAI-compatible wire format: request validation and response bodies (pure).

Field sets, field order and compact separators follow the captured responses in
tests/fixtures/vllm-0.32.0-api, so the bytes a client receives per streamed token match a real
deployment (the client-edge bandwidth results depend on it).
"""

from __future__ import annotations

import hashlib
import json
import math
import zlib
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

VLLM_VERSION = "0.32.0"
SYSTEM_FINGERPRINT = "vllm-0.32.0-e1bf65a5"
CHARS_PER_TOKEN = 4  # English text with a Llama-3 tokenizer
CHAT_TOKENS_PER_MESSAGE = 5  # Llama-3.1 chat template headers around each message
PROMPT_HINT_HEADER = "X-Prompt-Tokens"  # testbed extension: exact prompt length for synthetic prompts
PROMPT_HINT_FIELD = "prompt_tokens_hint"

# Synthetic output: English-like pieces of a few characters (a Llama-3 token averages ~4).
TOKEN_PIECES: tuple[str, ...] = (
    " the",
    " model",
    " network",
    " of",
    " and",
    " to",
    " latency",
    " in",
    " a",
    " is",
    "ing",
    " that",
    " for",
    " it",
    " with",
    " as",
    " on",
    " be",
    " tier",
    " at",
    " by",
    ".",
    ",",
    " this",
    " from",
    " token",
    " or",
    " which",
    " slice",
    "ed",
    " are",
    " GPU",
    " can",
    " an",
    " we",
    " has",
    " more",
    " will",
    " one",
    " each",
)


def dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


# -- requests --------------------------------------------------------------------------------
class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool | None = False
    continuous_usage_stats: bool | None = False


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list[dict[str, Any]] | None = None


class _Sampling(BaseModel):
    model_config = ConfigDict(extra="allow")
    model: str | None = None
    max_tokens: int | None = None
    n: int | None = 1
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    ignore_eos: bool = False
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    prompt_tokens_hint: int | None = None


class ChatCompletionRequest(_Sampling):
    messages: list[ChatMessage]
    max_completion_tokens: int | None = None


class CompletionRequest(_Sampling):
    prompt: str | list[str] | list[int] | list[list[int]]


class ApiError(Exception):
    """An error response in vLLM's shape: {"error": {"message", "type", "param", "code"}}."""

    def __init__(self, message: str, status: int = 400, err_type: str = "Bad Request", param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.err_type = err_type
        self.param = param

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.err_type, self.param, self.status)


def error_body(message: str, err_type: str, param: str | None, code: int) -> dict[str, Any]:
    return {"error": {"message": message, "type": err_type, "param": param, "code": code}}


def _validation_error(err: ValidationError) -> ApiError:
    """FastAPI's RequestValidationError as vLLM renders it (see fixtures/.../error-400.json)."""
    items = []
    for e in err.errors():
        item: dict[str, Any] = {"type": e["type"], "loc": ".".join(["body", *(str(p) for p in e["loc"])]), "msg": e["msg"]}
        item["input"] = e.get("input")
        if "ctx" in e:
            item["ctx"] = {k: str(v) if isinstance(v, Exception) else v for k, v in e["ctx"].items()}
        items.append(item)
    n = len(items)
    message = f"{n} validation error{'s' if n != 1 else ''}:\n  " + "\n  ".join(str(i) for i in items)
    return ApiError(message, param=items[0]["loc"] if items else None)


def parse_body(raw: bytes, kind: type[_Sampling]) -> _Sampling:
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        item = {"type": "json_invalid", "loc": "body.0", "msg": "JSON decode error", "input": {}, "ctx": {"error": str(err)}}
        raise ApiError(f"1 validation error:\n  {item}", param="body.0") from None
    try:
        return kind.model_validate(data)
    except ValidationError as err:
        raise _validation_error(err) from None


@dataclass(frozen=True)
class Plan:
    """What the engine must do for one validated request."""

    prompt_tokens: int
    output_tokens: int | None  # None: let the model draw a length (stops at a synthetic EOS)
    max_tokens_param: int | None
    prefix_hashes: tuple[int, ...]
    stream: bool
    include_usage: bool


def prompt_text(req: _Sampling) -> str:
    if isinstance(req, ChatCompletionRequest):
        parts = []
        for m in req.messages:
            if isinstance(m.content, str):
                parts.append(f"<{m.role}>{m.content}")
            elif isinstance(m.content, list):
                parts.append(f"<{m.role}>" + "".join(str(p.get("text", "")) for p in m.content))
            else:
                parts.append(f"<{m.role}>")
        return "".join(parts)
    assert isinstance(req, CompletionRequest)
    return req.prompt if isinstance(req.prompt, str) else dumps(req.prompt)


def estimate_prompt_tokens(req: _Sampling) -> int:
    if isinstance(req, CompletionRequest) and isinstance(req.prompt, list) and all(isinstance(t, int) for t in req.prompt):
        return max(1, len(req.prompt))
    if isinstance(req, ChatCompletionRequest):
        chars = sum(len(t) for t in _message_texts(req))
        return max(1, math.ceil(chars / CHARS_PER_TOKEN) + CHAT_TOKENS_PER_MESSAGE * len(req.messages) + 1)
    return max(1, math.ceil(len(prompt_text(req)) / CHARS_PER_TOKEN))


def _message_texts(req: ChatCompletionRequest) -> list[str]:
    out = []
    for m in req.messages:
        if isinstance(m.content, str):
            out.append(m.content)
        elif isinstance(m.content, list):
            out.extend(str(p.get("text", "")) for p in m.content)
    return out


def prefix_hashes(text: str, prompt_tokens: int, block_size: int = 16) -> tuple[int, ...]:
    """Chained hashes of the prompt's full blocks, as vLLM's prefix cache keys them."""
    step = block_size * CHARS_PER_TOKEN
    out: list[int] = []
    h = hashlib.blake2b(digest_size=8)
    for k in range(min(prompt_tokens // block_size, len(text) // step)):
        h.update(text[k * step : (k + 1) * step].encode())
        out.append(int.from_bytes(h.copy().digest(), "big"))
    return tuple(out)


def plan_request(req: _Sampling, served_model: str, max_model_len: int, header_hint: str | None = None) -> Plan:
    """Check a request as vLLM would and decide its token counts."""
    if req.model is not None and req.model != served_model:
        raise ApiError(f"The model `{req.model}` does not exist.", 404, "NotFoundError", "model")
    if isinstance(req, ChatCompletionRequest) and not req.messages:
        raise ApiError("messages must contain at least one message", param="messages")
    if req.n is not None and req.n != 1:
        raise ApiError("n > 1 is not supported by this vLLM emulator", param="n")
    max_tokens = req.max_tokens
    if isinstance(req, ChatCompletionRequest) and req.max_completion_tokens is not None:
        max_tokens = req.max_completion_tokens
    if max_tokens is not None and max_tokens < 1:
        raise ApiError(f"max_tokens must be at least 1, got {max_tokens}.", param="max_tokens")
    hint = req.prompt_tokens_hint
    if hint is None and header_hint is not None:
        try:
            hint = int(header_hint)
        except ValueError:
            raise ApiError(f"{PROMPT_HINT_HEADER} must be an integer", param=PROMPT_HINT_HEADER) from None
    if hint is not None and hint < 1:
        raise ApiError("prompt_tokens_hint must be at least 1", param=PROMPT_HINT_FIELD)
    prompt = hint if hint is not None else estimate_prompt_tokens(req)
    wanted = max_tokens if max_tokens is not None else 1
    if prompt + wanted > max_model_len:
        raise ApiError(
            f"This model's maximum context length is {max_model_len} tokens. However, your request has {prompt} input tokens"
            f" and requests {wanted} output tokens. Please reduce the length of the input or output.",
            param="max_tokens" if max_tokens is not None else "messages",
        )
    # vLLM bench sets max_tokens with ignore_eos; like it, a request that names max_tokens gets
    # exactly that many tokens, so offered load is reproducible.
    output = max_tokens
    stream = bool(req.stream)
    include_usage = bool(stream and req.stream_options is not None and req.stream_options.include_usage)
    return Plan(prompt, output, max_tokens, prefix_hashes(prompt_text(req), prompt), stream, include_usage)


# -- responses -------------------------------------------------------------------------------
def token_piece(request_id: str, index: int) -> str:
    return TOKEN_PIECES[(zlib.crc32(request_id.encode()) + 7 * index) % len(TOKEN_PIECES)]


def sse(payload: str) -> bytes:
    return f"data: {payload}\n\n".encode()


DONE = b"data: [DONE]\n\n"


class ChatStream:
    """Renders one streamed chat completion's events."""

    def __init__(self, rid: str, created: int, model: str) -> None:
        self._head = f'{{"id":{dumps(rid)},"object":"chat.completion.chunk","created":{created},"model":{dumps(model)},"choices":['
        self.rid = rid

    def role(self) -> bytes:
        return sse(
            self._head + '{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],'
            '"prompt_token_ids":null,"prompt_text":null}'
        )

    def token(self, text: str, finish_reason: str | None) -> bytes:
        if finish_reason is None:
            tail = '"finish_reason":null,"token_ids":null}]}'
        else:
            tail = f'"finish_reason":{dumps(finish_reason)},"stop_reason":null,"token_ids":null}}]}}'
        return sse(f'{self._head}{{"index":0,"delta":{{"content":{dumps(text)}}},"logprobs":null,{tail}')

    def usage(self, prompt_tokens: int, completion_tokens: int) -> bytes:
        u = {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + completion_tokens, "completion_tokens": completion_tokens}
        return sse(f'{self._head}],"usage":{dumps(u)},"system_fingerprint":"{SYSTEM_FINGERPRINT}"}}')


class CompletionStream:
    def __init__(self, rid: str, created: int, model: str) -> None:
        self._head = f'{{"id":{dumps(rid)},"object":"text_completion","created":{created},"model":{dumps(model)},"choices":['

    def token(self, text: str, finish_reason: str | None) -> bytes:
        fin = "null" if finish_reason is None else dumps(finish_reason)
        body = (
            f'{self._head}{{"index":0,"text":{dumps(text)},"logprobs":null,"finish_reason":{fin},"stop_reason":null,'
            '"prompt_token_ids":null,"token_ids":null}]'
        )
        if finish_reason is not None:
            body += f',"system_fingerprint":"{SYSTEM_FINGERPRINT}"'
        return sse(body + "}")

    def usage(self, prompt_tokens: int, completion_tokens: int) -> bytes:
        u = {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + completion_tokens, "completion_tokens": completion_tokens}
        return sse(f'{self._head}],"usage":{dumps(u)},"system_fingerprint":"{SYSTEM_FINGERPRINT}"}}')


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": None,
        "completion_tokens_details": None,
    }


def chat_response(rid: str, created: int, model: str, text: str, finish_reason: str, prompt_tokens: int, n: int) -> dict[str, Any]:
    message = {
        "role": "assistant",
        "content": text,
        "refusal": None,
        "annotations": None,
        "audio": None,
        "function_call": None,
        "reasoning": None,
    }
    choice = {
        "index": 0,
        "message": message,
        "logprobs": None,
        "finish_reason": finish_reason,
        "stop_reason": None,
        "token_ids": None,
        "routed_experts": None,
    }
    return {
        "id": rid,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [choice],
        "service_tier": None,
        "system_fingerprint": SYSTEM_FINGERPRINT,
        "usage": _usage(prompt_tokens, n),
        "prompt_logprobs": None,
        "prompt_token_ids": None,
        "prompt_text": None,
        "kv_transfer_params": None,
        "ec_transfer_params": None,
        "metrics": None,
    }


def completion_response(rid: str, created: int, model: str, text: str, finish_reason: str, prompt_tokens: int, n: int) -> dict[str, Any]:
    choice = {
        "index": 0,
        "text": text,
        "logprobs": None,
        "finish_reason": finish_reason,
        "stop_reason": None,
        "prompt_logprobs": None,
        "prompt_token_ids": None,
        "token_ids": None,
    }
    return {
        "id": rid,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": [choice],
        "service_tier": None,
        "system_fingerprint": SYSTEM_FINGERPRINT,
        "usage": _usage(prompt_tokens, n),
        "kv_transfer_params": None,
    }


def models_response(model: str, root: str, max_model_len: int, created: int, perm_id: str) -> dict[str, Any]:
    perm = {
        "id": perm_id,
        "object": "model_permission",
        "created": created,
        "allow_create_engine": False,
        "allow_sampling": True,
        "allow_logprobs": True,
        "allow_search_indices": False,
        "allow_view": True,
        "allow_fine_tuning": False,
        "organization": "*",
        "group": None,
        "is_blocking": False,
    }
    card = {
        "id": model,
        "object": "model",
        "created": created,
        "owned_by": "vllm",
        "root": root,
        "parent": None,
        "max_model_len": max_model_len,
        "permission": [perm],
    }
    return {"object": "list", "data": [card]}
