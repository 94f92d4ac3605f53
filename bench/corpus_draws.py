"""What one corpus run is, drawn from its seed alone (pure): issue 17's scenario generator.

``draw_run(seed, topology)`` -> ``RunPlan``: per tier its workload (length mix, arrivals: closed
loop, Poisson or bursty), its replicas (fixed, or autoscaling from one), its placement (the order its
GPU slots fill, so WAN links are on some tiers' paths and not on others'), its base load (a fraction
of the tier's breach point); and 0-2 causes, each with the tier it hits, its kind, magnitude, onset
and duration. The same seed always gives the same plan (``DRAW_VERSION`` names the rules), so a run
can be repeated with a cause removed (``twins``) and the blind set drawn later from fresh seeds.

Cause kinds and their class (the truth's vocabulary):

| kind | class | what it does | magnitude |
|---|---|---|---|
| load | queue | extra clients (closed loop) or arrivals (open loop) on the tier | total load 1.2-3x the tier's breach point |
| cap | network | the tier's client-edge receive cap | 0.2-0.9x the tier's measured demand |
| wan_cross | network | UDP cross-traffic on a WAN link the tier's replicas send over | 0.95-1.5x the link's physical rate |
| wan_rate | network | that link's physical rate lowered (no slice cap binds) | 0.2-0.9x the link's measured demand |
| wan_delay | network | that link's RTT raised | +20-150 ms |
| gpu | compute | the tier's replicas' effective GPU share (a co-tenant) | 0.2-0.6 |

"Measured" magnitudes are fractions here; the generator turns them into rates with what the run's
clean twin measured (``corpus_gen``). Cross-traffic is sized by the link's capacity, not by what it
leaves: a drop-tail queue spreads its losses over every flow, so UDP at 95 % of the link still leaves
TCP most of its demand (seen: 4.7 % loss, the tier's streams barely slowed), and only a link the
cross-traffic alone fills squeezes them. Two causes in one run overlap in time; on the same tier they
are one of the compound pairs (network + queue, compute + queue, network + compute).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from inferslice.topology import Topology, parse_slot

DRAW_VERSION = 2  # bump when a rule below changes: plans of the same seed then differ
CLASS_OF = {"load": "queue", "cap": "network", "wan_cross": "network", "wan_rate": "network", "wan_delay": "network", "gpu": "compute"}
CLASSES = ("queue", "network", "compute")
NETWORK_KINDS = ("cap", "wan_cross", "wan_rate", "wan_delay")
NETWORK_KIND_P = (0.4, 0.2, 0.2, 0.2)  # the client-edge cap is the paper's case; the WAN kinds share the rest
WAN_KINDS = frozenset({"wan_cross", "wan_rate", "wan_delay"})
COMPOUND_PAIRS = (("network", "queue"), ("compute", "queue"), ("network", "compute"))
MIXES = ("sharegpt-like", "short-chat", "long-generation", "long-prompt")
ARRIVALS = ("closed", "poisson", "bursty")
BURSTY_SHAPE = 0.25  # gamma shape of a bursty process's gaps (vllm bench's burstiness < 1)
CAUSE_COUNT_P = (0.08, 0.32, 0.60)  # 0, 1, 2 causes: two-cause runs also yield each cause alone (their twins)
SAME_TIER_P = 0.75  # of two-cause runs: a compound pair on one tier
AUTOSCALE_P = 0.3
FIXED_REPLICAS = {"free": (1,), "standard": (1, 2), "premium": (1, 2)}  # <= 12 admitted in flight: loads a 2-core machine can drive
DEFAULT_FIXED_REPLICAS = (1, 2)
ALTERNATE_SLOTS = {"free": ("dublin/gpu1",)}  # free's one replica may also sit off the gateway (a GPU nothing else uses)
# Magnitude ranges (issue 17)
CAP_FRACTION = (0.2, 0.9)
LOAD_MULTIPLE = (1.2, 3.0)
GPU_SHARE = (0.2, 0.6)
WAN_FRACTION = (0.2, 0.9)
WAN_CROSS_LOAD = (0.95, 1.5)
WAN_DELAY_S = (0.020, 0.150)
# Base load as a fraction of the breach point, healthy without a cause: a closed loop never exceeds its
# clients; open arrivals queue at high utilisation on their own, bursty ones (gamma shape 0.25, CV 2) far
# earlier (seen: a Free tier at 0.67 with bursty arrivals queued to 2-5 s with no cause at all).
BASE_UTILISATION = {"closed": (0.3, 0.7), "poisson": (0.2, 0.5), "bursty": (0.1, 0.3)}
# Time layout (compressed: a run is a benchmark step, not an hour of traffic)
RUN_S = 66.0
WINDOW_S = 6.0  # non-overlapping windows; the first covers the load's ramp and is not a corpus window
ONSET_S = (12.0, 20.0)
DURATION_S = (20.0, 38.0)
COMPOUND_LAG_S = (0.0, 6.0)  # the second cause of a compound starts this long after the first
MIN_END_GAP_S = 0.0


@dataclass(frozen=True)
class TierPlan:
    tier: str
    mix: str
    arrivals: str  # closed | poisson | bursty
    replicas: int  # fixed count, or where autoscaling starts
    autoscale: bool
    utilisation: float  # base load / breach point
    placement: tuple[str, ...]  # GPU slots in scale-out order
    seed: int  # the tier's load generator seed (the extra load of a load step uses seed + 1)


@dataclass(frozen=True)
class Cause:
    name: str  # "c0", "c1": what a twin removes
    kind: str
    tier: str
    onset_s: float  # from the start of the load
    duration_s: float
    magnitude: float  # see the module table
    link: str | None = None  # WAN kinds: the registry name of the link's gateway-side end ("wan-bristol-london")

    @property
    def cls(self) -> str:
        return CLASS_OF[self.kind]

    @property
    def end_s(self) -> float:
        return self.onset_s + self.duration_s


@dataclass(frozen=True)
class RunPlan:
    seed: int
    tiers: tuple[TierPlan, ...]
    causes: tuple[Cause, ...]
    run_s: float = RUN_S
    window_s: float = WINDOW_S
    draw_version: int = DRAW_VERSION
    notes: tuple[str, ...] = field(default=())

    def tier(self, name: str) -> TierPlan:
        return next(t for t in self.tiers if t.tier == name)

    def without(self, names: frozenset[str]) -> RunPlan:
        """The same run with the causes named removed (a counterfactual twin)."""
        return RunPlan(self.seed, self.tiers, tuple(c for c in self.causes if c.name not in names), self.run_s, self.window_s,
                       self.draw_version, self.notes)  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def twins(plan: RunPlan) -> list[tuple[str, frozenset[str]]]:
    """The runs a plan needs, clean first (it measures what the magnitudes are fractions of), the
    full run last: ``(label, causes removed)``. One cause: clean, all. Two: clean, each removed, all."""
    names = [c.name for c in plan.causes]
    out: list[tuple[str, frozenset[str]]] = [("clean", frozenset(names))]
    if len(names) == 2:
        out += [(f"-{n}", frozenset({n})) for n in names]
    if names:
        out.append(("all", frozenset()))
    return out


def breach_point(top: Topology, tier: str, replicas: int) -> int:
    """Requests in flight the tier admits before its router holds requests back (replicas x max_ongoing_requests)."""
    return replicas * top.tier(tier).max_ongoing_requests


def _uniform(rng: np.random.Generator, lo_hi: tuple[float, float]) -> float:
    return float(rng.uniform(lo_hi[0], lo_hi[1]))


def _placement(rng: np.random.Generator, top: Topology, tier: str) -> tuple[str, ...]:
    slots = list(top.tier(tier).placement)
    alternates = ALTERNATE_SLOTS.get(tier, ())
    if alternates and len(slots) == 1 and rng.random() < 0.5:
        return (str(alternates[int(rng.integers(len(alternates)))]),)
    order = rng.permutation(len(slots))
    return tuple(slots[int(i)] for i in order)


def remote_pops(top: Topology, tp: TierPlan) -> list[str]:
    """PoPs off the gateway among the tier's first replicas (where its traffic crosses a WAN link)."""
    pops = [parse_slot(s)[0] for s in tp.placement[: tp.replicas]]
    return sorted({p for p in pops if p != top.client.gateway})


def _draw_tier(rng: np.random.Generator, top: Topology, tier: str, seed: int, index: int) -> TierPlan:
    autoscale = bool(rng.random() < AUTOSCALE_P)
    choices = FIXED_REPLICAS.get(tier, DEFAULT_FIXED_REPLICAS)
    replicas = 1 if autoscale else int(choices[int(rng.integers(len(choices)))])
    replicas = min(replicas, top.tier(tier).replicas_max)
    mix = MIXES[int(rng.integers(len(MIXES)))]
    arrivals = ARRIVALS[int(rng.integers(len(ARRIVALS)))]
    return TierPlan(
        tier=tier,
        mix=mix,
        arrivals=arrivals,
        replicas=replicas,
        autoscale=autoscale,
        utilisation=round(_uniform(rng, BASE_UTILISATION[arrivals]), 3),
        placement=_placement(rng, top, tier),
        seed=seed * 100 + 10 * index,
    )


def _kind(rng: np.random.Generator, cls: str) -> str:
    if cls == "queue":
        return "load"
    if cls == "compute":
        return "gpu"
    return NETWORK_KINDS[int(rng.choice(len(NETWORK_KINDS), p=NETWORK_KIND_P))]


def _magnitude(rng: np.random.Generator, kind: str) -> float:
    ranges = {"load": LOAD_MULTIPLE, "cap": CAP_FRACTION, "gpu": GPU_SHARE, "wan_cross": WAN_CROSS_LOAD, "wan_rate": WAN_FRACTION,
              "wan_delay": WAN_DELAY_S}  # fmt: skip
    return round(_uniform(rng, ranges[kind]), 4)


def _with_remote_replica(rng: np.random.Generator, top: Topology, tp: TierPlan) -> TierPlan:
    """A WAN cause needs the tier's traffic on a WAN link: re-draw its placement until a first replica is remote."""
    for _ in range(64):
        if remote_pops(top, tp):
            return tp
        alternates = ALTERNATE_SLOTS.get(tp.tier, ())
        placement = (alternates[0],) if alternates and len(tp.placement) == 1 else _placement(rng, top, tp.tier)
        tp = TierPlan(tp.tier, tp.mix, tp.arrivals, tp.replicas, tp.autoscale, tp.utilisation, placement, tp.seed)
    if tp.replicas < len(top.tier(tp.tier).placement):  # every order of one replica is at the gateway: use two
        return _with_remote_replica(rng, top, TierPlan(tp.tier, tp.mix, tp.arrivals, tp.replicas + 1, tp.autoscale,
                                                       tp.utilisation, tp.placement, tp.seed))  # fmt: skip
    return tp


def _link(rng: np.random.Generator, top: Topology, tp: TierPlan) -> str:
    pops = remote_pops(top, tp)
    pop = pops[int(rng.integers(len(pops)))]
    route = top.route(pop, top.client.gateway)
    hop = int(rng.integers(len(route) - 1))  # any link on the way: its gateway-side end
    return f"wan-{route[hop + 1]}-{route[hop]}"


REAL_ENGINE_KINDS = ("cap", "load", "gpu")  # item 4: every single cause on a real engine (gpu: its CPU quota)
REAL_ENGINE_MIX = "short-chat"  # fits the tiny real model's 256-token context


def draw_run(seed: int, top: Topology, real_tier: str | None = None) -> RunPlan:
    """The plan of run ``seed`` (a pure function of the seed, the topology and ``DRAW_VERSION``).

    With ``real_tier`` (a tier served by a real vLLM), one single cause on that tier, of a kind
    drawn from ``REAL_ENGINE_KINDS``; the tier at one fixed replica (a real replica cold-starts in
    about a minute here) and short chat turns. Its plans are drawn from their own stream."""
    rng = np.random.default_rng(np.random.SeedSequence([DRAW_VERSION, seed] + ([1] if real_tier else [])))
    tiers = {t: _draw_tier(rng, top, t, seed, i) for i, t in enumerate(top.tier_names)}
    if real_tier is not None:
        tp = tiers[real_tier]
        placement = tuple(top.tier(real_tier).placement)
        tiers[real_tier] = TierPlan(tp.tier, REAL_ENGINE_MIX, tp.arrivals, 1, False, tp.utilisation, placement, tp.seed)
        kind = REAL_ENGINE_KINDS[int(rng.integers(len(REAL_ENGINE_KINDS)))]
        onset, duration = _uniform(rng, ONSET_S), _uniform(rng, DURATION_S)
        cause = Cause("c0", kind, real_tier, round(onset, 2), round(min(duration, RUN_S - onset), 2), _magnitude(rng, kind))
        return RunPlan(seed, tuple(tiers[t] for t in top.tier_names), (cause,), notes=(f"real engine: {real_tier}",))
    n = int(rng.choice(3, p=CAUSE_COUNT_P))
    specs: list[tuple[str, str]] = []  # (class, tier)
    if n == 2 and rng.random() < SAME_TIER_P:
        pair = COMPOUND_PAIRS[int(rng.integers(len(COMPOUND_PAIRS)))]
        tier = top.tier_names[int(rng.integers(len(top.tier_names)))]
        specs = [(pair[0], tier), (pair[1], tier)]
    else:
        while len(specs) < n:
            cls = CLASSES[int(rng.integers(len(CLASSES)))]
            tier = top.tier_names[int(rng.integers(len(top.tier_names)))]
            if (cls, tier) not in specs:  # one cause per class and tier: its share is then its own
                specs.append((cls, tier))
    causes: list[Cause] = []
    for i, (cls, tier) in enumerate(specs):
        kind = _kind(rng, cls)
        link = None
        if kind in WAN_KINDS:
            tiers[tier] = _with_remote_replica(rng, top, tiers[tier])
            link = _link(rng, top, tiers[tier])
        if i == 1 and specs[0][1] == tier:  # a compound: overlaps the first cause for most of its span
            first = causes[0]
            onset = first.onset_s + _uniform(rng, COMPOUND_LAG_S)
            duration = min(_uniform(rng, DURATION_S), RUN_S - MIN_END_GAP_S - onset)
        else:
            onset = _uniform(rng, ONSET_S)
            duration = min(_uniform(rng, DURATION_S), RUN_S - MIN_END_GAP_S - onset)
        causes.append(Cause(f"c{i}", kind, tier, round(onset, 2), round(duration, 2), _magnitude(rng, kind), link))
    return RunPlan(seed, tuple(tiers[t] for t in top.tier_names), tuple(causes))


def run_topology(top: Topology, plan: RunPlan) -> dict[str, Any]:
    """The topology document of a run: the base one with each tier's placement as drawn (scale-out
    order) and ``replicas_min`` at the drawn replica count (autoscaling starts from one)."""
    data = top.model_dump(mode="json")
    for t in data["tiers"]:
        tp = plan.tier(t["name"])
        placement = list(tp.placement)
        if len(placement) < t["replicas_max"]:  # an alternate single slot for a one-replica tier
            placement += [s for s in t["placement"] if s not in placement]
        t["placement"] = placement
        t["replicas_min"] = 1 if tp.autoscale else tp.replicas
    return data


def parse_seeds(text: str) -> list[int]:
    """``"A-B"`` (inclusive), ``"A"``, or ``"A-B,C,D-E"`` -> sorted seeds."""
    seeds: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            a, b = int(lo), int(hi) if sep else int(lo)
        except ValueError:
            raise ValueError(f"seeds must be A-B or A (integers), got {part!r}") from None
        if b < a or a < 0:
            raise ValueError(f"seed range {part!r} is empty or negative")
        seeds.update(range(a, b + 1))
    if not seeds:
        raise ValueError("no seeds given")
    return sorted(seeds)
