"""Child processes, managed in one place: absolute paths, a log file, readiness, stopped by PID.

Every path a child receives (its config files, data dirs, logs, its working directory) is resolved
to an absolute path here, before the child starts: a relative path would be read against the
child's working directory, which is not the caller's (the demo's Alertmanager once failed on a
relative ``--out`` exactly so). Callers therefore pass paths as ``Path`` objects, or as
``(flag, Path)`` for ``--flag=PATH``, never pre-formatted into a string.

Children die with their parent: a ``kill -9`` of the Platform would otherwise orphan its API,
controller, exporter, Prometheus and load generators (they run in their own sessions, so no terminal
hang-up reaches them). Each child asks the kernel for ``SIGTERM`` when its parent dies
(``prctl(PR_SET_PDEATHSIG)``, Linux). The kernel sends it when the *thread* that forked the child
exits, so children are spawned from threads that live as long as the parent (the CLIs' main thread).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import httpx

from inferslice.errors import PermanentError, RetryableError

READY_TIMEOUT_S = 30.0  # Prometheus is ready in ~0.2 s; Alertmanager in ~1 s; allow a loaded machine
# Debian packages the binaries under other names than the tools; for the "not installed" message.
DEBIAN_PACKAGE = {
    "prometheus": "prometheus",
    "promtool": "prometheus",
    "prometheus-alertmanager": "prometheus-alertmanager",
    "victoria-metrics": "victoria-metrics",
}

Arg = str | os.PathLike[str] | tuple[str, os.PathLike[str]]
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _prctl() -> Callable[..., int] | None:
    """libc's prctl, resolved in the parent: the child between fork and exec must not dlopen (locks)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl  # type: ignore[no-any-return]
    except (OSError, AttributeError):
        return None


_PRCTL = _prctl()


def parent_death_signal(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the kernel send ``sig`` to the child when its parent dies; None off Linux."""
    prctl = _PRCTL
    if prctl is None:
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the request was in place: nobody will signal
            os.kill(os.getpid(), sig)

    return preexec


def absolute(path: str | os.PathLike[str]) -> Path:
    """``path`` made absolute against the caller's working directory (symlinks kept, unlike resolve())."""
    return Path(os.path.abspath(os.fspath(path)))


def resolve_argv(argv: Sequence[Arg]) -> list[str]:
    """Strings stay as given; paths become absolute; ``(flag, path)`` becomes ``flag=/abs/path``."""
    out: list[str] = []
    for arg in argv:
        if isinstance(arg, tuple):
            flag, path = arg
            out.append(f"{flag}={absolute(path)}")
        elif isinstance(arg, str):
            out.append(arg)
        else:
            out.append(str(absolute(arg)))
    return out


def find_binary(name: str) -> str:
    path = shutil.which(name) or (f"/usr/bin/{name}" if os.access(f"/usr/bin/{name}", os.X_OK) else None)
    if path is None:
        raise PermanentError(f"{name} is not installed (Debian package {DEBIAN_PACKAGE.get(name, name)})")
    return path


def terminate(proc: subprocess.Popen[bytes] | None, timeout_s: float = 10.0) -> None:
    """Stop a child: SIGTERM, then SIGKILL if it has not exited within ``timeout_s``."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


class ManagedProcess:
    """A child process with a log file, optionally waited on until ``ready_url`` answers 200, stopped by PID."""

    def __init__(
        self,
        name: str,
        argv: Sequence[Arg],
        workdir: str | os.PathLike[str],
        ready_url: str | None = None,
        *,
        log_path: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        die_with_parent: bool = True,
    ) -> None:
        self.name = name
        self.workdir = absolute(workdir)
        self.argv = resolve_argv(argv)
        self.ready_url = ready_url
        self.log_path = absolute(log_path) if log_path is not None else self.workdir / f"{name}.log"
        self.env = dict(env) if env is not None else None
        self.die_with_parent = die_with_parent  # False: the child outlives its parent (a daemon the caller hands on)
        self.proc: subprocess.Popen[bytes] | None = None

    def spawn(self) -> None:
        """Start the child without waiting for readiness (a load generator, a one-shot tool)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.env} if self.env is not None else None
        with self.log_path.open("ab") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                env=env,
                start_new_session=True,
                preexec_fn=parent_death_signal() if self.die_with_parent else None,
            )

    def start(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Start the child and wait until ``ready_url`` answers 200 (when there is one)."""
        self.spawn()
        assert self.proc is not None
        if self.ready_url is None:
            return
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise PermanentError(f"{self.name} exited ({self.proc.returncode}): {self.log_tail()}")
            try:
                if httpx.get(self.ready_url, timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RetryableError(f"{self.name} not ready after {timeout_s:.0f} s: {self.log_tail()}")

    def log_tail(self, n: int = 1500) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def poll(self) -> int | None:
        """The exit status once exited, else None (also None before it started)."""
        return self.proc.poll() if self.proc else None

    def wait(self, timeout_s: float) -> int:
        """Block until the child exits; ``subprocess.TimeoutExpired`` after ``timeout_s``."""
        if self.proc is None:
            raise PermanentError(f"{self.name} was never started")
        return self.proc.wait(timeout=timeout_s)

    def stop(self, timeout_s: float = 10.0) -> None:
        terminate(self.proc, timeout_s)
