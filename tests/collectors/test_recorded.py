"""The recorded snapshot: rules generated from the field table, read back in three queries.

1. Against a real Prometheus that scrapes a live two-slice world and evaluates the generated rule
   group: at the instant the group last evaluated, the recorded round (three queries) gives every
   field the raw round (one query per field) gives at that instant.
2. Across PoPs, pure: parts that add up are summed, quantiles keep the highest PoP's, NaN parts
   (no observations at a PoP) say nothing, a gauge's ``at_most`` clamp and a field's scale apply after the
   join, and ``FirstOf`` falls through to its second option only where the first is missing.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import httpx
import pytest
import yaml

from inferslice.collectors import PrometheusSettings, PrometheusSource, SliceConfig
from inferslice.collectors import recorded as rec
from inferslice.collectors.fields import FieldSettings, field_specs

from .conftest import ExpositionServer, render_text, require_prometheus, running_prometheus, world

SLICES = (SliceConfig("free"), SliceConfig("premium"))
WINDOW_S, INTERVAL_S = 4.0, 1.0


def test_a_recorded_round_gives_the_raw_rounds_fields(tmp_path: Path) -> None:
    require_prometheus()
    start = time.time()
    rules = tmp_path / "snapshot.rules.yml"
    rules.write_text(yaml.safe_dump({"groups": [rec.snapshot_rule_group(WINDOW_S, INTERVAL_S)]}, sort_keys=False))
    with ExpositionServer() as srv:
        for target in ("engine", "serve", "network", "gpu"):
            srv.dynamic[f"/{target}"] = lambda target=target: _ahead(target, start)  # type: ignore[misc]
        jobs = "".join(
            f"  - job_name: {t}\n    metrics_path: /{t}\n    static_configs: [{{targets: ['127.0.0.1:{srv.port}']}}]\n"
            for t in ("engine", "serve", "network", "gpu")
        )
        config = f"global: {{scrape_interval: 1s, scrape_timeout: 900ms}}\nrule_files: ['{rules}']\nscrape_configs:\n{jobs}"
        with running_prometheus(tmp_path, config) as url:
            raw = PrometheusSource(SLICES, PrometheusSettings(base_url=url))
            recorded = PrometheusSource(SLICES, PrometheusSettings(base_url=url, recorded=True))
            try:
                family = rec.family_name("sum", WINDOW_S)
                after, tries = start + 5 + WINDOW_S + 1, 0
                mismatches: list[object] = ["never compared"]
                deadline = time.time() + 40
                # Samples are stamped ahead of their scrape (``_ahead``) and a round is read at an
                # evaluation the group has finished (``_next_evaluation``). Compare at up to three
                # evaluations all the same; a real disagreement shows at every one.
                while mismatches and tries < 3:
                    at = _next_evaluation(url, family, after, deadline)
                    by_raw = {s.slice: s.to_dict(drop_none=False) for s in raw.snapshots(at, WINDOW_S)}
                    by_rec = {s.slice: s.to_dict(drop_none=False) for s in recorded.snapshots(at, WINDOW_S)}
                    tries, after, mismatches = tries + 1, at, _mismatches(by_raw, by_rec)
                assert not mismatches, mismatches
                assert recorded._queries == 3 * tries  # one per family, whatever the slice count
                assert recorded.health()["recorded_series"] > 0
                # The round read Prometheus's own answers with the scan, not the full decode's fallback.
                real = httpx.get(f"{url}/api/v1/query", params={"query": family, "time": f"{at:.3f}"}).content
                scanned = rec.scan_vector(real)
                assert scanned, real[:200]
                decoded = [(m["metric"]["slice"], m["metric"]["term"]) for m in httpx.Response(200, content=real).json()["data"]["result"]
                           if m["metric"].get("slice")]  # fmt: skip
                assert [(s, t) for s, t, _ in scanned] == decoded
            finally:
                raw.close()
                recorded.close()


# A scrape in flight when the group evaluates would land a sample stamped (at its scrape's start)
# before the evaluation, which the group did not see but the raw query at that instant does: the two
# rounds then differ by one scrape. Scrape and evaluation share a 1 s period and keep their phase, so
# under load (a slow scrape) that happened at every evaluation of a run (CI, stop 38). A sample
# stamped one scrape timeout ahead has landed before any evaluation at or after its stamp begins.
STAMP_AHEAD_S = 1.0


def _ahead(target: str, start: float) -> str:
    """The world at one scrape timeout ahead of now, stamped then."""
    stamp = time.time() + STAMP_AHEAD_S
    return render_text(world((stamp - start) / 10)[target], stamp_s=stamp)


def _next_evaluation(url: str, family: str, after: float, deadline: float) -> float:
    """An evaluation instant of the snapshot group later than ``after`` whose every rule has been written.

    The group writes its rules one by one, so a sample of one family at an instant does not say the
    others are written: a round read then would mix two evaluations (under load, CI of stop 38). A
    group's evaluations run one after another, so the one before the newest seen is complete."""
    query = f"timestamp({family}{{term=~'rate:inferslice_engine_gen.*'}})"

    def stamp(at: float | None) -> float | None:
        params = {"query": query} if at is None else {"query": query, "time": f"{at:.3f}"}
        result = httpx.get(f"{url}/api/v1/query", params=params).json()["data"]["result"]
        return float(result[0]["value"][1]) if result else None

    while True:
        newest = stamp(None)
        if newest is not None and newest > after:
            before = stamp(newest - 0.001)
            if before is not None and before > after:
                return before
        assert time.time() < deadline, "the snapshot group never recorded a fresh rate"
        time.sleep(0.2)


def _mismatches(by_raw: dict[str, dict[str, object]], by_rec: dict[str, dict[str, object]]) -> list[object]:
    """Where the recorded round differs from the raw one (after checking the world filled most fields)."""
    out: list[object] = []
    for sl in ("free", "premium"):
        filled = [k for k, v in by_raw[sl].items() if v is not None and k not in ("slice", "window_end_s", "window_s")]
        assert len(filled) >= 10, (sl, filled)  # the world fills most fields: a real comparison
        for k, v in by_raw[sl].items():
            w = by_rec[sl][k]
            differs = (v is None) != (w is None) or (isinstance(v, float) and w != pytest.approx(v, rel=1e-9, abs=1e-12))
            if differs:
                out.append((sl, k, v, w))
    return out


def _spec(name: str) -> object:
    return field_specs(FieldSettings())[name]


def test_parts_of_several_pops_join_by_their_family() -> None:
    specs = field_specs(FieldSettings())
    terms = {t.id: t for spec in specs.values() for t in rec.terms_of(spec, 8.0)}
    p99 = "quantile:0.99:inferslice_engine_time_to_first_token_seconds"
    tokens = "rate:inferslice_engine_generation_tokens_total"
    ttft_sum, ttft_count = (f"rate:inferslice_engine_time_to_first_token_seconds_{x}" for x in ("sum", "count"))
    rx = "rate:inferslice_link_receive_bytes_total{link=client-edge}"
    cap = "min:inferslice_link_cap_bits_per_second{link=client-edge,direction=receive}"
    assert terms[p99].combine == "max" and terms[tokens].combine == "sum" and terms[cap].combine == "min"
    parts = [
        ("max", "a", p99, 0.4), ("max", "a", p99, 1.2), ("max", "a", p99, math.nan),  # a PoP without observations
        ("sum", "a", tokens, 100.0), ("sum", "a", tokens, 50.0),
        ("sum", "a", ttft_sum, 3.0), ("sum", "a", ttft_count, 10.0), ("sum", "a", ttft_sum, 1.0), ("sum", "a", ttft_count, 10.0),
        ("sum", "a", rx, 1000.0), ("min", "a", cap, 2e6), ("min", "a", cap, 5e5),
        ("min", "b", cap, 2e10),  # above the nominal link rate: no cap, reported at the physical rate
        ("max", "b", p99, math.nan),
    ]  # fmt: skip
    joined = rec.combine(parts)  # type: ignore[arg-type]
    a, b = joined["a"], joined.get("b", {})
    assert rec.value_of(specs["ttft_p99_s"], 8.0, a) == 1.2
    assert rec.value_of(specs["output_tokens_per_s"], 8.0, a) == 150.0
    assert rec.value_of(specs["ttft_mean_s"], 8.0, a) == pytest.approx(0.2)  # (3 + 1) / (10 + 10), not the mean of the means
    assert rec.value_of(specs["link_rx_bps"], 8.0, a) == 8000.0  # the field's scale, bytes to bits
    assert rec.value_of(specs["link_cap_bps"], 8.0, a) == 5e5
    assert rec.value_of(specs["link_cap_bps"], 8.0, b) == 1e10  # FieldSettings' nominal 10 Gbit/s
    assert rec.value_of(specs["ttft_p99_s"], 8.0, b) is None
    # request_rate: the SLO counter's rate where there is one, else the TTFT histogram's count
    assert rec.value_of(specs["request_rate"], 8.0, a) == 20.0
    a["rate:inferslice_slo_ttft_requests_total"] = 0.0
    assert rec.value_of(specs["request_rate"], 8.0, a) == 0.0  # present and zero is not missing


def test_the_rule_group_records_each_term_once_under_its_family() -> None:
    group = rec.snapshot_rule_group(8.0, 2.0)
    assert group["interval"] == "2s"
    terms = [r for r in group["rules"] if "labels" in r]
    helpers = [r for r in group["rules"] if "labels" not in r]
    ids = [r["labels"][rec.TERM_LABEL] for r in terms]
    assert len(ids) == len(set(ids))
    assert {r["record"] for r in terms} == {rec.family_name(f, 8.0) for f in rec.FAMILIES}
    # one bucket-rate helper per histogram, recorded before the quantiles that read it
    assert len(helpers) == len({r["record"] for r in helpers}) == 5
    first_quantile = next(i for i, r in enumerate(group["rules"]) if "histogram_quantile" in r["expr"])
    assert all(group["rules"].index(h) < first_quantile for h in helpers)
    needed = {t.id for s in field_specs(FieldSettings(perspective="client")).values() for t in rec.terms_of(s, 8.0)}
    assert needed <= set(ids)  # the client perspective is recorded too


def test_the_compiled_assembly_is_value_of() -> None:
    import random

    rng = random.Random(3)
    for fs in (FieldSettings(), FieldSettings(perspective="client")):
        specs = field_specs(fs)
        ids = sorted({t.id for s in specs.values() for t in rec.terms_of(s, 8.0)})
        for _ in range(200):
            terms = {i: rng.choice([0.0, 1.0, 2.5e10, math.nan, rng.random()]) for i in ids if rng.random() < 0.7}
            for spec in specs.values():
                assert rec.assembler(spec, 8.0)(terms) == rec.value_of(spec, 8.0, terms)


def test_a_malformed_recorded_answer_is_a_parse_error() -> None:
    import json as _json

    from inferslice.errors import ParseError

    def answer(request: httpx.Request) -> httpx.Response:
        body = {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {"slice": "free", "term": "x"}, "value": [1]}]}}
        return httpx.Response(200, content=_json.dumps(body))

    source = PrometheusSource(SLICES, PrometheusSettings(recorded=True), transport=httpx.MockTransport(answer))
    with pytest.raises(ParseError):
        source.snapshots(1_700_000_000.0, 8.0)
    assert source.health()["ok"] is False


def _answer(items: list[dict[str, object]], compact: bool = True, partial: bool = False) -> bytes:
    import json as _json

    body: dict[str, object] = {"status": "success"}
    if partial:
        body["isPartial"] = False  # VictoriaMetrics's field
    body["data"] = {"resultType": "vector", "result": items}
    return _json.dumps(body, separators=(",", ":") if compact else None).encode()


def _item(value: str, **labels: str) -> dict[str, object]:
    return {"metric": {"__name__": "slice_pop:inferslice_snapshot:sum_w8s", **dict(sorted(labels.items()))}, "value": [1700000000.5, value]}


def test_the_scan_reads_a_prometheus_answer_sample_by_sample() -> None:
    items = [
        _item("1.5", pop="a", slice="free", term="rate:x"),
        _item("NaN", pop="a", slice="free", term="quantile:0.99:y"),
        _item("+Inf", pop="b", slice="premium", term="rate:x{link=client-edge}"),
        _item("7", pop="b", term="rate:x"),  # a row of series without a slice: skipped
    ]
    for partial in (False, True):
        got = rec.scan_vector(_answer(items, partial=partial))
        assert got is not None
        assert [(s, t) for s, t, _ in got] == [("free", "rate:x"), ("free", "quantile:0.99:y"), ("premium", "rate:x{link=client-edge}")]
        assert got[0][2] == 1.5 and math.isnan(got[1][2]) and got[2][2] == math.inf
    assert rec.scan_vector(_answer([])) == []


def test_the_scan_declines_what_it_does_not_know_rather_than_read_fewer_samples() -> None:
    import json as _json

    plain = [_item("1.5", pop="a", slice="free", term="rate:x")]
    assert rec.scan_vector(_answer(plain)) is not None
    reordered = [{"metric": {"term": "rate:x", "slice": "free"}, "value": [1.0, "1.5"]}]
    escaped = [_item("1.5", pop="a", slice='fr"ee', term="rate:x")]
    no_term = [_item("1.5", pop="a", slice="free"), *plain]
    error = _json.dumps({"status": "error", "errorType": "bad_data", "error": "x"}).encode()
    matrix = _answer(plain).replace(b'"vector"', b'"matrix"')
    for body in (_answer(reordered), _answer(escaped), _answer(no_term), _answer(plain, compact=False), error, matrix, b"\xff"):
        assert rec.scan_vector(body) is None, body[:80]


def test_a_round_reads_the_same_whether_the_answer_is_scanned_or_decoded() -> None:
    items = {
        "sum": [_item("3.0", pop="a", slice="free", term="rate:inferslice_engine_generation_tokens_total")],
        "max": [_item("0.25", pop="a", slice="free", term="quantile:0.99:inferslice_engine_time_to_first_token_seconds")],
        "min": [],
    }

    def source(compact: bool) -> PrometheusSource:
        def answer(request: httpx.Request) -> httpx.Response:
            fam = next(f for f in rec.FAMILIES if request.url.params["query"].startswith(rec.family_name(f, 8.0)))
            return httpx.Response(200, content=_answer(items[fam], compact=compact))

        return PrometheusSource(SLICES, PrometheusSettings(recorded=True), transport=httpx.MockTransport(answer))

    scanned, decoded = (s.snapshots(1_700_000_000.0, 8.0) for s in (source(True), source(False)))
    assert [s.to_dict() for s in scanned] == [s.to_dict() for s in decoded]
    free = next(s for s in scanned if s.slice == "free")
    assert free.ttft_p99_s == 0.25 and free.output_tokens_per_s == 3.0


def test_the_scan_reads_a_real_victoria_metrics_answer(tmp_path: Path) -> None:
    """The sharded fleet's rounds read VictoriaMetrics: its answers must take the scan too (else each
    round pays the full decode), and read the same samples. Series imported with their labels out
    of order and one without a slice."""
    import shutil

    from inferslice.common.prometheus import VictoriaMetrics

    if shutil.which("victoria-metrics") is None:
        pytest.skip("no victoria-metrics binary (Debian package 'victoria-metrics')")
    name = rec.family_name("sum", 8.0)
    now_ms = int(time.time() * 1000)
    lines = [f'{name}{{term="rate:x{{link=client-edge}}",slice="t{i}",pop="p{i % 3}"}} {i * 1.5} {now_ms}' for i in range(5)]
    lines.append(f'{name}{{term="rate:x",pop="p0"}} 7 {now_ms}')
    vm = VictoriaMetrics(tmp_path / "vm")
    vm.start(timeout_s=30)
    try:
        httpx.post(f"{vm.url}/api/v1/import/prometheus", content="\n".join(lines) + "\n", timeout=10).raise_for_status()
        deadline = time.time() + 20
        while True:
            got = httpx.get(f"{vm.url}/api/v1/query", params={"query": name, "time": f"{now_ms / 1000:.3f}"}, timeout=10)
            if len(got.json()["data"]["result"]) == 6:
                break
            assert time.time() < deadline, got.text[:300]
            time.sleep(0.5)
    finally:
        vm.stop()
    scanned = rec.scan_vector(got.content)
    assert scanned is not None, got.content[:300]
    assert sorted(scanned) == sorted((f"t{i}", "rate:x{link=client-edge}", i * 1.5) for i in range(5))
