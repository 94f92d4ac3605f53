"""The ``engine:`` section of the exporter config, validated into discoveries and settings.

Schema (every key optional)::

    engine:
      timeout_s: 0.6            # per target
      max_workers: 16
      forget_after_s: 600
      metrics_path: /metrics    # appended to base URLs (registry, static entries without a path)
      slo_ttft_s: {premium: 0.5}              # override the tier's slo_ttft_p99_s
      all_tiers: true           # static series for every tier (one exporter); false: only slices with targets here
      registry: true            # read replicas/fronts from the testbed registry (default: when one is configured)
      static:                   # replicas: url, slice required; pop, replica optional
        - {url: "http://127.0.0.1:18100", slice: premium, pop: bristol, replica: premium-0}
      fronts:                   # routers with ray_serve_* metrics; slice optional (else the application label)
        - {url: "http://127.0.0.1:18002/metrics", slice: premium}
      kubernetes: {namespace: serving, selector: "app=vllm", slice_label: inferslice.io/tier,
                   label_to_slice: {"app=vllm-premium": premium}, port: metrics, kind: endpointslices}
      ray_serve: {dashboard_url: "http://127.0.0.1:8265", metrics_port: 8080,
                  application_slices: {llm-premium: premium}, deployments: [LLMServer], node_pops: {10.0.0.1: bristol}}
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from inferslice.errors import ConfigError
from inferslice.exporters.engine.collector import EngineSettings
from inferslice.exporters.engine.scrape import HttpFetcher
from inferslice.exporters.engine.targets import (
    DEFAULT_METRICS_PATH,
    Discovery,
    FrontTarget,
    KubernetesDiscovery,
    RayServeDiscovery,
    RegistryDiscovery,
    StaticDiscovery,
    Target,
    kubectl_lister,
    metrics_url,
)

_KEYS = {"timeout_s", "grace_s", "max_workers", "forget_after_s", "metrics_path", "slo_ttft_s", "registry", "static", "fronts",
         "kubernetes", "ray_serve", "enabled", "all_tiers"}


@dataclass(frozen=True)
class EngineConfig:
    settings: EngineSettings
    discoveries: tuple[Discovery, ...]


def _flag(sec: Mapping[str, Any], key: str, field: str) -> bool:
    value = sec.get(key, True)
    if not isinstance(value, bool):
        raise ConfigError("expected true or false", f"{field}.{key}")
    return value


def _mapping(value: Any, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError("expected a mapping", field)
    return value


def _str_map(value: Any, field: str) -> dict[str, str]:
    return {str(k): str(v) for k, v in _mapping(value, field).items()}


def _number(section: Mapping[str, Any], key: str, default: float, field: str, positive: bool = True) -> float:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or (positive and value <= 0):
        raise ConfigError(f"expected a positive number, got {value!r}", f"{field}.{key}")
    return float(value)


def _entry(item: Any, field: str, required: tuple[str, ...], optional: tuple[str, ...]) -> dict[str, str]:
    if not isinstance(item, dict):
        raise ConfigError("expected a mapping", field)
    for key in item:
        if key not in required + optional:
            raise ConfigError(f"unknown key {key!r}", field)
    for key in required:
        if not item.get(key):
            raise ConfigError(f"missing {key!r}", field)
    return {str(k): str(v) for k, v in item.items() if v is not None}


def engine_config_from_dict(
    section: Mapping[str, Any] | None,
    registry_path: str | None,
    *,
    fetch_json: Callable[[str, float], Any] | None = None,
    k8s_lister: Callable[[], Any] | None = None,
    field: str = "engine",
) -> EngineConfig:
    """Validate the section; ``ConfigError`` names the offending field (``engine.static[1].url``)."""
    sec = dict(section or {})
    for key in sec:
        if key not in _KEYS:
            raise ConfigError(f"unknown key {key!r}", field)
    path = str(sec.get("metrics_path") or DEFAULT_METRICS_PATH)
    slo_items = _mapping(sec.get("slo_ttft_s"), f"{field}.slo_ttft_s").items()
    slo = {str(k): _number({"v": v}, "v", 0.0, f"{field}.slo_ttft_s.{k}") for k, v in slo_items}
    max_workers = _number(sec, "max_workers", 16, field)
    if max_workers != int(max_workers):
        raise ConfigError("expected an integer", f"{field}.max_workers")
    ray = _mapping(sec.get("ray_serve"), f"{field}.ray_serve")
    settings = EngineSettings(
        timeout_s=_number(sec, "timeout_s", EngineSettings.timeout_s, field),
        grace_s=_number(sec, "grace_s", EngineSettings.grace_s, field),
        max_workers=int(max_workers),
        forget_after_s=_number(sec, "forget_after_s", 600.0, field),
        slo_ttft_s=slo,
        application_slices=_str_map(ray.get("application_slices"), f"{field}.ray_serve.application_slices"),
        all_tiers=_flag(sec, "all_tiers", field),
    )
    discoveries: list[Discovery] = []

    static = sec.get("static") or []
    fronts = sec.get("fronts") or []
    if not isinstance(static, list):
        raise ConfigError("expected a list", f"{field}.static")
    if not isinstance(fronts, list):
        raise ConfigError("expected a list", f"{field}.fronts")
    replicas: list[Target] = []
    for i, item in enumerate(static):
        e = _entry(item, f"{field}.static[{i}]", ("url", "slice"), ("pop", "replica"))
        replicas.append(Target(url=metrics_url(e["url"], path), slice=e["slice"], pop=e.get("pop", ""),
                               replica=e.get("replica", e["url"])))
    front_targets: list[FrontTarget] = []
    for i, item in enumerate(fronts):
        e = _entry(item, f"{field}.fronts[{i}]", ("url",), ("slice", "pop"))
        front_targets.append(FrontTarget(url=metrics_url(e["url"], path), slice=e.get("slice"), pop=e.get("pop", "")))
    if replicas or front_targets:
        discoveries.append(StaticDiscovery(tuple(replicas), tuple(front_targets)))

    use_registry = sec.get("registry", registry_path is not None)
    if not isinstance(use_registry, bool):
        raise ConfigError("expected true or false", f"{field}.registry")
    if use_registry:
        if registry_path is None:
            raise ConfigError("registry: true but the config names no registry directory", f"{field}.registry")
        discoveries.append(RegistryDiscovery(registry_path, path))

    if "kubernetes" in sec:
        k = _mapping(sec["kubernetes"], f"{field}.kubernetes")
        for key in k:
            if key not in {"namespace", "selector", "slice_label", "label_to_slice", "port", "kind", "scheme"}:
                raise ConfigError(f"unknown key {key!r}", f"{field}.kubernetes")
        label_to_slice = _str_map(k.get("label_to_slice"), f"{field}.kubernetes.label_to_slice")
        slice_label = k.get("slice_label")
        if not label_to_slice and not slice_label:
            raise ConfigError("needs label_to_slice or slice_label", f"{field}.kubernetes")
        selector = str(k.get("selector") or ",".join(label_to_slice) or str(slice_label))
        port = k.get("port")
        if port is not None and not isinstance(port, int | str):
            raise ConfigError("expected a port number or name", f"{field}.kubernetes.port")
        lister = k8s_lister or kubectl_lister(str(k.get("namespace", "default")), selector, str(k.get("kind", "endpointslices")))
        discoveries.append(KubernetesDiscovery(lister, label_to_slice, str(slice_label) if slice_label else None, port,
                                               str(k.get("scheme", "http")), path))

    if "ray_serve" in sec:
        for key in ray:
            if key not in {"dashboard_url", "metrics_port", "application_slices", "deployments", "node_pops"}:
                raise ConfigError(f"unknown key {key!r}", f"{field}.ray_serve")
        port_value = ray.get("metrics_port")
        if not isinstance(port_value, int) or isinstance(port_value, bool):
            raise ConfigError("expected the Ray metrics export port (an integer)", f"{field}.ray_serve.metrics_port")
        dashboard = str(ray.get("dashboard_url") or "http://127.0.0.1:8265").rstrip("/")
        url = dashboard + "/api/serve/applications/"
        timeout_s = settings.timeout_s
        getter = fetch_json or HttpFetcher().get_json
        deployments = ray.get("deployments")
        if deployments is not None and not isinstance(deployments, list):
            raise ConfigError("expected a list", f"{field}.ray_serve.deployments")
        discoveries.append(
            RayServeDiscovery(
                fetch=lambda: getter(url, timeout_s),
                metrics_port=port_value,
                application_slices=settings.application_slices,
                deployments=tuple(str(d) for d in deployments) if deployments is not None else None,
                node_pops=_str_map(ray.get("node_pops"), f"{field}.ray_serve.node_pops"),
                path=path,
            )
        )
    if not discoveries:
        raise ConfigError("no targets: give static, registry, kubernetes or ray_serve", field)
    return EngineConfig(settings=settings, discoveries=tuple(discoveries))
