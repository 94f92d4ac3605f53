"""Ray Serve actuator: a tier's replica count set through Serve's REST API, its autoscaler off.

Each tier is a Serve application of that name (testbed/rayserve/config.py) with one deployment.
Setting replicas replaces that deployment's ``autoscaling_config`` by ``num_replicas`` (Serve's
autoscaler no longer owns the count: the two are exclusive) and PUTs the whole config back
(``PUT /api/serve/applications/`` replaces every application; the others are sent back as deployed,
so they are left running untouched). Serve converges asynchronously; ``observe`` shows the replicas
STARTING during their cold start. Idempotent: a deployment already fixed at the value is not touched.

Errors: connection failures, timeouts and 5xx are retryable; a 4xx (Serve refused the config), an
unknown tier or a value outside the tier's bounds are permanent.
"""

from __future__ import annotations

import copy
import json
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from inferslice.actions import Action, ActionKind
from inferslice.common.placement import serve_app
from inferslice.control.actuators.base import (
    ApplyResult,
    ApplyStatus,
    PermanentActuatorError,
    RetryableActuatorError,
    TierObservation,
    require_kind,
)

REST_TIMEOUT_S = 10.0  # Serve's controller answers in well under a second when healthy
# Keys of ServeInstanceDetails that belong in the declarative config sent back.
_CONFIG_KEYS = ("proxy_location", "http_options", "grpc_options", "target_capacity")
_HTTP_KEYS = ("host", "port", "root_path", "request_timeout_s", "keep_alive_timeout_s")


def _http(url: str, method: str = "GET", body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=REST_TIMEOUT_S) as r:
            raw = r.read()
    except urllib.error.HTTPError as err:
        detail = err.read().decode(errors="replace")[-500:]
        if 400 <= err.code < 500:
            raise PermanentActuatorError(f"rayserve: {method} {url}: {err.code}: {detail}") from None
        raise RetryableActuatorError(f"rayserve: {method} {url}: {err.code}: {detail}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as err:
        raise RetryableActuatorError(f"rayserve: {method} {url}: {err}") from None
    if not raw:
        return {}
    obj = json.loads(raw)
    return obj if isinstance(obj, dict) else {}


def config_from_details(details: Mapping[str, Any]) -> dict[str, Any]:
    """The declarative config (``ServeDeploySchema``) of a running instance, from its GET answer."""
    out: dict[str, Any] = {}
    for k in _CONFIG_KEYS:
        if details.get(k) is not None:
            out[k] = copy.deepcopy(details[k])
    if isinstance(out.get("http_options"), dict):
        out["http_options"] = {k: v for k, v in out["http_options"].items() if k in _HTTP_KEYS and v is not None}
    out.pop("grpc_options", None)  # gRPC is unused; Serve's defaults stand
    apps = []
    for app in (details.get("applications") or {}).values():
        cfg = app.get("deployed_app_config")
        if not isinstance(cfg, dict):
            raise PermanentActuatorError(f"rayserve: application {app.get('name')!r} was not deployed declaratively")
        apps.append(copy.deepcopy(cfg))
    out["applications"] = apps
    return out


def with_fixed_replicas(config: dict[str, Any], app: str, replicas: int) -> tuple[dict[str, Any], bool]:
    """(config with ``app``'s deployment fixed at ``replicas``, whether anything changed)."""
    new = copy.deepcopy(config)
    for a in new["applications"]:
        if a.get("name") != app:
            continue
        deps = a.setdefault("deployments", [])
        if not deps:
            raise PermanentActuatorError(f"rayserve: application {app!r} declares no deployment options")
        dep = deps[0]
        changed = dep.get("num_replicas") != replicas or "autoscaling_config" in dep
        dep.pop("autoscaling_config", None)
        dep["num_replicas"] = replicas
        return new, changed
    raise PermanentActuatorError(f"rayserve: no application {app!r}")


def observation_of(app: Mapping[str, Any]) -> TierObservation:
    """The tier's observation from its application in ``ServeInstanceDetails`` (the shared parser's reading)."""
    parsed = serve_app(str(app.get("name")), app)
    return TierObservation(
        tier=parsed.name, replicas_target=parsed.target_replicas or 0, replicas=parsed.replicas, externally_controlled=parsed.fixed
    )


class RayServeActuator:
    """``RayServeActuator("http://127.0.0.1:8265", bounds={"premium": (1, 6)})``."""

    name = "rayserve"
    kinds = frozenset({ActionKind.SET_REPLICAS})

    def __init__(
        self,
        dashboard_url: str,
        bounds: Mapping[str, tuple[int, int]] | None = None,
        http: Callable[[str, str, dict[str, Any] | None], dict[str, Any]] = _http,
    ) -> None:
        self.url = dashboard_url.rstrip("/") + "/api/serve/applications/"
        self.bounds = dict(bounds or {})
        self._http = http

    def _details(self) -> dict[str, Any]:
        return self._http(self.url, "GET", None)

    def observe(self) -> Mapping[str, TierObservation]:
        apps = self._details().get("applications") or {}
        return {name: observation_of(app) for name, app in apps.items()}

    def apply(self, action: Action) -> ApplyResult:
        require_kind(self, action)
        value = action.value
        if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
            raise PermanentActuatorError(f"rayserve: replicas must be an integer, got {value!r}")
        n = int(value)
        lo, hi = self.bounds.get(action.slice, (0, 1 << 30))
        if not lo <= n <= hi:
            raise PermanentActuatorError(f"rayserve: {action.slice} replicas {n} outside [{lo}, {hi}]")
        details = self._details()
        if action.slice not in (details.get("applications") or {}):
            raise PermanentActuatorError(f"rayserve: no application {action.slice!r}")
        config, changed = with_fixed_replicas(config_from_details(details), action.slice, n)
        if not changed:
            return ApplyResult(
                action.id,
                ApplyStatus.ALREADY_APPLIED,
                f"{action.slice} already fixed at {n}",
                observation_of(details["applications"][action.slice]),
            )
        self._http(self.url, "PUT", config)
        return ApplyResult(action.id, ApplyStatus.APPLIED, f"{action.slice}: num_replicas {n}, Serve autoscaler off")
