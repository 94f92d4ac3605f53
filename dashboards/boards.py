"""The four kinds of dashboard, generated from the tiers file: overview (every tier side by side),
one per tier, network and control. Uids are stable so links and provisioning survive rebuilds.
"""

from __future__ import annotations

from typing import Any

from inferslice import metric_names as m
from inferslice.dashboards import panels as p
from inferslice.dashboards import queries as q
from inferslice.dashboards.panels import Layout, Query
from inferslice.dashboards.rules import dashboard_uid_for_tier
from inferslice.topology import Tier, Topology, parse_slot

UID_OVERVIEW = "inferslice-overview"
UID_NETWORK = "inferslice-network"
UID_CONTROL = "inferslice-control"

RI = "$__rate_interval"  # Grafana picks >= 4 scrape intervals, so rate() always has two samples
ALL_SLICES = 'slice=~"$slice"'

SLICE_VAR_QUERY = f"label_values({m.SLICE_REPLICAS_MAX}, slice)"
POP_VAR_QUERY = f"label_values({m.LINK_RECEIVE_BYTES}, pop)"


def _slice_var() -> Any:
    return p.variable("slice", "tier", SLICE_VAR_QUERY)


def _pop_var(query: str = POP_VAR_QUERY) -> Any:
    return p.variable("pop", "PoP", query)


def _actions_annotation(selector: str) -> dict[str, Any]:
    return p.prometheus_annotation(
        "control actions",
        q.control_changes(selector, "1m"),
        title="{{kind}} ({{outcome}})",
        text_format="{{slice}}: {{kind}} {{outcome}}",
        tags="slice,kind,outcome",
    )


def _ttft_queries(selector: str, legend_prefix: str, quantiles: tuple[float, ...] = (0.99,)) -> list[Query]:
    out = []
    for quant in quantiles:
        for src in q.TTFT_SOURCES:
            out.append(Query(q.quantile(quant, src.histogram, selector, RI), f"{legend_prefix}{q.pct(quant)} {src.vantage}"))
    out.append(Query(f"max by (slice) ({m.SLO_TTFT_THRESHOLD}{{{selector}}})", f"{legend_prefix}SLO"))
    return out


# -- overview ---------------------------------------------------------------------------------
def overview(topology: Topology, api_url: str) -> dict[str, Any]:
    s = ALL_SLICES
    layout = Layout().add(
        p.row("Service level"),
        p.timeseries(
            "P99 TTFT against the SLO",
            _ttft_queries(s, "{{slice}} "),
            p.SECONDS,
            w=12,
            description="Engine-side (vLLM) and client-perceived P99 TTFT per tier; the SLO line is the tier's threshold.",
        ),
        p.timeseries(
            "Goodput (requests meeting the TTFT SLO)",
            [Query(q.sum_rate(m.SLO_TTFT_GOOD, s, RI), "{{slice}} good"), Query(q.sum_rate(m.SLO_TTFT_REQUESTS, s, RI), "{{slice}} all")],
            p.REQ_PER_S,
            w=12,
        ),
        p.timeseries(
            "SLO attainment",
            [Query(q.attainment(s, RI), "{{slice}}")],
            p.RATIO,
            w=12,
            description="Share of requests whose TTFT met the SLO, over the rate window.",
        ),
        p.state_timeline(
            "Diagnosed regime",
            [Query(q.regime_active(s), "{{slice}} {{regime}}")],
            w=12,
            description="inferslice_diagnosis_regime: the regime the classifier holds for each tier.",
        ),
        p.row("Capacity"),
        p.timeseries(
            "Replicas against ceiling",
            [
                Query(f"max by (slice) ({m.SLICE_REPLICAS}{{{s}}})", "{{slice}} replicas"),
                Query(f"max by (slice) ({m.SLICE_REPLICAS_MAX}{{{s}}})", "{{slice}} ceiling"),
            ],
            p.COUNT,
            w=12,
        ),
        p.timeseries(
            "Client-edge caps against demand",
            [
                Query(q.link_bits("receive", f'{s},pop=~"$pop"', RI), "{{slice}} {{pop}}/{{link}} demand"),
                Query(q.link_cap("receive", f'{s},pop=~"$pop"'), "{{slice}} {{pop}}/{{link}} cap"),
            ],
            p.BITS_PER_S,
            w=12,
            description="Receive rate x 8 against the receive cap: demand at or above the cap is where a network limit can bind.",
        ),
    )
    tier_links = [(f"{t.label} tier", f"/d/{dashboard_uid_for_tier(t.name)}") for t in topology.tiers]
    return p.dashboard(
        UID_OVERVIEW,
        "InferSlice / Overview",
        layout,
        variables=[_slice_var(), _pop_var()],
        annotations=[_actions_annotation(s)],
        links=[*tier_links, ("Diagnosis API", f"{api_url.rstrip('/')}/v1/slices")],
        description="Every tier side by side: SLO, goodput, regime, capacity; control actions as annotations.",
    )


# -- per tier -----------------------------------------------------------------------------------
def tier_pops(topology: Topology, tier: Tier) -> list[str]:
    pops = [topology.client.gateway]
    for slot in tier.placement[: tier.replicas_max]:
        pop, _ = parse_slot(slot)
        if pop not in pops:
            pops.append(pop)
    return pops


def tier_dashboard(topology: Topology, tier: Tier, api_url: str) -> dict[str, Any]:
    s = q.sel(slice=tier.name)
    sp = f'{s},pop=~"$pop"'
    api = f"{api_url.rstrip('/')}/v1/slices/{tier.name}"
    lat = (0.5, 0.9, 0.99)

    def lat_q(histogram: str, vantage: str) -> list[Query]:
        return [Query(q.quantile(x, histogram, s, RI), f"{q.pct(x)} {vantage}") for x in lat]

    evidence = (
        f"**Current diagnosis of {tier.label}**: [{api}]({api}) (JSON: regime, SLO state, evidence with values and thresholds).\n\n"
        f"SLO: P99 TTFT <= {tier.slo_ttft_p99_s:g} s, objective {tier.attainment_objective:g}; "
        f"replicas {tier.replicas_min}-{tier.replicas_max} of {tier.gpu_per_replica:g} GPU, quota {tier.gpu_quota:g} GPU.\n\n"
        "Read TTFT, TPOT and link throughput together: queue-limited = TTFT up, TPOT flat, link below cap; "
        "network-limited = TTFT **and** TPOT up with the link pinned at its cap; replicas cure queueing, never a bandwidth limit."
    )
    layout = Layout().add(
        p.row("Latency"),
        p.timeseries(
            "TTFT percentiles",
            [*lat_q(m.ENGINE_TTFT, "engine"), *lat_q(m.CLIENT_TTFT, "client"), Query(f"max({m.SLO_TTFT_THRESHOLD}{{{s}}})", "SLO")],
            p.SECONDS,
            w=12,
        ),
        p.timeseries(
            "TPOT and ITL percentiles",
            [
                *lat_q(m.ENGINE_TPOT, "engine TPOT"),
                Query(q.quantile(0.99, m.ENGINE_ITL, s, RI), "p99 engine ITL"),
                *lat_q(m.CLIENT_TPOT, "client per-chunk"),
            ],
            p.SECONDS,
            w=12,
        ),
        p.timeseries(
            "Generation throughput",
            [
                Query(f"sum({q.rate(m.ENGINE_GENERATION_TOKENS, s, RI)})", "generated"),
                Query(f"sum({q.rate(m.ENGINE_PROMPT_TOKENS, s, RI)})", "prompt"),
            ],
            p.TOKENS_PER_S,
            w=8,
        ),
        p.timeseries(
            "Goodput and request rate",
            [
                Query(f"sum({q.rate(m.SLO_TTFT_GOOD, s, RI)})", "good"),
                Query(f"sum({q.rate(m.SLO_TTFT_REQUESTS, s, RI)})", "all"),
                Query(f"sum by (finished_reason) ({q.rate(m.ENGINE_REQUEST_SUCCESS, s, RI)})", "finished {{finished_reason}}"),
            ],
            p.REQ_PER_S,
            w=8,
        ),
        p.timeseries("SLO attainment", [Query(q.attainment(s, RI), "attainment")], p.RATIO, w=8),
        p.row("Queueing and cache"),
        p.timeseries(
            "Queue depth",
            [
                Query(f"sum({m.ENGINE_WAITING}{{{s}}})", "engine waiting"),
                Query(f"sum({m.ENGINE_RUNNING}{{{s}}})", "engine running"),
                Query(f"sum({m.SERVE_QUEUED}{{{s}}})", "router queued"),
                Query(f"sum({m.SERVE_ONGOING}{{{s}}})", "router ongoing"),
            ],
            p.COUNT,
            w=8,
        ),
        p.timeseries("Queue time", lat_q(m.ENGINE_QUEUE_TIME, "engine queue"), p.SECONDS, w=8),
        p.timeseries(
            "KV-cache usage",
            [
                Query(f"max by (stat) ({m.ENGINE_KV_CACHE_USAGE}{{{s}}})", "{{stat}}"),
                Query(f"max({m.ENGINE_PREFIX_CACHE_HIT}{{{s}}})", "prefix hit"),
            ],
            p.RATIO,
            w=4,
        ),
        p.timeseries("Preemptions", [Query(f"sum({q.rate(m.ENGINE_PREEMPTIONS, s, RI)})", "preemptions")], p.OPS_PER_S, w=4),
        p.row("Capacity"),
        p.timeseries(
            "Replicas and cold starts",
            [
                Query(f"max({m.SLICE_REPLICAS}{{{s}}})", "serving"),
                Query(f"max({m.SERVE_TARGET_REPLICAS}{{{s}}})", "target"),
                Query(f"max({m.SLICE_REPLICAS_MAX}{{{s}}})", "ceiling"),
                Query(f"clamp_min(max({m.SERVE_TARGET_REPLICAS}{{{s}}}) - max({m.SLICE_REPLICAS}{{{s}}}), 0)", "starting (cold)"),
            ],
            p.COUNT,
            w=8,
            description="Replicas the autoscaler wants but that do not serve yet are in their cold start.",
        ),
        p.timeseries(
            "GPU fraction against quota",
            [
                Query(f"sum by (pop) ({m.GPU_ALLOCATED_FRACTION}{{{sp}}})", "allocated {{pop}}"),
                Query(f"max({m.SLICE_GPU_QUOTA}{{{s}}})", "quota"),
            ],
            p.GPUS,
            w=8,
            stack=False,
        ),
        p.timeseries(
            "Effective GPU share per replica",
            [Query(f"min by (replica) ({m.REPLICA_GPU_SHARE}{{{sp}}})", "{{replica}}")],
            p.RATIO,
            w=8,
            description="effective/allocated share; below 1 the replica is slowed by its GPU neighbours.",
        ),
        p.row("Network"),
        p.timeseries(
            "Link receive/transmit against the cap",
            [
                Query(q.link_bits("receive", sp, RI), "{{pop}}/{{link}} receive"),
                Query(q.link_bits("transmit", sp, RI), "{{pop}}/{{link}} transmit"),
                Query(q.link_cap("receive", sp), "{{pop}}/{{link}} receive cap"),
                Query(q.link_cap("transmit", sp), "{{pop}}/{{link}} transmit cap"),
            ],
            p.BITS_PER_S,
            w=12,
        ),
        p.timeseries(
            "RTT to the tier's PoPs",
            [
                Query(
                    q.quantile(x, m.POP_RTT, f'pop=~"$pop",peer_pop=~"{"|".join(tier_pops(topology, tier))}"', RI, by=("pop", "peer_pop")),
                    f"{q.pct(x)} {{{{pop}}}}->{{{{peer_pop}}}}",
                )
                for x in (0.5, 0.99)
            ],
            p.SECONDS,
            w=12,
        ),
        p.row("Diagnosis"),
        p.state_timeline("Regime over time", [Query(q.regime_active(s), "{{regime}}")], w=12),
        p.table(
            "Current diagnosis",
            [
                Query(q.regime_active(s), instant=True, table=True),
                Query(f"max by (slice) ({m.DIAGNOSIS_CONFIDENCE}{{{s}}})", instant=True, table=True),
                Query(f"max by (slice) ({m.DIAGNOSIS_REQUESTS}{{{s}}})", instant=True, table=True),
            ],
            p.STATE,
            w=6,
            links=[("Diagnosis API", api)],
            description="Regime now (value 1), the classifier's calibrated confidence (a verdict below 0.6 is a hint) "
            "and the requests the window's quantiles rest on; the evidence is in the API's JSON.",
        ),
        p.text("Evidence", evidence, w=6),
        p.timeseries(
            "Diagnosis confidence",
            [Query(f"max by (slice) ({m.DIAGNOSIS_CONFIDENCE}{{{s}}})", "confidence")],
            p.RATIO,
            w=12,
            description="Calibrated: of the windows diagnosed at confidence c, a fraction c was right on the corpus's "
            "test seeds. Below 0.6 the verdict is a hint (a field it rests on is missing, or too few requests).",
        ),
        p.timeseries(
            "Requests per diagnosed window",
            [Query(f"max by (slice) ({m.DIAGNOSIS_REQUESTS}{{{s}}})", "requests")],
            p.COUNT,
            w=12,
            description="Requests whose first token the window saw: the sample its TTFT quantiles rest on. "
            "A P99 needs hundreds; below the bound in docs/diagnosis.md the verdict is low-confidence.",
        ),
        p.row("Where the latency goes"),
        *(
            p.timeseries(
                f"Where the latency goes: {label}",
                [Query(q.latency_attribution(s, stat), "{{resource}}")],
                p.SECONDS,
                w=12,
                stack=True,
                description="Seconds of the statistic attributed to queue, network and compute by the diagnosis; "
                "base is the reference level plus what no resource explains. The stack is the observed statistic.",
            )
            for stat, label in (("ttft_p99", "P99 TTFT"), ("tpot_p99", "P99 TPOT"))
        ),
    )
    return p.dashboard(
        dashboard_uid_for_tier(tier.name),
        f"InferSlice / Tier {tier.label}",
        layout,
        variables=[_pop_var(f"label_values({m.LINK_RECEIVE_BYTES}{{{s}}}, pop)")],
        annotations=[_actions_annotation(s)],
        links=[("Overview", f"/d/{UID_OVERVIEW}"), ("Diagnosis API", api)],
        tags=("inferslice", "tier", tier.name),
        description=f"Tier {tier.label}: every layer's signal for the diagnosis of why it misses (or meets) its SLO.",
    )


# -- network ------------------------------------------------------------------------------------
def network(topology: Topology) -> dict[str, Any]:
    sp = f'{ALL_SLICES},pop=~"$pop"'
    by_dir = ("slice", "pop", "link", "direction")
    rtt_by = ("pop", "peer_pop")
    layout = Layout().add(
        p.row("Links"),
        p.timeseries("Receive rate per link", [Query(q.link_bits("receive", sp, RI), "{{slice}} {{pop}}/{{link}}")], p.BITS_PER_S, w=12),
        p.timeseries("Transmit rate per link", [Query(q.link_bits("transmit", sp, RI), "{{slice}} {{pop}}/{{link}}")], p.BITS_PER_S, w=12),
        p.timeseries(
            "Caps",
            [Query(f"max by ({', '.join(by_dir)}) ({m.LINK_CAP_BPS}{{{sp}}})", "{{slice}} {{pop}}/{{link}} {{direction}}")],
            p.BITS_PER_S,
            w=8,
        ),
        p.timeseries(
            "Utilisation of the receive cap",
            [
                Query(
                    f"{q.link_utilisation('receive', RI)} and on (slice, pop, link) group by (slice, pop, link) ({m.LINK_CAP_BPS}{{{sp}}})",
                    "{{slice}} {{pop}}/{{link}}",
                )
            ],
            p.RATIO,
            w=8,
        ),
        p.timeseries(
            "Drops",
            [
                Query(q.sum_rate(m.LINK_RECEIVE_DROPS, sp, RI, ("slice", "pop", "link")), "{{slice}} {{pop}}/{{link}} rx"),
                Query(q.sum_rate(m.LINK_TRANSMIT_DROPS, sp, RI, ("slice", "pop", "link")), "{{slice}} {{pop}}/{{link}} tx"),
            ],
            p.PACKETS_PER_S,
            w=8,
        ),
        p.timeseries(
            "HTB overlimits",
            [Query(q.sum_rate(m.HTB_OVERLIMITS, sp, RI, by_dir), "{{slice}} {{pop}}/{{link}} {{direction}}")],
            p.OPS_PER_S,
            w=12,
            description="Packets the cap delayed per second: the shaper is binding.",
        ),
        p.timeseries(
            "HTB backlog",
            [Query(f"max by ({', '.join(by_dir)}) ({m.HTB_BACKLOG_BYTES}{{{sp}}})", "{{slice}} {{pop}}/{{link}} {{direction}}")],
            p.BYTES,
            w=12,
        ),
        p.row("WAN"),
        p.timeseries(
            "Tunnel traffic between PoPs",
            [
                Query(f"{q.sum_rate(m.TUNNEL_RECEIVE_BYTES, sp, RI, ('slice', 'pop', 'peer_pop'))} * 8", "{{slice}} {{peer_pop}}->{{pop}}"),
                Query(
                    f"{q.sum_rate(m.TUNNEL_TRANSMIT_BYTES, sp, RI, ('slice', 'pop', 'peer_pop'))} * 8", "{{slice}} {{pop}}->{{peer_pop}}"
                ),
            ],
            p.BITS_PER_S,
            w=12,
        ),
        p.timeseries(
            "PoP RTT (p50, p99)",
            [Query(q.quantile(x, m.POP_RTT, 'pop=~"$pop"', RI, rtt_by), f"{q.pct(x)} {{{{pop}}}}->{{{{peer_pop}}}}") for x in (0.5, 0.99)],
            p.SECONDS,
            w=12,
        ),
        p.table(
            "PoP RTT matrix (median, 5m)",
            [Query(q.quantile(0.5, m.POP_RTT, 'pop=~"$pop"', "5m", rtt_by), instant=True, table=True)],
            p.SECONDS,
            w=24,
            h=6,
            transformations=[{"id": "groupingToMatrix", "options": {"columnField": "peer_pop", "rowField": "pop", "valueField": "Value"}}],
            description=f"Configured: {', '.join(f'{ln.a}-{ln.b} {ln.rtt_ms:g} ms' for ln in topology.links)}.",
        ),
    )
    return p.dashboard(
        UID_NETWORK,
        "InferSlice / Network",
        layout,
        variables=[_slice_var(), _pop_var()],
        annotations=[_actions_annotation(ALL_SLICES)],
        tags=("inferslice", "network"),
        description="Per-link rates, caps, drops, shaping and the PoP RTT matrix.",
    )


# -- control ------------------------------------------------------------------------------------
def control() -> dict[str, Any]:
    s = ALL_SLICES
    act = m.CONTROL_ACTIONS

    def outcome(o: str) -> str:
        return f'{s},outcome="{o}"'

    layout = Layout().add(
        p.row("Decisions"),
        p.timeseries(
            "Decisions by kind and outcome",
            [Query(f"sum by (slice, kind, outcome) (increase({act}{{{s}}}[{RI}]))", "{{slice}} {{kind}} {{outcome}}")],
            p.COUNT,
            w=24,
            stack=True,
        ),
        p.stat(
            "Pending approvals (1h)",
            [Query(f"sum by (slice) (increase({act}{{{outcome(q.OUTCOME_PENDING)}}}[1h]))", "{{slice}}")],
            p.COUNT,
            w=4,
            description="Actions that entered the approval queue in the last hour.",
        ),
        p.stat("Applied (1h)", [Query(f"sum by (slice) (increase({act}{{{outcome(q.OUTCOME_APPLIED)}}}[1h]))", "{{slice}}")], p.COUNT, w=4),
        p.stat(
            "Effective (1h)",
            [Query(f"sum by (slice) (increase({act}{{{outcome(q.OUTCOME_EFFECTIVE)}}}[1h]))", "{{slice}}")],
            p.COUNT,
            w=4,
            description="Judged on a window measured under the action: its cause no longer binds.",
        ),
        p.stat(
            "Insufficient (1h)",
            [Query(f"sum by (slice) (increase({act}{{{outcome(q.OUTCOME_INSUFFICIENT)}}}[1h]))", "{{slice}}")],
            p.COUNT,
            w=4,
            description="The right remedy, too little: the cause still bound at its value, or a further step followed it.",
        ),
        p.stat(
            "Ineffective (1h)",
            [Query(f"sum by (slice) (increase({act}{{{outcome(q.OUTCOME_INEFFECTIVE)}}}[1h]))", "{{slice}}")],
            p.COUNT,
            w=4,
            description="Measured under it, the cause still bound and it did not help (a cap the link left unused); rolled back if safe.",
        ),
        p.stat(
            "Ineffective share (1h)",
            [
                Query(
                    f"sum by (slice) (increase({act}{{{outcome(q.OUTCOME_INEFFECTIVE)}}}[1h])) / "
                    f"sum by (slice) (increase({act}{{{outcome(q.OUTCOME_APPLIED)}}}[1h]))",
                    "{{slice}}",
                )
            ],
            p.RATIO,
            w=4,
        ),
        p.timeseries(
            "Applied actions and their verdicts",
            [
                Query(f"sum by (slice, kind) (increase({act}{{{outcome(o)}}}[{RI}]))", f"{{{{slice}}}} {{{{kind}}}} {o}")
                for o in (
                    q.OUTCOME_APPLIED,
                    q.OUTCOME_EFFECTIVE,
                    q.OUTCOME_INSUFFICIENT,
                    q.OUTCOME_INEFFECTIVE,
                    q.OUTCOME_REJECTED,
                    q.OUTCOME_FAILED,
                )
            ],
            p.COUNT,
            w=12,
        ),
        p.state_timeline("Regime (what the actions answered)", [Query(q.regime_active(s), "{{slice}} {{regime}}")], w=12),
        p.row("Effect"),
        p.timeseries(
            "Replicas against ceiling",
            [
                Query(f"max by (slice) ({m.SLICE_REPLICAS}{{{s}}})", "{{slice}} replicas"),
                Query(f"max by (slice) ({m.SLICE_REPLICAS_MAX}{{{s}}})", "{{slice}} ceiling"),
            ],
            p.COUNT,
            w=12,
        ),
        p.timeseries("Caps", [Query(q.link_cap("receive", s), "{{slice}} {{pop}}/{{link}} receive cap")], p.BITS_PER_S, w=12),
    )
    return p.dashboard(
        UID_CONTROL,
        "InferSlice / Control",
        layout,
        variables=[_slice_var()],
        annotations=[_actions_annotation(s)],
        tags=("inferslice", "control"),
        description="The control loop's decisions, approvals, applied actions and their verdicts (effective, insufficient, ineffective).",
    )


def all_dashboards(topology: Topology, api_url: str) -> list[dict[str, Any]]:
    return [overview(topology, api_url), *(tier_dashboard(topology, t, api_url) for t in topology.tiers), network(topology), control()]
