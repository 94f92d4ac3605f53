from __future__ import annotations

import json
from pathlib import Path

import pytest

from inferslice.errors import InputError
from inferslice.records import RequestRecord
from inferslice.testbed.loadgen import Goodput, format_report, parse_goodput, summarize

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"  # captured from vLLM 0.32.0: see tests/fixtures/README.md
NOT_MEANINGFUL: set[str] = set()  # every key of the captured vLLM result is produced


def _rec(ttft: float, e2e: float, out: int, prompt: int = 10, start: float = 1000.0, ok: bool = True) -> RequestRecord:
    itl = tuple([(e2e - ttft) / (out - 1)] * (out - 1)) if ok and out > 1 else ()
    return RequestRecord(slice="free", start_s=start, success=ok, ttft_s=ttft if ok else None, e2e_s=e2e,
                         prompt_tokens=prompt, output_tokens=out if ok else 0, itl_s=itl, error=None if ok else "500: boom",
                         model="tiny")


def test_summary_keys_and_types_match_vllm_bench_save_result() -> None:
    fixture = json.loads((FIXTURES / "vllm-bench-serve-result.json").read_text())
    records = [_rec(0.1, 0.5, 5, start=1000.0 + i) for i in range(4)] + [_rec(0, 0.1, 0, start=2000.0, ok=False)]
    ours = summarize(records, 2.0, percentiles=(50, 99), meta={"max_concurrency": 4, "num_prompts": 5})
    for key, value in fixture.items():
        if key in NOT_MEANINGFUL:
            continue
        assert key in ours, key
        if value is None:
            continue
        expected = float if isinstance(value, float) else type(value)
        assert isinstance(ours[key], expected), (key, ours[key])
    assert ours["request_goodput"] is None
    assert ours["completed"] == 4 and ours["failed"] == 1
    assert ours["total_output_tokens"] == 20 and ours["total_input_tokens"] == 40
    assert ours["output_throughput"] == pytest.approx(10.0)
    assert ours["mean_ttft_ms"] == pytest.approx(100.0)
    assert ours["mean_tpot_ms"] == pytest.approx(100.0)
    assert ours["p99_e2el_ms"] == pytest.approx(500.0)
    assert ours["max_concurrent_requests"] == 1


def test_report_reproduces_vllm_stdout_from_a_vllm_result() -> None:
    fixture = json.loads((FIXTURES / "vllm-bench-serve-result.json").read_text())
    stdout = (FIXTURES / "vllm-bench-serve-stdout.txt").read_text().splitlines()
    start = stdout.index("============ Serving Benchmark Result ============")
    expected = stdout[start: start + len(format_report(fixture).splitlines())]
    assert format_report(fixture).splitlines() == expected
    assert expected[-1] == "=" * 50


def test_goodput_counts_requests_meeting_every_slo() -> None:
    records = [_rec(0.2, 1.0, 9), _rec(0.6, 1.0, 9), _rec(0.4, 3.0, 9), _rec(0.5, 0.5, 1)]
    ttft_only = summarize(records, 2.0, goodput=Goodput(ttft_ms=500))
    assert ttft_only["request_goodput"] == pytest.approx(3 / 2.0)  # 0.5 s meets a 500 ms SLO (inclusive)
    both = summarize(records, 2.0, goodput=parse_goodput(["ttft:500", "tpot:200"]))
    # tpot: 100 ms, 50 ms, 325 ms, 0 (one token): the third now fails
    assert both["request_goodput"] == pytest.approx(2 / 2.0)
    assert both["goodput_config"] == {"ttft": 500.0, "tpot": 200.0}


@pytest.mark.parametrize("bad", [["ttft"], ["foo:5"], ["ttft:abc"], ["ttft:-1"], []])
def test_bad_goodput_spec_is_an_input_error(bad: list[str]) -> None:
    with pytest.raises(InputError):
        parse_goodput(bad)


def test_empty_run_summarises_to_zeros() -> None:
    s = summarize([], 0.0)
    assert s["completed"] == 0 and s["mean_ttft_ms"] == 0.0 and s["request_throughput"] == 0.0
