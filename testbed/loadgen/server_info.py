"""What the load generator learns from the server before a run: the model's context and its tokenizer's costs.

``vllm bench serve`` builds prompts from the model's own tokenizer; this client has none, so it asks
the server. ``GET /v1/models`` gives ``max_model_len`` (every request must fit: prompt + template +
``max_tokens`` <= max_model_len, or vLLM answers 400); vLLM's ``POST /tokenize`` gives the token
count of each vocabulary word and of the chat template around an empty message, so prompts are
built to an exact token count. A server without ``/tokenize`` (the engine emulator, other
OpenAI-compatible servers) gets the emulator's rule: one token per 3-letter word, plus
``FALLBACK_TEMPLATE_TOKENS`` for the chat template.

Word costs are exact for tokenizers that split words before merging (byte-level BPE as in Llama 3,
GPT-2 and the tiny test model): a prompt's count is then the sum of its words' counts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

# Llama-3.1's chat template wraps one user message in 5 header tokens plus BOS and the assistant
# header (the engine emulator's estimate uses the same 5 + 1); an unknown server's template is
# assumed this large so a request near the context limit is not rejected for it.
FALLBACK_TEMPLATE_TOKENS = 8
PROBE_TIMEOUT_S = 10.0  # the probe runs once before the run; a server this slow is reported, not awaited


@dataclass(frozen=True)
class ModelInfo:
    id: str
    max_model_len: int | None  # None: the server did not say


@dataclass(frozen=True)
class TokenCosts:
    """Token counts of prompt words as the server's tokenizer sees them."""

    first: Mapping[str, int] = field(default_factory=dict)  # word at the start of the prompt
    rest: Mapping[str, int] = field(default_factory=dict)  # word after a space
    template_tokens: int = 0  # chat template + special tokens around the prompt
    source: str = "rule"  # "tokenize": measured with /tokenize; "rule": one token per word

    def word(self, word: str, position: int) -> int:
        table = self.first if position == 0 else self.rest
        return table.get(word, 1)

    def cost(self, words: Sequence[str]) -> int:
        """Tokens of the prompt text ``" ".join(words)`` (template excluded)."""
        return sum(self.word(w, i) for i, w in enumerate(words))


def parse_models(obj: Any, model: str | None) -> ModelInfo:
    """The entry for ``model`` (or the only/first one) of a /v1/models body; ValueError if none."""
    data = obj.get("data") if isinstance(obj, dict) else None
    if not isinstance(data, list) or not data:
        raise ValueError("no models listed")
    cards = [c for c in data if isinstance(c, dict) and isinstance(c.get("id"), str)]
    chosen = next((c for c in cards if c["id"] == model), None) if model else None
    if chosen is None:
        if model and cards:
            raise ValueError(f"model {model!r} is not served (have {', '.join(c['id'] for c in cards)})")
        if not cards:
            raise ValueError("no model has an id")
        chosen = cards[0]
    mml = chosen.get("max_model_len")
    return ModelInfo(chosen["id"], int(mml) if isinstance(mml, int) and not isinstance(mml, bool) and mml > 0 else None)


async def fetch_model_info(session: aiohttp.ClientSession, base_url: str, model: str | None) -> ModelInfo | None:
    """GET /v1/models; None when the server does not answer it usefully."""
    try:
        async with session.get(base_url.rstrip("/") + "/v1/models", timeout=aiohttp.ClientTimeout(total=PROBE_TIMEOUT_S)) as r:
            if r.status != 200:
                return None
            return parse_models(await r.json(content_type=None), model)
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return None


async def _count(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> int | None:
    try:
        async with session.post(url, json=body, timeout=aiohttp.ClientTimeout(total=PROBE_TIMEOUT_S)) as r:
            if r.status != 200:
                return None
            obj = await r.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return None
    count = obj.get("count") if isinstance(obj, dict) else None
    return count if isinstance(count, int) and not isinstance(count, bool) else None


async def fetch_token_costs(
    session: aiohttp.ClientSession, base_url: str, model: str, endpoint: str, words: Sequence[str]
) -> TokenCosts:
    """Measure ``words`` with vLLM's /tokenize (special tokens and, for chat, the template included);
    the emulator's rule when the server has no /tokenize."""
    url = base_url.rstrip("/") + "/tokenize"

    def chat(text: str) -> dict[str, Any]:
        return {"model": model, "messages": [{"role": "user", "content": text}], "add_generation_prompt": True}

    def plain(text: str) -> dict[str, Any]:
        return {"model": model, "prompt": text}

    wrap = chat if endpoint == "chat" else plain
    base = await _count(session, url, wrap(""))
    if base is None:
        return TokenCosts(template_tokens=FALLBACK_TEMPLATE_TOKENS if endpoint == "chat" else 0)
    # "w" alone, and "the w" minus "the": the word at the start and after a space.
    anchor = words[0]
    counts = await asyncio.gather(
        _count(session, url, wrap(anchor)), *(_count(session, url, wrap(w)) for w in words),
        *(_count(session, url, wrap(f"{anchor} {w}")) for w in words),
    )
    anchor_n, firsts, pairs = counts[0], counts[1 : 1 + len(words)], counts[1 + len(words) :]
    if anchor_n is None or any(c is None for c in (*firsts, *pairs)):
        return TokenCosts(template_tokens=FALLBACK_TEMPLATE_TOKENS if endpoint == "chat" else 0)
    first = {w: max(1, int(c or 0) - base) for w, c in zip(words, firsts, strict=True)}
    rest = {w: max(1, int(c or 0) - anchor_n) for w, c in zip(words, pairs, strict=True)}
    return TokenCosts(first, rest, base, "tokenize")
