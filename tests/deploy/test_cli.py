"""`inferslice deploy render --tiers FILE --out DIR` and `inferslice deploy check DIR`."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from inferslice.cli import main

from .conftest import kubectl_or_skip, load_all


def test_render_follows_the_given_tiers_file(tmp_path: Path, tiers_text: str, capsys: pytest.CaptureFixture[str]) -> None:
    doc = yaml.safe_load(tiers_text)
    doc["tiers"][0]["client_cap_bps"] = 25e6
    tiers = tmp_path / "tiers.yaml"
    tiers.write_text(yaml.safe_dump(doc))
    out = tmp_path / "out"
    assert main(["deploy", "render", "--tiers", str(tiers), "--out", str(out)]) == 0
    first = doc["tiers"][0]["name"]
    objs = load_all((out / "base" / "tiers" / f"{first}.yaml").read_text())
    rs = next(o for o in objs if o["kind"] == "RayService")
    ann = rs["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["metadata"]["annotations"]
    assert ann["ovn.kubernetes.io/ingress_rate"] == "25"
    kubectl_or_skip()
    assert main(["deploy", "check", str(out)]) == 0
    assert capsys.readouterr().out.strip().endswith("ok")


def test_a_bad_tiers_file_names_the_field(tmp_path: Path, tiers_text: str, capsys: pytest.CaptureFixture[str]) -> None:
    doc = yaml.safe_load(tiers_text)
    doc["tiers"][1]["replicas_max"] = 0
    tiers = tmp_path / "tiers.yaml"
    tiers.write_text(yaml.safe_dump(doc))
    assert main(["deploy", "render", "--tiers", str(tiers), "--out", str(tmp_path / "out")]) == 1
    assert "tiers[1].replicas_max" in capsys.readouterr().err
