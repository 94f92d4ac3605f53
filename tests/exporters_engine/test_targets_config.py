"""Discovery parsers, the exporter config loader and the ``inferslice exporter`` command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from inferslice.cli import main
from inferslice.common.registry import FrontEntry, Registry, ReplicaEntry, write_registry
from inferslice.errors import ConfigError, ParseError
from inferslice.exporters import config as exporter_config
from inferslice.exporters.engine import (
    RegistryDiscovery,
    engine_config_from_dict,
    replicas_from_serve_applications,
    targets_from_endpoints,
    targets_from_serve_applications,
)

ENDPOINT_SLICES = {
    "kind": "List",
    "items": [
        {"kind": "EndpointSlice", "metadata": {"name": "vllm-premium-x", "labels": {"app": "vllm-premium"}},
         "ports": [{"name": "http", "port": 8000}, {"name": "metrics", "port": 8001}],
         "endpoints": [
             {"addresses": ["10.203.0.10"], "conditions": {"ready": True}, "targetRef": {"name": "premium-0"}, "zone": "bristol"},
             {"addresses": ["fd00::5"], "conditions": {"ready": False}, "targetRef": {"name": "premium-1"}, "nodeName": "n2"},
         ]},
        {"kind": "EndpointSlice", "metadata": {"name": "other", "labels": {"app": "redis"}}, "ports": [{"port": 1}],
         "endpoints": [{"addresses": ["10.0.0.1"]}]},
    ],
}
ENDPOINTS = {
    "kind": "Endpoints", "metadata": {"name": "vllm-free", "labels": {"inferslice.io/tier": "free"}},
    "subsets": [{"addresses": [{"ip": "10.201.0.10", "targetRef": {"name": "free-0"}, "nodeName": "bristol"}],
                 "notReadyAddresses": [{"ip": "10.201.0.11"}], "ports": [{"name": "metrics", "port": 8000}]}],
}


def test_targets_from_endpoint_slices():
    got = targets_from_endpoints(ENDPOINT_SLICES, {"app=vllm-premium": "premium"}, port="metrics")
    assert [(t.url, t.slice, t.pop, t.replica, t.state) for t in got] == [
        ("http://10.203.0.10:8001/metrics", "premium", "bristol", "premium-0", "ready"),
        ("http://[fd00::5]:8001/metrics", "premium", "n2", "premium-1", "starting"),
    ]


def test_targets_from_endpoints_by_slice_label():
    got = targets_from_endpoints(ENDPOINTS, {}, slice_label="inferslice.io/tier")
    assert [(t.url, t.slice, t.pop, t.replica, t.state) for t in got] == [
        ("http://10.201.0.10:8000/metrics", "free", "bristol", "free-0", "ready"),
        ("http://10.201.0.11:8000/metrics", "free", "", "10.201.0.11", "starting"),
    ]
    with pytest.raises(ParseError):
        targets_from_endpoints({"items": "nope"}, {})


SERVE = {
    "applications": {
        "premium": {"deployments": {
            "LLMRouter": {"replicas": [{"replica_id": "rt", "node_ip": "10.0.0.1", "state": "RUNNING"}]},
            "LLMServer": {"replicas": [
                {"replica_id": "a1", "node_ip": "10.0.0.1", "state": "RUNNING"},
                {"replica_id": "a2", "node_ip": "10.0.0.2", "state": "STARTING"},
            ]}}},
        "llm-free": {"deployments": {"LLMServer": {"replicas": [{"replica_id": "f1", "node_ip": "10.0.0.2", "state": "RUNNING"}]}}},
    }
}


def test_serve_applications_parser():
    reps = replicas_from_serve_applications(SERVE)
    assert {app: [r.replica_id for r in rs] for app, rs in reps.items()} == {"premium": ["rt", "a1", "a2"], "llm-free": ["f1"]}
    found = targets_from_serve_applications(SERVE, metrics_port=8080, application_slices={"llm-free": "free"},
                                            deployments=["LLMServer"], node_pops={"10.0.0.1": "bristol"})
    assert [(t.url, t.slice, t.pop, t.ray_replica_id, t.state) for t in found.replicas] == [
        ("http://10.0.0.1:8080/metrics", "premium", "bristol", "a1", "ready"),
        ("http://10.0.0.2:8080/metrics", "premium", "10.0.0.2", "a2", "starting"),
        ("http://10.0.0.2:8080/metrics", "free", "10.0.0.2", "f1", "ready"),
    ]
    assert [f.url for f in found.fronts] == ["http://10.0.0.1:8080/metrics", "http://10.0.0.2:8080/metrics"]
    with pytest.raises(ParseError):
        replicas_from_serve_applications("{not json")


def test_registry_discovery(tmp_path):
    reg = Registry(
        topology_path="", state_dir=str(tmp_path),
        replicas=(ReplicaEntry("premium-0", "premium", "bristol", 1, 0.5, 1.0, "http://127.0.0.1:18140"),
                  ReplicaEntry("premium-1", "premium", "london", 0, 0.5, 1.0, "http://127.0.0.1:18141", state="starting")),
        fronts=(FrontEntry("premium", "http://127.0.0.1:18002", "http://127.0.0.1:18202"),),
    )
    write_registry(reg, tmp_path)
    found = RegistryDiscovery(str(tmp_path)).discover()
    assert [(t.url, t.slice, t.pop, t.replica, t.state) for t in found.replicas] == [
        ("http://127.0.0.1:18140/metrics", "premium", "bristol", "premium-0", "ready"),
        ("http://127.0.0.1:18141/metrics", "premium", "london", "premium-1", "starting"),
    ]
    assert [(f.url, f.slice) for f in found.fronts] == [("http://127.0.0.1:18002/metrics", "premium")]


@pytest.mark.parametrize(
    ("section", "field"),
    [
        ({"static": [{"slice": "premium"}]}, "engine.static[0]"),
        ({"static": [{"url": "http://x", "slice": "p", "colour": "red"}]}, "engine.static[0]"),
        ({"timeout_s": -1, "static": [{"url": "http://x", "slice": "p"}]}, "engine.timeout_s"),
        ({"bogus": 1}, "engine"),
        ({}, "engine"),
        ({"ray_serve": {"dashboard_url": "http://x"}}, "engine.ray_serve.metrics_port"),
        ({"registry": True}, "engine.registry"),
    ],
)
def test_engine_config_errors_name_the_field(section, field):
    with pytest.raises(ConfigError) as info:
        engine_config_from_dict(section, None)
    assert info.value.field == field


def test_config_rejects_unknown_top_level_key():
    with pytest.raises(ConfigError) as info:
        exporter_config.config_from_dict({"engine": {}, "enigne": {}})
    assert info.value.field == "enigne"


def test_missing_exporter_package_names_the_section(monkeypatch):
    real = exporter_config.importlib.import_module

    def fake(name: str):
        if name == "inferslice.exporters.gpu":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return real(name)

    monkeypatch.setattr(exporter_config.importlib, "import_module", fake)
    cfg = exporter_config.config_from_dict({"gpu": {}, "requests": {"port": 9464}})
    with pytest.raises(ConfigError) as info:
        exporter_config.build_sources(cfg)
    assert info.value.field == "gpu"
    # Absent sections are never imported; 'enabled: false' switches one off.
    assert exporter_config.config_from_dict({"gpu": {"enabled": False}}).sections == {}


def _config(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "exporter.yaml"
    path.write_text(yaml.safe_dump({
        "engine": {"timeout_s": 1.0, "static": [{"url": url, "slice": "premium", "pop": "bristol", "replica": "premium-0"}]},
        "requests": {"port": 9464},
    }))
    return path


def test_once_in_process(kit, tmp_path, capsys):
    replica = kit.standin(kit.AFTER)
    assert main(["exporter", "--config", str(_config(tmp_path, replica.url)), "--once"]) == 0
    out = capsys.readouterr().out
    assert 'inferslice_source_up{source="engine"} 1.0' in out
    assert 'inferslice_slo_ttft_good_requests_total{slice="premium"} 41.0' in out


def test_once_as_a_command(kit, tmp_path):
    replica = kit.standin(kit.AFTER)
    done = subprocess.run(
        [sys.executable, "-m", "inferslice.cli", "exporter", "--config", str(_config(tmp_path, replica.url)), "--once"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "inferslice_source_up" in done.stdout
    assert "inferslice_engine_time_to_first_token_seconds_bucket" in done.stdout


def test_bad_config_exits_1(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("enigne: {}\n")
    assert main(["exporter", "--config", str(path), "--once"]) == 1
    assert "enigne" in capsys.readouterr().err


def test_serves_metrics_and_healthz_and_stops_on_sigterm(kit, tmp_path):
    import httpx

    replica = kit.standin(kit.AFTER)
    proc = subprocess.Popen(
        [sys.executable, "-m", "inferslice.cli", "exporter", "--config", str(_config(tmp_path, replica.url)), "--port", "0"],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith("inferslice exporter: http://127.0.0.1:"), line
        url = line.split(": ", 1)[1].strip()
        assert httpx.get(url.replace("/metrics", "/healthz"), timeout=5).text == "ok\n"
        body = httpx.get(url, timeout=5).text
        assert 'inferslice_target_up{pop="bristol",replica="premium-0",slice="premium"' in body
        assert httpx.get(url.replace("/metrics", "/nope"), timeout=5).status_code == 404
        proc.terminate()
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
