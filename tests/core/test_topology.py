"""The tiers/topology file: the default follows the brief, and bad files name the bad field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from inferslice.errors import ConfigError
from inferslice.topology import (
    LatencyTier,
    Parallelism,
    feasible_parallelism,
    latency_tier,
    load_topology,
    topology_from_dict,
)


def default_doc() -> dict:
    return yaml.safe_load(Path(load_topology.__globals__["default_topology_path"]()).read_text())


def test_default_topology_follows_the_brief() -> None:
    top = load_topology()
    tiers = {t.name: t for t in top.tiers}
    assert [(t.gpu_quota, t.cpu_quota, t.replicas_max) for t in tiers.values()] == [(0.5, 4, 1), (1.5, 8, 3), (3.0, 16, 6)]
    assert all(t.slo_ttft_p99_s == 0.5 for t in top.tiers)
    assert len(top.pops) >= 3
    # pairwise links fall in different latency tiers
    assert len({link.latency_tier for link in top.links}) == len(top.links) >= 3


@pytest.mark.parametrize(
    ("rtt_ms", "tier"),
    [(0.6, LatencyTier.NEAR), (4.26, LatencyTier.NEAR), (7.57, LatencyTier.MID), (10.9, LatencyTier.FAR), (18.97, LatencyTier.DISTANT)],
)
def test_latency_tier_boundaries(rtt_ms: float, tier: LatencyTier) -> None:
    assert latency_tier(rtt_ms / 1000) is tier


def test_feasible_parallelism_follows_the_brief() -> None:
    assert set(feasible_parallelism(LatencyTier.INTRA_POP)) == set(Parallelism)
    assert feasible_parallelism(LatencyTier.MID) == [Parallelism.REPLICATION, Parallelism.PIPELINE]
    assert feasible_parallelism(LatencyTier.FAR) == [Parallelism.REPLICATION]


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d["tiers"][1].__setitem__("replicas_max", "three"), "tiers[1].replicas_max"),
        (lambda d: d["tiers"][0].__setitem__("subnet", "10.300.0.0/24"), "tiers[0].subnet"),
        (lambda d: d["tiers"][2].__setitem__("placement", ["bristol/gpu1"]), "tiers[2]"),
        (lambda d: d["tiers"][2]["placement"].__setitem__(0, "mars/gpu0"), "tiers[2].placement[0]"),
        (lambda d: d["links"][0].__setitem__("rtt_ms", -3), "links[0].rtt_ms"),
        (lambda d: d["client"].__setitem__("gateway", "paris"), "client.gateway"),
        (lambda d: d.__setitem__("colour", "blue"), "colour"),
        (lambda d: d["pops"][0].pop("name"), "pops[0].name"),
    ],
)
def test_invalid_topology_names_the_bad_field(mutate, field: str) -> None:
    doc = default_doc()
    mutate(doc)
    with pytest.raises(ConfigError) as err:
        topology_from_dict(doc)
    assert err.value.field is not None
    assert err.value.field.startswith(field), str(err.value)


def test_oversubscribed_gpu_is_rejected() -> None:
    doc = default_doc()
    doc["tiers"][0]["placement"] = ["bristol/gpu1"]  # premium already fills bristol/gpu1
    with pytest.raises(ConfigError, match="oversubscribed"):
        topology_from_dict(doc)


def test_missing_and_non_yaml_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_topology(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("tiers: [\n")
    with pytest.raises(ConfigError, match="YAML"):
        load_topology(bad)
