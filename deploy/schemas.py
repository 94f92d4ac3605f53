"""Validate custom-resource objects against their CRDs' OpenAPI schemas, offline, with ``jsonschema``.

Third-party CRDs (KubeRay, Kube-OVN, Prometheus Operator) are the upstream files bundled in
``inferslice.deploy.crds`` (see its README for where each was captured); ours are generated
(``custom_resources.crds()``). ``validate_object`` raises ``SchemaError`` naming the first bad
field path, as the apiserver's 422 would.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from inferslice.errors import PermanentError

from . import custom_resources
from .crds import crd_dir
from .openapi import validation_schema

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class SchemaError(PermanentError):
    """An object does not match its kind's schema (permanent: the same object fails again)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field


@dataclass(frozen=True)
class Kind:
    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    schema: dict[str, Any]  # JSON Schema for jsonschema (converted from openAPIV3Schema)
    has_status: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


def _kinds_of(crd: dict[str, Any]) -> Iterable[Kind]:
    spec = crd["spec"]
    for version in spec["versions"]:
        if not version.get("served", True):
            continue
        yield Kind(
            group=spec["group"],
            version=version["name"],
            kind=spec["names"]["kind"],
            plural=spec["names"]["plural"],
            namespaced=spec.get("scope", "Namespaced") == "Namespaced",
            schema=validation_schema(version["schema"]["openAPIV3Schema"]),
            has_status="status" in version.get("subresources", {}),
        )


def load_crds(directory: Path | None = None) -> list[dict[str, Any]]:
    directory = directory or crd_dir()
    docs: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*.yaml")):
        with path.open() as fh:
            docs.extend(d for d in yaml.load_all(fh, Loader=_Loader) if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition")
    return docs


@functools.cache
def registry() -> dict[tuple[str, str], Kind]:
    """(apiVersion, kind) -> Kind for every served version of every known CRD."""
    out: dict[tuple[str, str], Kind] = {}
    for crd in [*load_crds(), *custom_resources.crds()]:
        for kind in _kinds_of(crd):
            out[(kind.api_version, kind.kind)] = kind
    return out


def by_plural(group: str, version: str, plural: str) -> Kind | None:
    for kind in registry().values():
        if (kind.group, kind.version, kind.plural) == (group, version, plural):
            return kind
    return None


def _path(err: jsonschema.ValidationError) -> str:
    out = ""
    for part in err.absolute_path:
        out += f"[{part}]" if isinstance(part, int) else ("." if out else "") + str(part)
    return out or "<root>"


@functools.cache
def _validator(key: tuple[str, str]) -> jsonschema.Draft4Validator:
    return jsonschema.Draft4Validator(registry()[key].schema)


def validate_object(obj: dict[str, Any]) -> Kind:
    """Validate a custom-resource object; return its Kind. Raises ``SchemaError``."""
    key = (obj.get("apiVersion", ""), obj.get("kind", ""))
    kind = registry().get(key)
    if kind is None:
        raise SchemaError(f"no CRD known for {key[0]} {key[1]}", "kind")
    validator = _validator(key)
    errors = sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        raise SchemaError(first.message, _path(first))
    return kind


def is_custom(obj: dict[str, Any]) -> bool:
    return (obj.get("apiVersion", ""), obj.get("kind", "")) in registry()
