"""``inferslice load`` end to end against the in-test server (the CLI runs in a worker thread so
the server keeps serving on the test's loop)."""

from __future__ import annotations

import asyncio
import json
import os
import time
import urllib.request
from pathlib import Path

import pytest

from inferslice import metric_names as mn
from inferslice.cli import main
from inferslice.common.ports import free_port

from .conftest import ServerBehaviour


async def test_cli_saves_a_vllm_style_result_and_serves_client_metrics(sse_server: tuple[str, ServerBehaviour], tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    url, b = sse_server
    b.ttft_s, b.itl_s = 0.2, 0.0  # 3 rounds of 0.2 s: long enough to scrape mid-run
    port = free_port()
    out = tmp_path / "result.json"
    scraped: list[str] = []

    def scrape_while_running() -> None:
        # Poll until the first record shows up on /metrics; the server goes away when the run ends.
        for _ in range(300):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:
                    text = resp.read().decode()
            except OSError:
                text = ""
            if mn.CLIENT_TTFT in text:
                scraped.append(text)
                return
            time.sleep(0.01)

    argv = ["load", "--url", url, "--model", "tiny", "--slice", "standard", "--concurrency", "2", "--num-prompts", "6",
            "--goodput", "ttft:500", "--metric-percentiles", "50,99", "--save-result", str(out), "--otel-port", str(port)]
    rc, _ = await asyncio.gather(asyncio.to_thread(main, argv), asyncio.to_thread(scrape_while_running))
    assert rc == 0
    result = json.loads(out.read_text())
    assert result["completed"] == 6 and result["slice"] == "standard"
    assert result["request_goodput"] > 0 and "p50_ttft_ms" in result
    assert "Request goodput (req/s):" in capsys.readouterr().out
    assert scraped, "the client metrics were never served during the run"
    assert 'slice="standard"' in scraped[0] and mn.CLIENT_TTFT + "_bucket" in scraped[0]


def test_cli_unreachable_endpoint_exits_1_with_a_clear_message(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["load", "--url", f"http://127.0.0.1:{free_port()}", "--model", "m", "--concurrency", "2", "--num-prompts", "3",
               "--quiet"])
    err = capsys.readouterr().err
    assert rc == 1
    assert "all 3 requests" in err and "failed" in err and "ClientConnectorError" in err


def test_cli_tier_resolves_the_front_from_the_address_plan(capsys: pytest.CaptureFixture[str]) -> None:
    from inferslice.testbed.addressing import AddressPlan
    from inferslice.topology import load_topology

    topology = load_topology(None)
    tier = topology.tier_names[0]
    rc = main(["load", "--tier", tier, "--address-mode", "loopback", "--concurrency", "1", "--num-prompts", "1", "--quiet"])
    front = AddressPlan(topology, mode="loopback").front(tier).url
    err = capsys.readouterr().err
    assert rc == 1 and front in err  # nothing listens there in tests: the message names the resolved URL


def test_cli_unknown_netns_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["load", "--url", "http://127.0.0.1:9", "--model", "m", "--concurrency", "1", "--num-prompts", "1",
               "--netns", f"inferslice-test-missing-{os.getpid()}"])
    assert rc == 1
    assert "no network namespace" in capsys.readouterr().err


def test_cli_bad_arguments_are_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["load", "--url", "http://127.0.0.1:9", "--model", "m", "--concurrency", "1"]) == 1  # no bound
    assert "num_prompts" in capsys.readouterr().err
    assert main(["load", "--url", "http://127.0.0.1:9", "--model", "m", "--concurrency", "1", "--num-prompts", "1",
                 "--goodput", "ttft"]) == 1
