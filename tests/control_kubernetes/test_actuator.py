"""The Kubernetes actuator through the apiserver stand-in, against the rendered objects."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from inferslice.actions import Action, ActionKind
from inferslice.control.actuators.base import Actuator, ApplyStatus, PermanentActuatorError, RetryableActuatorError
from inferslice.control.actuators.fencing import Deposed, FencingToken, NotLeader
from inferslice.control.actuators.kubernetes import FENCE_ANNOTATION, KubernetesActuator, distribute, fence_of
from inferslice.deploy import apiserver, rbac, serve_config
from inferslice.deploy.apiserver import Call
from inferslice.topology import Topology

from .conftest import cluster_name, pod


def _get(server: apiserver.StandIn, plural: str, ns: str, name: str) -> dict[str, Any]:
    group, version = ("", "v1") if plural == "pods" else ("ray.io", "v1")
    return server.store.get(apiserver._resource(group, version, plural), ns, name)


def _ns(topology: Topology, tier: str) -> str:
    return rbac.tier_namespace(topology, tier)


def _mutations(server: apiserver.StandIn) -> list[Call]:
    return [c for c in server.store.calls if c.verb not in ("get", "list")]


def test_it_is_an_actuator(api: Any, topology: Topology) -> None:
    assert isinstance(KubernetesActuator(topology, api), Actuator)


def test_set_replicas_patches_serve_config_and_the_running_cluster(server: apiserver.StandIn, api: Any, topology: Topology) -> None:
    act = KubernetesActuator(topology, api)
    result = act.apply(Action(ActionKind.SET_REPLICAS, "premium", 4, id="a-1"))
    assert result.status == ApplyStatus.APPLIED
    ns = _ns(topology, "premium")
    rs = _get(server, "rayservices", ns, "premium")
    cfg = yaml.safe_load(rs["spec"]["serveConfigV2"])
    dc = cfg["applications"][0]["args"]["llm_configs"][0]["deployment_config"]
    assert dc["num_replicas"] == 4 and "autoscaling_config" not in dc  # Ray Serve's autoscaler off
    serve_config.check_serve_config(rs["spec"]["serveConfigV2"])
    # Placement order: bristol/gpu1 x2, london/gpu0 x2, dublin/gpu0 x2 -> 4 = bristol 2 + london 2.
    rc = _get(server, "rayclusters", ns, cluster_name("premium"))
    groups = {g["groupName"]: (g["replicas"], g["minReplicas"], g["maxReplicas"]) for g in rc["spec"]["workerGroupSpecs"]}
    assert groups == {"gpu-bristol": (2, 2, 2), "gpu-london": (2, 2, 2), "gpu-dublin": (0, 0, 2)}
    # The RayService's copy of the bounds follows, so a cluster KubeRay creates later keeps them.
    rs_groups = {g["groupName"]: g["replicas"] for g in rs["spec"]["rayClusterConfig"]["workerGroupSpecs"]}
    assert rs_groups == {"gpu-bristol": 2, "gpu-london": 2, "gpu-dublin": 0}
    assert act.observe()["premium"].replicas_target == 4


def test_repeating_an_action_changes_nothing(server: apiserver.StandIn, api: Any, topology: Topology) -> None:
    act = KubernetesActuator(topology, api)
    action = Action(ActionKind.SET_REPLICAS, "standard", 2, id="a-2")
    assert act.apply(action).status == ApplyStatus.APPLIED
    server.store.calls.clear()
    assert act.apply(action).status == ApplyStatus.ALREADY_APPLIED
    assert _mutations(server) == []


def test_scale_in_empties_the_last_slots_first(server: apiserver.StandIn, api: Any, topology: Topology) -> None:
    act = KubernetesActuator(topology, api)
    act.apply(Action(ActionKind.SET_REPLICAS, "premium", 5, id="up"))
    act.apply(Action(ActionKind.SET_REPLICAS, "premium", 3, id="down"))
    rc = _get(server, "rayclusters", _ns(topology, "premium"), cluster_name("premium"))
    assert {g["groupName"]: g["replicas"] for g in rc["spec"]["workerGroupSpecs"]} == {"gpu-bristol": 2, "gpu-london": 1, "gpu-dublin": 0}


def test_replicas_beyond_the_ceiling_are_refused(api: Any, topology: Topology) -> None:
    with pytest.raises(PermanentActuatorError, match=r"outside 0\.\.1"):
        KubernetesActuator(topology, api).apply(Action(ActionKind.SET_REPLICAS, "free", 2, id="x"))


def test_a_tier_without_an_active_cluster_is_retryable(server: apiserver.StandIn, api: Any, topology: Topology) -> None:
    ns = _ns(topology, "free")
    rs = _get(server, "rayservices", ns, "free")
    server.store.write(apiserver._resource("ray.io", "v1", "rayservices"), ns, "free", {**rs, "status": {}}, True, None)
    with pytest.raises(RetryableActuatorError, match="no active RayCluster"):
        KubernetesActuator(topology, api).apply(Action(ActionKind.SET_REPLICAS, "free", 1, id="x"))


def test_set_cap_annotates_the_head_pod_live_and_its_template(server: apiserver.StandIn, api: Any, topology: Topology) -> None:
    act = KubernetesActuator(topology, api)
    assert act.apply(Action(ActionKind.SET_CAP, "standard", 120e6, id="c-1")).status == ApplyStatus.APPLIED
    ns = _ns(topology, "standard")
    head = _get(server, "pods", ns, f"{cluster_name('standard')}-head")
    assert head["metadata"]["annotations"]["ovn.kubernetes.io/ingress_rate"] == "120"
    assert head["metadata"]["annotations"]["ovn.kubernetes.io/egress_rate"] == "120"
    rc = _get(server, "rayclusters", ns, cluster_name("standard"))
    assert rc["spec"]["headGroupSpec"]["template"]["metadata"]["annotations"]["ovn.kubernetes.io/ingress_rate"] == "120"
    assert act.observe()["standard"].cap_bps == 120e6
    server.store.calls.clear()
    assert act.apply(Action(ActionKind.SET_CAP, "standard", 120e6, id="c-1")).status == ApplyStatus.ALREADY_APPLIED
    assert _mutations(server) == []
    assert act.apply(Action(ActionKind.SET_CAP, "standard", None, id="c-2")).status == ApplyStatus.APPLIED
    head = _get(server, "pods", ns, f"{cluster_name('standard')}-head")
    assert "ovn.kubernetes.io/ingress_rate" not in head["metadata"]["annotations"]


def test_relocation_is_make_before_break(server: apiserver.StandIn, api: Any, topology: Topology) -> None:
    """free runs one replica at bristol; move it to london, a PoP where free has no group yet."""
    act = KubernetesActuator(topology, api)
    ns, cname = _ns(topology, "free"), cluster_name("free")
    old = f"{cname}-gpu-bristol-w0"
    move = Action(ActionKind.RELOCATE, "free", "london", replica=old, id="r-1")
    first = act.apply(move)
    assert first.status == ApplyStatus.IN_PROGRESS
    rc = _get(server, "rayclusters", ns, cname)
    groups = {g["groupName"]: g for g in rc["spec"]["workerGroupSpecs"]}
    assert groups["gpu-bristol"]["replicas"] == 1  # the old replica still serves
    new_group = groups["gpu-london"]
    assert new_group["replicas"] == 1
    term = new_group["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][
        0
    ]
    assert term["matchExpressions"][0] == {"key": "inferslice.io/pop", "operator": "In", "values": ["london"]}
    rs = _get(server, "rayservices", ns, "free")
    assert serve_config.replicas_of(rs["spec"]["serveConfigV2"]) == 2  # one more while moving
    # Not ready yet: still in progress, nothing drained.
    server.store.seed(pod(f"{cname}-gpu-london-w0", ns, cname, "worker", "gpu-london", new_group["template"], ready=False))
    assert act.apply(move).status == ApplyStatus.IN_PROGRESS
    assert _get(server, "rayclusters", ns, cname)["spec"]["workerGroupSpecs"][0]["replicas"] == 1
    # Ready: the old one drains, by name.
    p = _get(server, "pods", ns, f"{cname}-gpu-london-w0")
    p["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    server.store.write(apiserver._resource("", "v1", "pods"), ns, p["metadata"]["name"], p, True, None)
    assert act.apply(move).status == ApplyStatus.APPLIED
    rc = _get(server, "rayclusters", ns, cname)
    bristol = next(g for g in rc["spec"]["workerGroupSpecs"] if g["groupName"] == "gpu-bristol")
    assert bristol["replicas"] == 0 and bristol["scaleStrategy"]["workersToDelete"] == [old]
    assert serve_config.replicas_of(_get(server, "rayservices", ns, "free")["spec"]["serveConfigV2"]) == 1
    server.store.calls.clear()
    assert act.apply(move).status == ApplyStatus.ALREADY_APPLIED
    assert _mutations(server) == []


def test_a_concurrent_write_makes_the_patch_fail_retryably(server: apiserver.StandIn, api: Any, topology: Topology) -> None:
    """The actuator's JSON patches carry preconditions: a RayService changed under it is a 409."""
    act = KubernetesActuator(topology, api)
    ns = _ns(topology, "standard")
    res = apiserver._resource("ray.io", "v1", "rayservices")
    real_get = act._get

    def stale_get(plural: str, namespace: str, name: str) -> dict[str, Any]:
        obj = real_get(plural, namespace, name)
        if plural == "rayservices":  # someone writes between our read and our patch
            fresh = server.store.get(res, ns, "standard")
            fresh["metadata"].setdefault("labels", {})["touched"] = "yes"
            server.store.write(res, ns, "standard", fresh, False, None)
        return obj

    act._get = stale_get  # type: ignore[method-assign]
    with pytest.raises(RetryableActuatorError, match="409"):
        act.apply(Action(ActionKind.SET_REPLICAS, "standard", 3, id="c"))


def test_distribute_fills_the_placement_in_order(topology: Topology) -> None:
    tier = topology.tier("standard")  # bristol/gpu0, london/gpu1, london/gpu1
    groups = [
        {"groupName": "gpu-bristol", "replicas": 1, "maxReplicas": 1},
        {"groupName": "gpu-london", "replicas": 0, "maxReplicas": 2},
    ]
    assert distribute(tier, groups, 3) == {"gpu-bristol": 1, "gpu-london": 2}
    assert distribute(tier, groups, 0) == {"gpu-bristol": 0, "gpu-london": 0}
    with pytest.raises(PermanentActuatorError):
        distribute(tier, groups, 4)


def test_the_actuator_uses_exactly_the_controller_permissions_for_tiers(server: apiserver.StandIn, api: Any, topology: Topology) -> None:
    act = KubernetesActuator(topology, api)
    act.observe()
    act.apply(Action(ActionKind.SET_REPLICAS, "premium", 3, id="p"))
    act.apply(Action(ActionKind.SET_CAP, "premium", 50e6, id="c"))
    ns = _ns(topology, "free")
    old = f"{cluster_name('free')}-gpu-bristol-w0"
    act.apply(Action(ActionKind.RELOCATE, "free", "london", replica=old, id="r"))
    used = {(c.group, c.resource, c.verb) for c in server.store.calls}
    assert all(c.namespace in {_ns(topology, t.name) for t in topology.tiers} for c in server.store.calls)
    declared = {
        (p.api_group, p.resource, v)
        for p in rbac.PERMISSIONS
        if p.component == rbac.Component.CONTROLLER and p.scope == rbac.Scope.TIERS
        for v in p.verbs
    }
    assert used == declared, f"unused grants: {declared - used}; calls without a grant: {used - declared}"
    assert ns


def test_one_concurrent_write_is_absorbed_by_a_re_read(server: apiserver.StandIn, api: Any, topology: Topology) -> None:
    """A 409 (the object moved on) is re-read and recomputed, as client-go's RetryOnConflict does."""
    act = KubernetesActuator(topology, api)
    ns = _ns(topology, "standard")
    res = apiserver._resource("ray.io", "v1", "rayservices")
    real_get = act._get
    touched = []

    def get_then_touch_once(plural: str, namespace: str, name: str) -> dict[str, Any]:
        obj = real_get(plural, namespace, name)
        if plural == "rayservices" and not touched:
            touched.append(1)
            fresh = server.store.get(res, ns, "standard")
            fresh["metadata"].setdefault("labels", {})["touched"] = "yes"
            server.store.write(res, ns, "standard", fresh, False, None)
        return obj

    act._get = get_then_touch_once  # type: ignore[method-assign]
    assert act.apply(Action(ActionKind.SET_REPLICAS, "standard", 3, id="c")).status == ApplyStatus.APPLIED
    assert [c.code for c in server.store.calls if c.verb == "patch" and c.resource == "rayservices"] == [409, 200]
    assert _get(server, "rayservices", ns, "standard")["metadata"]["labels"]["touched"] == "yes", "the other write is kept"


class _Term:
    """A Leadership with a fixed token (or none), recording step-downs."""

    def __init__(self, token: FencingToken | None) -> None:
        self.token = token
        self.stepped_down: list[str] = []

    def check(self) -> FencingToken:
        if self.token is None:
            raise NotLeader("not leading")
        return self.token

    def step_down(self, reason: str) -> None:
        self.stepped_down.append(reason)
        self.token = None


def test_every_write_carries_the_term_and_a_later_term_is_refused(server: apiserver.StandIn, api: Any, topology: Topology) -> None:
    term_b = _Term(FencingToken(4, "controller-b"))
    assert KubernetesActuator(topology, api, leadership=term_b).claim() == 2 * len(topology.tiers) + len(topology.tiers)
    stamped = {(w.resource, w.name) for w in server.store.writes if fence_of(w.obj) == FencingToken(4, "controller-b")}
    assert all(w.obj["metadata"]["annotations"][FENCE_ANNOTATION] == "4/controller-b" for w in server.store.writes)
    assert {r for r, _ in stamped} == {"rayservices", "rayclusters", "pods"}
    assert KubernetesActuator(topology, api, leadership=term_b).apply(Action(ActionKind.SET_REPLICAS, "premium", 3, id="b-1")).status == (
        ApplyStatus.APPLIED
    )
    ns = _ns(topology, "premium")
    assert fence_of(_get(server, "rayclusters", ns, cluster_name("premium"))) == FencingToken(4, "controller-b")
    # controller-a still believes it leads term 3: it reads b's token and stops, writing nothing.
    term_a = _Term(FencingToken(3, "controller-a"))
    before = len(server.store.writes)
    with pytest.raises(Deposed):
        KubernetesActuator(topology, api, leadership=term_a).apply(Action(ActionKind.SET_REPLICAS, "premium", 5, id="a-9"))
    assert term_a.stepped_down and len(server.store.writes) == before
    # Not leading at all: nothing is written either.
    with pytest.raises(NotLeader):
        KubernetesActuator(topology, api, leadership=_Term(None)).apply(Action(ActionKind.SET_CAP, "free", 10e6, id="x"))
    assert len(server.store.writes) == before


@pytest.mark.parametrize(
    ("code", "reason", "retryable"),
    [
        (429, "TooManyRequests", True),  # api-conventions: wait Retry-After, retry
        (500, "InternalError", True),  # retry with backoff
        (503, "ServiceUnavailable", True),
        (504, "Timeout", True),
        (422, "Invalid", False),  # do not retry, fix the request
        (403, "Forbidden", False),
        (404, "NotFound", False),
        (400, "BadRequest", False),
    ],
)
def test_the_retry_table_is_kube_apiservers(
    server: apiserver.StandIn, api: Any, topology: Topology, code: int, reason: str, retryable: bool
) -> None:
    server.faults.add(apiserver.Fault(lambda c: c.verb == "patch", answer=apiserver.ApiError(code, reason, f"injected {code}"), times=1))
    act = KubernetesActuator(topology, api)
    expected = RetryableActuatorError if retryable else PermanentActuatorError
    with pytest.raises(expected, match=str(code)) as info:
        act.apply(Action(ActionKind.SET_REPLICAS, "premium", 3, id=f"t-{code}"))
    assert not isinstance(info.value, PermanentActuatorError if retryable else RetryableActuatorError)
    assert [c.code for c in server.store.calls if c.verb == "patch"] == [code], "one attempt: no retry inside apply"
