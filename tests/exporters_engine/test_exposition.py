"""parse_exposition: the captured vLLM expositions, the format's corners, and fuzzing."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inferslice.common.exposition import parse_exposition
from inferslice.errors import ParseError


@pytest.mark.parametrize("which", ["IDLE", "AFTER"])
def test_fixture_families_types_and_labels(kit, which):
    text = getattr(kit, which)
    expo = parse_exposition(text)
    # Every '# TYPE' line is one family with that type, in order, and every sample line is kept.
    declared = [line.split()[2:4] for line in text.splitlines() if line.startswith("# TYPE ")]
    assert [[f.name, f.type] for f in expo.families] == declared
    sample_lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert sum(len(f.samples) for f in expo.families) == len(sample_lines)
    fam = expo.family("vllm:time_to_first_token_seconds")
    assert fam is not None and fam.type == "histogram"
    assert {s.name for s in fam.samples} == {
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:time_to_first_token_seconds_count",
        "vllm:time_to_first_token_seconds_sum",
    }
    buckets = [s for s in fam.samples if s.name.endswith("_bucket")]
    assert [s.label("le") for s in buckets][-1] == "+Inf"
    assert all(s.label_dict.keys() == {"engine", "le", "model_name"} for s in buckets)
    success = expo.family("vllm:request_success_total")
    assert success is not None and success.type == "counter"
    assert {s.label("finished_reason") for s in success.samples} == {"stop", "length", "abort", "error", "repetition"}
    assert expo.family("vllm:kv_cache_usage_perc").type == "gauge"  # type: ignore[union-attr]
    assert expo.family("vllm:num_preemptions_created").type == "gauge"  # type: ignore[union-attr]
    assert expo.family("http_request_size_bytes").type == "summary"  # type: ignore[union-attr]
    info = expo.samples("vllm:cache_config_info")[0]
    assert info.label("block_size") == "128" and info.label("kv_cache_dtype_skip_layers") == "[]"
    assert expo.family("vllm:num_requests_running").help == "Number of requests in model execution batches."  # type: ignore[union-attr]


def test_fixture_numbers(kit):
    expo = parse_exposition(kit.AFTER)
    (count,) = expo.samples("vllm:time_to_first_token_seconds_count")
    assert count.value == 41.0
    (s,) = expo.samples("vllm:time_to_first_token_seconds_sum")
    assert s.value == pytest.approx(0.8787593841552734)
    (created,) = expo.samples("vllm:prompt_tokens_created")
    assert created.value == pytest.approx(1.795995050396866e9)


def test_format_corners():
    text = "\n".join([
        "# a free comment",
        "# HELP m:x_total Help with \\\\ backslash and \\n newline",
        "# TYPE m:x counter",
        'm:x_total{a="q\\"uote",b="back\\\\slash",c="new\\nline",} 3 1700000000000',
        "m:x_created 1.7e9",
        "# TYPE h histogram",
        'h_bucket{le="0.5"} 1',
        'h_bucket{le="+Inf"} 2',
        "h_count 2",
        "h_sum NaN",
        "g +Inf",
        "g2 -Inf",
        "g3 { } 1.5e-3",
        "# EOF",
        "ignored after EOF {{{",
    ])
    expo = parse_exposition(text)
    fam = expo.family("m:x")
    assert fam is not None and fam.type == "counter"
    assert [s.name for s in fam.samples] == ["m:x_total", "m:x_created"]
    first = fam.samples[0]
    assert first.label_dict == {"a": 'q"uote', "b": "back\\slash", "c": "new\nline"}
    assert first.timestamp == 1700000000000
    help_fam = expo.family("m:x_total")
    assert help_fam is not None and help_fam.help == "Help with \\ backslash and \n newline"
    h = expo.family("h")
    assert h is not None and h.type == "histogram" and len(h.samples) == 4
    assert math.isnan(expo.samples("h_sum")[0].value)
    assert expo.samples("g")[0].value == math.inf and expo.samples("g2")[0].value == -math.inf
    assert expo.samples("g3")[0].value == pytest.approx(0.0015)
    assert expo.family("g") is not None and expo.family("g").type == "untyped"  # type: ignore[union-attr]


def test_keep_filter_skips_unwanted_lines():
    expo = parse_exposition("a 1\nb 2\n# TYPE c gauge\nc 3\n", keep=lambda n: n != "b")
    assert [f.name for f in expo.families] == ["a", "c"]


@pytest.mark.parametrize(
    "bad",
    [
        "<html><body>502 Bad Gateway</body></html>",
        'm{a="x} 1',
        'm{a=x} 1',
        "m{a=\"x\",a=\"y\"} 1",
        "m 1 2 3",
        "m one",
        "m",
        "m 1_000",
        "# TYPE m sandwich",
        "# TYPE m gauge\n# TYPE m gauge",
        "m 1\n# TYPE m gauge",
        "m{1a=\"x\"} 1",
        "m 1 NaN",
        '{"error": "not found"}',
    ],
)
def test_garbage_raises_parse_error(bad):
    with pytest.raises(ParseError):
        parse_exposition(bad)


def test_non_text_raises_parse_error():
    with pytest.raises(ParseError):
        parse_exposition(b"m 1")  # type: ignore[arg-type]


_pieces = st.sampled_from(
    ["m", "vllm:x", "_total", "{", "}", "=", '"', "\\", ",", " ", "\n", "#", " HELP ", " TYPE ", "counter", "histogram",
     "le", "+Inf", "NaN", "1", "0.5", "e", "-", ".", "\t", "\r", "\x00", "é", "EOF"]
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=200), st.lists(_pieces, max_size=60).map("".join)))
def test_fuzz_only_parse_error(text):
    try:
        expo = parse_exposition(text)
    except ParseError:
        return
    for fam in expo.families:
        for s in fam.samples:
            assert isinstance(s.value, float)


@settings(max_examples=150, deadline=None)
@given(st.integers(min_value=0, max_value=2000), st.text(max_size=20))
def test_fuzz_mutated_fixture(kit_text_cut, insert):
    # A truncated or spliced real exposition parses or raises ParseError, nothing else.
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "fixtures" / "vllm-0.32.0-cpu-metrics-idle.txt").read_text()[:20000]
    at = kit_text_cut * 10
    mutated = text[:at] + insert + text[at:]
    try:
        parse_exposition(mutated)
    except ParseError:
        pass
