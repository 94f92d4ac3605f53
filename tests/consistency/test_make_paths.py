"""The README's commands from a clone whose path holds a space, and through ``make -C PATH``.

make's path functions and unquoted variables split on spaces: ``VENV_BIN=/my clone/.venv/bin
.ci/lint.sh`` ran ``clone/.venv/bin`` as a command. Here the real Makefile and .ci/ run (not ``make
-n``: the shell's word splitting is the bug) from a copy under ``.../my clone/``, with a venv of stubs
that record how they were called, so the test takes a second and checks every path arrives whole.
The shell scripts themselves are checked by shellcheck (unquoted expansions and the rest).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STUBS = ("python", "pytest", "ruff", "mypy", "lint-imports", "inferslice", "kubectl")
STUB = """#!/bin/bash
{ printf '%s' "$(basename "$0")"; printf '\\t%s' "$@"; printf '\\n'; } >> "$STUB_LOG"
"""

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make (the README's commands)")


def _clone(tmp_path: Path) -> Path:
    clone = tmp_path / "my projects" / "my clone"
    clone.mkdir(parents=True)
    for name in ("Makefile", "pyproject.toml", "setup.py"):
        shutil.copy2(ROOT / name, clone / name)
    shutil.copytree(ROOT / ".ci", clone / ".ci")
    (clone / "inferslice").mkdir()
    (clone / "inferslice" / "__init__.py").write_text("")
    bin_dir = clone / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name in STUBS:
        (bin_dir / name).write_text(STUB)
        (bin_dir / name).chmod(0o755)
    (clone / ".venv" / ".installed").touch()  # newer than the copied pyproject.toml: no venv rebuild
    return clone


def _calls(log: Path) -> list[list[str]]:
    return [line.split("\t") for line in log.read_text().splitlines()] if log.exists() else []


def _make(args: list[str], cwd: Path, log: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STUB_LOG": str(log), "MAKEFLAGS": "", "MAKELEVEL": ""}
    env.pop("PYTEST_ADDOPTS", None)
    # -o apt: the Debian packages are the machine's business, not this test's
    return subprocess.run(["make", "-o", "apt", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def _assert_lint_and_tests_ran_in(clone: Path, calls: list[list[str]]) -> None:
    tools = [c[0] for c in calls]
    assert ["ruff", "check", str(clone)] in calls, calls
    assert any(c[0] == "mypy" and str(clone / "pyproject.toml") in c for c in calls), calls
    assert any(c[0] == "lint-imports" and str(clone / "pyproject.toml") in c for c in calls), calls
    pytest_calls = [c for c in calls if c[0] == "pytest"]
    assert len(pytest_calls) == 1 and tools.index("pytest") > tools.index("lint-imports"), calls
    args = pytest_calls[0]
    assert "-n" in args and "--durations=20" in args, args


def test_make_test_from_a_spaced_clone_and_through_make_c(tmp_path: Path) -> None:
    clone = _clone(tmp_path)
    log = tmp_path / "calls.log"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = _make(["-C", str(clone), "test"], elsewhere, log)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _assert_lint_and_tests_ran_in(clone, _calls(log))

    log.unlink()
    proc = _make(["test"], clone, log)  # `cd` into the clone, then the README's command
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _assert_lint_and_tests_ran_in(clone, _calls(log))


def test_make_demo_from_a_spaced_clone_passes_whole_paths(tmp_path: Path) -> None:
    clone = _clone(tmp_path)
    log = tmp_path / "calls.log"
    out = "demo out"  # OUT may hold a space too
    proc = _make(["-C", str(clone), "demo", f"OUT={out}", "DEMO_PHASE_S=30"], tmp_path, log)
    if os.geteuid() != 0:  # the demo refuses before building anything
        assert proc.returncode != 0 and "needs root" in proc.stderr
        return
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ["inferslice", "demo", "--out", out, "--phase-s", "30"] in _calls(log)


def test_a_venv_path_with_a_space_is_refused_clearly(tmp_path: Path) -> None:
    clone = _clone(tmp_path)
    proc = _make(["-C", str(clone), "lint", "VENV=my venv"], tmp_path, tmp_path / "calls.log")
    assert proc.returncode != 0 and "cannot hold spaces" in proc.stderr


def test_ci_clones_into_a_path_with_a_space() -> None:
    text = (ROOT / ".ci" / "run").read_text()
    clone_lines = [line for line in text.splitlines() if line.startswith("clone=")]
    assert len(clone_lines) == 1 and " " in clone_lines[0].split("=", 1)[1].strip('"'), clone_lines


SCRIPTS = sorted(
    p
    for p in [*ROOT.glob("*/**/*.sh"), *ROOT.glob(".ci/**/*.sh"), ROOT / ".ci" / "run"]
    if not any(part.startswith(".venv") or part in ("build", "node_modules") for part in p.relative_to(ROOT).parts)
)


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="needs shellcheck (make setup installs it)")
def test_shell_scripts_pass_shellcheck() -> None:
    assert ROOT / ".ci" / "run" in SCRIPTS and ROOT / ".ci" / "lint.sh" in SCRIPTS
    proc = subprocess.run(["shellcheck", "-S", "warning", "-x", *map(str, SCRIPTS)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
