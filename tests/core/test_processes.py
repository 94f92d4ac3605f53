"""The one child-process launcher: every path a child receives is absolute, whatever the caller's cwd."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from inferslice.common.processes import ManagedProcess, resolve_argv
from inferslice.testbed.net import procs


def test_paths_become_absolute_strings_stay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    argv = resolve_argv(["tool", Path("cfg.yml"), ("--data", Path("data")), "--name=plain", "rel/but/a/string"])
    assert argv == ["tool", str(tmp_path / "cfg.yml"), f"--data={tmp_path / 'data'}", "--name=plain", "rel/but/a/string"]


def test_a_child_in_its_own_workdir_reads_what_the_caller_meant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("cfg.txt").write_text("hello\n")
    # The child runs in work/, so a relative cfg.txt would be work/cfg.txt (absent): the Alertmanager bug.
    child = ManagedProcess("cat", ["/bin/cat", Path("cfg.txt")], Path("work"))
    assert child.workdir == tmp_path / "work" and child.log_path == tmp_path / "work" / "cat.log"
    child.spawn()
    assert child.wait(10) == 0
    assert child.log_tail() == "hello\n"


def test_the_testbed_launcher_resolves_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    procs.spawn("probe", ["/bin/sh", "-c", 'echo "$0" > seen.txt', Path("rel/x")], Path("state"))
    deadline = time.monotonic() + 10
    # The shell creates the file before echo writes into it: wait for its line, not its existence.
    while not (Path("seen.txt").exists() and Path("seen.txt").read_text().endswith("\n")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert Path("seen.txt").read_text().strip() == str(tmp_path / "rel" / "x")
    assert (tmp_path / "state" / "pids" / "probe.pid").exists()
