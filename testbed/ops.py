"""Operator actions on a running testbed's serving stack: replica counts, GPU shares and replica moves.

These talk to the tier fronts' and engine hosts' admin APIs (found through the registry), from
the root namespace over the management link. Caps live in ``testbed.net.lifecycle.set_cap``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from inferslice.common.registry import DEFAULT_STATE_DIR, read_registry
from inferslice.errors import InputError, PermanentError, RetryableError
from inferslice.testbed.addressing import AddressPlan
from inferslice.topology import load_topology

ADMIN_TIMEOUT_S = 5.0  # admin calls are local and cheap; a slow answer means the process is stuck


def _call(method: str, url: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    try:
        resp = httpx.request(method, url, json=body, timeout=ADMIN_TIMEOUT_S)
    except httpx.HTTPError as err:
        raise RetryableError(f"{method} {url}: {err}") from None
    if resp.status_code >= 400:
        raise PermanentError(f"{method} {url}: HTTP {resp.status_code}: {resp.text[:300]}")
    try:
        data = resp.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {"items": data}


def front_state(tier: str, state_dir: Path = DEFAULT_STATE_DIR) -> dict[str, Any]:
    front = read_registry(state_dir).front(tier)
    if front is None:
        raise InputError(f"no serving front for tier {tier!r}", "tier")
    return _call("GET", f"{front.admin_url}/admin/state")


def set_replicas(tier: str, replicas: int | None, state_dir: Path = DEFAULT_STATE_DIR) -> dict[str, Any]:
    """Fixed replica count under external control, or ``None`` to hand the tier back to its autoscaler."""
    front = read_registry(state_dir).front(tier)
    if front is None:
        raise InputError(f"no serving front for tier {tier!r}", "tier")
    if replicas is None:
        return _call("PUT", f"{front.admin_url}/admin/autoscale", {"enabled": True})
    # The front takes a fixed count only with its autoscaler off (409 otherwise).
    _call("PUT", f"{front.admin_url}/admin/autoscale", {"enabled": False})
    return _call("PUT", f"{front.admin_url}/admin/replicas", {"replicas": replicas})


def set_gpu_share(tier: str, share: float, state_dir: Path = DEFAULT_STATE_DIR, replica: str | None = None) -> list[str]:
    """Set the effective GPU share of a tier's replicas (a co-tenant slowing them); returns replica ids."""
    if not 0 < share <= 1:
        raise InputError(f"a GPU share is in (0, 1], got {share}", "share")
    reg = read_registry(state_dir)
    top = load_topology(reg.topology_path)
    plan = AddressPlan(top)
    changed: list[str] = []
    for rep in reg.replicas_of(tier):
        if replica is not None and rep.id != replica:
            continue
        _call("PUT", f"{plan.host_admin(rep.pop).url}/admin/replicas/{rep.id}/share", {"gpu_share": share})
        changed.append(rep.id)
    if replica is not None and not changed:
        raise InputError(f"no replica {replica!r} in tier {tier!r}", "replica")
    return changed


def start_move(tier: str, replica: str, pop: str, gpu: int, move_id: str, state_dir: Path = DEFAULT_STATE_DIR) -> dict[str, Any]:
    """Start a make-before-break move of ``replica`` to ``pop``/``gpu`` (the front's POST /admin/moves);
    the same ``move_id`` again returns the move already known. Returns the move."""
    front = read_registry(state_dir).front(tier)
    if front is None:
        raise InputError(f"no serving front for tier {tier!r}", "tier")
    return _call("POST", f"{front.admin_url}/admin/moves", {"id": move_id, "replica": replica, "pop": pop, "gpu": gpu})


def move_state(tier: str, move_id: str, state_dir: Path = DEFAULT_STATE_DIR) -> dict[str, Any]:
    """The move's phase (starting | draining | done | failed), successor and detail (GET /admin/moves/{id})."""
    front = read_registry(state_dir).front(tier)
    if front is None:
        raise InputError(f"no serving front for tier {tier!r}", "tier")
    return _call("GET", f"{front.admin_url}/admin/moves/{quote(move_id, safe='')}")
