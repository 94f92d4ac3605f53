"""``--netns``: the client's sockets live in the named namespace (root only; own namespace, cleaned up)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator

import pytest

from .conftest import ServerBehaviour

pytestmark = pytest.mark.root

NS = f"isl-lg-{os.getpid()}"


@pytest.fixture
def netns() -> Iterator[str]:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("network namespaces need root and iproute2")
    subprocess.run(["ip", "netns", "add", NS], check=True)
    try:
        subprocess.run(["ip", "-n", NS, "link", "set", "lo", "up"], check=True)
        yield NS
    finally:
        subprocess.run(["ip", "netns", "del", NS], check=False)


async def test_client_runs_inside_the_namespace(netns: str, sse_server: tuple[str, ServerBehaviour]) -> None:
    url, b = sse_server  # listens on 127.0.0.1 of the *root* namespace
    cmd = [sys.executable, "-m", "inferslice.cli", "load", "--url", url, "--model", "tiny", "--concurrency", "1",
           "--num-prompts", "1", "--quiet", "--request-timeout-s", "3"]
    inside = await _run([*cmd, "--netns", netns])
    assert inside.returncode == 1 and "ClientConnectorError" in inside.stderr  # the namespace's own loopback has no server
    assert b.bodies == []
    outside = await _run(cmd)
    assert outside.returncode == 0, outside.stderr
    assert len(b.bodies) == 1


async def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    proc = await asyncio.create_subprocess_exec(*cmd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    return subprocess.CompletedProcess(cmd, proc.returncode or 0, out.decode(), err.decode())
