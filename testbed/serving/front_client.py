"""The tier front's admin API (``testbed/serving/admin.py``) as every caller outside the front calls it.

    front = FrontClient(admin_url)            # or front_client(tier, state_dir): found through the registry
    front.state()                             # FrontState: mode, target, replicas (ReplicaPlacement), queue
    front.set_replicas(4)                     # the rule: autoscale off first; False when already fixed at 4
    front.set_autoscale(True)                 # hand the count back to the front's own autoscaler
    front.start_move("act-7", "premium-0", "dublin", 1); front.move("act-7")

One place for the rule the front enforces (a fixed count only with its autoscaler off: 409
otherwise) and for what its answers mean. Its callers: the operator commands (``testbed.ops``), the
testbed actuator (``control/actuators/testbed.py``) and the control benchmark's testbed backend.
Errors use the vocabulary's two kinds: ``FrontUnavailable`` (retryable: no answer, timeout, 409 a
conflict that clears, 5xx) and ``FrontRefused`` (permanent: 400, 404, 422 — the request is wrong).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from inferslice.common.placement import placement_from_front
from inferslice.common.registry import DEFAULT_STATE_DIR, read_registry
from inferslice.errors import InputError, ParseError, PermanentError, RetryableError
from inferslice.placement import ReplicaPlacement

ADMIN_TIMEOUT_S = 5.0  # admin calls are local and cheap; a slower answer means the front is stuck
PERMANENT_STATUSES = frozenset({400, 404, 422})  # the request itself is wrong: asking again cannot help


class FrontUnavailable(RetryableError):
    """The front did not answer, or answered with a conflict or failure that may clear."""


class FrontRefused(PermanentError):
    """The front refused the request as given (bad body, unknown replica, out of bounds)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class FrontState:
    tier: str
    mode: str  # "fixed" (a count set from outside) | "autoscale" (the front's own autoscaler)
    target: int
    replicas: tuple[ReplicaPlacement, ...]
    queued: int  # in the tier's router queue, waiting for a replica slot
    ongoing: int  # queued + in flight
    raw: Mapping[str, Any]  # the whole answer (in-flight counts and URLs per replica, the autoscaler's desired count)

    @property
    def fixed(self) -> bool:
        return self.mode == "fixed"


def front_state_from_dict(body: Mapping[str, Any]) -> FrontState:
    """``GET /admin/state``'s answer, parsed (``ParseError`` when it is not one)."""
    try:
        replicas = tuple(placement_from_front(r) for r in body.get("replicas") or [])
        return FrontState(
            str(body.get("tier", "")),
            str(body.get("mode", "")),
            int(body.get("target", len(replicas))),
            replicas,
            int(body.get("queued") or 0),
            int(body.get("ongoing") or 0),
            body,
        )
    except (AttributeError, TypeError, ValueError) as err:
        raise ParseError(f"front state: {err}") from None


class FrontClient:
    def __init__(self, admin_url: str, client: httpx.Client | None = None, timeout_s: float = ADMIN_TIMEOUT_S) -> None:
        self.admin_url = admin_url.rstrip("/")
        self.client = client
        self.timeout_s = timeout_s

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None, *, missing_ok: bool = False) -> dict[str, Any] | None:
        url = f"{self.admin_url}{path}"
        try:
            if self.client is not None:
                resp = self.client.request(method, url, json=body)
            else:
                resp = httpx.request(method, url, json=body, timeout=self.timeout_s)
        except httpx.HTTPError as err:
            raise FrontUnavailable(f"{method} {url}: {err}") from None
        if missing_ok and resp.status_code == 404:
            return None
        if resp.status_code in PERMANENT_STATUSES:
            raise FrontRefused(f"{method} {url}: HTTP {resp.status_code}: {resp.text[:300]}", resp.status_code)
        if resp.status_code >= 300:
            raise FrontUnavailable(f"{method} {url}: HTTP {resp.status_code}: {resp.text[:300]}")
        try:
            data = resp.json()
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {"items": data}

    # -- reads -------------------------------------------------------------------------------------
    def state_json(self) -> dict[str, Any]:
        return self._call("GET", "/admin/state") or {}

    def state(self) -> FrontState:
        try:
            return front_state_from_dict(self.state_json())
        except ParseError as err:  # a front mid-restart may answer half a state: ask again later
            raise FrontUnavailable(f"{self.admin_url}/admin/state: {err}") from None

    def move(self, move_id: str) -> dict[str, Any] | None:
        """The move's phase (starting | draining | done | failed), successor and detail; None for an unknown id."""
        return self._call("GET", f"/admin/moves/{quote(move_id, safe='')}", missing_ok=True)

    # -- writes ------------------------------------------------------------------------------------
    def set_autoscale(self, enabled: bool) -> dict[str, Any]:
        """Switch the front's own autoscaler (disabling keeps the current target, fixed)."""
        return self._call("PUT", "/admin/autoscale", {"enabled": enabled}) or {}

    def set_replicas(self, replicas: int) -> bool:
        """Fix the count at ``replicas`` under external control; False when it already was (nothing sent).

        The front takes a fixed count only with its autoscaler off (409 otherwise): switch it off first."""
        st = self.state()
        if st.fixed and st.target == replicas:
            return False
        if not st.fixed:
            self.set_autoscale(False)
        self._call("PUT", "/admin/replicas", {"replicas": replicas})
        return True

    def start_move(self, move_id: str, replica: str, pop: str, gpu: int) -> dict[str, Any]:
        """Start a make-before-break move of ``replica`` to ``pop``/gpu ``gpu``; the same id again returns the move known."""
        return self._call("POST", "/admin/moves", {"id": move_id, "replica": replica, "pop": pop, "gpu": gpu}) or {}


def front_client(tier: str, state_dir: str | Path = DEFAULT_STATE_DIR, client: httpx.Client | None = None) -> FrontClient:
    """The client of ``tier``'s front, found through the testbed registry (``InputError`` when it has none)."""
    front = read_registry(Path(state_dir)).front(tier)
    if front is None:
        raise InputError(f"no serving front for tier {tier!r}", "tier")
    return FrontClient(front.admin_url, client)
