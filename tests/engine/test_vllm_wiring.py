"""Choosing the engine per tier (--engine) and the real vLLM's command line, without running vLLM."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferslice.errors import ConfigError
from inferslice.testbed.engine import cpu_quota
from inferslice.testbed.engine.host import EngineHost
from inferslice.testbed.net.lifecycle import default_services
from inferslice.testbed.net.plan import net_plan
from inferslice.testbed.vllm.process import VllmSettings
from inferslice.testbed.vllm.services import engine_services, resolve_engines
from inferslice.topology import load_topology

TOP = load_topology()
TIERS = TOP.tier_names


def test_engine_choice_for_every_tier_or_one() -> None:
    assert resolve_engines([], TIERS) == dict.fromkeys(TIERS, "emulator")
    assert resolve_engines(["vllm"], TIERS) == dict.fromkeys(TIERS, "vllm")
    assert resolve_engines(["free=vllm"], TIERS) == {**dict.fromkeys(TIERS, "emulator"), "free": "vllm"}
    assert resolve_engines(["vllm", "premium=emulator"], TIERS)["premium"] == "emulator"
    for bad in (["gold=vllm"], ["free=sglang"], ["tgi"]):
        with pytest.raises(ConfigError):
            resolve_engines(bad, TIERS)


def test_vllm_command_and_environment() -> None:
    s = VllmSettings(python="venv/bin/python", model="venv/tiny-llama", served_model_name="tiny", max_num_seqs=2)
    cmd = s.command("10.203.0.11", 8000)
    assert cmd[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    assert Path(cmd[0]).is_absolute() and Path(cmd[cmd.index("--model") + 1]).is_absolute()  # the host may chdir
    assert cmd[cmd.index("--host") + 1] == "10.203.0.11" and cmd[cmd.index("--port") + 1] == "8000"
    assert cmd[cmd.index("--max-num-seqs") + 1] == "2" and cmd[cmd.index("--served-model-name") + 1] == "tiny"
    env = s.environment()
    assert env["VLLM_TARGET_DEVICE"] == "cpu" and env["HF_HUB_OFFLINE"] == "1"


def test_a_vllm_tier_needs_settings_and_known_names() -> None:
    with pytest.raises(ConfigError):
        EngineHost(TOP, "bristol", engines={"free": "vllm"})
    with pytest.raises(ConfigError):
        EngineHost(TOP, "bristol", engines={"gold": "vllm"}, vllm=VllmSettings("p", "m"))


def test_services_pass_the_vllm_tiers_to_every_engine_host_only(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    factory = engine_services(resolve_engines(["free=vllm"], TIERS), venv, max_num_seqs=3)
    plan = net_plan(TOP)
    specs = factory(TOP, "topology.yaml", tmp_path, plan)
    plain = default_services(TOP, "topology.yaml", tmp_path, plan)
    assert [s.name for s in specs] == [s.name for s in plain]
    for got, base in zip(specs, plain, strict=True):
        if base.kind == "host":
            extra = got.argv[len(base.argv) :]
            assert "--engine=free=vllm" in extra and extra[extra.index("--vllm-max-num-seqs") + 1] == "3"
            assert extra[extra.index("--vllm-python") + 1] == str(venv / "bin" / "python")
        else:
            assert got == base
    with pytest.raises(ConfigError):
        engine_services({"free": "vllm"}, tmp_path / "missing")


FAKE_VLLM = """# Stands in for `python -m vllm.entrypoints.openai.api_server ...`: serves /health on --host/--port.
import sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer
args = sys.argv
host, port = args[args.index("--host") + 1], int(args[args.index("--port") + 1])
time.sleep(0.3)  # a (short) cold start
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
    def log_message(self, *a):
        pass
HTTPServer((host, port), H).serve_forever()
"""


async def test_engine_host_runs_a_vllm_process_per_replica(tmp_path: Path) -> None:
    import asyncio
    import os
    import socket
    import sys

    # The fake "python" is a shell wrapper: a shebang cannot hold a space, and a clone's path may.
    script = tmp_path / "fake_vllm.py"
    script.write_text(FAKE_VLLM)
    fake = tmp_path / "python"
    fake.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{script}" "$@"\n')
    fake.chmod(0o755)
    ports = []
    for _ in range(2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    host = EngineHost(TOP, "bristol", engines={"free": "vllm"}, vllm=VllmSettings(str(fake), str(tmp_path)), log_dir=str(tmp_path))
    await host.start("127.0.0.1", ports[0])
    try:
        entry = await host.add_replica("free-0", "free", 0, 0.5, "127.0.0.1", ports[1])
        assert entry["engine"] == "vllm" and entry["state"] == "starting" and entry["pid"] != os.getpid()
        pid = entry["pid"]
        for _ in range(100):
            if host.entry("free-0")["state"] == "ready":
                break
            await asyncio.sleep(0.1)
        assert host.entry("free-0")["state"] == "ready"  # /health answered 200
        assert host.set_share("free-0", 1.0)["gpu_share"] == 1.0
        try:
            ctl = cpu_quota.find_controller() if os.geteuid() == 0 else None
        except cpu_quota.CgroupUnavailable:
            ctl = None
        if ctl is None:  # a real engine's share is a CPU quota: without a writable cgroup, a clear refusal
            with pytest.raises(ValueError, match="CPU quota"):
                host.set_share("free-0", 0.5)
        else:  # its process tree in a cgroup at half the machine's cores
            assert host.set_share("free-0", 0.5)["gpu_share"] == 0.5
            group = ctl.group(f"{host.pop.name}-free-0")
            assert str(pid) in (group / "cgroup.procs").read_text().split()
        await host.remove_replica("free-0")
        if ctl is not None:
            assert not ctl.group(f"{host.pop.name}-free-0").exists()  # released with the replica
        assert "free-0" not in host.replicas
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # the process is gone
    finally:
        await host.stop()
