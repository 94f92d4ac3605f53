"""Figures in the docs are the committed results (bench/docfigs.py, ``inferslice bench docs``).

Every ``<!-- fig:PATH#KEY ... -->VALUE<!-- /fig -->`` span in README.md, docs/ and bench/results/
must show what its result file holds; ``inferslice bench docs`` rewrites them after a new run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from inferslice.bench import docfigs
from inferslice.errors import InputError

ROOT = Path(__file__).resolve().parents[2]

RESULT = {
    "sizes": [
        {"interfaces": 100, "ratio": {"ours": 0.4464}, "median_s": 0.0085},
        {"interfaces": 1000, "ratio": {"ours": 0.4299}, "median_s": 0.0781},
    ],
    "tiers": [{"name": "free", "p99_s": 1.234}],
    "count": 146507,
}


def _load(path: str) -> Any:
    assert path == "bench/results/x/summary.json"
    return RESULT


def test_the_repository_docs_show_their_results() -> None:
    stale, seen = docfigs.update(ROOT, docfigs.doc_files(ROOT), write=False)
    assert seen >= 10  # the exporter and scale figures at least
    assert not stale, "figures differ from bench/results (run `inferslice bench docs`):\n" + "\n".join(
        f"{s.file}:{s.line}: shows {s.shown!r}, the result says {s.expected!r} ({s.spec})" for s in stale
    )


def test_the_two_figures_the_issue_found_wrong() -> None:
    # Issue 20: docs/exporters.md said 0.74x at 100 interfaces where the results said 0.45x (typed by
    # hand), and scale.md called a 3.6 s round "one 2 s round". The exporter's counters + HTB ratio must
    # be a marked span at both sizes, showing what the committed exporter.json holds (whatever it is
    # after a new run), and no hand-typed ratio of that figure may sit beside it.
    exporters = (ROOT / "docs" / "exporters.md").read_text()
    scale = (ROOT / "docs" / "scale.md").read_text()
    result = json.loads((ROOT / "bench" / "results" / "exporter" / "exporter.json").read_text())
    for interfaces in (100, 1000):
        key = f"sizes[interfaces={interfaces}].ratio_to_node_exporter.ours_counters_htb"
        marker = f"bench/results/exporter/exporter.json#{key} "
        spans = [m for m in docfigs.SPAN.finditer(exporters) if m["spec"].strip().startswith(marker)]
        assert spans, f"docs/exporters.md has no figure marker for {key}"
        committed = docfigs.lookup(result, key)
        assert isinstance(committed, float) and 0 < committed < 5
        assert all(m["value"] == f"{committed:.2f}" for m in spans), (key, [m["value"] for m in spans], committed)
    row_100 = next(line for line in exporters.splitlines() if line.startswith("| 100 |"))
    assert "0.74" not in docfigs.SPAN.sub("", row_100)  # no bare number outside the spans
    assert "one 2 s round" not in scale  # a 3.6 s round was called that; scale.md's round times are spans now


def test_a_span_is_rendered_from_its_key_path() -> None:
    text = (
        "at 1,000: <!-- fig:bench/results/x/summary.json#sizes[interfaces=1000].ratio.ours {:.2f} -->0.74<!-- /fig -->x; "
        "node: <!-- fig:bench/results/x/summary.json#sizes.0.median_s *1000 {:.1f} ms -->?<!-- /fig -->; "
        "free: <!-- fig:bench/results/x/summary.json#tiers[name=free].p99_s {:.2f} s -->1.23 s<!-- /fig -->; "
        "<!-- fig:bench/results/x/summary.json#count {:,} -->146507<!-- /fig --> series"
    )
    new, stale = docfigs.refresh(text, _load, "doc.md")
    assert "-->0.43<!-- /fig -->x" in new and "-->8.5 ms<!-- /fig -->" in new and "-->146,507<!-- /fig --> series" in new
    assert [(s.shown, s.expected) for s in stale] == [("0.74", "0.43"), ("?", "8.5 ms"), ("146507", "146,507")]
    again, none = docfigs.refresh(new, _load, "doc.md")
    assert again == new and none == []  # idempotent: the markers survive


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("bench/results/x/summary.json#sizes[interfaces=10].ratio.ours", "0 elements"),
        ("bench/results/x/summary.json#tiers.3.p99_s", "no '3'"),
        ("bench/results/x/summary.json#nope", "no 'nope'"),
        ("bench/results/x/summary.json#tiers *2", "needs a number"),
        ("bench/results/x/summary.json", "expected fig:PATH#KEY"),
        ("bench/results/x/summary.json#count {:.2f} and {}", "exactly one"),
    ],
)
def test_a_bad_marker_is_a_clear_error_naming_the_line(spec: str, needle: str) -> None:
    with pytest.raises(InputError, match=needle):
        docfigs.refresh(f"line one\n<!-- fig:{spec} -->1<!-- /fig -->\n", _load, "doc.md")


def test_the_cli_rewrites_and_checks(tmp_path: Path) -> None:
    (tmp_path / "bench" / "results" / "x").mkdir(parents=True)
    (tmp_path / "bench" / "results" / "x" / "summary.json").write_text(json.dumps(RESULT))
    (tmp_path / "docs").mkdir()
    doc = tmp_path / "docs" / "a.md"
    doc.write_text("ratio <!-- fig:bench/results/x/summary.json#sizes.1.ratio.ours {:.2f} -->0.74<!-- /fig -->\n")
    cli = [sys.executable, "-m", "inferslice.cli", "bench", "docs", "--root", str(tmp_path)]
    check = subprocess.run([*cli, "--check"], capture_output=True, text=True, timeout=60)
    assert check.returncode == 1 and "docs/a.md:1: '0.74' -> '0.43'" in check.stdout
    assert "0.74" in doc.read_text()  # --check changes nothing
    assert subprocess.run(cli, capture_output=True, text=True, timeout=60).returncode == 0
    assert "-->0.43<!-- /fig -->" in doc.read_text()
    assert subprocess.run([*cli, "--check"], capture_output=True, text=True, timeout=60).returncode == 0


def test_a_marker_in_code_is_an_example() -> None:
    example = "<!-- fig:bench/results/X/summary.json#key.path {:.2f} -->0.45<!-- /fig -->"
    text = f"inline `{example}` and\n```md\n{example}\n```\n"
    assert docfigs.refresh(text, _load, "doc.md") == (text, [])  # _load would fail on that path
