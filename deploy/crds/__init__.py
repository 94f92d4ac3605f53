"""The CustomResourceDefinitions that deploy objects are validated against offline (package data).

Where each file was captured is in ``README.md`` beside them. ``crd_path(kind)`` finds the file that
defines a kind; the Kube-OVN file holds many CRDs in one multi-document YAML.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from inferslice.errors import ConfigError

_KUBE_OVN = "kube-ovn-crd.yaml"
# kind -> file; the Kube-OVN kinds are the ones the platform writes or reads (Subnet for a tier's subnet).
FILES: dict[str, str] = {
    "RayService": "ray.io_rayservices.yaml",
    "RayCluster": "ray.io_rayclusters.yaml",
    "PrometheusRule": "monitoring.coreos.com_prometheusrules.yaml",
    "ServiceMonitor": "monitoring.coreos.com_servicemonitors.yaml",
    "PodMonitor": "monitoring.coreos.com_podmonitors.yaml",
    "Prometheus": "monitoring.coreos.com_prometheuses.yaml",
    "Subnet": _KUBE_OVN,
    "Vpc": _KUBE_OVN,
    "IP": _KUBE_OVN,
    "IPPool": _KUBE_OVN,
    "QoSPolicy": _KUBE_OVN,
    "ProviderNetwork": _KUBE_OVN,
    "Vlan": _KUBE_OVN,
}


def crd_dir() -> Path:
    """The installed folder holding the CRD files (a real directory: the package is installed from files)."""
    return Path(str(resources.files(__name__)))


def crd_path(kind: str) -> Path:
    """The file defining ``kind``; ``ConfigError`` for a kind none of the bundled CRDs defines."""
    try:
        name = FILES[kind]
    except KeyError:
        raise ConfigError(f"no bundled CRD defines kind {kind!r} (known: {', '.join(sorted(FILES))})") from None
    return crd_dir() / name
