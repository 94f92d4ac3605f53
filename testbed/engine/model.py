"""Performance model of vLLM engines sharing physical GPUs (pure: simulated time, no asyncio).

Each replica is a continuous-batching engine stepping in discrete iterations: a running batch
(at most ``max_num_seqs``), a FIFO waiting queue, a paged KV cache (blocks of 16 tokens, newest
sequence preempted and recomputed when blocks run out), a prefix cache counted in tokens, and
chunked prefill under a per-step token budget. Step time follows the brief's calibration:

    t = (base + per_seq x B_gpu) / gpu_share + prefill_tokens x per_prefill_token

where B_gpu counts running sequences over every replica on the same physical GPU (co-tenancy) and
gpu_share < 1 models an injected co-tenant (how compute-limited episodes are made).

Drive it with ``submit`` / ``next_event_time`` / ``step(now_s)``; ``driver.EngineDriver`` runs it
in real time, ``inferslice bench engine`` and the unit tests with a fake clock.
"""

from __future__ import annotations

import math
import random
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from inferslice.testbed.engine.stats import ReplicaStats

GpuKey = tuple[str, int]  # (pop, gpu index): one physical GPU

# Llama-3.1-8B bf16: 32 layers x 8 KV heads x 128 dims x 2 (K and V) x 2 bytes per token.
KV_BYTES_PER_TOKEN = 131_072
WEIGHTS_BYTES = 16_060_000_000  # Llama-3.1-8B bf16 weights
GPU_MEMORY_UTILIZATION = 0.9  # vLLM's default


@dataclass(frozen=True)
class StepCost:
    base_s: float = 0.0235  # brief: median TPOT ~24 ms at low load
    per_seq_s: float = 0.0002  # brief: Free's one replica peaks at ~462 tok/s with 12 streams (~26 ms a token)
    cotenant_penalty: float = 0.17  # brief: Premium ~30 ms at 32 streams, 2 replicas (~11 streams) per GPU
    per_prefill_token_s: float = 0.00002  # ~0.02 ms per prefill token in a step

    def duration_s(self, gpu_batch: int, gpu_share: float, prefill_tokens: int, active_cotenants: int = 0) -> float:
        """One engine iteration. Replicas time-slicing one GPU (0.5 GPU each) interfere: each other
        replica with work on the same GPU stretches the step, beyond the batch they add."""
        decode = (self.base_s + self.per_seq_s * gpu_batch) * (1.0 + self.cotenant_penalty * active_cotenants)
        return decode / gpu_share + self.per_prefill_token_s * prefill_tokens


def kv_blocks_for(gpu_fraction: float, gpu_memory_bytes: int = 48 * 1024**3, block_size: int = 16) -> int:
    """KV blocks left after the weights in a fractional GPU (vLLM's profiling, roughly)."""
    free = gpu_fraction * gpu_memory_bytes * GPU_MEMORY_UTILIZATION - WEIGHTS_BYTES
    # A floor keeps tiny fractions usable in tests; a real vLLM would refuse to start.
    return max(64, int(free // (KV_BYTES_PER_TOKEN * block_size)))


@dataclass(frozen=True)
class EngineConfig:
    max_num_seqs: int = 256  # vLLM default
    max_num_batched_tokens: int = 2048  # vLLM V1 chunked-prefill budget for online serving
    block_size: int = 16  # vLLM default on GPU
    num_gpu_blocks: int = 3390  # kv_blocks_for(0.5): a 0.5 x L40S replica
    max_model_len: int = 8192  # a common --max-model-len for Llama-3.1-8B on 24 GB
    enable_prefix_caching: bool = True  # vLLM V1 default
    cost: StepCost = field(default_factory=StepCost)


@dataclass(frozen=True)
class EngineRequest:
    id: str
    prompt_tokens: int
    output_tokens: int  # exact number of tokens to generate
    arrival_s: float
    prefix_hashes: tuple[int, ...] = ()  # hashes of the prompt's full blocks (prefix cache keys)
    finish_reason: str = "length"  # "length" when max_tokens bound it, "stop" for a drawn EOS
    max_tokens_param: int | None = None  # the request's max_tokens, for vllm:request_params_max_tokens


@dataclass(frozen=True)
class TokenEvent:
    request_id: str
    replica_id: str
    index: int  # 0-based output token index
    time_s: float
    finish_reason: str | None = None  # set on the last token (or on an abort with index -1)


@dataclass(frozen=True)
class StepResult:
    events: tuple[TokenEvent, ...]
    steps: int  # engine iterations completed in this call


@dataclass(eq=False)
class _Seq:
    req: EngineRequest
    computed: int = 0  # tokens whose KV is in the cache
    generated: int = 0
    blocks: int = 0
    state: str = "waiting"  # waiting | running | finished
    first_scheduled_s: float | None = None
    first_token_s: float | None = None
    last_token_s: float | None = None
    preemptions: int = 0
    prompt_counted: bool = False

    @property
    def context(self) -> int:
        return self.req.prompt_tokens + self.generated


@dataclass(eq=False)
class _Replica:
    id: str
    gpu: GpuKey
    cfg: EngineConfig
    ready_at_s: float
    gpu_share: float
    stats: ReplicaStats
    free_blocks: int = 0
    running: list[_Seq] = field(default_factory=list)
    waiting: deque[_Seq] = field(default_factory=deque)
    batch: list[tuple[_Seq, int]] = field(default_factory=list)
    busy_until_s: float | None = None
    prefix_cache: OrderedDict[int, None] = field(default_factory=OrderedDict)


class EngineModel:
    """All replicas of one PoP; replicas on the same GPU key contend for it."""

    def __init__(self, seed: int = 0, default_config: EngineConfig | None = None) -> None:
        self.rng = random.Random(seed)
        self.default_config = default_config or EngineConfig()
        self._replicas: dict[str, _Replica] = {}
        self._seqs: dict[str, tuple[_Replica, _Seq]] = {}

    # -- replicas ----------------------------------------------------------------------------
    def add_replica(
        self,
        replica_id: str,
        gpu: GpuKey,
        *,
        now_s: float,
        cold_start_s: float = 0.0,
        gpu_share: float = 1.0,
        config: EngineConfig | None = None,
        created_wall_s: float = 0.0,
    ) -> None:
        if replica_id in self._replicas:
            raise ValueError(f"replica {replica_id!r} exists")
        _check_share(gpu_share)
        cfg = config or self.default_config
        self._replicas[replica_id] = _Replica(
            id=replica_id,
            gpu=gpu,
            cfg=cfg,
            ready_at_s=now_s + cold_start_s,
            gpu_share=gpu_share,
            stats=ReplicaStats(max_model_len=cfg.max_model_len, created_s=created_wall_s),
            free_blocks=cfg.num_gpu_blocks,
        )

    def remove_replica(self, replica_id: str, now_s: float) -> list[TokenEvent]:
        """Drop a replica; whatever it still held is aborted (one event per request)."""
        rep = self._replicas[replica_id]
        events = [self._abort(rep, seq, now_s) for seq in [*rep.running, *rep.waiting]]
        del self._replicas[replica_id]
        return events

    def set_share(self, replica_id: str, gpu_share: float) -> None:
        _check_share(gpu_share)
        self._replicas[replica_id].gpu_share = gpu_share

    def replica_ids(self) -> list[str]:
        return list(self._replicas)

    def is_ready(self, replica_id: str, now_s: float) -> bool:
        return now_s >= self._replicas[replica_id].ready_at_s

    def ready_at(self, replica_id: str) -> float:
        return self._replicas[replica_id].ready_at_s

    def gpu_share(self, replica_id: str) -> float:
        return self._replicas[replica_id].gpu_share

    def config(self, replica_id: str) -> EngineConfig:
        return self._replicas[replica_id].cfg

    def stats(self, replica_id: str) -> ReplicaStats:
        return self._replicas[replica_id].stats

    def num_running(self, replica_id: str) -> int:
        return len(self._replicas[replica_id].running)

    def num_waiting(self, replica_id: str) -> int:
        return len(self._replicas[replica_id].waiting)

    def kv_usage(self, replica_id: str) -> float:
        rep = self._replicas[replica_id]
        return 1.0 - rep.free_blocks / rep.cfg.num_gpu_blocks

    def gpu_batch(self, gpu: GpuKey) -> int:
        return sum(len(r.running) for r in self._replicas.values() if r.gpu == gpu)

    def active_cotenants(self, rep: _Replica) -> int:
        return sum(1 for r in self._replicas.values() if r is not rep and r.gpu == rep.gpu and r.running)

    def draw_output_tokens(self, limit: int) -> int:
        """A ShareGPT-like response length (log-normal, median ~190 tokens), for requests that let
        the model stop by itself."""
        return max(1, min(limit, round(self.rng.lognormvariate(math.log(190.0), 0.6))))

    # -- requests ----------------------------------------------------------------------------
    def submit(self, replica_id: str, request: EngineRequest, now_s: float) -> None:
        rep = self._replicas[replica_id]
        if request.id in self._seqs:
            raise ValueError(f"request {request.id!r} already submitted")
        if request.prompt_tokens < 1 or request.output_tokens < 1:
            raise ValueError("a request needs at least one prompt and one output token")
        total = request.prompt_tokens + request.output_tokens
        if total > rep.cfg.max_model_len or _blocks(total, rep.cfg.block_size) > rep.cfg.num_gpu_blocks:
            raise ValueError(f"request of {total} tokens exceeds the model length or the KV cache")
        seq = _Seq(req=request)
        rep.waiting.append(seq)
        self._seqs[request.id] = (rep, seq)
        self._maybe_start(rep, now_s)

    def abort(self, request_id: str, now_s: float) -> TokenEvent | None:
        entry = self._seqs.get(request_id)
        if entry is None:
            return None
        rep, seq = entry
        return self._abort(rep, seq, now_s)

    def _abort(self, rep: _Replica, seq: _Seq, now_s: float) -> TokenEvent:
        if seq.state == "running":
            rep.running.remove(seq)
        elif seq.state == "waiting":
            rep.waiting.remove(seq)
        rep.free_blocks += seq.blocks
        seq.blocks = 0
        seq.state = "finished"
        rep.stats.success["abort"] += 1
        self._seqs.pop(seq.req.id, None)
        return TokenEvent(seq.req.id, rep.id, -1, now_s, "abort")

    # -- time --------------------------------------------------------------------------------
    def next_event_time(self) -> float | None:
        """When ``step`` next has something to do (a step ends or a cold start completes)."""
        best: float | None = None
        for rep in self._replicas.values():
            t = self._replica_event(rep)
            if t is not None and (best is None or t < best):
                best = t
        return best

    @staticmethod
    def _replica_event(rep: _Replica) -> float | None:
        if rep.busy_until_s is not None:
            return rep.busy_until_s
        if rep.waiting or rep.running:
            return rep.ready_at_s
        return None

    def step(self, now_s: float) -> StepResult:
        """Complete every engine iteration that ends at or before ``now_s``, in time order."""
        events: list[TokenEvent] = []
        steps = 0
        while True:
            best: tuple[float, str] | None = None
            for rep in self._replicas.values():
                t = self._replica_event(rep)
                if t is not None and t <= now_s and (best is None or (t, rep.id) < best):
                    best = (t, rep.id)
            if best is None:
                break
            t, rid = best
            rep = self._replicas[rid]
            if rep.busy_until_s is not None:
                events.extend(self._complete(rep, t))
                steps += 1
            if not self._maybe_start(rep, t) and rep.busy_until_s is None and (rep.waiting or rep.running):
                # Nothing schedulable although work is queued (cannot happen with a consistent
                # cache; guard against a livelock rather than spin).
                break
        return StepResult(tuple(events), steps)

    # -- one iteration -----------------------------------------------------------------------
    def _maybe_start(self, rep: _Replica, now_s: float) -> bool:
        if rep.busy_until_s is not None or now_s < rep.ready_at_s or not (rep.waiting or rep.running):
            return False
        batch, prefill_tokens = self._schedule(rep, now_s)
        if not batch:
            return False
        rep.batch = batch
        gpu_batch = self.gpu_batch(rep.gpu)
        rep.busy_until_s = now_s + rep.cfg.cost.duration_s(gpu_batch, rep.gpu_share, prefill_tokens, self.active_cotenants(rep))
        rep.stats.iteration_tokens.observe(sum(n for _, n in batch))
        return True

    def _schedule(self, rep: _Replica, now_s: float) -> tuple[list[tuple[_Seq, int]], int]:
        cfg = rep.cfg
        budget = cfg.max_num_batched_tokens
        batch: list[tuple[_Seq, int]] = []
        prefill_tokens = 0
        preempted = False
        i = 0
        while i < len(rep.running) and budget > 0:
            seq = rep.running[i]
            n = min(seq.context - seq.computed, budget)
            extra = _blocks(seq.computed + n, cfg.block_size) - seq.blocks
            while extra > rep.free_blocks:
                victim = rep.running[-1]  # vLLM V1 preempts the newest request (recompute)
                self._preempt(rep, victim)
                preempted = True
                if victim is seq:
                    break
            if seq.state != "running":
                continue  # it was the victim; the list shrank under index i
            rep.free_blocks -= extra
            seq.blocks += extra
            batch.append((seq, n))
            prefill_tokens += n if n > 1 else 0
            budget -= n
            i += 1
        while rep.waiting and budget > 0 and len(rep.running) < cfg.max_num_seqs and not preempted:
            seq = rep.waiting[0]
            if seq.computed == 0:
                self._prefix_lookup(rep, seq)
            n = min(seq.context - seq.computed, budget)
            extra = _blocks(seq.computed + n, cfg.block_size) - seq.blocks
            if extra > rep.free_blocks:
                if seq.computed and not seq.blocks:
                    seq.computed = 0  # the cached prefix is not held while it waits
                break
            rep.waiting.popleft()
            rep.free_blocks -= extra
            seq.blocks += extra
            seq.state = "running"
            rep.running.append(seq)
            if seq.first_scheduled_s is None:
                seq.first_scheduled_s = now_s
                rep.stats.queue.observe(now_s - seq.req.arrival_s)
            batch.append((seq, n))
            prefill_tokens += n if n > 1 else 0
            budget -= n
        return batch, prefill_tokens

    def _prefix_lookup(self, rep: _Replica, seq: _Seq) -> None:
        prompt = seq.req.prompt_tokens
        rep.stats.prefix_cache_queries += seq.context
        if not rep.cfg.enable_prefix_caching:
            return
        hit_blocks = 0
        for h in seq.req.prefix_hashes:
            if h not in rep.prefix_cache:
                break
            rep.prefix_cache.move_to_end(h)
            hit_blocks += 1
        # At least one token is always computed so the engine can sample (as in vLLM).
        hit = min(hit_blocks * rep.cfg.block_size, prompt - 1)
        rep.stats.prefix_cache_hits += hit
        seq.computed = hit

    def _preempt(self, rep: _Replica, seq: _Seq) -> None:
        rep.running.remove(seq)
        rep.free_blocks += seq.blocks
        seq.blocks = 0
        seq.computed = 0
        seq.state = "waiting"
        seq.preemptions += 1
        rep.stats.preemptions += 1
        rep.waiting.appendleft(seq)

    def _complete(self, rep: _Replica, t: float) -> list[TokenEvent]:
        events: list[TokenEvent] = []
        stats = rep.stats
        batch, rep.batch, rep.busy_until_s = rep.batch, [], None
        for seq, n in batch:
            if seq.state != "running":
                continue  # aborted during the step
            seq.computed += n
            if not seq.prompt_counted and seq.computed >= seq.req.prompt_tokens:
                seq.prompt_counted = True
                self._prompt_done(rep, seq)
            if seq.computed < seq.context:
                continue  # a prefill chunk (or a recompute) that has not caught up yet
            seq.generated += 1
            stats.generation_tokens += 1
            if seq.first_token_s is None:
                seq.first_token_s = t
                stats.ttft.observe(t - seq.req.arrival_s)
            elif seq.last_token_s is not None:
                stats.itl.observe(t - seq.last_token_s)
            seq.last_token_s = t
            done = seq.generated >= seq.req.output_tokens
            reason = seq.req.finish_reason if done else None
            events.append(TokenEvent(seq.req.id, rep.id, seq.generated - 1, t, reason))
            if done:
                self._finish(rep, seq, t)
        return events

    def _prompt_done(self, rep: _Replica, seq: _Seq) -> None:
        req = seq.req
        stats = rep.stats
        stats.prompt_tokens += req.prompt_tokens
        stats.request_prompt_tokens.observe(req.prompt_tokens)
        stats.prefill_kv_computed_tokens.observe(req.prompt_tokens)
        if rep.cfg.enable_prefix_caching:
            for h in req.prefix_hashes:
                rep.prefix_cache[h] = None
                rep.prefix_cache.move_to_end(h)
            while len(rep.prefix_cache) > rep.cfg.num_gpu_blocks:
                rep.prefix_cache.popitem(last=False)

    def _finish(self, rep: _Replica, seq: _Seq, t: float) -> None:
        req = seq.req
        stats = rep.stats
        rep.running.remove(seq)
        rep.free_blocks += seq.blocks
        seq.blocks = 0
        seq.state = "finished"
        self._seqs.pop(req.id, None)
        stats.success[req.finish_reason] += 1
        first_sched = seq.first_scheduled_s if seq.first_scheduled_s is not None else req.arrival_s
        first_token = seq.first_token_s if seq.first_token_s is not None else t
        stats.e2e.observe(t - req.arrival_s)
        stats.prefill.observe(first_token - first_sched)
        stats.decode.observe(t - first_token)
        stats.inference.observe(t - first_sched)
        if seq.generated > 1:
            stats.tpot.observe((t - first_token) / (seq.generated - 1))
        stats.request_generation_tokens.observe(seq.generated)
        stats.request_max_generation_tokens.observe(req.max_tokens_param or req.output_tokens)
        stats.params_max_tokens.observe(req.max_tokens_param or req.output_tokens)
        stats.params_n.observe(1)
        stats.request_preemptions.observe(seq.preemptions)


def _blocks(tokens: int, block_size: int) -> int:
    return -(-tokens // block_size)


def _check_share(share: float) -> None:
    if not 0.0 < share <= 1.0:
        raise ValueError(f"gpu_share must be in (0, 1], got {share}")
