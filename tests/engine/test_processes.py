"""The engine host and the serving front as the lifecycle launches them (exact command lines)."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path

import aiohttp
import yaml

from .conftest import fast_topology


async def test_host_and_front_processes_serve_and_stop_on_sigterm(base_port: int, tmp_path: Path) -> None:
    topo_path = tmp_path / "topology.yaml"
    topo_path.write_text(yaml.safe_dump(fast_topology().model_dump(mode="json")))
    host = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "inferslice.testbed.engine.host",
            "--topology",
            str(topo_path),
            "--pop",
            "bristol",
            "--admin",
            f"127.0.0.1:{base_port + 200}",
            "--state-dir",
            str(tmp_path),
            "--seed",
            "3",
        ]
    )
    front = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "inferslice.testbed.serving.front",
            "--topology",
            str(topo_path),
            "--tier",
            "free",
            "--listen",
            f"127.0.0.1:{base_port}",
            "--state-dir",
            str(tmp_path),
            "--plan",
            "loopback",
            "--base-port",
            str(base_port),
        ]
    )
    try:
        async with aiohttp.ClientSession() as s:
            for _ in range(200):
                try:
                    async with s.get(f"http://127.0.0.1:{base_port}/admin/state") as r:
                        state = await r.json()
                    if state["replicas"] and state["replicas"][0]["state"] == "ready":
                        break
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("front never got a ready replica")
            body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
            async with s.post(f"http://127.0.0.1:{base_port}/v1/chat/completions", json=body) as r:
                assert r.status == 200
                assert (await r.json())["usage"]["completion_tokens"] == 4
            async with s.get(f"http://127.0.0.1:{base_port + 200}/admin/replicas") as r:
                [entry] = await r.json()
            assert entry["id"] == "free-0" and entry["url"] == f"http://127.0.0.1:{base_port + 100}"
            async with s.put(f"http://127.0.0.1:{base_port + 200}/admin/replicas/free-0/share", json={"gpu_share": 0.4}) as r:
                assert (await r.json())["gpu_share"] == 0.4
        frag = json.loads((tmp_path / "replicas-free.json").read_text())
        assert frag[0]["id"] == "free-0"
    finally:
        for p in (front, host):
            p.send_signal(signal.SIGTERM)
        for p in (front, host):
            try:
                assert p.wait(timeout=10) == 0
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                raise
