"""Offline validation of rendered objects: custom resources against their CRDs (``schemas``), each
RayService's ``serveConfigV2`` against what Ray Serve accepts (``serve_config``), built-in kinds with
``kubernetes-validate --strict`` (for Kubernetes 1.32, the oldest the deploy guide supports, and 1.37), and the policy
checks (``policy``). ``check_tree`` renders every overlay of a tree with ``kubectl kustomize``.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from . import policy, schemas, serve_config

KUBERNETES_VERSION = "1.32.0"  # the oldest the deploy guide supports
KUBERNETES_VERSIONS = (KUBERNETES_VERSION, "1.37.0")  # and the newest kubernetes-validate knows: a field removed since fails here
OVERLAYS = ("testbed-like", "production")


def _builtin_problem(obj: dict[str, Any]) -> str | None:
    import kubernetes_validate  # the test extra; ``deploy check`` says so when it is missing

    for version in KUBERNETES_VERSIONS:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as err:
            return f"{obj['kind']}/{obj['metadata'].get('name')} ({version}): {err.message} at {'.'.join(str(p) for p in err.path)}"
        except kubernetes_validate.SchemaNotFoundError:
            return f"{obj['kind']}/{obj['metadata'].get('name')}: unknown built-in kind {obj.get('apiVersion')} {obj['kind']} in {version}"
    return None


def check_objects(objects: list[dict[str, Any]]) -> list[str]:
    problems: list[str] = []
    for obj in objects:
        where = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
        if schemas.is_custom(obj):
            try:
                schemas.validate_object(obj)
            except schemas.SchemaError as err:
                problems.append(f"{where}: {err}")
            if obj.get("kind") == "RayService":
                try:
                    serve_config.check_serve_config(obj["spec"]["serveConfigV2"])
                except serve_config.ServeConfigError as err:
                    problems.append(f"{where}: {err}")
        else:
            problem = _builtin_problem(obj)
            if problem:
                problems.append(problem)
    return problems + policy.violations(objects)


def kustomize(directory: Path) -> list[dict[str, Any]]:
    """``kubectl kustomize DIR`` -> its objects. Raises ``FileNotFoundError`` without kubectl."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        raise FileNotFoundError("kubectl is not on PATH")
    proc = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"kubectl kustomize {directory}: {proc.stderr.strip()}")
    return [d for d in yaml.safe_load_all(proc.stdout) if isinstance(d, dict)]


def check_tree(root: Path) -> list[str]:
    problems: list[str] = []
    for overlay in OVERLAYS:
        try:
            objects = kustomize(root / "overlays" / overlay)
        except (RuntimeError, FileNotFoundError) as err:
            problems.append(f"{overlay}: {err}")
            continue
        problems += [f"{overlay}: {p}" for p in check_objects(objects)]
    return problems
