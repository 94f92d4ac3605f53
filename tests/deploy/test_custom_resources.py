"""InferSliceTier and SliceAction: the tiers file and the CRs are two views of one model."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferslice.actions import Action, ActionKind
from inferslice.deploy import custom_resources as cr
from inferslice.deploy import schemas
from inferslice.topology import Tier, Topology


def test_tiers_file_round_trips_through_the_crs(topology: Topology) -> None:
    crs = [cr.tier_to_cr(t, "inferslice-system") for t in topology.tiers]
    for obj in crs:
        schemas.validate_object(obj)
    back = [cr.tier_from_cr(o) for o in crs]
    assert back == topology.tiers
    rebuilt = topology.model_copy(update={"tiers": back})
    assert Topology.model_validate(rebuilt.model_dump(mode="json")) == topology


def test_cr_spec_uses_kubernetes_camel_case(topology: Topology) -> None:
    spec = cr.tier_to_cr(topology.tier("premium"), "ns")["spec"]
    assert spec["replicasMax"] == 6 and spec["gpuQuota"] == 3.0 and spec["maxOngoingRequests"] == 6
    assert "name" not in spec  # the tier's name is metadata.name


def test_crd_schema_carries_every_tier_field_but_the_name() -> None:
    props = cr.tier_spec_schema()["properties"]
    from pydantic.alias_generators import to_camel

    assert set(props) == {to_camel(f) for f in Tier.model_fields} - {"name"}
    assert props["replicasMax"]["minimum"] == 1
    assert props["gpuQuota"]["exclusiveMinimum"] is True  # OpenAPI 3.0 boolean form


def _tier_cr(topology: Topology, **spec: Any) -> dict[str, Any]:
    obj = cr.tier_to_cr(topology.tier("standard"), "ns")
    obj["spec"].update(spec)
    return obj


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"replicasMax": 0}, "spec.replicasMax"),
        ({"subnet": "not-a-cidr"}, "spec.subnet"),
        ({"gpuQuota": 0}, "spec.gpuQuota"),
        ({"attainmentObjective": 1.0}, "spec.attainmentObjective"),
        ({"placement": "bristol/gpu0"}, "spec.placement"),
    ],
)
def test_crd_schema_rejects_what_the_tiers_file_rejects(topology: Topology, spec: dict[str, Any], field: str) -> None:
    with pytest.raises(schemas.SchemaError) as info:
        schemas.validate_object(_tier_cr(topology, **spec))
    assert info.value.field == field


def test_cross_field_rules_apply_on_the_way_back(topology: Topology) -> None:
    obj = _tier_cr(topology, replicasMax=5)  # 5 x 0.5 GPU > quota 1.5: the schema cannot say so, the model does
    schemas.validate_object(obj)
    with pytest.raises(ValueError, match="exceeds gpu_quota"):
        cr.tier_from_cr(obj)


def test_unknown_spec_fields_are_refused(topology: Topology) -> None:
    with pytest.raises(ValueError, match="unknown fields"):
        cr.tier_from_cr(_tier_cr(topology, replicaMax=3))


_values = {
    ActionKind.SET_REPLICAS: st.integers(0, 64),
    ActionKind.SET_CAP: st.floats(1e3, 1e11, allow_nan=False),
    ActionKind.RELOCATE: st.sampled_from(["bristol", "london", "dublin"]),
    ActionKind.SET_GPU_SHARE: st.floats(0.0, 1.0, allow_nan=False),
}


@st.composite
def actions(draw: st.DrawFn) -> Action:
    kind = draw(st.sampled_from(list(_values)))
    return Action(
        kind=kind,
        slice=draw(st.sampled_from(["free", "standard", "premium"])),
        value=draw(_values[kind]),
        previous=draw(st.none() | _values[kind]),
        reason=draw(st.text(max_size=40)),
        regime=draw(st.none() | st.sampled_from(["queue_limited", "network_limited", "forecast"])),
        id=draw(st.from_regex(r"[a-z0-9][a-z0-9:/.-]{0,30}[a-z0-9]", fullmatch=True)),
        replica=draw(st.none() | st.just("premium-2")),
        decided_s=draw(st.none() | st.floats(1e9, 2e9, allow_nan=False)),
        expected_by_s=draw(st.none() | st.floats(1e9, 2e9, allow_nan=False)),
    )


@settings(max_examples=60, deadline=None)
@given(actions())
def test_actions_round_trip_through_slice_actions(action: Action) -> None:
    obj = cr.action_to_cr(action, "inferslice-system")
    schemas.validate_object(obj)
    assert obj["status"]["phase"] == "Pending"
    assert cr.action_from_cr(obj) == action


def test_slice_action_status_phases_are_enforced_by_the_schema(topology: Topology) -> None:
    obj = cr.action_to_cr(Action(ActionKind.SET_REPLICAS, "free", 1, reason="r", id="a1"), "ns")
    obj["status"]["phase"] = "Done"
    with pytest.raises(schemas.SchemaError) as info:
        schemas.validate_object(obj)
    assert info.value.field == "status.phase"


def test_action_object_names_are_deterministic_dns_names() -> None:
    name = cr.action_object_name("Premium:set_replicas/1700000000.5")
    assert name.startswith("premium-set-replicas-1700000000-5-")
    assert cr.action_object_name("Premium:set_replicas/1700000000.5") == name
    assert cr.action_object_name("a:b") != cr.action_object_name("a/b")
    with pytest.raises(ValueError):
        cr.action_object_name("::")
