"""A synthetic ShareGPT-like workload: seeded prompt/output token lengths and prompt text.

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
real BPE tokenizer. Requests ask for exactly the drawn output length (``max_tokens`` with
``ignore_eos``) as vllm bench does, so the output length is the workload's, not the model's.

Determinism: lengths, text and arrival gaps come from independent streams spawned from one
``numpy.random.SeedSequence(seed)``, and lengths are drawn in fixed blocks, so request ``i`` is the
same whatever the mode, the number of requests or how many were consumed before it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from inferslice.errors import ConfigError

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
_VOCAB = np.array(_WORDS)
_BLOCK = 256  # lengths are drawn in blocks of this size so request i never depends on how many were consumed


@dataclass(frozen=True)
class WorkloadSpec:
    """Length distributions; defaults are the ShareGPT fit documented above."""

    prompt_mu: float = 5.05  # ln-space location: mean prompt ~215 tokens after the 4..1024 filter
    prompt_sigma: float = 1.0  # ShareGPT prompts are heavy-tailed (std ~ mean)
    output_mu: float = 4.97  # mean output ~190 tokens after the filter (brief: 462 tok/s / 2.5 req/s)
    output_sigma: float = 0.8  # outputs are less spread than prompts
    min_tokens: int = 4  # vLLM's ShareGPT filter drops pairs shorter than 4 tokens
    max_prompt_tokens: int = 1024  # vLLM's ShareGPT filter drops prompts over 1024 tokens
    max_output_tokens: int = 1024  # keeps prompt + output within a 2048 context like vLLM's filter
    chars_per_token: int = 4  # rule of thumb for English text with a Llama tokenizer

    def __post_init__(self) -> None:
        if self.prompt_sigma < 0 or self.output_sigma < 0:
            raise ConfigError("sigma must be >= 0", field="workload")
        if not 1 <= self.min_tokens <= min(self.max_prompt_tokens, self.max_output_tokens):
            raise ConfigError("need 1 <= min_tokens <= max_*_tokens", field="workload")
        if self.chars_per_token != 4:
            raise ConfigError("prompt text is built from 4-character words; chars_per_token must be 4", field="workload")


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


def synthetic_prompt(rng: np.random.Generator, tokens: int) -> str:
    """``tokens`` random 3-letter words joined by spaces (4*tokens - 1 characters)."""
    return " ".join(_VOCAB[rng.integers(0, _VOCAB.size, size=tokens)].tolist())


class Workload:
    """An endless, seeded sequence of requests; ``take(n)`` or iterate."""

    def __init__(self, spec: WorkloadSpec | None = None, seed: int = 0) -> None:
        self.spec = spec or WorkloadSpec()
        lengths_seq, text_seq, arrival_seq = np.random.SeedSequence(seed).spawn(3)
        self._lengths_rng = np.random.default_rng(lengths_seq)
        self._text_seed = text_seq
        self.arrival_rng = np.random.default_rng(arrival_seq)  # consumed by the Poisson schedule only
        self._prompt_lens: list[int] = []
        self._output_lens: list[int] = []

    def lengths(self, index: int) -> tuple[int, int]:
        """(prompt tokens, output tokens) of request ``index``."""
        s = self.spec
        while index >= len(self._prompt_lens):
            p = _draw_lengths(self._lengths_rng, s.prompt_mu, s.prompt_sigma, s.min_tokens, s.max_prompt_tokens, _BLOCK)
            o = _draw_lengths(self._lengths_rng, s.output_mu, s.output_sigma, s.min_tokens, s.max_output_tokens, _BLOCK)
            self._prompt_lens.extend(p.tolist())
            self._output_lens.extend(o.tolist())
        return self._prompt_lens[index], self._output_lens[index]

    def request(self, index: int) -> SampledRequest:
        prompt_tokens, output_tokens = self.lengths(index)
        # Text of request i comes from its own child stream: independent of which requests were built before.
        rng = np.random.default_rng(np.random.SeedSequence(self._text_seed.entropy, spawn_key=(*self._text_seed.spawn_key, index)))
        return SampledRequest(index, synthetic_prompt(rng, prompt_tokens), prompt_tokens, output_tokens)

    def __iter__(self) -> Iterator[SampledRequest]:
        i = 0
        while True:
            yield self.request(i)
            i += 1

    def take(self, n: int) -> list[SampledRequest]:
        return [self.request(i) for i in range(n)]
