"""A discrete-time model of the testbed's serving stack for the control benchmark.

Why a model: comparing six policies on five scenarios on the netns testbed takes hours on two
cores; the model runs the full grid in seconds, with the same topology, the same calibrated engine
figures and the same classifier (``bottleneck.classify`` reads the model's windows exactly as it
reads the testbed's). What it reproduces, from the testbed's engine calibration and the brief:

- a replica admits ``max_ongoing_requests`` streams; a stream's TPOT is 24 ms + 0.2 ms per
  co-batched sequence, x1.15 per other busy replica on the same physical GPU (0.5-GPU replicas share
  GPUs, so capacity grows less than linearly), divided by the replica's GPU share (a co-tenant);
  ~190 output tokens per request (Free: 12 streams -> ~2.4 req/s, the paper's 2.49);
- excess requests wait in the tier's FIFO router queue (Ray Serve's behaviour: TPOT stays flat
  while TTFT grows);
- a tier's streams share its client-edge cap at ~2430 bit per token (the brief: ~0.9 Mbit/s at
  ~370 tok/s); above the cap every stream is paced down (TPOT x demand/cap) and first chunks wait
  behind the backlog (TTFT + 1.5 s per unit of overload);
- a new replica serves ``cold_start_s`` after it is asked for; a relocation is make-before-break;
- a replica at another PoP than the gateway streams over that PoP's WAN link to it (the topology's
  links): the link has a physical rate (``Link.capacity_bps``, else the brief's mean TCP throughput
  for its latency tier), cross-traffic takes what it uses, and the tier streams on it share the rest
  (paced like under a cap when they need more; their first chunks wait behind the link's buffer);
  an added delay on the link (``WanState.extra_rtt_s``) delays every first chunk by that round trip.
  The client-edge cap then applies to what the WAN delivers.

It is a model, not the testbed: absolute numbers are indicative, the comparison between policies
(same arrivals, same seeds) is what the benchmark reports.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from inferslice.snapshot import SliceSnapshot
from inferslice.topology import Topology, parse_slot

BITS_PER_TOKEN = 2430.0  # brief: ~0.9 Mbit/s of streamed response at ~370 tok/s
BASE_TPOT_S = 0.024  # engine calibration: unconstrained median TPOT 24-27 ms
PER_SEQ_TPOT_S = 0.0002  # engine calibration: 0.2 ms per co-batched sequence
COLOCATION_PENALTY = 0.15  # per other busy replica on the same GPU (Standard 3 replicas: ~3.2 req/s, paper 3.18)
PREFILL_S = 0.06  # first token after admission at low load (brief: P99 TTFT ~0.1 s unloaded)
TOKENS_MEAN = 190  # output tokens per request (ShareGPT-like, ~5 s per request at 25 ms)
NET_TTFT_S_PER_OVERLOAD = 1.5  # first chunk waits behind the backlog: 0.9 Mbit/s into 0.5 -> +1.2 s (brief: P99 2-3 s)
WAN_BUFFER_S = 0.05  # the WAN link's drop-tail buffer at line rate (the testbed delay line's 50 ms): cross-traffic keeps it full
WAN_MIN_SHARE = 1e-4  # the least the tier streams keep of a link cross-traffic fills (a floor against a zero rate)
# The brief's mean TCP throughput per latency tier: a link's rate when the topology declares none.
WAN_RATE_BPS_BY_TIER = {"intra_pop": 10e9, "near": 6.53e9, "mid": 2.79e9, "far": 1.19e9, "distant": 1.30e9}


@dataclass
class Request:
    tier: str
    arrival_s: float
    tokens: int
    start_s: float | None = None
    first_token_s: float | None = None
    done_tokens: float = 0.0
    finish_s: float | None = None
    replica: str | None = None


@dataclass
class SimReplica:
    id: str
    tier: str
    slot: str
    ready_at_s: float
    state: str = "starting"  # starting | ready | draining
    streams: list[Request] = field(default_factory=list)
    replaces: str | None = None  # make-before-break: the replica this one relieves once ready

    @property
    def pop(self) -> str:
        return parse_slot(self.slot)[0]

    @property
    def gpu(self) -> int:
        return parse_slot(self.slot)[1]


@dataclass
class TierSim:
    name: str
    max_ongoing: int
    slo_s: float
    placement: list[str]
    replicas: list[SimReplica] = field(default_factory=list)
    queue: deque[Request] = field(default_factory=deque)
    cap_bps: float | None = None
    target: int = 1
    next_id: int = 0
    # window accumulators
    w_ttft: list[float] = field(default_factory=list)
    w_tpot: list[float] = field(default_factory=list)
    w_tokens: float = 0.0
    w_bits: float = 0.0
    w_first: int = 0
    demand_bps: float = 0.0
    overload: float = 1.0


@dataclass(frozen=True)
class WanState:
    """One WAN link at one instant: what the scenario injects on it."""

    # Cross-traffic (another service's bulk transfer) takes all of the link's rate but this much; None: no cross-traffic.
    leaves_bps: float | None = None
    extra_rtt_s: float = 0.0  # round trip added to the link's own (a reroute onto a longer path)

    @property
    def impaired(self) -> bool:
        return self.leaves_bps is not None or self.extra_rtt_s > 0


NO_WAN_IMPAIRMENT = WanState()

Arrivals = Callable[[str, float], float]  # (tier, t) -> request rate (req/s)
ShareOf = Callable[[str, float], float]  # (slot, t) -> GPU share of replicas on that slot
WanOf = Callable[[str, float], WanState]  # ("a|b" PoP pair, t) -> the link's injected state
CapEvent = tuple[float, str, float | None]  # (t, tier, cap) injected by the scenario


def wan_key(a: str, b: str) -> str:
    return "|".join(sorted((a, b)))


def link_rate_bps(top: Topology, key: str) -> float:
    a, b = key.split("|")
    link = top.link_between(a, b)
    if link is None:
        raise KeyError(f"no link {key}")
    return link.capacity_bps if link.capacity_bps is not None else WAN_RATE_BPS_BY_TIER[link.latency_tier.value]


def no_wan(key: str, t: float) -> WanState:
    return NO_WAN_IMPAIRMENT


def replica_capacity_rps(max_ongoing: int, share: float = 1.0, busy_neighbours: int = 0) -> float:
    """Requests/s one replica completes at its admission limit in this model (its maximum service rate)."""
    tpot = (BASE_TPOT_S + PER_SEQ_TPOT_S * max_ongoing) * (1 + COLOCATION_PENALTY * busy_neighbours) / max(0.05, share)
    return max_ongoing / (TOKENS_MEAN * tpot)


def tier_max_capacity_rps(top: Topology, tier: str) -> float:
    """A tier's most requests/s at its ceiling, every GPU slot as busy as the tiers' reservations allow
    (each replica shares its GPU with every other replica any tier may place there)."""
    per_slot: dict[str, int] = {}
    for t in top.tiers:
        for slot in t.placement[: t.replicas_max]:
            per_slot[slot] = per_slot.get(slot, 0) + 1
    t = top.tier(tier)
    return sum(replica_capacity_rps(t.max_ongoing_requests, 1.0, per_slot[slot] - 1) for slot in t.placement[: t.replicas_max])


class ServingSim:
    """The whole stack: tiers, replicas, queues, caps. Step with ``step(dt)``; read windows with ``window``."""

    def __init__(
        self,
        topology: Topology,
        arrivals: Arrivals,
        share_of: ShareOf,
        seed: int,
        cold_start_s: float,
        wan_of: WanOf = no_wan,
        probed: bool = True,
    ) -> None:
        self.top = topology
        self.arrivals = arrivals
        self.share_of = share_of
        self.wan_of = wan_of
        self.probed = probed  # the network exporter's path source and the PoP prober run: snapshots carry the WAN fields
        self.gateway = topology.client.gateway
        self.wan_rate_bps = {wan_key(lk.a, lk.b): link_rate_bps(topology, wan_key(lk.a, lk.b)) for lk in topology.links}
        self.wan_demand_bps: dict[str, float] = {}  # per link, the tier streams' unpaced demand in the last step
        self.wan_scale: dict[str, float] = {}  # per link, the pace its streams get (1 = unimpeded)
        self.wan_excess_s: dict[str, float] = {}  # per link, its RTT above the topology's (what a prober measures)
        self.rng = random.Random(seed)
        self.cold_start_s = cold_start_s
        self.t = 0.0
        self.tiers: dict[str, TierSim] = {
            t.name: TierSim(t.name, t.max_ongoing_requests, t.slo_ttft_p99_s, list(t.placement), cap_bps=t.client_cap_bps)
            for t in topology.tiers
        }
        self.done: list[Request] = []
        self.arrived: dict[str, int] = {t: 0 for t in self.tiers}

    # -- actuation -------------------------------------------------------------------------------
    def set_replicas(self, tier: str, n: int, *, instant: bool = False) -> None:
        ts = self.tiers[tier]
        ts.target = n
        live = [r for r in ts.replicas if r.state != "draining"]
        while len(live) < n:
            used = [r.slot for r in live]
            slot = next((s for k, s in enumerate(ts.placement) if used.count(s) < ts.placement[: k + 1].count(s)), ts.placement[-1])
            r = SimReplica(f"{tier}-{ts.next_id}", tier, slot, self.t if instant else self.t + self.cold_start_s)
            if instant:
                r.state = "ready"
            ts.next_id += 1
            ts.replicas.append(r)
            live.append(r)
        if len(live) > n:
            # scale in: the newest first (starting ones before ready ones), as Ray Serve does
            for r in sorted(live, key=lambda r: (r.state == "ready", r.ready_at_s), reverse=False)[: len(live) - n]:
                r.state = "draining"

    def relocate(self, tier: str, replica: str, slot: str) -> None:
        ts = self.tiers[tier]
        old = next((r for r in ts.replicas if r.id == replica and r.state != "draining"), None)
        if old is None:
            return
        new = SimReplica(f"{tier}-{ts.next_id}", tier, slot, self.t + self.cold_start_s, replaces=old.id)
        ts.next_id += 1
        ts.replicas.append(new)

    def set_cap(self, tier: str, cap_bps: float | None) -> None:
        self.tiers[tier].cap_bps = cap_bps

    # -- dynamics --------------------------------------------------------------------------------
    def _tpot(self, r: SimReplica) -> float:
        busy_neighbours = sum(
            1 for ts in self.tiers.values() for o in ts.replicas if o is not r and o.slot == r.slot and o.state != "starting" and o.streams
        )
        share = max(0.05, self.share_of(r.slot, self.t))
        return (BASE_TPOT_S + PER_SEQ_TPOT_S * len(r.streams)) * (1 + COLOCATION_PENALTY * busy_neighbours) / share

    def step(self, dt: float) -> None:
        t0 = self.t
        # arrivals (Poisson within the step)
        for name, ts in self.tiers.items():
            lam = max(0.0, self.arrivals(name, t0))
            n = _poisson(self.rng, lam * dt)
            for _ in range(n):
                tokens = max(20, int(self.rng.gauss(TOKENS_MEAN, 60)))
                ts.queue.append(Request(name, t0 + self.rng.random() * dt, tokens))
            self.arrived[name] += n
        for ts in self.tiers.values():
            self._replicas(ts)
            self._dispatch(ts)
            self._serve(ts, dt)
        self.t = t0 + dt

    def _replicas(self, ts: TierSim) -> None:
        for r in ts.replicas:
            if r.state == "starting" and self.t >= r.ready_at_s:
                r.state = "ready"
                if r.replaces:
                    for o in ts.replicas:
                        if o.id == r.replaces:
                            o.state = "draining"
        ts.replicas = [r for r in ts.replicas if not (r.state == "draining" and not r.streams)]

    def _dispatch(self, ts: TierSim) -> None:
        ready = [r for r in ts.replicas if r.state == "ready"]
        while ts.queue and ready:
            r = min(ready, key=lambda x: len(x.streams))
            if len(r.streams) >= ts.max_ongoing:
                break
            req = ts.queue.popleft()
            req.start_s = max(self.t, req.arrival_s)
            req.replica = r.id
            r.streams.append(req)

    def _with_wan(self, snap: SliceSnapshot, pops: list[str]) -> SliceSnapshot:
        """The snapshot's WAN fields over the links these PoPs stream to the gateway over (none: all at
        the gateway): the fullest link's delivered and physical rate (every tier's streams and the
        cross-traffic on it), the slowest link's measured and declared round trip."""
        keys = sorted({k for k in (self.path(p) for p in pops) if k is not None})
        if not keys:
            return snap
        delivered = {}
        for key in keys:
            w = self.wan_of(key, self.t)
            rate = self.wan_rate_bps[key]
            streams = self.wan_demand_bps.get(key)
            if streams is None:  # unimpaired: nothing paces the streams; their unpaced rate is what the link carries
                streams = BITS_PER_TOKEN * sum(
                    len(r.streams) / self._tpot(r)
                    for ts in self.tiers.values()
                    for r in ts.replicas
                    if r.state in ("ready", "draining") and r.streams and self.path(r.pop) == key
                )
            tier_bps = streams * self.wan_scale.get(key, 1.0)
            cross = 0.0 if w.leaves_bps is None else max(0.0, rate - w.leaves_bps)
            delivered[key] = min(rate, tier_bps + cross)
        fullest = max(keys, key=lambda k: delivered[k] / self.wan_rate_bps[k])
        slowest = max(keys, key=lambda k: self.wan_excess_s.get(k, 0.0))
        a, b = slowest.split("|")
        declared = self.top.rtt_s(a, b)
        return dataclasses.replace(
            snap,
            wan_rx_bps=delivered[fullest],
            wan_capacity_bps=self.wan_rate_bps[fullest],
            wan_rtt_s=declared + self.wan_excess_s.get(slowest, 0.0),
            wan_base_rtt_s=declared,
        )

    def path_excess_s(self, pop: str) -> float:
        """How much slower than configured the path from ``pop`` to the gateway is now (0 at the gateway)."""
        key = self.path(pop)
        return self.wan_excess_s.get(key, 0.0) if key is not None else 0.0

    def path(self, pop: str) -> str | None:
        """The WAN link a replica at ``pop`` streams to the gateway over (None: it is at the gateway)."""
        if pop == self.gateway:
            return None
        key = wan_key(self.gateway, pop)
        return key if key in self.wan_rate_bps else None

    def _wan_pace(self) -> dict[str, tuple[float, float]]:
        """Per impaired WAN link: (the pace its tier streams get, the delay of their first chunks)."""
        out: dict[str, tuple[float, float]] = {}
        for key, rate in self.wan_rate_bps.items():
            w = self.wan_of(key, self.t)
            if not w.impaired:
                self.wan_demand_bps.pop(key, None)
                self.wan_scale.pop(key, None)
                self.wan_excess_s.pop(key, None)
                continue
            tps = sum(
                len(r.streams) / self._tpot(r)
                for ts in self.tiers.values()
                for r in ts.replicas
                if r.state in ("ready", "draining") and r.streams and self.path(r.pop) == key
            )
            demand = tps * BITS_PER_TOKEN
            avail = rate if w.leaves_bps is None else min(rate, max(w.leaves_bps, WAN_MIN_SHARE * rate))
            scale = min(1.0, avail / demand) if demand > 0 else 1.0
            full = w.leaves_bps is not None and demand >= avail  # the cross-traffic keeps the link's buffer full
            delay = w.extra_rtt_s + (WAN_BUFFER_S if full else 0.0) + NET_TTFT_S_PER_OVERLOAD * (1.0 / scale - 1.0)
            self.wan_demand_bps[key], self.wan_scale[key] = demand, scale
            self.wan_excess_s[key] = w.extra_rtt_s + (WAN_BUFFER_S if full else 0.0)
            out[key] = (scale, delay)
        return out

    def _serve(self, ts: TierSim, dt: float) -> None:
        active = [r for r in ts.replicas if r.state in ("ready", "draining") and r.streams]
        wan = self._wan_pace()
        rates = {r.id: 1.0 / self._tpot(r) for r in active}
        paths = {r.id: self.path(r.pop) for r in active}
        for r in active:
            key = paths[r.id]
            if key in wan:
                rates[r.id] *= wan[key][0]
        demand_tps = sum(rates[r.id] * len(r.streams) for r in active)
        demand_bps = demand_tps * BITS_PER_TOKEN
        scale = 1.0
        if ts.cap_bps is not None and demand_bps > ts.cap_bps:
            scale = ts.cap_bps / demand_bps
        ts.demand_bps = demand_bps
        ts.overload = 1.0 / scale
        for r in active:
            rate = rates[r.id] * scale
            for req in list(r.streams):
                if req.first_token_s is None and req.start_s is not None:
                    net = NET_TTFT_S_PER_OVERLOAD * max(0.0, ts.overload - 1.0)
                    key = paths[r.id]
                    if key in wan:
                        net += wan[key][1]
                    req.first_token_s = req.start_s + PREFILL_S + net
                if req.first_token_s is not None and req.first_token_s <= self.t + dt:
                    if req.done_tokens == 0.0:
                        ts.w_ttft.append(req.first_token_s - req.arrival_s)
                        ts.w_first += 1
                    tokens = min(rate * dt, req.tokens - req.done_tokens)
                    req.done_tokens += max(tokens, 1e-9)
                    ts.w_tokens += tokens
                    ts.w_bits += tokens * BITS_PER_TOKEN
                    if req.done_tokens >= req.tokens:
                        req.finish_s = self.t + dt
                        ts.w_tpot.append(1.0 / rate)
                        r.streams.remove(req)
                        self.done.append(req)

    # -- observation -----------------------------------------------------------------------------
    def window(self, tier: str, window_s: float) -> SliceSnapshot:
        """The tier's snapshot for the window just ended (and reset the accumulators)."""
        ts = self.tiers[tier]
        tt = sorted(ts.w_ttft)
        tp = sorted(ts.w_tpot)
        ready = [r for r in ts.replicas if r.state == "ready"]
        shares = [self.share_of(r.slot, self.t) for r in ready] or [1.0]
        running = sum(len(r.streams) for r in ts.replicas)
        snap = SliceSnapshot(
            slice=tier,
            window_end_s=self.t,
            window_s=window_s,
            slo_ttft_p99_s=ts.slo_s,
            ttft_p50_s=_q(tt, 0.5),
            ttft_p99_s=_q(tt, 0.99),
            ttft_mean_s=sum(tt) / len(tt) if tt else None,
            tpot_p50_s=_q(tp, 0.5),
            tpot_p99_s=_q(tp, 0.99),
            tpot_mean_s=sum(tp) / len(tp) if tp else None,
            output_tokens_per_s=ts.w_tokens / window_s,
            request_rate=ts.w_first / window_s,
            link_rx_bps=ts.w_bits / window_s,
            link_cap_bps=ts.cap_bps,
            requests_waiting=float(len(ts.queue)),
            requests_running=float(running),
            replicas=float(len(ready)),
            replicas_max=float(len(ts.placement)),
            gpu_share=min(1.0, min(shares)),  # the lowest replica's, as the collectors report it (fields.py: min)
            kv_cache_usage=min(1.0, running / max(1, len(ready) * ts.max_ongoing)) * 0.9,
        )
        if self.probed:
            snap = self._with_wan(snap, [r.pop for r in ready])
        ts.w_ttft, ts.w_tpot, ts.w_tokens, ts.w_bits, ts.w_first = [], [], 0.0, 0.0, 0
        return snap

    def waiting_now(self, tier: str) -> int:
        return len(self.tiers[tier].queue)

    def ongoing_now(self, tier: str) -> int:
        ts = self.tiers[tier]
        return len(ts.queue) + sum(len(r.streams) for r in ts.replicas)


def _q(values: list[float], q: float) -> float | None:
    if not values:
        return None
    k = min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))
    return values[k]


def _poisson(rng: random.Random, mean: float) -> int:
    if mean <= 0:
        return 0
    limit, k, p = math.exp(-mean), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1
