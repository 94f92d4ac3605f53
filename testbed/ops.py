"""Operator actions on a running testbed's serving stack: replica counts, GPU shares and replica moves.

These talk to the tier fronts' admin APIs through their one client (``testbed.serving.front_client``)
and to the engine hosts' admin APIs (both found through the registry), from the root namespace over
the management link. Caps live in ``testbed.net.lifecycle.set_cap``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from inferslice.common.registry import DEFAULT_STATE_DIR, read_registry
from inferslice.errors import InputError, PermanentError, RetryableError
from inferslice.testbed.addressing import AddressPlan
from inferslice.testbed.serving.front_client import ADMIN_TIMEOUT_S, FrontRefused, FrontUnavailable, front_client
from inferslice.topology import load_topology


def _host_put(url: str, body: dict[str, Any]) -> None:
    """A PUT to an engine host's admin API, its errors typed as the front client types them."""
    try:
        resp = httpx.put(url, json=body, timeout=ADMIN_TIMEOUT_S)
    except httpx.HTTPError as err:
        raise FrontUnavailable(f"PUT {url}: {err}") from None
    what = f"PUT {url}: HTTP {resp.status_code}: {resp.text[:300]}"
    if resp.status_code >= 500:
        raise FrontUnavailable(what)
    if resp.status_code >= 400:
        raise FrontRefused(what, resp.status_code)


def front_state(tier: str, state_dir: Path = DEFAULT_STATE_DIR) -> dict[str, Any]:
    return front_client(tier, state_dir).state_json()


def wait_replicas_ready(wanted: Mapping[str, int], state_dir: Path = DEFAULT_STATE_DIR, timeout_s: float = 90.0) -> None:
    """Block until each tier's front reports at least ``wanted[tier]`` replicas ready.

    A front not answering yet (still starting) is polled again, not an error; the deadline is.
    """
    deadline = time.monotonic() + timeout_s
    pending = dict(wanted)
    while pending:
        for tier, n in list(pending.items()):
            try:
                ready = sum(1 for r in front_state(tier, state_dir).get("replicas", []) if r.get("state") == "ready")
            except (PermanentError, RetryableError):
                continue
            if ready >= n:
                del pending[tier]
        if pending:
            if time.monotonic() > deadline:
                raise PermanentError(f"replicas not ready after {timeout_s:g} s: {pending}")
            time.sleep(0.5)  # a replica's cold start is seconds: polling faster only loads the fronts


def set_replicas(tier: str, replicas: int | None, state_dir: Path = DEFAULT_STATE_DIR) -> dict[str, Any]:
    """Fixed replica count under external control, or ``None`` to hand the tier back to its autoscaler."""
    front = front_client(tier, state_dir)
    if replicas is None:
        return front.set_autoscale(True)
    front.set_replicas(replicas)
    return front.state_json()


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
        _host_put(f"{plan.host_admin(rep.pop).url}/admin/replicas/{rep.id}/share", {"gpu_share": share})
        changed.append(rep.id)
    if replica is not None and not changed:
        raise InputError(f"no replica {replica!r} in tier {tier!r}", "replica")
    return changed


def start_move(tier: str, replica: str, pop: str, gpu: int, move_id: str, state_dir: Path = DEFAULT_STATE_DIR) -> dict[str, Any]:
    """Start a make-before-break move of ``replica`` to ``pop``/``gpu`` (the front's POST /admin/moves);
    the same ``move_id`` again returns the move already known. Returns the move."""
    return front_client(tier, state_dir).start_move(move_id, replica, pop, gpu)


def move_state(tier: str, move_id: str, state_dir: Path = DEFAULT_STATE_DIR) -> dict[str, Any]:
    """The move's phase (starting | draining | done | failed), successor and detail (GET /admin/moves/{id})."""
    move = front_client(tier, state_dir).move(move_id)
    if move is None:
        raise InputError(f"no move {move_id!r} at {tier!r}'s front", "move_id")
    return move
