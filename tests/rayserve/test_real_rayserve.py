"""One real Ray Serve run (CI's real-Ray test): tests/rayserve/ray_check.py inside ``unshare --net``.

Needs root (a private network namespace: Ray binds non-loopback addresses) and the ``ray`` extra;
skipped with the reason otherwise. About 2 minutes on 2 cores (Ray start ~15 s, applications
running ~35 s, the checks, Ray stop).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .test_ray_fixtures import check_discovery, check_fronts, check_reading

CHECK = Path(__file__).resolve().parent / "ray_check.py"

pytestmark = [pytest.mark.root, pytest.mark.slow]


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root for a private network namespace (unshare --net)"
    if importlib.util.find_spec("ray") is None:
        return "ray is not installed: pip install -e '.[ray]'"
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is missing"
    return None


@pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))
def test_real_ray_serve_testbed(tmp_path: Path) -> None:
    out = tmp_path / "ray"
    proc = subprocess.run(["unshare", "--net", sys.executable, str(CHECK), str(out)], capture_output=True, text=True, timeout=480)
    assert proc.returncode == 0, proc.stderr[-4000:]
    facts = json.loads((out / "facts.json").read_text())
    assert facts["first_status"] == {"free": 200, "standard": 200, "premium": 200}
    assert all(facts["first_done"].values())  # streamed through Serve to [DONE]
    # The inferslice queue policy, run by Serve as a custom autoscaling policy, scaled premium out.
    assert facts["premium_target_before"] == 1 and facts["premium_target_after"] >= 2
    assert facts["premium_statuses"] == [200]
    # The actuator: applied once, then idempotent; Serve's autoscaler off for that tier only.
    assert (facts["apply_1"], facts["apply_2"]) == ("applied", "already_applied")
    assert facts["standard_running"] == 2
    assert facts["observe"]["standard"]["externally_controlled"] is True
    assert facts["observe"]["premium"]["externally_controlled"] is False
    assert facts["free_untouched"]  # the other applications kept their replicas
    # The exporter against what the real agent exported in this run.
    check_discovery(out)
    check_reading(out)
    check_fronts(out)
