"""Leader election on a ``coordination.k8s.io/v1`` Lease that cannot split, handing out the fencing
token every actuation carries (its types: ``control/actuators/fencing.py``).

    lease = KubernetesLeaseClient(api_client, namespace, "inferslice-controller")
    elector = LeaseElector(lease, identity=pod_name)          # clock=time.monotonic by default
    elector.run(stop)                                         # a thread: a round every retry_period_s
    ...
    token = elector.check()            # raises NotLeader unless leading *now*; call before every write
    elector.run_while_leading(fn)      # fn(token) only while leading, else None

The rules are client-go's ``tools/leaderelection`` (leaderelection.go, tryAcquireOrRenew; defaults
lease 15 s, renew deadline 10 s, retry 2 s), with the two places where a slow apiserver could make
two leaders closed:

- Every Lease call has a request timeout below the renew deadline (client-go's
  ``max(1 s, renew_deadline / 2)``, ``resourcelock.NewFromKubeconfig``) and no client-side retries,
  so one hung call cannot hold a round past the deadline.
- Leadership counts from when the successful write was *sent*, not from when its answer arrived:
  ``is_leader()`` is ``clock() < sent + renew_deadline_s``. A write sent at t = 2 s whose answer
  arrives at t = 20 s gives leadership until t = 12 s, i.e. none. A follower counts the holder's
  silence from when it *received* a record (the later instant), and waits ``lease_duration_s``
  (> ``renew_deadline_s``) of its own clock without the record changing before it writes a takeover
  with the record's ``resourceVersion`` as precondition. Each side takes the conservative end, so
  with clocks that advance at about the same rate the old leader stops before the new one starts.
  Only a monotonic clock is compared; the wall clock only fills the informational timestamps.

What the Lease cannot give (client-go says so: "does not guarantee that only one client is acting as
a leader (a.k.a. fencing)") is protection against a process that checked ``is_leader()`` and then
stalled (GC, a VM pause, a clock that runs fast) before its write landed. For that, every term has a
``FencingToken`` (the Lease's ``leaseTransitions``, incremented on every change of holder, and the
holder), which each write carries and whoever applies it checks: see ``control/actuators/kubernetes.py``
(fenced objects) and the SliceAction trail.

The installed ``kubernetes.leaderelection`` is not used: it applies no request timeout, counts
leadership from when an answer arrived, keeps ``leaseTransitions`` at 0, reads the wall clock, takes
no API client (only the global default) and calls ``sys.exit`` on a bad configuration.
"""

from __future__ import annotations

import copy
import json
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from inferslice.control.actuators.base import PermanentActuatorError, RetryableActuatorError
from inferslice.control.actuators.fencing import Deposed, FencingToken, Leadership, NotLeader

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class LeaseSettings:
    lease_duration_s: float = 15.0  # client-go's default: how long a follower waits on a silent holder
    renew_deadline_s: float = 10.0  # client-go's default: a leader stops acting this long after its last renew was sent
    retry_period_s: float = 2.0  # client-go's default: one round every 2 s
    request_timeout_s: float | None = None  # None: client-go's max(1 s, renew_deadline_s / 2)

    def __post_init__(self) -> None:
        if not 0 < self.retry_period_s < self.renew_deadline_s < self.lease_duration_s:
            raise ValueError("need 0 < retry_period_s < renew_deadline_s < lease_duration_s")
        if not 0 < self.timeout_s < self.renew_deadline_s:
            raise ValueError("need 0 < request_timeout_s < renew_deadline_s")

    @property
    def timeout_s(self) -> float:
        if self.request_timeout_s is not None:
            return self.request_timeout_s
        return max(1.0, self.renew_deadline_s / 2) if self.renew_deadline_s > 1.0 else self.renew_deadline_s / 2


# -- the Lease ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LeaseRecord:
    holder: str  # "" when released
    lease_duration_s: float
    acquire_time: str | None
    renew_time: str | None
    transitions: int
    resource_version: str


@dataclass(frozen=True)
class LeaseSpec:
    holder: str
    lease_duration_s: float
    acquire_time: str
    renew_time: str
    transitions: int


class LeaseConflict(RetryableActuatorError):
    """409: the Lease changed since it was read (or already exists on create)."""


class LeaseUnavailable(RetryableActuatorError):
    """No answer within the timeout, a refused connection, 429 or 5xx: the round failed, try later."""


class LeaseClient(Protocol):
    """One Lease object. Every call takes its timeout; errors are ``LeaseConflict``,
    ``LeaseUnavailable`` or a ``PermanentActuatorError`` (403: a missing grant)."""

    def get(self, timeout_s: float) -> LeaseRecord | None: ...  # None: no such Lease

    def create(self, spec: LeaseSpec, timeout_s: float) -> LeaseRecord: ...

    def update(self, spec: LeaseSpec, resource_version: str, timeout_s: float) -> LeaseRecord: ...


def _record(doc: dict[str, Any]) -> LeaseRecord:
    spec = doc.get("spec") or {}
    return LeaseRecord(
        holder=spec.get("holderIdentity") or "",
        lease_duration_s=float(spec.get("leaseDurationSeconds") or 0),
        acquire_time=spec.get("acquireTime"),
        renew_time=spec.get("renewTime"),
        transitions=int(spec.get("leaseTransitions") or 0),
        resource_version=str(doc["metadata"]["resourceVersion"]),
    )


class KubernetesLeaseClient:
    """``LeaseClient`` over the ``kubernetes`` client. It uses its own copy of the API client's
    configuration with urllib3 retries off: a retried PUT would multiply the request timeout."""

    def __init__(self, api_client: Any, namespace: str, name: str) -> None:
        from kubernetes import client

        cfg = copy.copy(api_client.configuration)
        cfg.retries = False
        self._api = client.CoordinationV1Api(client.ApiClient(cfg))
        self.namespace, self.name = namespace, name

    def _call(self, what: str, fn: Callable[..., Any], *args: Any, timeout_s: float) -> dict[str, Any] | None:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            resp = fn(*args, _request_timeout=timeout_s, _preload_content=False)
        except ApiException as err:
            status = int(err.status or 0)
            if status == 404 and what == "get":
                return None
            if status == 409:
                raise LeaseConflict(f"lease {self.namespace}/{self.name}: {what}: 409 {err.reason}") from err
            if status in (0, 429) or status >= 500:
                raise LeaseUnavailable(f"lease {self.namespace}/{self.name}: {what}: {status} {err.reason}") from err
            raise PermanentActuatorError(f"lease {self.namespace}/{self.name}: {what}: {status} {err.reason}: {err.body}") from err
        except (HTTPError, OSError) as err:  # urllib3's ReadTimeoutError/MaxRetryError are HTTPErrors
            raise LeaseUnavailable(f"lease {self.namespace}/{self.name}: {what}: {err}") from err
        doc: dict[str, Any] = json.loads(resp.data)
        return doc

    def _body(self, spec: LeaseSpec, resource_version: str | None) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if resource_version is not None:
            meta["resourceVersion"] = resource_version  # the precondition: 409 if someone wrote since
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": meta,
            "spec": {
                **({"holderIdentity": spec.holder} if spec.holder else {}),  # released: no holder
                "leaseDurationSeconds": max(1, int(spec.lease_duration_s)),
                "acquireTime": spec.acquire_time,
                "renewTime": spec.renew_time,
                "leaseTransitions": spec.transitions,
            },
        }

    def get(self, timeout_s: float) -> LeaseRecord | None:
        doc = self._call("get", self._api.read_namespaced_lease, self.name, self.namespace, timeout_s=timeout_s)
        return _record(doc) if doc is not None else None

    def create(self, spec: LeaseSpec, timeout_s: float) -> LeaseRecord:
        doc = self._call("create", self._api.create_namespaced_lease, self.namespace, self._body(spec, None), timeout_s=timeout_s)
        assert doc is not None
        return _record(doc)

    def update(self, spec: LeaseSpec, resource_version: str, timeout_s: float) -> LeaseRecord:
        body = self._body(spec, resource_version)
        doc = self._call("update", self._api.replace_namespaced_lease, self.name, self.namespace, body, timeout_s=timeout_s)
        assert doc is not None
        return _record(doc)


# -- the elector ----------------------------------------------------------------------------------


def _micro_time(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseElector:
    """One replica's view of one Lease. Thread-safe: one thread runs the rounds (``run`` or repeated
    ``try_acquire_or_renew``), any thread may ``check()``."""

    def __init__(
        self,
        lease: LeaseClient,
        identity: str,
        settings: LeaseSettings | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        if not identity or "/" in identity:
            raise ValueError(f"identity {identity!r}: needs a non-empty name without '/' (the pod name)")
        self.lease = lease
        self.identity = identity
        self.settings = settings or LeaseSettings()
        self._clock = clock
        self._wall = wall_clock  # only for acquireTime/renewTime, which nobody compares
        self._lock = threading.Lock()
        self._seen: LeaseRecord | None = None  # the latest record read or written
        self._seen_at: float | None = None  # our clock when that record was first *received*
        self._leading_until: float | None = None  # send time of our last successful write + renew deadline
        self._token: FencingToken | None = None
        self.last_error: str | None = None

    # -- asking ------------------------------------------------------------------------------------
    def is_leader(self) -> bool:
        with self._lock:
            return self._leading_until is not None and self._clock() < self._leading_until

    def token(self) -> FencingToken | None:
        """The current term's token while leading, else None."""
        with self._lock:
            if self._leading_until is not None and self._clock() < self._leading_until:
                return self._token
            return None

    def check(self) -> FencingToken:
        """The token to write, or ``NotLeader``: call it immediately before every write."""
        token = self.token()
        if token is None:
            raise NotLeader(f"{self.identity} does not hold lease {getattr(self.lease, 'name', '')} now")
        return token

    def run_while_leading(self, fn: Callable[[FencingToken], T]) -> T | None:
        """``fn(token)`` if leading now, else None. ``fn`` must still ``check()`` before each write it
        makes: leadership can end while it runs."""
        token = self.token()
        return fn(token) if token is not None else None

    def holder(self) -> str | None:
        """The holder of the latest record seen ("" released, None: never read)."""
        with self._lock:
            return self._seen.holder if self._seen is not None else None

    def step_down(self, reason: str) -> None:
        """Stop leading now (a newer term was seen on an object we write)."""
        with self._lock:
            was = self._leading_until is not None
            self._leading_until = None
        if was:
            log.warning("lease %s: %s steps down: %s", getattr(self.lease, "name", ""), self.identity, reason)

    # -- one round (client-go's tryAcquireOrRenew) -------------------------------------------------
    def _spec(self, transitions: int, acquire_time: str | None) -> LeaseSpec:
        stamp = _micro_time(self._wall())
        return LeaseSpec(self.identity, self.settings.lease_duration_s, acquire_time or stamp, stamp, transitions)

    def _won(self, rec: LeaseRecord, sent: float) -> None:
        arrived = self._clock()
        with self._lock:
            self._seen, self._seen_at = rec, arrived
            self._leading_until = sent + self.settings.renew_deadline_s
            self._token = FencingToken(rec.transitions, self.identity)
        if arrived >= sent + self.settings.renew_deadline_s:
            log.warning("lease %s: renew answered %.1f s after it was sent: not leading", getattr(self.lease, "name", ""), arrived - sent)

    def _observe(self, rec: LeaseRecord, arrived: float) -> None:
        with self._lock:
            if self._seen is None or rec.resource_version != self._seen.resource_version:
                self._seen, self._seen_at = rec, arrived
            if rec.holder != self.identity:
                self._leading_until = None

    def try_acquire_or_renew(self) -> bool:
        """One round; returns ``is_leader()`` after it. Retryable failures end the round (leadership
        then lapses at the renew deadline); a permanent one (403) is raised."""
        timeout = self.settings.timeout_s
        try:
            with self._lock:
                fast = self._seen if (self._leading_until is not None and self._seen is not None) else None
            if fast is not None and fast.holder == self.identity and self.is_leader():
                # client-go's fast path: the leader renews on the record it wrote, without a read.
                sent = self._clock()
                try:
                    self._won(self.lease.update(self._spec(fast.transitions, fast.acquire_time), fast.resource_version, timeout), sent)
                    return self.is_leader()
                except LeaseConflict:
                    self.step_down("the lease changed under the leader")  # re-read below
            current = self.lease.get(timeout)
            arrived = self._clock()
            if current is None:
                sent = self._clock()
                self._won(self.lease.create(self._spec(0, None), timeout), sent)
                return self.is_leader()
            self._observe(current, arrived)
            ours = current.holder == self.identity
            if current.holder and not ours:
                with self._lock:
                    silent_s = arrived - (self._seen_at if self._seen_at is not None else arrived)
                wait_s = max(current.lease_duration_s, self.settings.lease_duration_s)
                if silent_s < wait_s:
                    return False
            transitions = current.transitions if ours else current.transitions + 1
            sent = self._clock()
            rec = self.lease.update(self._spec(transitions, current.acquire_time if ours else None), current.resource_version, timeout)
            self._won(rec, sent)
            if not ours:
                log.info(
                    "lease %s: %s took over from %r (term %d)", getattr(self.lease, "name", ""), self.identity, current.holder, transitions
                )
        except LeaseConflict as err:
            self.last_error = str(err)  # another replica wrote first: follow it next round
        except LeaseUnavailable as err:
            self.last_error = str(err)  # keep what we had; is_leader() lapses at the renew deadline
        return self.is_leader()

    def release(self) -> bool:
        """Give the Lease up (graceful shutdown, client-go's ReleaseOnCancel): stop leading first, then
        clear the holder so a follower takes over at its next round instead of after the lease duration.
        Call it only once the work the Lease guards has stopped."""
        with self._lock:
            seen = self._seen
            self._leading_until = None
        if seen is None or seen.holder != self.identity:
            return False
        stamp = _micro_time(self._wall())
        spec = LeaseSpec("", 1.0, stamp, stamp, seen.transitions)
        try:
            rec = self.lease.update(spec, seen.resource_version, self.settings.timeout_s)
        except (LeaseConflict, LeaseUnavailable) as err:
            self.last_error = str(err)
            return False
        with self._lock:
            self._seen, self._seen_at = rec, self._clock()
        return True

    # -- the loop ----------------------------------------------------------------------------------
    def run(
        self,
        stop: threading.Event,
        on_started_leading: Callable[[FencingToken], None] | None = None,
        on_stopped_leading: Callable[[], None] | None = None,
        release_on_stop: bool = True,
    ) -> None:
        """Rounds every ``retry_period_s`` (followers with client-go's 1.2 jitter) until ``stop``;
        the callbacks run in this thread on each change of leadership."""
        leading = False
        try:
            while not stop.is_set():
                now_leading = self.try_acquire_or_renew()
                if now_leading and not leading and on_started_leading is not None:
                    token = self.token()
                    if token is not None:
                        on_started_leading(token)
                if leading and not now_leading and on_stopped_leading is not None:
                    on_stopped_leading()
                leading = now_leading
                period = self.settings.retry_period_s
                stop.wait(period if leading else period * (1.0 + 0.2 * random.random()))
        finally:
            if leading and on_stopped_leading is not None:
                on_stopped_leading()
            if release_on_stop:
                self.release()


__all__ = [
    "Deposed",
    "FencingToken",
    "KubernetesLeaseClient",
    "Leadership",
    "LeaseClient",
    "LeaseConflict",
    "LeaseElector",
    "LeaseRecord",
    "LeaseSettings",
    "LeaseSpec",
    "LeaseUnavailable",
    "NotLeader",
]
