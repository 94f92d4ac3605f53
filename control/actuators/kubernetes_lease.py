"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go's leaderelection does it.

Two controller replicas run; only the lease holder acts. Each replica calls ``tick(now)`` every
``retry_period_s``:

- no Lease: create it holding it (a 409 means the other replica was faster);
- we hold it: renew ``renewTime`` with a PUT carrying the read ``resourceVersion`` (a 409 means
  someone else wrote it: we re-read next tick);
- someone else holds it: take it over only when the record has not changed for
  ``lease_duration_s`` of *our* clock (client-go's observed-time rule: never compare our clock with
  the holder's timestamps, so clock skew cannot cause two leaders).

``is_leader(now)`` is true only while our last successful renew is younger than
``renew_deadline_s`` (< ``lease_duration_s``): a leader that cannot reach the apiserver stops acting
before anyone else may take over, so two replicas never act at once (failover within the lease
duration plus one retry period).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


@dataclass(frozen=True)
class LeaseSettings:
    lease_duration_s: float = 15.0  # client-go's default: how long a silent holder keeps the lease
    renew_deadline_s: float = 10.0  # a leader stops acting when it could not renew for this long
    retry_period_s: float = 2.0  # how often each replica ticks; one diagnosis interval

    def __post_init__(self) -> None:
        if not 0 < self.retry_period_s < self.renew_deadline_s < self.lease_duration_s:
            raise ValueError("need 0 < retry_period_s < renew_deadline_s < lease_duration_s")


def _micro_time(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseElector:
    def __init__(
        self,
        api_client: Any,
        namespace: str,
        identity: str,
        name: str = "inferslice-controller",
        settings: LeaseSettings | None = None,
        wall_clock: Callable[[], float] | None = None,
    ) -> None:
        from kubernetes import client

        self._api = client.CoordinationV1Api(api_client)
        self.namespace, self.name, self.identity = namespace, name, identity
        self.settings = settings or LeaseSettings()
        self._wall = wall_clock  # only for the timestamps written into the Lease (informational)
        self._renewed_at: float | None = None  # our clock at our last successful acquire/renew
        self._observed: tuple[str, float] | None = None  # (resourceVersion, our clock when first seen)

    def is_leader(self, now: float) -> bool:
        return self._renewed_at is not None and now - self._renewed_at < self.settings.renew_deadline_s

    def _spec(self, now: float, transitions: int, acquire: str | None) -> dict[str, Any]:
        stamp = _micro_time(self._wall() if self._wall else now)
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.settings.lease_duration_s),
            "acquireTime": acquire or stamp,
            "renewTime": stamp,
            "leaseTransitions": transitions,
        }

    def tick(self, now: float) -> bool:
        """One election round at ``now`` (a monotonic clock); returns ``is_leader(now)`` after it."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            self._round(now)
        except ApiException as err:
            if err.status not in (404, 409) and (err.status or 0) < 500:
                raise
        except (HTTPError, OSError):
            pass  # unreachable: keep what we had; is_leader() expires it at the renew deadline
        return self.is_leader(now)

    def _round(self, now: float) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            lease = self._api.read_namespaced_lease(self.name, self.namespace, _preload_content=False)
        except ApiException as err:
            if err.status != 404:
                raise
            body: Any = {  # the client serialises plain dicts as they are
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(now, 0, None),
            }
            self._api.create_namespaced_lease(self.namespace, body)
            self._renewed_at = now
            return
        doc = json.loads(lease.data)  # type: ignore[attr-defined]  # _preload_content=False: the raw response
        spec, rv = doc.get("spec", {}), doc["metadata"]["resourceVersion"]
        if self._observed is None or self._observed[0] != rv:
            self._observed = (rv, now)
        holder = spec.get("holderIdentity") or ""
        if holder == self.identity:
            new_spec = self._spec(now, int(spec.get("leaseTransitions", 0)), spec.get("acquireTime"))
        else:
            duration = float(spec.get("leaseDurationSeconds") or self.settings.lease_duration_s)
            if holder and now - self._observed[1] < duration:
                self._renewed_at = None  # someone else leads
                return
            new_spec = self._spec(now, int(spec.get("leaseTransitions", 0)) + 1, None)
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {**doc["metadata"], "resourceVersion": rv},
            "spec": new_spec,
        }
        try:
            self._api.replace_namespaced_lease(self.name, self.namespace, body)
        except ApiException as err:
            if err.status == 409:
                self._renewed_at = None if holder != self.identity else self._renewed_at
                return
            raise
        self._renewed_at = now
