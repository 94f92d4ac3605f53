"""Synthetic workloads: seeded prompt/output token lengths and prompt text, as ``vllm bench serve`` offers.

Two datasets (``vllm bench serve --dataset-name``): ``sharegpt-like`` (below) and ``random``
(``--random-input-len``, ``--random-output-len``, ``--random-range-ratio``: lengths uniform over
``[floor(L*(1-r)), ceil(L*(1+r))]``, vLLM's RandomDataset). Both keep every request within the
server's context (``context_tokens``, the model's max_model_len, minus the chat template): a pair
whose prompt + output would not fit is *dropped* and redrawn, as vLLM filters its ShareGPT set, so
lengths are never truncated and there is no spike of mass at the limit.

sharegpt-like:

ShareGPT cannot be downloaded here, so lengths are drawn from lognormal distributions fitted to
the published statistics of the set `vllm bench serve --dataset-name sharegpt` uses (prompts and
reference outputs tokenised with a Llama tokenizer, pairs with fewer than 4 tokens dropped,
prompts over 1024 tokens dropped): mean prompt ~215 tokens (heavy right tail, median ~150) and
mean output ~190 tokens (median ~145). The brief's numbers agree: 2.5 req/s x ~190 output tokens
~ 462 tok/s at Free's goodput peak.

    prompt tokens  ~ round(LogNormal(mu=5.05, sigma=1.0)), kept if 4 <= n <= 1024  (mean ~215)
    output tokens  ~ round(LogNormal(mu=4.97, sigma=0.8)), kept if 4 <= n <= 1024  (mean ~190)

Out-of-range draws are redrawn (vLLM *filters* ShareGPT rather than clipping it, so there is no
spike of mass at the bounds). Prompt text is made of 3-letter words plus a space: 4 characters
per token, the rule of thumb the engine emulator also uses, and about one token per word for a
real BPE tokenizer; with the server's measured word costs (``TokenCosts`` from /tokenize) the
words are chosen to make exactly the drawn token count. Requests ask for exactly the drawn output length (``max_tokens`` with
``ignore_eos``) as vllm bench does, so the output length is the workload's, not the model's.

Determinism: lengths, text and arrival gaps come from independent streams spawned from one
``numpy.random.SeedSequence(seed)``, and lengths are drawn in fixed blocks, so request ``i`` is the
same whatever the mode, the number of requests or how many were consumed before it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from inferslice.errors import ConfigError

from .server_info import TokenCosts

DATASETS = ("sharegpt-like", "random")

# 3-letter words: with the separating space each is 4 characters, i.e. one token by the ~4 chars/token rule.
_WORDS = (
    "the", "and", "for", "are", "but", "not", "you", "all", "any", "can", "had", "her", "was", "one", "our", "out",
    "day", "get", "has", "him", "his", "how", "man", "new", "now", "old", "see", "two", "way", "who", "boy", "did",
    "its", "let", "put", "say", "she", "too", "use", "act", "add", "age", "ago", "air", "arm", "art", "ask", "bad",
    "bag", "bed", "big", "bit", "box", "bus", "buy", "car", "cat", "cup", "cut", "dog", "dry", "ear", "eat", "egg",
    "end", "eye", "far", "few", "fit", "fly", "fun", "gas", "god", "gun", "hat", "hit", "hot", "ice", "job", "key",
    "kid", "law", "lay", "leg", "lie", "lot", "low", "map", "may", "mix", "net", "oil", "own", "pay", "pen", "per",
    "pop", "pot", "raw", "red", "run", "sea", "set", "sit", "six", "sky", "son", "sun", "tax", "tea", "ten", "tie",
    "top", "toy", "try", "war", "wet", "win", "yes", "yet",
)
WORDS = _WORDS
_VOCAB = np.array(_WORDS)
_BLOCK = 256  # lengths are drawn in blocks of this size so request i never depends on how many were consumed


@dataclass(frozen=True)
class WorkloadSpec:
    """Length distributions; defaults are the ShareGPT fit documented above and vLLM's random defaults."""

    dataset: str = "sharegpt-like"  # sharegpt-like | random (vllm bench serve --dataset-name)
    prompt_mu: float = 5.05  # ln-space location: mean prompt ~215 tokens after the 4..1024 filter
    prompt_sigma: float = 1.0  # ShareGPT prompts are heavy-tailed (std ~ mean)
    output_mu: float = 4.97  # mean output ~190 tokens after the filter (brief: 462 tok/s / 2.5 req/s)
    output_sigma: float = 0.8  # outputs are less spread than prompts
    min_tokens: int = 4  # vLLM's ShareGPT filter drops pairs shorter than 4 tokens
    max_prompt_tokens: int = 1024  # vLLM's ShareGPT filter drops prompts over 1024 tokens
    max_output_tokens: int = 1024  # keeps prompt + output within a 2048 context like vLLM's filter
    max_total_tokens: int = 2048  # vLLM's ShareGPT filter drops pairs over 2048 tokens (sharegpt-like only)
    random_input_len: int = 1024  # vllm bench serve --random-input-len default
    random_output_len: int = 128  # vllm bench serve --random-output-len default
    random_range_ratio: float = 0.0  # vllm bench serve --random-range-ratio default: fixed lengths
    context_tokens: int | None = None  # prompt + output must fit (the model's max_model_len - template); None: unknown
    chars_per_token: int = 4  # rule of thumb for English text with a Llama tokenizer

    def __post_init__(self) -> None:
        if self.dataset not in DATASETS:
            raise ConfigError(f"dataset must be one of {', '.join(DATASETS)}", field="dataset-name")
        if self.prompt_sigma < 0 or self.output_sigma < 0:
            raise ConfigError("sigma must be >= 0", field="workload")
        if not 1 <= self.min_tokens <= min(self.max_prompt_tokens, self.max_output_tokens):
            raise ConfigError("need 1 <= min_tokens <= max_*_tokens", field="workload")
        if self.chars_per_token != 4:
            raise ConfigError("prompt text is built from 4-character words; chars_per_token must be 4", field="workload")
        if self.random_input_len < 1 or self.random_output_len < 1:
            raise ConfigError("random input and output lengths must be >= 1", field="random-input-len")
        if not 0.0 <= self.random_range_ratio < 1.0:
            raise ConfigError("random range ratio must be in [0, 1)", field="random-range-ratio")
        lo_in, lo_out = self.smallest_pair()
        if self.limit_tokens is not None and lo_in + lo_out > self.limit_tokens:
            flag = "random-input-len" if self.dataset == "random" else "context"
            raise ConfigError(
                f"no request fits: the shortest prompt + output is {lo_in} + {lo_out} tokens, over the limit of "
                f"{self.limit_tokens} (max_model_len minus the chat template)", field=flag,
            )

    @property
    def limit_tokens(self) -> int | None:
        """The most prompt + output tokens a request may have (None: no limit)."""
        limits = [x for x in (self.context_tokens, self.max_total_tokens if self.dataset == "sharegpt-like" else None) if x is not None]
        return min(limits) if limits else None

    def random_bounds(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """((input lo, hi), (output lo, hi)), inclusive, as vLLM's RandomDataset draws them."""
        r = self.random_range_ratio

        def bounds(n: int) -> tuple[int, int]:
            return max(1, math.floor(n * (1 - r))), max(1, math.ceil(n * (1 + r)))

        return bounds(self.random_input_len), bounds(self.random_output_len)

    def smallest_pair(self) -> tuple[int, int]:
        if self.dataset == "random":
            (lo_in, _), (lo_out, _) = self.random_bounds()
            return lo_in, lo_out
        return self.min_tokens, self.min_tokens


# Named length mixes (sharegpt-like lognormals, ln-space location/scale), for corpora that vary the
# workload: the ShareGPT fit itself, short chat turns, long generations, long prompts (RAG-like).
WORKLOAD_MIXES: dict[str, dict[str, float]] = {
    "sharegpt-like": {},
    "short-chat": {"prompt_mu": 4.0, "prompt_sigma": 0.8, "output_mu": 4.1, "output_sigma": 0.6},  # ~70 in, ~75 out
    "long-generation": {"prompt_mu": 4.6, "prompt_sigma": 0.8, "output_mu": 6.0, "output_sigma": 0.35},  # ~140 in, ~430 out
    "long-prompt": {"prompt_mu": 6.55, "prompt_sigma": 0.3, "output_mu": 4.2, "output_sigma": 0.6},  # ~700 in, ~80 out
}


def mix_spec(name: str, **overrides: object) -> WorkloadSpec:
    """The ``WorkloadSpec`` of a named mix (``WORKLOAD_MIXES``), sharegpt-like lengths."""
    if name not in WORKLOAD_MIXES:
        raise ConfigError(f"unknown workload mix {name!r} (have {', '.join(WORKLOAD_MIXES)})", field="mix")
    return WorkloadSpec(**{**WORKLOAD_MIXES[name], **overrides})  # type: ignore[arg-type]


@dataclass(frozen=True)
class SampledRequest:
    index: int
    prompt: str
    prompt_tokens: int
    output_tokens: int


def _draw_lengths(rng: np.random.Generator, mu: float, sigma: float, lo: int, hi: int, n: int) -> np.ndarray:
    out = np.empty(0, dtype=np.int64)
    while out.size < n:
        draw = np.rint(rng.lognormal(mu, sigma, size=n)).astype(np.int64)
        out = np.concatenate([out, draw[(draw >= lo) & (draw <= hi)]])
    return out[:n]


def synthetic_prompt(rng: np.random.Generator, tokens: int, costs: TokenCosts | None = None) -> str:
    """Random 3-letter words joined by spaces making ``tokens`` tokens: ``tokens`` words (4*tokens - 1
    characters) under the one-token-per-word rule, else as many as the measured costs allow, the last
    slots filled with the cheapest words (at least one word)."""
    draw = _VOCAB[rng.integers(0, _VOCAB.size, size=tokens)].tolist()
    if costs is None or costs.source == "rule":
        return " ".join(draw)
    words: list[str] = []
    used = 0
    for w in draw:
        c = costs.word(w, len(words))
        if used + c > tokens:
            break
        words.append(w)
        used += c
    cheapest = sorted(_WORDS, key=lambda w: (costs.word(w, 1), w))
    while used < tokens:  # top up with the cheapest word that still fits
        w = next((w for w in cheapest if used + costs.word(w, len(words)) <= tokens), None)
        if w is None:
            break
        words.append(w)
        used += costs.word(w, len(words) - 1)
    return " ".join(words or draw[:1])


class Workload:
    """An endless, seeded sequence of requests; ``take(n)`` or iterate."""

    def __init__(self, spec: WorkloadSpec | None = None, seed: int = 0, costs: TokenCosts | None = None) -> None:
        self.spec = spec or WorkloadSpec()
        self.costs = costs
        lengths_seq, text_seq, arrival_seq = np.random.SeedSequence(seed).spawn(3)
        self._lengths_rng = np.random.default_rng(lengths_seq)
        self._text_seed = text_seq
        self.arrival_rng = np.random.default_rng(arrival_seq)  # consumed by the Poisson schedule only
        self._prompt_lens: list[int] = []
        self._output_lens: list[int] = []

    def lengths(self, index: int) -> tuple[int, int]:
        """(prompt tokens, output tokens) of request ``index``."""
        s = self.spec
        limit = s.limit_tokens
        while index >= len(self._prompt_lens):
            if s.dataset == "random":
                (lo_in, hi_in), (lo_out, hi_out) = s.random_bounds()
                p = self._lengths_rng.integers(lo_in, hi_in + 1, size=_BLOCK)
                o = self._lengths_rng.integers(lo_out, hi_out + 1, size=_BLOCK)
            else:
                p = _draw_lengths(self._lengths_rng, s.prompt_mu, s.prompt_sigma, s.min_tokens, s.max_prompt_tokens, _BLOCK)
                o = _draw_lengths(self._lengths_rng, s.output_mu, s.output_sigma, s.min_tokens, s.max_output_tokens, _BLOCK)
            if limit is not None:  # drop (never truncate) pairs that would not fit, as vLLM's ShareGPT filter
                keep = p + o <= limit
                p, o = p[keep], o[keep]
            self._prompt_lens.extend(p.tolist())
            self._output_lens.extend(o.tolist())
        return self._prompt_lens[index], self._output_lens[index]

    def request(self, index: int) -> SampledRequest:
        prompt_tokens, output_tokens = self.lengths(index)
        # Text of request i comes from its own child stream: independent of which requests were built before.
        rng = np.random.default_rng(np.random.SeedSequence(self._text_seed.entropy, spawn_key=(*self._text_seed.spawn_key, index)))
        return SampledRequest(index, synthetic_prompt(rng, prompt_tokens, self.costs), prompt_tokens, output_tokens)

    def __iter__(self) -> Iterator[SampledRequest]:
        i = 0
        while True:
            yield self.request(i)
            i += 1

    def take(self, n: int) -> list[SampledRequest]:
        return [self.request(i) for i in range(n)]
