"""The ``inferslice diagnose`` line contract."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from inferslice.cli import main
from inferslice.topology import default_topology_path

QUEUE = {
    "slice": "free",
    "ttft_p99_s": 5,
    "tpot_p50_s": 0.026,
    "ref_tpot_p50_s": 0.025,
    "link_rx_bps": 9e5,
    "link_cap_bps": 1e7,
    "requests_waiting": 4,
}
NETWORK = {
    "slice": "edge-7",  # any name, not only a configured tier
    "ttft_p99_s": 2.5,
    "tpot_p99_s": 0.2,
    "ref_tpot_p50_s": 0.03,
    "link_rx_bps": 4.6e5,
    "link_cap_bps": 5e5,
    "output_tokens_per_s": 220,
    "ref_output_tokens_per_s": 370,
    "colour": "ignored",
}
TRAP = {"slice": "free", "ttft_p99_s": 0.12, "tpot_p50_s": 0.026, "ref_tpot_p50_s": 0.025, "link_rx_bps": 1.02e6, "link_cap_bps": 1e6}

LINES = [
    json.dumps({"id": "a", **QUEUE}),
    "",
    "{not json",
    json.dumps({"id": 7, **NETWORK}),
    json.dumps({"id": "bad", "slice": "free", "ttft_p99_s": "slow"}),
    "   ",
    json.dumps(TRAP),
    json.dumps([1, 2]),
]


def _run(
    argv: list[str], stdin: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, list[dict[str, Any]], str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    rc = main(argv)
    cap = capsys.readouterr()
    return rc, [json.loads(line) for line in cap.out.splitlines()], cap.err


def test_contract_order_ids_and_rejections(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(LINES) + "\n")
    rc, out, err = _run(["diagnose", "--input", str(path)], "", monkeypatch, capsys)
    assert rc == 1
    assert [o["id"] for o in out] == ["a", 7, None]  # order kept, ids copied as given, missing id -> null
    assert [o["regime"] for o in out] == ["queue_limited", "network_limited", "healthy"]
    assert out[1]["slice"] == "edge-7"
    for o in out:
        assert {"id", "slice", "regime", "secondary", "confidence", "evidence"} <= set(o)
        assert isinstance(o["secondary"], list) and 0.0 <= o["confidence"] <= 1.0
        assert all({"signal", "value", "crossed"} <= set(e) for e in o["evidence"])
    err_lines = err.strip().splitlines()
    assert len(err_lines) == 3
    assert err_lines[0].startswith("line 3:")
    assert err_lines[1].startswith("line 5:") and "ttft_p99_s" in err_lines[1]
    assert err_lines[2].startswith("line 8:")


def test_all_good_lines_exit_zero_and_default_slo(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _run(["diagnose", "--input", "-"], json.dumps({"slice": "x", "ttft_p99_s": 0.45}) + "\n", monkeypatch, capsys)
    assert rc == 0 and err == ""
    assert out[0]["slo"] == "at_risk"  # against the default 0.5 s SLO
    slo_ev = next(e for e in out[0]["evidence"] if e["signal"] == "ttft_p99_s")
    assert slo_ev["threshold"] == 0.5


def test_topology_supplies_tier_slos(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    doc = yaml.safe_load(default_topology_path().read_text())
    next(t for t in doc["tiers"] if t["name"] == "free")["slo_ttft_p99_s"] = 0.3
    tp = tmp_path / "topo.yaml"
    tp.write_text(yaml.safe_dump(doc))
    lines = json.dumps({"slice": "free", "ttft_p99_s": 0.45}) + "\n" + json.dumps({"slice": "other", "ttft_p99_s": 0.45}) + "\n"
    rc, out, _ = _run(["diagnose", "--topology", str(tp)], lines, monkeypatch, capsys)
    assert rc == 0
    assert [o["slo"] for o in out] == ["breached", "at_risk"]


def test_stdin_dash_in_a_real_process() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "inferslice.cli", "diagnose", "--input", "-"],
        input="\n".join([json.dumps({"id": 1, **QUEUE}), "oops", json.dumps({"id": 2, **TRAP})]) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    out = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [(o["id"], o["regime"]) for o in out] == [(1, "queue_limited"), (2, "healthy")]
    assert proc.stderr.startswith("line 2:")


def test_missing_input_file_is_an_error(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rc, out, err = _run(["diagnose", "--input", str(tmp_path / "nope.jsonl")], "", monkeypatch, capsys)
    assert rc == 1 and out == [] and "--input" in err
