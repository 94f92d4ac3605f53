"""The API's OpenAPI document tells the truth: schemathesis, all checks, every phase (stateful
included), against a live ``inferslice api`` on 127.0.0.1 with a bearer token, finds nothing.

Marked ``schemathesis`` (about a minute): ``pytest -m schemathesis tests/api`` runs it alone;
CI runs the same script as its hook (``.ci/hooks/schemathesis.sh``).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("run_schemathesis.sh")
VENV_BIN = Path(sys.executable).parent

pytestmark = [
    pytest.mark.schemathesis,
    pytest.mark.skipif(
        shutil.which("schemathesis", path=str(VENV_BIN)) is None, reason="schemathesis is not installed (the test extra)"
    ),
]


def test_schemathesis_finds_no_failure() -> None:
    run = subprocess.run(
        [str(SCRIPT), "50", "--no-color"], env={"VENV_BIN": str(VENV_BIN), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
        timeout=540,
    )  # fmt: skip
    tail = (run.stdout + run.stderr)[-6000:]
    assert run.returncode == 0, tail  # schemathesis exits non-zero on any failure or error
    summary = tail.split("SUMMARY")[-1]
    assert "Stateful" in summary and "Fuzzing" in summary and "Coverage" in summary, tail  # every phase ran
