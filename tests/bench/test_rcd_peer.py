"""RCD, RCAEval's fourth peer, runs for real: ``make rcd-venv`` (causal-learn 0.1.2.3 with RCAEval's own
patch, bench/rcaeval-rcd/) and bench/rcaeval_runner.py in it, on a case built here.

Skips without that environment (``make test`` does not build it: 300 MB for one peer); the CI hook
``peers`` builds it and runs this file, and CI fails a test that skipped everywhere.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RCD_PYTHON = Path(os.environ.get("INFERSLICE_RCD_PYTHON") or ROOT / ".venv-rcd" / "bin" / "python")
RUNNER = ROOT / "bench" / "rcaeval_runner.py"
pytestmark = pytest.mark.skipif(
    not RCD_PYTHON.exists(), reason=f"RCD's environment is not built ({RCD_PYTHON}): make rcd-venv (the CI hook 'peers' does)"
)


def _case(case_id: str, seed: int) -> dict[str, object]:
    """20 normal rows, then 20 in which the queue steps up and the TTFT follows it; two noise columns
    and a constant beside them. The F-node's child is the queue (and its symptom), never the noise."""
    rng = random.Random(seed)
    rows = []
    for i in range(40):
        waiting = rng.uniform(0.0, 1.0) + (12.0 if i >= 20 else 0.0)
        rows.append({
            "time": float(i),
            "queue_waiting": waiting,
            "latency_ttftp99": 0.2 + 0.1 * waiting + rng.uniform(0.0, 0.05),
            "gpu_share": rng.uniform(0.95, 1.0),
            "link_rx": rng.uniform(1e6, 2e6),
            "link_cap": 5e6,
        })  # fmt: skip
    return {"id": case_id, "inject_time": 19.5, "rows": rows}


def _run(tmp_path: Path, name: str, cases: list[dict[str, object]]) -> list[dict[str, object]]:
    inp, out = tmp_path / f"{name}.in.jsonl", tmp_path / f"{name}.out.jsonl"
    inp.write_text("".join(json.dumps(c) + "\n" for c in cases))
    subprocess.run([str(RCD_PYTHON), str(RUNNER), str(inp), str(out), "--methods", "rcd"], check=True, timeout=300)
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_rcd_runs_and_names_the_column_that_stepped(tmp_path: Path) -> None:
    cases = [_case(f"c{k}", k) for k in range(4)]
    got = _run(tmp_path, "a", cases)
    assert [r["id"] for r in got] == ["c0", "c1", "c2", "c3"] and {r["method"] for r in got} == {"rcd"}
    for r in got:
        assert r["error"] is None, r  # the patched local_skeleton_discovery is there (unpatched: AttributeError)
        ranks = r["ranks"]
        assert isinstance(ranks, list) and ranks, r
        assert set(ranks) <= {"queue_waiting", "latency_ttftp99"}, r  # never the noise, the constant or the time
    assert sum("queue_waiting" in r["ranks"] for r in got) >= 3  # type: ignore[operator]


def test_rcd_is_reproducible(tmp_path: Path) -> None:
    """RCD visits neighbours in a random order; the runner seeds it, so a rerun ranks the same."""
    cases = [_case(f"c{k}", 10 + k) for k in range(3)]
    assert _run(tmp_path, "a", cases) == _run(tmp_path, "b", cases)
