"""The Kubernetes actuator (KubeRay + Kube-OVN), with the ``kubernetes`` Python client.

- ``set_replicas N``: pin the tier's Ray Serve deployment at N in the RayService's ``serveConfigV2``
  (autoscaling off), and set the worker-group bounds of the RayCluster that serves now
  (``status.activeServiceStatus.rayClusterName``): a RayService patch alone never reaches a running
  cluster (KubeRay by design). The RayService's own worker bounds follow too, so the next cluster
  KubeRay creates keeps them (KubeRay leaves replica fields out of its upgrade hash). New replicas
  fill the tiers file's placement in order; scale-in empties the last slots first.
- ``set_cap C``: Kube-OVN ``ovn.kubernetes.io/ingress_rate``/``egress_rate`` (whole Mbit/s) on the
  tier's head pod, the client edge (Serve's proxy runs there only), live; and on the head template,
  so a restarted head keeps the cap. ``None`` removes the cap.
- ``relocate`` (value: destination PoP, replica: a worker pod name): make-before-break over
  successive calls. First the destination PoP's worker group and Serve's replica count grow by one
  (a group pinned by node affinity to the PoP is added when the tier has none there): IN_PROGRESS.
  When the destination group has a Ready pod more than before, the source group shrinks by one
  naming the old pod in ``scaleStrategy.workersToDelete`` and Serve's count returns: APPLIED. The
  progress lives in an annotation of the RayCluster, so a restarted controller picks it up.

Every write is a patch carrying the ``resourceVersion`` it was computed from: kube-apiserver answers
409 Conflict if the object moved on, and ``apply`` re-reads and recomputes, as client-go's
``retry.RetryOnConflict`` does (``retry.DefaultRetry``: 5 attempts, 10 ms apart), before giving up
retryably. (No JSON-patch ``test`` op is a precondition: kube-apiserver answers a failed one with
422, which its API conventions say not to retry.) Status codes map as kube-apiserver's conventions
say (``api-conventions.md``, "HTTP Status codes"): 409 re-read and retry; 429, 5xx, no answer:
retryable (the controller tries again next step); 422 and other 4xx: permanent.

Fencing (with ``leadership``, the Lease elector): immediately before every write the actuator asks
the elector for the current term's token (``NotLeader`` if the Lease is not held now), refuses to
write an object carrying a later term's token (``Deposed``: it steps down), and writes its token
into the object's ``inferslice.io/fencing-token`` annotation in the same patch. ``claim()``, called
once per term before any action, stamps every RayService, active RayCluster and head pod: after it,
a deposed leader's write to any of them fails (409 from the resourceVersion it read, or its own
check of the newer token). What remains unfenced: an object created after the claim (a RayCluster
KubeRay starts for an upgrade, a restarted head pod) written by a deposed leader that stalled
between its check and its write.

Each apply first compares the target with what is, so repeating an action id changes nothing
(``ALREADY_APPLIED``). Calls and verbs used are exactly ``inferslice.deploy.rbac.PERMISSIONS`` for
the controller (tested through the apiserver stand-in).
"""

from __future__ import annotations

import copy
import functools
import json
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from inferslice.actions import Action, ActionKind
from inferslice.common.placement import placement_from_pod, pod_ready
from inferslice.deploy import serve_config
from inferslice.deploy.rbac import tier_namespace
from inferslice.deploy.tiers import EGRESS_RATE, INGRESS_RATE, POP_LABEL, rate_mbps, worker_group_name
from inferslice.placement import ReplicaPlacement
from inferslice.topology import Tier, Topology, parse_slot

from .base import (
    ApplyResult,
    ApplyStatus,
    PermanentActuatorError,
    RetryableActuatorError,
    TierObservation,
    require_kind,
)
from .fencing import Deposed, FencingToken, Leadership

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
RELOCATION_ANNOTATION = "inferslice.io/relocation"
RAY = ("ray.io", "v1")
FENCE_ANNOTATION = "inferslice.io/fencing-token"
_FENCE_PATH = "/metadata/annotations/" + FENCE_ANNOTATION.replace("~", "~0").replace("/", "~1")
T = TypeVar("T")


@dataclass(frozen=True)
class KubernetesSettings:
    field_manager: str = "inferslice-controller"  # names our writes in managedFields
    request_timeout_s: float = 4.0  # one apiserver round trip; below the Lease's 5 s, so a write ends before a takeover may start
    conflict_attempts: int = 5  # client-go retry.DefaultRetry: 5 steps
    conflict_backoff_s: float = 0.01  # retry.DefaultRetry: 10 ms between them (jitter 0.1)


class Conflict(RetryableActuatorError):
    """409: the object changed since it was read; ``apply`` re-reads and tries again."""


def _api_error(err: Exception, what: str) -> Exception:
    from kubernetes.client.exceptions import ApiException

    if isinstance(err, ApiException):
        status = int(err.status or 0)
        if status == 409:
            return Conflict(f"kubernetes: {what}: 409 {err.reason}")
        if status == 429 or status >= 500 or status == 0:
            return RetryableActuatorError(f"kubernetes: {what}: {status} {err.reason}")
        return PermanentActuatorError(f"kubernetes: {what}: {status} {err.reason}: {err.body}")
    return RetryableActuatorError(f"kubernetes: {what}: {err}")


def fence_of(obj: Mapping[str, Any]) -> FencingToken | None:
    """The fencing token an object carries (None: none, or not one of ours)."""
    text = (obj.get("metadata", {}).get("annotations") or {}).get(FENCE_ANNOTATION)
    try:
        return FencingToken.parse(text) if text else None
    except ValueError:
        return None


def _precondition(obj: Mapping[str, Any]) -> dict[str, Any]:
    # The patched object carries the resourceVersion we read: kube-apiserver refuses it with 409 if stale.
    return {"op": "replace", "path": "/metadata/resourceVersion", "value": obj["metadata"]["resourceVersion"]}


def _fence_op(obj: Mapping[str, Any], token: FencingToken | None, annotations: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """The op that writes ``token`` (last in a patch, after any op that replaces the annotations)."""
    if token is None:
        return []
    present = annotations if annotations is not None else obj.get("metadata", {}).get("annotations")
    if present is None:
        return [{"op": "add", "path": "/metadata/annotations", "value": {FENCE_ANNOTATION: str(token)}}]
    return [{"op": "add", "path": _FENCE_PATH, "value": str(token)}]


class KubernetesActuator:
    name = "kubernetes"
    kinds = frozenset({ActionKind.SET_REPLICAS, ActionKind.SET_CAP, ActionKind.RELOCATE})

    def __init__(
        self, topology: Topology, api_client: Any, settings: KubernetesSettings | None = None, leadership: Leadership | None = None
    ) -> None:
        from kubernetes import client

        self.topology = topology
        self.settings = settings or KubernetesSettings()
        self.leadership = leadership  # None: a single controller, no fencing
        self._custom = client.CustomObjectsApi(api_client)
        self._core = client.CoreV1Api(api_client)

    # -- fencing -------------------------------------------------------------------------------
    def _token_for(self, obj: Mapping[str, Any]) -> FencingToken | None:
        """The token to write on ``obj``, checked now: ``NotLeader`` if the Lease is not held,
        ``Deposed`` if ``obj`` already carries a later term's token."""
        if self.leadership is None:
            return None
        token = self.leadership.check()
        theirs = fence_of(obj)
        if theirs is not None and theirs.transitions > token.transitions:
            reason = f"{obj.get('kind')} {obj['metadata'].get('name')} carries term {theirs}, later than ours ({token})"
            self.leadership.step_down(reason)
            raise Deposed(reason)
        return token

    def claim(self) -> int:
        """Stamp this term's token on every object the actions write (RayServices, their active
        RayClusters, head pods), before the term's first action; returns how many were stamped."""
        if self.leadership is None:
            return 0

        def once(tier: Tier) -> int:
            ns = tier_namespace(self.topology, tier.name)
            rs = self._get("rayservices", ns, tier.name)
            stamped = self._stamp("rayservices", ns, rs)
            cluster = rs.get("status", {}).get("activeServiceStatus", {}).get("rayClusterName")
            if cluster:
                stamped += self._stamp("rayclusters", ns, self._get("rayclusters", ns, cluster))
                for head in self._pods(ns, f"ray.io/cluster={cluster},ray.io/node-type=head"):
                    stamped += self._stamp_pod(ns, head)
            return stamped

        total = 0
        for tier in self.topology.tiers:
            total += self._on_conflict_retry(functools.partial(once, tier))
        return total

    def _stamp(self, plural: str, ns: str, obj: dict[str, Any]) -> int:
        token = self._token_for(obj)
        if token is None or fence_of(obj) == token:
            return 0
        self._patch(plural, ns, obj["metadata"]["name"], [_precondition(obj), *_fence_op(obj, token)], JSON_PATCH)
        return 1

    def _stamp_pod(self, ns: str, pod: dict[str, Any], extra: Mapping[str, Any] | None = None) -> int:
        token = self._token_for(pod)
        if (token is None or fence_of(pod) == token) and not extra:
            return 0
        annotations = {**(extra or {}), **({FENCE_ANNOTATION: str(token)} if token is not None else {})}
        patch = {"metadata": {"resourceVersion": pod["metadata"]["resourceVersion"], "annotations": annotations}}
        name = pod["metadata"]["name"]
        self._call(
            f"patch pod {name}",
            self._core.patch_namespaced_pod,
            name,
            ns,
            patch,
            field_manager=self.settings.field_manager,
            _content_type=MERGE,
        )
        return 1

    def _on_conflict_retry(self, fn: Callable[[], T]) -> T:
        """``fn`` again (it re-reads) after a 409, as client-go's retry.RetryOnConflict."""
        last: Conflict | None = None
        for attempt in range(self.settings.conflict_attempts):
            try:
                return fn()
            except Conflict as err:
                last = err
                if attempt + 1 < self.settings.conflict_attempts:
                    time.sleep(self.settings.conflict_backoff_s * (1.0 + 0.1 * random.random()))
        raise RetryableActuatorError(f"{last} (still conflicting after {self.settings.conflict_attempts} re-reads)")

    # -- reads ---------------------------------------------------------------------------------
    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            return fn(*args, _request_timeout=self.settings.request_timeout_s, **kwargs)
        except (ApiException, HTTPError, OSError) as err:
            raise _api_error(err, what) from err

    def _get(self, plural: str, ns: str, name: str) -> dict[str, Any]:
        obj: dict[str, Any] = self._call(f"get {plural}/{name}", self._custom.get_namespaced_custom_object, *RAY, ns, plural, name)
        return obj

    def _patch(self, plural: str, ns: str, name: str, body: Any, content_type: str) -> dict[str, Any]:
        obj: dict[str, Any] = self._call(
            f"patch {plural}/{name}",
            self._custom.patch_namespaced_custom_object,
            *RAY,
            ns,
            plural,
            name,
            body,
            field_manager=self.settings.field_manager,
            _content_type=content_type,
        )
        return obj

    def _pods(self, ns: str, selector: str) -> list[dict[str, Any]]:
        resp = self._call(f"list pods {selector}", self._core.list_namespaced_pod, ns, label_selector=selector, _preload_content=False)
        items: list[dict[str, Any]] = json.loads(resp.data).get("items", [])
        return items

    def _tier(self, name: str) -> Tier:
        try:
            return self.topology.tier(name)
        except KeyError:
            raise PermanentActuatorError(f"kubernetes: unknown tier {name!r}") from None

    def _objects(self, tier: Tier) -> tuple[str, dict[str, Any], dict[str, Any]]:
        ns = tier_namespace(self.topology, tier.name)
        rs = self._get("rayservices", ns, tier.name)
        cluster_name = rs.get("status", {}).get("activeServiceStatus", {}).get("rayClusterName")
        if not cluster_name:
            raise RetryableActuatorError(f"kubernetes: RayService {ns}/{tier.name} has no active RayCluster yet")
        return ns, rs, self._get("rayclusters", ns, cluster_name)

    # -- observe -------------------------------------------------------------------------------
    def observe(self) -> Mapping[str, TierObservation]:
        out: dict[str, TierObservation] = {}
        for tier in self.topology.tiers:
            ns, rs, rc = self._objects(tier)
            pinned = serve_config.replicas_of(rs["spec"]["serveConfigV2"])
            groups = rc["spec"].get("workerGroupSpecs", [])
            target = pinned if pinned is not None else sum(int(g.get("replicas", 0)) for g in groups)
            pods = self._pods(ns, f"ray.io/cluster={rc['metadata']['name']}")
            replicas = tuple(_placement(p) for p in pods if p["metadata"].get("labels", {}).get("ray.io/node-type") == "worker")
            heads = [p for p in pods if p["metadata"].get("labels", {}).get("ray.io/node-type") == "head"]
            cap = _cap_bps(heads[0]) if heads else None
            out[tier.name] = TierObservation(tier.name, target, replicas, cap, externally_controlled=pinned is not None)
        return out

    # -- apply ---------------------------------------------------------------------------------
    def apply(self, action: Action) -> ApplyResult:
        require_kind(self, action)
        tier = self._tier(action.slice)
        if action.kind == ActionKind.SET_REPLICAS:
            return self._on_conflict_retry(lambda: self._set_replicas(action, tier))
        if action.kind == ActionKind.SET_CAP:
            return self._on_conflict_retry(lambda: self._set_cap(action, tier))
        return self._on_conflict_retry(lambda: self._relocate(action, tier))

    def _set_replicas(self, action: Action, tier: Tier) -> ApplyResult:
        if not isinstance(action.value, int | float) or int(action.value) != action.value:
            raise PermanentActuatorError(f"kubernetes: set_replicas needs a whole number, got {action.value!r}")
        n = int(action.value)
        if not 0 <= n <= tier.replicas_max:
            raise PermanentActuatorError(f"kubernetes: {n} replicas is outside 0..{tier.replicas_max} for tier {tier.name}")
        ns, rs, rc = self._objects(tier)
        groups = rc["spec"].get("workerGroupSpecs", [])
        wanted = distribute(tier, groups, n)
        cfg = rs["spec"]["serveConfigV2"]
        if serve_config.replicas_of(cfg) == n and all(_bounds(g) == (wanted[g["groupName"]],) * 2 for g in groups):
            return ApplyResult(action.id, ApplyStatus.ALREADY_APPLIED, f"{tier.name} already at {n}")
        ops = _bounds_ops(groups, wanted)
        if ops:
            self._patch(
                "rayclusters", ns, rc["metadata"]["name"], [_precondition(rc), *ops, *_fence_op(rc, self._token_for(rc))], JSON_PATCH
            )
        rs_groups = rs["spec"]["rayClusterConfig"].get("workerGroupSpecs", [])
        rs_ops = [_precondition(rs)]
        rs_ops += _bounds_ops(rs_groups, {g["groupName"]: wanted.get(g["groupName"], 0) for g in rs_groups}, "/spec/rayClusterConfig")
        rs_ops += [{"op": "replace", "path": "/spec/serveConfigV2", "value": serve_config.set_replicas(cfg, n)}]
        self._patch("rayservices", ns, tier.name, [*rs_ops, *_fence_op(rs, self._token_for(rs))], JSON_PATCH)
        return ApplyResult(action.id, ApplyStatus.APPLIED, f"{tier.name}: {n} replicas {wanted}")

    def _set_cap(self, action: Action, tier: Tier) -> ApplyResult:
        if action.value is not None and (not isinstance(action.value, int | float) or action.value <= 0):
            raise PermanentActuatorError(f"kubernetes: set_cap needs a positive bit/s or null, got {action.value!r}")
        rate = rate_mbps(float(action.value)) if action.value is not None else None
        ns, _rs, rc = self._objects(tier)
        heads = self._pods(ns, f"ray.io/cluster={rc['metadata']['name']},ray.io/node-type=head")
        template_ann = rc["spec"]["headGroupSpec"]["template"].get("metadata", {}).get("annotations", {})
        stale = [p for p in heads if _rates(p["metadata"].get("annotations", {})) != (rate, rate)]
        if not stale and _rates(template_ann) == (rate, rate):
            return ApplyResult(action.id, ApplyStatus.ALREADY_APPLIED, f"{tier.name} cap already {rate} Mbit/s")
        rates = {INGRESS_RATE: rate, EGRESS_RATE: rate}
        if _rates(template_ann) != (rate, rate):
            # The RayCluster first: a fenced object every cap change passes, so a deposed leader stops here.
            token = self._token_for(rc)
            patch: dict[str, Any] = {
                "metadata": {
                    "resourceVersion": rc["metadata"]["resourceVersion"],
                    **({"annotations": {FENCE_ANNOTATION: str(token)}} if token else {}),
                },
                "spec": {"headGroupSpec": {"template": {"metadata": {"annotations": rates}}}},
            }
            self._patch("rayclusters", ns, rc["metadata"]["name"], patch, MERGE)
        for pod in stale:
            self._stamp_pod(ns, pod, rates)
        return ApplyResult(action.id, ApplyStatus.APPLIED, f"{tier.name} cap {rate} Mbit/s on {len(stale)} head pod(s)")

    def _relocate(self, action: Action, tier: Tier) -> ApplyResult:
        dest = action.value
        if not isinstance(dest, str) or dest not in {p.name for p in self.topology.pops}:
            raise PermanentActuatorError(f"kubernetes: relocate needs a destination PoP, got {dest!r}")
        if not action.replica:
            raise PermanentActuatorError("kubernetes: relocate needs the replica (worker pod) that moves")
        ns, rs, rc = self._objects(tier)
        progress = json.loads(rc["metadata"].get("annotations", {}).get(RELOCATION_ANNOTATION, "{}"))
        if progress.get("id") == action.id and progress.get("phase") == "done":
            return ApplyResult(action.id, ApplyStatus.ALREADY_APPLIED, f"{action.replica} already moved to {dest}")
        groups = rc["spec"].get("workerGroupSpecs", [])
        dest_group = worker_group_name(dest)
        if progress.get("id") != action.id:
            return self._make(action, tier, ns, rs, rc, groups, dest)
        ready = sum(1 for p in self._pods(ns, f"ray.io/cluster={rc['metadata']['name']},ray.io/group={dest_group}") if pod_ready(p))
        if ready < int(progress["ready_needed"]):
            return ApplyResult(
                action.id, ApplyStatus.IN_PROGRESS, f"waiting for a ready replica at {dest} ({ready}/{progress['ready_needed']})"
            )
        return self._break(action, tier, ns, rs, rc, groups, progress)

    def _make(
        self, action: Action, tier: Tier, ns: str, rs: dict[str, Any], rc: dict[str, Any], groups: list[dict[str, Any]], dest: str
    ) -> ApplyResult:
        source = self._source_group(ns, rc, str(action.replica))
        dest_group = worker_group_name(dest)
        ready_now = sum(1 for p in self._pods(ns, f"ray.io/cluster={rc['metadata']['name']},ray.io/group={dest_group}") if pod_ready(p))
        ops: list[dict[str, Any]] = [_precondition(rc)]
        index = next((i for i, g in enumerate(groups) if g["groupName"] == dest_group), None)
        if index is None:
            src = next(g for g in groups if g["groupName"] == source)
            ops.append({"op": "add", "path": "/spec/workerGroupSpecs/-", "value": _group_at(src, dest)})
        else:
            n = int(groups[index].get("replicas", 0)) + 1
            max_r = max(int(groups[index].get("maxReplicas", n)), n)
            base = f"/spec/workerGroupSpecs/{index}"
            ops += [
                {"op": "replace", "path": f"{base}/{k}", "value": v}
                for k, v in (("replicas", n), ("minReplicas", n), ("maxReplicas", max_r))
            ]
        progress = {"id": action.id, "phase": "made", "source": source, "replica": action.replica, "ready_needed": ready_now + 1}
        annotations = {**rc["metadata"].get("annotations", {}), RELOCATION_ANNOTATION: json.dumps(progress)}
        ops.append({"op": "add", "path": "/metadata/annotations", "value": annotations})
        ops += _fence_op(rc, self._token_for(rc), annotations)
        self._patch("rayclusters", ns, rc["metadata"]["name"], ops, JSON_PATCH)
        n_serve = serve_config.replicas_of(rs["spec"]["serveConfigV2"])
        total = n_serve if n_serve is not None else sum(int(g.get("replicas", 0)) for g in groups)
        self._serve_replicas(ns, tier, rs, total + 1)  # the new replica serves before the old one drains
        return ApplyResult(action.id, ApplyStatus.IN_PROGRESS, f"starting a replica at {dest} before {action.replica} drains")

    def _break(
        self,
        action: Action,
        tier: Tier,
        ns: str,
        rs: dict[str, Any],
        rc: dict[str, Any],
        groups: list[dict[str, Any]],
        progress: dict[str, Any],
    ) -> ApplyResult:
        index = next((i for i, g in enumerate(groups) if g["groupName"] == progress["source"]), None)
        if index is None:
            raise PermanentActuatorError(f"kubernetes: source group {progress['source']} vanished during the relocation")
        g = groups[index]
        n = max(0, int(g.get("replicas", 0)) - 1)
        base = f"/spec/workerGroupSpecs/{index}"
        annotations = {**rc["metadata"].get("annotations", {}), RELOCATION_ANNOTATION: json.dumps({**progress, "phase": "done"})}
        ops: list[dict[str, Any]] = [
            _precondition(rc),
            {"op": "replace", "path": f"{base}/replicas", "value": n},
            {"op": "replace", "path": f"{base}/minReplicas", "value": min(n, int(g.get("minReplicas", n)))},
            {"op": "add", "path": f"{base}/scaleStrategy", "value": {"workersToDelete": [progress["replica"]]}},
            {"op": "add", "path": "/metadata/annotations", "value": annotations},
            *_fence_op(rc, self._token_for(rc), annotations),
        ]
        self._patch("rayclusters", ns, rc["metadata"]["name"], ops, JSON_PATCH)
        n_serve = serve_config.replicas_of(rs["spec"]["serveConfigV2"])
        if n_serve is not None:
            self._serve_replicas(ns, tier, rs, max(0, n_serve - 1))
        return ApplyResult(action.id, ApplyStatus.APPLIED, f"{progress['replica']} drained; its replica serves at {action.value}")

    def _serve_replicas(self, ns: str, tier: Tier, rs: dict[str, Any], n: int) -> None:
        ops = [
            _precondition(rs),
            {"op": "replace", "path": "/spec/serveConfigV2", "value": serve_config.set_replicas(rs["spec"]["serveConfigV2"], n)},
            *_fence_op(rs, self._token_for(rs)),
        ]
        self._patch("rayservices", ns, tier.name, ops, JSON_PATCH)

    def _source_group(self, ns: str, rc: dict[str, Any], pod_name: str) -> str:
        pods = self._pods(ns, f"ray.io/cluster={rc['metadata']['name']},ray.io/node-type=worker")
        for pod in pods:
            if pod["metadata"]["name"] == pod_name:
                return str(pod["metadata"]["labels"]["ray.io/group"])
        raise PermanentActuatorError(f"kubernetes: replica {pod_name} is not a worker of {rc['metadata']['name']}")


# -- pure helpers ----------------------------------------------------------------------------------


def distribute(tier: Tier, groups: list[dict[str, Any]], n: int) -> dict[str, int]:
    """Group -> replicas for ``n`` in total: keep what runs, add in the tiers file's placement order,
    remove from the last slots first; groups outside the placement (added by a relocation) keep
    their replicas until the total is below them."""
    current = {g["groupName"]: int(g.get("replicas", 0)) for g in groups}
    limits = {g["groupName"]: int(g.get("maxReplicas", 0)) for g in groups}
    order = [worker_group_name(parse_slot(s)[0]) for s in tier.placement[: tier.replicas_max]]
    wanted = dict(current)
    total = sum(wanted.values())
    for group in order * 2:  # at most every slot once more than the placement holds
        if total >= n:
            break
        if group in wanted and wanted[group] < limits.get(group, 0):
            wanted[group] += 1
            total += 1
    for group in [*reversed(order), *sorted(set(wanted) - set(order))]:
        while total > n and wanted.get(group, 0) > 0:
            wanted[group] -= 1
            total -= 1
    if total != n:
        raise PermanentActuatorError(f"kubernetes: tier {tier.name} has room for {total} replicas in its worker groups, not {n}")
    return wanted


def _bounds(group: dict[str, Any]) -> tuple[int, int]:
    return int(group.get("replicas", 0)), int(group.get("minReplicas", 0))


def _bounds_ops(groups: list[dict[str, Any]], wanted: Mapping[str, int], prefix: str = "/spec") -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = []
    for i, g in enumerate(groups):
        n = wanted.get(g["groupName"])
        if n is None or _bounds(g) == (n, n):
            continue
        base = f"{prefix}/workerGroupSpecs/{i}"  # the index names this group: the patch's resourceVersion says so
        ops += [
            {"op": "replace", "path": f"{base}/replicas", "value": n},
            {"op": "replace", "path": f"{base}/minReplicas", "value": n},  # Ray's autoscaler must not scale it in
        ]
    return ops


def _group_at(source: dict[str, Any], pop: str) -> dict[str, Any]:
    """A copy of ``source`` pinned to ``pop`` by node affinity, holding one replica."""
    group = copy.deepcopy(source)
    group.update({"groupName": worker_group_name(pop), "replicas": 1, "minReplicas": 1, "maxReplicas": 1})
    group.pop("scaleStrategy", None)
    tmpl = group["template"]
    tmpl.setdefault("metadata", {}).setdefault("labels", {})[POP_LABEL] = pop
    term = {"matchExpressions": [{"key": POP_LABEL, "operator": "In", "values": [pop]}]}
    tmpl["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
    return group


def _rates(annotations: Mapping[str, Any]) -> tuple[str | None, str | None]:
    return annotations.get(INGRESS_RATE), annotations.get(EGRESS_RATE)


def _cap_bps(pod: dict[str, Any]) -> float | None:
    rate = pod["metadata"].get("annotations", {}).get(INGRESS_RATE)
    return float(rate) * 1e6 if rate not in (None, "", "0") else None


def _placement(pod: dict[str, Any]) -> ReplicaPlacement:
    return placement_from_pod(pod, POP_LABEL)


__all__ = ["FENCE_ANNOTATION", "Conflict", "KubernetesActuator", "KubernetesSettings", "distribute", "fence_of"]
