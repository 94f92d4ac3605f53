"""The repository is self-contained: no tracked file names a path of the machine it was written on.

A user who clones the project has neither the developers' checkout location nor the briefing folder
beside it; fixtures and CRDs are in the repository (tests/fixtures, deploy/crds) and read from there.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Built from pieces so that this file does not match itself.
PIECES = ["/" + "work" + "/", ".." + "/shared", "shared" + "/fixtures", "shared" + "/crds", "shared" + "/recipes"]
FORBIDDEN = re.compile("|".join(re.escape(p) for p in PIECES))
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".sh", ".txt", ".cfg", ".ini", ".json", ""}


def _tracked_files() -> list[Path]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the tracked file list is unknown")
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True).stdout
    return [ROOT / name for name in out.decode().split("\0") if name]


def test_no_tracked_text_file_names_a_development_machine_path() -> None:
    offenders = []
    for path in _tracked_files():
        if path.suffix not in TEXT_SUFFIXES or not path.is_file():
            continue
        text = path.read_text(errors="replace")
        offenders += [f"{path.relative_to(ROOT)}:{n}" for n, line in enumerate(text.splitlines(), 1) if FORBIDDEN.search(line)]
    assert offenders == []


def test_the_pattern_catches_what_it_is_meant_to() -> None:
    # Negative control: the check would notice the very lines this repository used to have.
    assert FORBIDDEN.search('FIXTURES = Path("/' + 'work/sha' + 'red/fixtures")')
    assert FORBIDDEN.search("Brief: ../" + "shared/BRIEF.md")
    assert not FORBIDDEN.search('FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"')


def test_the_fixtures_and_crds_the_tests_read_are_in_the_repository() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in _tracked_files()}
    for needed in (
        "tests/fixtures/README.md",
        "tests/fixtures/vllm-0.32.0-api/chat-stream.txt",
        "tests/fixtures/vllm-bench-serve-result.json",
        "tests/fixtures/vllm-0.32.0-cpu-metrics-after-bench.txt",
        "deploy/crds/README.md",
        "deploy/crds/ray.io_rayservices.yaml",
        "deploy/crds/monitoring.coreos.com_prometheusrules.yaml",
    ):
        assert needed in names
