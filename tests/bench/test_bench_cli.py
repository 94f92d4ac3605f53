"""``inferslice bench``: smoke runs with tiny counts (niced: other work shares these cores)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

NICE = ["nice", "-n", "19"]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*NICE, sys.executable, "-m", "inferslice.cli", "bench", *args], capture_output=True, text=True, timeout=120)


def test_classifier_json_has_the_ratios_and_their_baseline() -> None:
    proc = _cli("classifier", "--n", "200", "--json", "-")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["benchmark"] == "classifier" and result["baseline"] == "parse_only"
    c = result["classifier"]
    assert set(c) == {
        "snapshots",
        "parse_per_s",
        "classify_only_per_s",
        "diagnose_line_per_s",
        "classify_over_parse_cost",
        "diagnose_line_over_parse_cost",
    }
    assert c["snapshots"] == 200
    assert c["diagnose_line_over_parse_cost"] > 0 and c["parse_per_s"] > 0
    assert "api" not in result
    assert "| parse only (baseline) |" in proc.stderr


def test_all_writes_json_and_a_summary(tmp_path: Path) -> None:
    out = tmp_path / "res"
    proc = _cli(
        "all", "--out", str(out), "--only", "classifier,engine", "--n", "100", "--tier", "free", "--concurrency", "2", "--duration-s", "30"
    )
    assert proc.returncode == 0, proc.stderr
    engine = json.loads((out / "engine.json").read_text())
    assert engine["baseline"] == "concurrency_1"
    levels = engine["tiers"]["free"]["levels"]
    assert [lv["concurrency"] for lv in levels] == [1, 2]  # the baseline is always run
    assert levels[0]["output_tok_s_over_c1"] == pytest.approx(1.0)
    assert json.loads((out / "classifier.json").read_text())["benchmark"] == "classifier"
    summary = (out / "summary.md").read_text()
    assert "## classifier" in summary and "## engine" in summary and "## exporter" not in summary


def test_bad_arguments_are_refused() -> None:
    assert _cli("exporter", "--sizes", "10,x").returncode == 2
    proc = _cli("all", "--out", "/tmp/unused-isb", "--only", "nope")
    assert proc.returncode == 1 and "nope" in proc.stderr


def test_corpus_generate_refuses_bad_flags_before_touching_the_testbed(tmp_path: Path) -> None:
    """``inferslice bench corpus generate --seeds A-B --out DIR``: a bad seed range or engine is a
    clear error naming the flag, and nothing is written (the testbed is never started)."""
    out, state = tmp_path / "corpus", str(tmp_path / "state")  # never the live generator's state directory
    bad = _cli("corpus", "generate", "--seeds", "12-x", "--out", str(out), "--state-dir", state)
    assert bad.returncode != 0 and "--seeds" in bad.stderr and not out.exists()
    bad = _cli("corpus", "generate", "--seeds", "1-2", "--out", str(out), "--state-dir", state, "--engine", "standard=sglang")
    assert bad.returncode != 0 and "--engine" in bad.stderr and "TIER=vllm" in bad.stderr and not out.exists()
    missing = _cli("corpus", "generate", "--seeds", "1-2")
    assert missing.returncode == 2 and "--out" in missing.stderr
