"""Kubernetes (Kube-OVN) mapping: pods -> OVS port entries, a pure function of ``kubectl get pods -o json``.

Kube-OVN names a pod's OVS Interface by ``external_ids:iface-id=<pod>.<namespace>``, records its
subnet in ``ovn.kubernetes.io/logical_switch`` and its caps in ``ovn.kubernetes.io/ingress_rate`` /
``egress_rate`` (Mbit/s, integer strings). The slice of a pod is its subnet's tier: the subnet name
through the config's ``subnets`` map, else a tier of the same name, else the tier whose CIDR holds
the pod's address. The PoP is its node's, through the config's ``nodes`` map. Entries use the pod's
viewpoint (``invert``): ``receive`` is what the pod receives, capped by ``ingress_rate``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from typing import Any

from inferslice.errors import ParseError

from .mapping import OvsPortMap

LOGICAL_SWITCH = "ovn.kubernetes.io/logical_switch"
INGRESS_RATE = "ovn.kubernetes.io/ingress_rate"
EGRESS_RATE = "ovn.kubernetes.io/egress_rate"
IP_ADDRESS = "ovn.kubernetes.io/ip_address"


def pod_items(doc: Any) -> list[dict[str, Any]]:
    """A ``kubectl get pods -o json`` document (a List) or a bare list -> the pod objects."""
    items = doc.get("items") if isinstance(doc, dict) else doc
    if not isinstance(items, list):
        raise ParseError("pods: expected a List object with items or a JSON array")
    return [p for p in items if isinstance(p, dict)]


def _mbit(value: Any, where: str) -> float | None:
    if value is None or value == "" or value == "0":
        return None  # Kube-OVN treats 0 / absent as no limit
    try:
        mbit = float(str(value))
    except ValueError:
        raise ParseError(f"{where}: {value!r} is not a number of Mbit/s") from None
    return mbit * 1e6 if mbit > 0 else None


def port_maps_from_pods(
    pods: Sequence[Mapping[str, Any]],
    tier_subnets: Mapping[str, str],
    subnets: Mapping[str, str] | None = None,
    nodes: Mapping[str, str] | None = None,
    default_pop: str | None = None,
) -> tuple[OvsPortMap, ...]:
    """Pods -> OVS port entries. ``tier_subnets``: tier -> CIDR (from the tiers file);
    ``subnets``: Kube-OVN subnet name -> slice; ``nodes``: node name -> PoP. Pods without a slice
    or PoP (host-network pods, other subnets) are skipped, malformed annotations raise ParseError."""
    subnets = subnets or {}
    nodes = nodes or {}
    cidrs = []
    for tier, cidr in tier_subnets.items():
        try:
            cidrs.append((tier, ipaddress.ip_network(cidr, strict=False)))
        except ValueError:
            raise ParseError(f"tier {tier}: bad subnet {cidr!r}") from None
    out: list[OvsPortMap] = []
    for pod in pods:
        meta = pod.get("metadata")
        if not isinstance(meta, dict):
            continue
        name, ns = meta.get("name"), meta.get("namespace", "default")
        if not isinstance(name, str) or not isinstance(ns, str):
            continue
        ann = meta.get("annotations") or {}
        if not isinstance(ann, dict):
            raise ParseError(f"pod {ns}/{name}: annotations are not a mapping")
        spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
        status = pod.get("status") if isinstance(pod.get("status"), dict) else {}
        assert isinstance(spec, dict) and isinstance(status, dict)
        if spec.get("hostNetwork"):
            continue
        slice_ = _slice_of(ann, status, subnets, tier_subnets, cidrs)
        pop = nodes.get(str(spec.get("nodeName", "")), default_pop)
        if slice_ is None or pop is None:
            continue
        where = f"pod {ns}/{name}"
        out.append(OvsPortMap(
            slice=slice_,
            pop=pop,
            link=f"{ns}/{name}",
            iface_id=f"{name}.{ns}",
            invert=True,
            cap_receive_bps=_mbit(ann.get(INGRESS_RATE), f"{where} {INGRESS_RATE}"),
            cap_transmit_bps=_mbit(ann.get(EGRESS_RATE), f"{where} {EGRESS_RATE}"),
        ))
    return tuple(out)


def _slice_of(
    ann: Mapping[str, Any],
    status: Mapping[str, Any],
    subnets: Mapping[str, str],
    tier_subnets: Mapping[str, str],
    cidrs: list[tuple[str, ipaddress.IPv4Network | ipaddress.IPv6Network]],
) -> str | None:
    switch = ann.get(LOGICAL_SWITCH)
    if isinstance(switch, str):
        if switch in subnets:
            return subnets[switch]
        if switch in tier_subnets:
            return switch
    for text in (ann.get(IP_ADDRESS), status.get("podIP")):
        if not isinstance(text, str):
            continue
        for part in text.split(","):  # dual-stack pods list "v4,v6"
            try:
                addr = ipaddress.ip_address(part.strip().split("/")[0])
            except ValueError:
                continue
            for tier, net in cidrs:
                if addr.version == net.version and addr in net:
                    return tier
    return None
