"""The exporter config: which exporters run, against which topology and testbed registry.

A YAML mapping with optional keys ``topology`` (tiers file; default the packaged one),
``registry`` (testbed registry directory) and one section per exporter: ``network``, ``gpu``,
``engine``, ``requests``. Each present section is handed to
``inferslice.exporters.<section>.collectors_from_config(section, topology, registry_path)``; a
section may say ``enabled: false``. Relative paths are resolved against the config file's folder.

``requests`` is special: client-perceived latency is measured by the load generator and served
from its own process (OpenTelemetry Prometheus exporter, ``port``); the section only documents
that port unless ``inferslice.exporters.requests`` offers a ``collectors_from_config``.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from inferslice.common.registry import read_registry
from inferslice.errors import ConfigError, InferSliceError
from inferslice.exporters.base import GuardedCollector, Source
from inferslice.topology import Topology, load_topology

log = logging.getLogger(__name__)

SECTIONS = ("network", "gpu", "engine", "requests")
TOP_LEVEL_KEYS = frozenset({"topology", "registry", *SECTIONS})


@dataclass(frozen=True)
class ExporterConfig:
    topology_path: str | None = None  # None: the packaged tiers file
    registry_path: str | None = None  # the testbed registry directory, when there is a testbed
    sections: dict[str, dict[str, Any]] = field(default_factory=dict)  # enabled sections only, in SECTIONS order


def _resolve(path: Any, base_dir: Path | None, field_: str) -> str:
    if not isinstance(path, str) or not path:
        raise ConfigError("expected a path", field_)
    p = Path(path)
    if base_dir is not None and not p.is_absolute():
        p = base_dir / p
    return str(p)


def config_from_dict(data: Any, base_dir: Path | None = None) -> ExporterConfig:
    """Validate a parsed config; ``ConfigError`` names the offending key."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError("the exporter config is a mapping")
    for key in data:
        if key not in TOP_LEVEL_KEYS:
            raise ConfigError(f"unknown key (expected one of {', '.join(sorted(TOP_LEVEL_KEYS))})", str(key))
    topology = _resolve(data["topology"], base_dir, "topology") if data.get("topology") is not None else None
    registry = _resolve(data["registry"], base_dir, "registry") if data.get("registry") is not None else None
    sections: dict[str, dict[str, Any]] = {}
    for name in SECTIONS:
        if name not in data:
            continue
        section = data[name] if data[name] is not None else {}  # "engine:" alone means defaults
        if not isinstance(section, dict):
            raise ConfigError("expected a mapping", name)
        section = dict(section)
        enabled = section.pop("enabled", True)
        if not isinstance(enabled, bool):
            raise ConfigError("expected true or false", f"{name}.enabled")
        if name == "requests":
            _check_requests(section)
        if enabled:
            sections[name] = section
    return ExporterConfig(topology_path=topology, registry_path=registry, sections=sections)


def _check_requests(section: dict[str, Any]) -> None:
    for key in section:
        if key != "port":
            raise ConfigError(f"unknown key {key!r}", "requests")
    port = section.get("port")
    if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536):
        raise ConfigError("expected a TCP port", "requests.port")


def load_config(path: str | Path) -> ExporterConfig:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as err:
        raise ConfigError(f"cannot read exporter config {p}: {err.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"{p}: not valid YAML: {err}") from None
    return config_from_dict(data, p.parent)


def _package_exists(section: str) -> bool:
    try:
        return importlib.util.find_spec(f"inferslice.exporters.{section}") is not None
    except ImportError:
        return False


def default_config(registry_path: str) -> ExporterConfig:
    """The testbed's config: network links, GPU shares and engine replicas/fronts from the registry.

    Exporter packages not yet installed are left out (with a warning) instead of failing, since
    nothing in this config asked for them by name. The topology is the one the registry names."""
    topology: str | None = None
    try:
        reg_topology = read_registry(registry_path).topology_path
        if reg_topology and Path(reg_topology).is_file():
            topology = reg_topology
    except InferSliceError as err:
        log.warning("registry %s not readable yet (%s); using the default topology", registry_path, err)
    sections: dict[str, dict[str, Any]] = {}
    for name in ("network", "gpu", "engine"):
        if _package_exists(name):
            sections[name] = {}
        else:
            log.warning("inferslice.exporters.%s is not installed: its metrics are left out", name)
    return ExporterConfig(topology_path=topology, registry_path=registry_path, sections=sections)


def build_sources(cfg: ExporterConfig, topology: Topology | None = None) -> list[Source]:
    """Import each configured exporter package and ask it for its sources."""
    if topology is None:
        topology = load_topology(cfg.topology_path)
    sources: list[Source] = []
    for name, section in cfg.sections.items():
        module_name = f"inferslice.exporters.{name}"
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            if name == "requests" and err.name == module_name:
                continue  # served by the load generator; nothing to register here
            missing = "is not installed" if err.name == module_name else f"needs missing module {err.name!r}"
            raise ConfigError(f"exporter {module_name} {missing}", name) from None
        factory = getattr(module, "collectors_from_config", None)
        if factory is None:
            if name == "requests":
                continue
            raise ConfigError(f"{module_name} has no collectors_from_config", name)
        sources.extend(factory(section, topology, cfg.registry_path))
    return sources


def build_collector(cfg: ExporterConfig, topology: Topology | None = None) -> GuardedCollector:
    """Every enabled exporter's sources behind one ``GuardedCollector``."""
    return GuardedCollector(build_sources(cfg, topology))
