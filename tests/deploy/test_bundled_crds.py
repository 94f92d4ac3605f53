"""The bundled CRDs (deploy/crds, package data): every kind resolves to a file that defines it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from inferslice.deploy.crds import FILES, crd_dir, crd_path
from inferslice.errors import ConfigError

# The kind named in the file's `spec.names.kind` lines, read without YAML (the Ray CRDs are ~1 MB).
KIND_LINE = re.compile(r"^    kind: (\w+)$", re.MULTILINE)


@pytest.mark.parametrize("kind", sorted(FILES))
def test_each_kind_resolves_to_a_bundled_file_that_defines_it(kind: str) -> None:
    path = crd_path(kind)
    assert path.parent == crd_dir() and path.is_file()
    assert kind in KIND_LINE.findall(path.read_text())


def test_every_bundled_file_is_reachable_and_has_its_provenance_noted() -> None:
    on_disk = {p.name for p in crd_dir().glob("*.yaml")}
    assert on_disk == set(FILES.values())
    readme = (Path(__file__).resolve().parents[2] / "deploy" / "crds" / "README.md").read_text()
    for name in on_disk:
        assert f"`{name}`" in readme  # a row saying where it was captured


def test_an_unknown_kind_is_a_config_error_naming_it() -> None:
    with pytest.raises(ConfigError, match="Deployment"):
        crd_path("Deployment")
