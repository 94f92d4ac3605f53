"""The truth's repeatability: two generations of the same seeds compared window by window, with the
figures the classifier is scored by, and the command end to end on files in the generator's format."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from inferslice.bench import corpus_metrics as cm
from inferslice.bench import corpus_repeat
from inferslice.bench.corpus_truth import TRUTH_VERSION
from inferslice.cli import main as cli_main

PRIMARY = {"healthy": "healthy", "network": "network_limited", "queue": "queue_limited", "compute": "compute_limited"}


def truth(*causes: str, share: float = 1.0) -> dict[str, Any]:
    """A corpus line's truth: the causes in remedy order, each removing ``share`` of a 1 s TTFT excess."""
    ordered = [c for c in cm.PRIORITY if c in causes]
    return {
        "causes": ordered,
        "kinds": [],
        "primary": PRIMARY[ordered[0]] if ordered else "healthy",
        "excess_s": {"ttft": 1.0 if causes else None, "tpot": None},
        "effects": [{"cls": c, "share": {"ttft": share}} for c in ordered],
    }


def line(seed: int, window: int, t: dict[str, Any], tier: str = "standard") -> dict[str, Any]:
    snap = {"slice": tier, "slo_ttft_p99_s": 0.5, "ttft_p99_s": 0.2, "ttft_p50_s": 0.1, "tpot_p99_s": 0.03, "request_count": 40}
    return {"id": f"s{seed}-all-{tier}-w{window:02d}", "seed": seed, "run": "all", "tier": tier, "window": window,
            "truth": t, "snapshots": {"prometheus": snap}, "causes": [], "stats": {}}  # fmt: skip


FIRST = [line(1, 1, truth("network", share=0.8)), line(1, 2, truth("network")), line(1, 3, truth()),
         line(1, 4, truth("queue", share=0.6)), line(1, 5, truth("compute"))]  # fmt: skip
SECOND = [line(1, 1, truth("network", share=0.5)), line(1, 2, truth()), line(1, 3, truth()),
          line(1, 4, truth("queue", share=0.6))]  # fmt: skip


def test_truth_as_verdict_keeps_the_whole_cause_set_primary_first() -> None:
    t = cm.Truth.of(truth("queue", "network", share=0.5), "free")
    v = corpus_repeat.truth_as_verdict(t)
    assert v.primary == "network" and v.causes == ("network", "queue")
    assert v.shares == {("ttft", "network"): 0.5, ("ttft", "queue"): 0.5}
    assert corpus_repeat.truth_as_verdict(cm.Truth.of(truth(), "free")).causes == ()


def test_compare_scores_the_second_truth_on_the_first_and_the_reverse() -> None:
    r = corpus_repeat.compare(FIRST, SECOND, confident_bar=0.6)
    assert (r["windows"], r["only_first"], r["only_second"]) == (4, 1, 0)  # window 5 was measured once
    assert r["truth"]["same_class"] == 0.75
    fwd, rev = r["truth"]["second_against_first"], r["truth"]["first_against_second"]
    # the first truth has two network windows, the second agrees on one; the reverse: one of one
    assert fwd["ac1"]["network"]["standard"]["windows"] == 2 and fwd["ac1"]["network"]["standard"]["ac1"] == 0.5
    assert rev["ac1"]["network"]["all"]["ac1"] == 1.0
    # the second truth's two healthy windows: the first truth calls one of them network
    assert rev["ac1"]["healthy"]["all"] == {"windows": 2, "ac1": 0.5, "ac1_lenient": 0.5}
    # shares: network 0.8 against 0.5 (30 pp), 1.0 against nothing (100 pp), queue 0.6 against 0.6 (0)
    assert fwd["attribution"]["true_share_positive"]["pairs"] == 3
    assert fwd["attribution"]["true_share_positive"]["mean_pp"] == pytest.approx((30 + 100 + 0) / 3, abs=0.01)
    # the same snapshots in both generations: the classifier says the same thing of each
    ours = r["inferslice"]["prometheus"]
    assert ours["windows"] == 4 and ours["same_verdict"] == 1.0
    assert ours["first"]["windows"] == ours["second"]["windows"] == 4


def test_identical_generations_agree_everywhere() -> None:
    r = corpus_repeat.compare(FIRST, FIRST, confident_bar=0.6)
    assert r["truth"]["same_cause_set"] == 1.0
    for cls, cells in r["truth"]["second_against_first"]["ac1"].items():
        assert all(c["ac1"] == 1.0 for c in cells.values()), cls
    assert r["truth"]["second_against_first"]["attribution"]["true_share_positive"]["mean_pp"] == 0.0


def test_repeat_command_writes_json_and_markdown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name, rows in (("a", FIRST), ("b", SECOND)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "windows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    rc = cli_main(["bench", "corpus", "repeat", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "out")])
    assert rc == 0
    shown = capsys.readouterr().out
    assert "Same truth class: 75.0 %" in shown and "| network / standard | 50.0 (2) | 100.0 (1) |" in shown
    saved = json.loads((tmp_path / "out" / "repeat.json").read_text())
    assert saved["windows"] == 4 and (tmp_path / "out" / "repeat.md").read_text() == shown


def test_repeat_command_picks_seeds_and_can_leave_the_classifier_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    both = [*FIRST, line(2, 1, truth("queue"))]
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "windows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in both))
    out = tmp_path / "out"
    assert (
        cli_main(["bench", "corpus", "repeat", "--seeds", "2", "--truth-only", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out)])
        == 0
    )
    saved = json.loads((out / "repeat.json").read_text())
    assert saved["seeds"] == [2] and saved["windows"] == 1 and saved["inferslice"] == {}
    assert "inferslice" not in capsys.readouterr().out


def test_rejudge_names_a_malformed_line_and_leaves_one_without_an_slo_unjudged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = [run_line("clean", 0.1, []), run_line("all", 1.1, [CAP])]
    no_slo = lines[1] | {"snapshots": {"prometheus": None}}
    assert corpus_repeat.rejudge(no_slo, corpus_repeat.Counterfactuals(lines)) is None
    broken = {k: v for k, v in lines[1].items() if k != "window"}
    corpus_repeat.write_lines(tmp_path / "windows.jsonl", [lines[0], broken])
    assert cli_main(["bench", "corpus", "rejudge", str(tmp_path)]) != 0
    err = capsys.readouterr().err
    assert "s7-all-standard-w03" in err and "window" in err
    assert [json.loads(x)["run"] for x in (tmp_path / "windows.jsonl").read_text().splitlines()] == ["clean", "all"]  # untouched


def test_repeat_command_names_generations_that_share_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "windows.jsonl").write_text(json.dumps(line(1, 1, truth())) + "\n")
    (tmp_path / "b" / "windows.jsonl").write_text(json.dumps(line(2, 1, truth())) + "\n")
    assert cli_main(["bench", "corpus", "repeat", str(tmp_path / "a"), str(tmp_path / "b")]) != 0
    assert "share no window" in capsys.readouterr().err


def test_parser_takes_two_corpora() -> None:
    p = argparse.ArgumentParser()
    corpus_repeat.add_subcommands(p.add_subparsers(dest="c"))
    args = p.parse_args(["repeat", "x", "y"])
    assert (args.first, args.second, args.out) == ([Path("x")], Path("y"), None)
    args = p.parse_args(["repeat", "x", "z", "y", "--seeds", "1-3"])  # a first generation split over two corpora
    assert (args.first, args.second, args.seeds) == ([Path("x"), Path("z")], Path("y"), "1-3")


def test_kinds_kept_and_agreement_by_excess() -> None:
    def t(*causes: str, kinds: tuple[str, ...] = (), excess: float | None = None) -> cm.Truth:
        return cm.Truth(causes[0] if causes else "healthy", causes, kinds, "free", {"ttft": excess, "tpot": None}, {})

    a = {(1, "all", "free", 1): t("network", kinds=("cap",), excess=0.05),
         (1, "all", "free", 2): t("network", kinds=("cap",), excess=0.8),
         (1, "all", "free", 3): t()}  # fmt: skip
    b = {(1, "all", "free", 1): t(excess=0.02),
         (1, "all", "free", 2): t("network", kinds=("cap",), excess=0.3),
         (1, "all", "free", 3): t()}  # fmt: skip
    assert corpus_repeat.by_kind(a, b) == {"cap": {"windows": 2, "kept": 0.5}}
    assert corpus_repeat.by_kind(b, a) == {"cap": {"windows": 1, "kept": 1.0}}
    # binned by the larger excess of the two: 0.05 (< 0.1 s, disagree), 0.8 (>= 0.5 s, agree), none (agree)
    assert corpus_repeat.by_excess(a, b) == {
        "immaterial": {"windows": 1, "same_class": 1.0},
        "< 0.1 s": {"windows": 1, "same_class": 0.0},
        ">= 0.5 s": {"windows": 1, "same_class": 1.0},
    }


def run_line(run: str, ttft_s: float, causes: list[dict[str, Any]], ref_s: float = 0.1) -> dict[str, Any]:
    """A line of seed 7's window 3 on Standard in the generator's format, its truth left to ``rejudge``."""
    r = line(7, 3, {"reference_s": {"ttft": ref_s, "tpot": 0.02}})
    stats = {"p99_ttft_s": ttft_s, "p99_tpot_s": 0.02, "ttft_requests": 30, "tpot_requests": 30, "failed": 0}
    return r | {"id": f"s7-{run}-standard-w03", "run": run, "stats": stats, "causes": causes}


CAP = {"name": "c0", "kind": "cap", "class": "network", "tier": "standard"}


def test_rejudge_finds_the_twin_without_each_cause_and_the_clean_reference() -> None:
    lines = [run_line("clean", 0.1, []), run_line("all", 1.1, [CAP])]
    t = corpus_repeat.rejudge(lines[1], corpus_repeat.Counterfactuals(lines))
    # excess 1.1 - 0.1 s; removing the cap takes it back to 0.1: all of it
    assert t is not None and t["causes"] == ("network",) and t["primary"] == "network_limited"
    assert t["shares"] == {"network": 1.0} and t["excess_s"]["ttft"] == pytest.approx(1.0)
    # the clean twin's own window: no cause, and nothing material
    clean = corpus_repeat.rejudge(lines[0], corpus_repeat.Counterfactuals(lines))
    assert clean is not None and clean["healthy"] and clean["causes"] == ()
    # a generation without the twin the window needs cannot judge it
    assert corpus_repeat.rejudge(lines[1], corpus_repeat.Counterfactuals(lines[1:])) is None


def test_twins_remeasured_judge_each_run_against_the_other_generations_twins() -> None:
    # first generation: the cap explains the whole excess; second: its clean twin ran slow (0.9 s),
    # so the same cap removes only 0.2 of the run's 1.0 s excess (20 % < 25 %): not in its truth
    def gen(clean_s: float, all_s: float) -> list[dict[str, Any]]:
        lines = [run_line("clean", clean_s, []), run_line("all", all_s, [CAP])]
        cf = corpus_repeat.Counterfactuals(lines)
        return [r | {"truth": corpus_repeat.rejudge(r, cf)} for r in lines]

    first, second = gen(0.1, 1.1), gen(0.9, 1.1)
    assert [r["truth"]["primary"] for r in second] == ["healthy", "healthy"]
    r = corpus_repeat.compare(first, second, confident_bar=0.6)
    # run 1 (1.1 s) against twins 2 (0.9 s): 0.2 of 1.0 removed, healthy, where its own truth said network
    assert r["twins_remeasured"]["first_runs"]["ac1"]["network"]["all"]["ac1"] == 0.0
    # run 2 against twins 1 (0.1 s): the cap removes all of it, network where its own truth said healthy
    assert r["twins_remeasured"]["second_runs"]["confusion"]["healthy"] == {"healthy": 1, "network": 1}
    assert r["twins_remeasured"]["first_runs"]["same_class"] == 0.5  # the clean windows agree


CORPUS = Path(__file__).resolve().parents[2] / "bench" / "results" / "diagnosis" / "corpus17"


@pytest.mark.parametrize("name", ["tune", "test", "blind-v16"])
def test_rejudge_reproduces_every_committed_truth(name: str) -> None:
    """The windows' statistics and their clean twin's reference are all the truth rests on: judged
    again from the committed lines alone, every window's truth is the one its file holds, at the
    truth version of today's rules."""
    lines = corpus_repeat.read_lines(CORPUS / name)
    assert len(lines) > 500
    cf = corpus_repeat.Counterfactuals(lines)
    for r in lines:
        assert r["truth_version"] == TRUTH_VERSION, r["id"]
        assert json.dumps(corpus_repeat.rejudge(r, cf), sort_keys=True) == json.dumps(r["truth"], sort_keys=True), r["id"]


def test_rejudge_command_rewrites_an_older_truth_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # truth v1: the load step's twin measured no first token in the window, and the window read healthy
    v1 = [run_line("clean", 0.1, []), run_line("all", 27.8, [CAP | {"kind": "load", "class": "queue"}])]
    v1[0] |= {"truth": {"primary": "healthy", "causes": [], "reference_s": {"ttft": 0.1, "tpot": 0.02}}}
    v1[1]["stats"] |= {"p99_ttft_s": 27.8}
    v1[0]["stats"] |= {"p99_ttft_s": None, "ttft_requests": 0}
    v1[1] |= {"truth": {"primary": "healthy", "causes": [], "reference_s": {"ttft": 0.1, "tpot": 0.02}}}
    path = tmp_path / "windows.jsonl.gz"
    corpus_repeat.write_lines(path, v1)
    assert cli_main(["bench", "corpus", "rejudge", "--check", str(tmp_path)]) == 1
    assert cli_main(["bench", "corpus", "rejudge", str(tmp_path)]) == 0
    assert "truth changed in 2 (class 1, cause set 1)" in capsys.readouterr().out
    lines = corpus_repeat.read_lines(tmp_path)
    assert [r["truth"]["primary"] for r in lines] == ["healthy", "queue_limited"]
    assert all(r["truth_version"] == TRUTH_VERSION for r in lines)
    assert list(lines[1]).index("truth_version") == list(lines[1]).index("truth") + 1  # beside the truth it versions
    before = path.read_bytes()
    assert cli_main(["bench", "corpus", "rejudge", "--check", str(tmp_path)]) == 0
    assert cli_main(["bench", "corpus", "rejudge", str(tmp_path)]) == 0 and path.read_bytes() == before  # the same bytes
