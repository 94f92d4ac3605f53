"""The console's view model, without a server: staleness, goodput, burn, placement, actions, alerts."""

from __future__ import annotations

from inferslice.service.console.links import samples_from_vectors
from inferslice.service.console.view import (
    ConsoleSettings,
    LinkSample,
    TierHistory,
    burn_rate,
    console_state,
    controller_block,
    history_point,
    normalise_attribution,
)
from inferslice.topology import load_topology

TOPO = load_topology()  # the testbed's: free (1 replica max), standard (3), premium (6); scrape 2 s


def _diag(slo: str, ts: float = 100.0, regime: str = "healthy") -> dict[str, object]:
    return {"ts": ts, "slice": "free", "regime": regime, "slo": slo, "confidence": 0.8, "evidence": [], "secondary": [], "missing": []}


def test_attribution_copies_seconds_per_statistic_and_drops_excess_share() -> None:
    raw = {
        "ttft_p99": {"observed_s": 2.0, "reference_s": 0.1, "queue_s": 1.5, "network_s": 0.3, "compute_s": 0.0, "base_s": 0.2},
        "excess_share": {"queue": 0.8, "network": 0.2, "compute": 0.0},
    }
    out = normalise_attribution(raw)
    assert out == {"ttft_p99": {"queue": 1.5, "network": 0.3, "compute": 0.0, "base": 0.2, "observed": 2.0, "reference": 0.1}}
    assert normalise_attribution(None) is None
    assert normalise_attribution({"excess_share": {"queue": 1.0}}) is None


def test_goodput_counts_a_window_only_when_it_met_the_slo() -> None:
    assert history_point({"request_rate": 3.0}, _diag("met"), 1.0)["goodput_rps"] == 3.0
    assert history_point({"request_rate": 3.0}, _diag("at_risk"), 1.0)["goodput_rps"] == 3.0
    assert history_point({"request_rate": 3.0}, _diag("breached"), 1.0)["goodput_rps"] == 0.0
    assert history_point({}, _diag("met"), 1.0)["goodput_rps"] is None


def test_burn_rate_is_breached_share_over_the_error_budget() -> None:
    points = [{"slo": "breached"}] + [{"slo": "met"}] * 9 + [{"slo": "unknown"}] * 5  # unknown windows are not judged
    h = TierHistory.of(points)
    assert (h.judged, h.breached) == (10, 1)
    assert abs((burn_rate(h.judged, h.breached, 0.95) or 0.0) - 0.1 / 0.05) < 1e-9
    assert burn_rate(0, 0, 0.99) is None


def _state(now: float, diag_ts: float | None, snapshot: dict[str, object] | None = None) -> dict[str, object]:
    diagnoses = {"free": _diag("met", diag_ts)} if diag_ts is not None else {}
    return console_state(
        TOPO,
        {"free": snapshot},
        diagnoses,
        {"free": TierHistory.of([history_point(snapshot, _diag("met", diag_ts or 0.0), diag_ts or 0.0)])} if diag_ts is not None else {},
        {"pending": [], "timeline": [], "alerts": []},
        {frozenset(("bristol", "london")): LinkSample(rate_bps=2e6, rtt_s=0.0095)},
        [],
        now,
        None,
        ConsoleSettings(),
    )


def test_a_tier_is_stale_after_five_scrape_intervals_without_a_window() -> None:
    tiers = {t["name"]: t for t in _state(now=110.0, diag_ts=100.0)["tiers"]}  # type: ignore[index]
    assert tiers["free"]["stale"] is False  # 10 s = 5 x 2 s: still fresh
    tiers = {t["name"]: t for t in _state(now=110.5, diag_ts=100.0)["tiers"]}  # type: ignore[index]
    assert tiers["free"]["stale"] is True
    assert tiers["standard"]["stale"] is True  # never had a window


def test_replicas_occupy_the_first_placement_slots() -> None:
    tiers = {t["name"]: t for t in _state(now=101.0, diag_ts=100.0)["tiers"]}  # type: ignore[index]
    assert [s["active"] for s in tiers["premium"]["placement"]] == [True, False, False, False, False, False]  # replicas_min 1
    state = console_state(
        TOPO, {"premium": {"replicas": 3.0}}, {}, {}, {"pending": [], "timeline": [], "alerts": []}, {}, [], 1.0, None, ConsoleSettings()
    )
    premium = next(t for t in state["tiers"] if t["name"] == "premium")
    assert [(s["pop"], s["active"]) for s in premium["placement"]][:4] == [
        ("bristol", True),
        ("bristol", True),
        ("london", True),
        ("london", False),
    ]


def test_links_carry_measurement_and_utilisation_only_against_a_declared_capacity() -> None:
    links = {(x["a"], x["b"]): x for x in _state(now=101.0, diag_ts=100.0)["topology"]["links"]}  # type: ignore[index]
    assert links[("bristol", "london")]["rate_bps"] == 2e6
    assert links[("bristol", "london")]["measured_rtt_s"] == 0.0095
    assert links[("bristol", "london")]["latency_tier"] == "mid"
    # against the physical rate the testbed declares (27.9 Mbit/s on bristol-london)
    assert links[("bristol", "london")]["capacity_bps"] == 27.9e6
    assert links[("bristol", "london")]["utilisation"] == 2e6 / 27.9e6
    assert links[("london", "dublin")]["rate_bps"] is None


def test_history_is_trimmed_to_what_the_page_lacks() -> None:
    state = console_state(
        TOPO,
        {},
        {"free": _diag("met", 5.0)},
        {"free": TierHistory.of([history_point({}, _diag("met", t), t) for t in (1.0, 3.0, 5.0)])},
        {"pending": [], "timeline": [], "alerts": []},
        {},
        [],
        6.0,
        3.0,
        ConsoleSettings(),
    )
    free = next(t for t in state["tiers"] if t["name"] == "free")
    assert [p["ts"] for p in free["history"]] == [5.0]


def test_controller_lists_pending_actions_shows_each_verdict_as_such_and_keeps_only_firing_alerts() -> None:
    actions = [
        {"id": "a1", "kind": "set_cap", "slice": "standard", "state": "pending"},
        {"id": "a2", "kind": "set_replicas", "slice": "premium", "state": "applied", "outcome": "ineffective"},
        {"id": "a3", "kind": "set_replicas", "slice": "free", "state": "applied", "measured": {"futile": True}},  # an older trail's word
        {"id": "a4", "kind": "set_cap", "slice": "standard", "state": "applied", "outcome": "insufficient"},
        {"id": "a5", "kind": "set_cap", "slice": "standard", "state": "applied", "outcome": "effective"},
        {"kind": "noop", "slice": "free", "outcome": "proposed"},  # no id: nobody could approve it
    ]
    alerts = [
        {"alertname": "A", "status": "firing", "ends_at_s": None},
        {"alertname": "B", "status": "firing", "ends_at_s": 50.0},  # Alertmanager's resolve time passed
        {"alertname": "C", "status": "resolved", "ends_at_s": None},
    ]
    block = controller_block(actions, alerts, now_s=100.0, limit=5)
    assert [a["id"] for a in block["pending"]] == ["a1"]
    assert [a["verdict"] for a in block["timeline"]] == [None, "ineffective", "ineffective", "insufficient", "effective"]
    assert [a["alertname"] for a in block["alerts"]] == ["A"]


def test_prometheus_vectors_become_undirected_link_samples() -> None:
    rate = [
        {"metric": {"pop": "bristol", "peer_pop": "london"}, "value": [0, "1000"]},
        {"metric": {"pop": "london", "peer_pop": "bristol"}, "value": [0, "4000"]},
        {"metric": {"pop": "dublin", "peer_pop": "london"}, "value": [0, "NaN"]},
    ]
    rtt = [
        {"metric": {"pop": "bristol", "peer_pop": "london"}, "value": [0, "0.009"]},
        {"metric": {"pop": "london", "peer_pop": "bristol"}, "value": [0, "0.011"]},
    ]
    out = samples_from_vectors(rate, rtt)
    pair = out[frozenset(("bristol", "london"))]
    assert pair.rate_bps == 4000.0  # the busier direction meets the capacity
    assert pair.rtt_s is not None and abs(pair.rtt_s - 0.010) < 1e-12
    assert frozenset(("dublin", "london")) not in out


def test_controller_audit_rows_are_flattened_with_their_cause_share() -> None:
    row = {
        "id": "c1",
        "tier": "standard",
        "kind": "set_cap",
        "state": "applied",
        "outcome": "ineffective",
        "action": {"kind": "set_cap", "slice": "standard", "value": 1.2e6, "regime": "network_limited", "id": "c1"},
        "diagnosis": {"regime": "network_limited", "attribution": {"excess_share": {"network": 0.9, "queue": 0.1, "compute": 0.0}}},
    }
    [item] = controller_block([row], [], now_s=0.0, limit=10)["timeline"]
    assert (item["slice"], item["value"], item["state"], item["verdict"]) == ("standard", 1.2e6, "applied", "ineffective")
    assert item["cause_share"] == {"network": 0.9, "queue": 0.1, "compute": 0.0}
    assert item["diagnosis"] is None  # not resent at every poll


def test_the_diagnosis_block_carries_confidence_and_the_request_count() -> None:
    tiers = {t["name"]: t for t in _state(now=101.0, diag_ts=100.0, snapshot={"request_count": 37.0})["tiers"]}  # type: ignore[index]
    d = tiers["free"]["diagnosis"]
    assert d["confidence"] == 0.8 and d["confident"] is True  # 0.8 >= the 0.6 bar
    assert d["request_count"] == 37.0  # from the snapshot when the diagnosis does not echo it
    low = console_state(
        TOPO,
        {"free": {}},
        {"free": {**_diag("met", 100.0), "confidence": 0.55, "request_count": 4.0}},
        {},
        {"pending": [], "timeline": [], "alerts": []},
        {},
        [],
        101.0,
        None,
        ConsoleSettings(),
    )
    free = next(t for t in low["tiers"] if t["name"] == "free")  # type: ignore[union-attr]
    assert free["diagnosis"]["confident"] is False and free["diagnosis"]["request_count"] == 4.0


def test_an_uncapped_edge_reported_at_its_physical_rate_shows_the_configured_cap() -> None:
    """The collectors report an uncapped edge's cap at 10 Gbit/s (issue 17, v10): the console shows
    no cap of its own there (the tier's configured one), and a cap below the rate as measured."""

    def edge(snapshot: dict[str, float]) -> object:
        state = console_state(
            TOPO, {"free": snapshot}, {}, {}, {"pending": [], "timeline": [], "alerts": []}, {}, [], 1.0, None, ConsoleSettings()
        )
        free = next(t for t in state["tiers"] if t["name"] == "free")  # type: ignore[union-attr]
        return free["client_edge"]["cap_bps"]

    configured = TOPO.tier("free").client_cap_bps
    assert edge({"link_cap_bps": 1e10, "link_capacity_bps": 1e10, "link_rx_bps": 1e6}) == configured
    assert edge({"link_cap_bps": 7e5, "link_capacity_bps": 1e10, "link_rx_bps": 4e5}) == 7e5
