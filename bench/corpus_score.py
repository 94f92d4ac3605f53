"""``inferslice bench corpus score``: the classifier and its peers on seeds of the issue-17 corpus, once.

One command for a split (``--seeds``, e.g. the test seeds, or the blind set's fresh seeds after the
freeze): it records the code hash of everything that decides a verdict (``bottleneck/``, the
vocabulary, the corpus reader that supplies the reference) and the git commit beside the figures,
so a blind score says which classifier it scored. Writes into ``--out``: ``score.json``,
``score.md`` and ``reliability.png`` (one panel per source). Each source (Prometheus, embedded) is scored apart:
they are two views of the same windows, never pooled as independent samples.

RCAEval's peers run in their own interpreter (``--rcaeval-python``, default ``.venv-rcaeval``; RCD in
``--rcd-python``, default ``.venv-rcd``); their rankings are cached in ``--out`` (``rca-ranks.json``)
and reused unless ``--rerun-rca``; a method the cache lacks is ranked and added. The
learned peer mapping is fitted on ``--tune-seeds`` (their windows are ranked too) and applied here.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import subprocess
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from inferslice.bench import corpus_interval, corpus_steal
from inferslice.bench import corpus_metrics as cm
from inferslice.bench import corpus_peers as peers
from inferslice.bench.corpus_draws import parse_seeds  # the generator's seed syntax: A-B, A, A-B,C
from inferslice.bench.corpus_windows import LabelledWindow, corpus_files, inferslice_verdict, labelled, read_jsonl
from inferslice.bottleneck import DEFAULT
from inferslice.diagnosis import CONFIDENT

# Everything that decides a verdict: the classifier, the vocabulary it reads and writes, and the
# reader that hands it each window's reference. The figures are only as frozen as these files.
VERDICT_CODE = ("bottleneck", "inferslice/diagnosis.py", "inferslice/snapshot.py", "bench/corpus_windows.py")
TARGETS = {"ac1": 0.97, "compound_exact": 0.9, "attr_mean_pp": 15.0, "attr_p90_pp": 30.0, "ece": 0.05, "confident": 0.8, "cell_min": 100}
RCA_FILE = "rca-ranks.json"
FORCED = "inferslice (forced choice)"  # inferslice scored as the RCA peers are (corpus_metrics.forced_choice)


def code_hash(root: Path, paths: Sequence[str] = VERDICT_CODE, exclude: Sequence[str] = ()) -> dict[str, Any]:
    """sha256 over (path, bytes) of every .py file that decides a verdict, plus the git commit and
    whether any of them differs from it (``exclude``: paths left out, e.g. the table a fit writes)."""
    files: list[Path] = []
    for rel in paths:
        p = root / rel
        files.extend(sorted(p.rglob("*.py")) if p.is_dir() else [p])
    files = [f for f in files if str(f.relative_to(root)) not in exclude]
    h = hashlib.sha256()
    for f in files:
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    commit, dirty = None, None
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True).stdout.strip()
        status = subprocess.run(["git", "status", "--porcelain", "--", *paths], cwd=root, capture_output=True, text=True, check=True)
        dirty = bool(status.stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        pass
    return {"sha256": h.hexdigest(), "files": [str(f.relative_to(root)) for f in files], "git_commit": commit, "dirty": dirty}


def files_of(path: Path) -> list[Path]:
    """A corpus's window files: the path itself, or a directory's ``windows.jsonl[.gz]``."""
    return [path] if path.is_file() else corpus_files(path) or sorted(path.glob("windows.jsonl*"))


def load(corpus: Sequence[Path]) -> list[LabelledWindow]:
    out: list[LabelledWindow] = []
    for c in corpus:
        for f in files_of(c):
            # One file at a time, as ``committed`` reads them: a seed recorded in two corpora (a dev
            # rerun beside its blind set) takes its clean twin and each window's predecessor from its own.
            out.extend(labelled(read_jsonl(f)))
    return out


def truth_versions(corpus: Sequence[Path], seeds: Iterable[int]) -> list[int]:
    """The truth versions of the scored seeds' lines (a line without one is v1): a score says which
    rules its truth was judged by (``corpus_truth.TRUTH_VERSION``). The files are read a second time
    here rather than carried on ``LabelledWindow``: ``corpus_windows`` is part of the frozen verdict
    code, whose hash a blind score checks, and a field there would change it."""
    return sorted({int(r.get("truth_version", 1)) for r in _lines_of(corpus, seeds)})


def _lines_of(corpus: Sequence[Path], seeds: Iterable[int]) -> Iterator[dict[str, Any]]:
    """The raw lines of the chosen seeds, for what ``LabelledWindow`` does not carry."""
    chosen = set(seeds)
    for c in corpus:
        for f in files_of(c):
            yield from (r for r in read_jsonl(f) if int(r["seed"]) in chosen)


def starved(corpus: Sequence[Path], seeds: Iterable[int], max_steal: float) -> set[tuple[int, str, str, int]]:
    """The scored seeds' windows the host starved: the CPU steal over the window (``window_steal``) or
    over any run its truth reads (``truth_steal_max``) at ``max_steal`` or above (``common/hostcpu.py``).
    A line that measured none is kept. Read from the files, as ``truth_versions``: a field on
    ``LabelledWindow`` would change the frozen verdict code's hash."""
    steal = corpus_steal.steal_of(_lines_of(corpus, seeds))
    return {k for k, share in steal.items() if share is not None and share >= max_steal}


def _pairs(ws: Sequence[LabelledWindow], verdicts: Mapping[str, cm.Verdict]) -> list[tuple[cm.Truth, cm.Verdict]]:
    return [(cm.Truth.of(w.truth, w.tier), verdicts[w.id]) for w in ws if w.id in verdicts]


def figures(ws: Sequence[LabelledWindow], verdicts: Mapping[str, cm.Verdict], *, ranked: bool = False) -> dict[str, Any]:
    pairs = _pairs(ws, verdicts)
    kept = [w for w in ws if w.id in verdicts]  # in ``pairs``' order
    out: dict[str, Any] = {
        "windows": len(pairs),
        "ac1": cm.ac1(pairs, ranked=ranked, caused_only=ranked),
        "compound": cm.compound(pairs),
        "named": cm.named(pairs, ranked=ranked),
    }
    if not ranked:
        out |= {
            "confusion": cm.confusion(pairs),
            "healthy_by_clean_twin": cm.healthy_by_clean_twin(pairs),
            "attribution": cm.attribution(pairs),
            "calibration": cm.calibration(pairs),
            "confident": cm.confident_share(pairs, CONFIDENT),
            "network_causes": cm.network_causes(pairs),
            "by_kind": cm.ac1_by_kind(pairs),
            "caps": cm.cap_reasons(pairs),
            "cause_shown": cm.ac1_cause_shown((t, v, w.snapshot) for (t, v), w in zip(pairs, kept, strict=True)),
            "by_uncounted": cm.ac1_by_uncounted(pairs),
            "by_slo": cm.ac1_by_slo((t, v, _p99_ttft(w), w.snapshot.slo_ttft_p99_s) for (t, v), w in zip(pairs, kept, strict=True)),
        }
    return out


def _p99_ttft(w: LabelledWindow) -> float | None:
    x = w.stats.get("p99_ttft_s")
    return float(x) if isinstance(x, (int, float)) else None


def rca_verdicts(rca: Mapping[str, Mapping[str, Any]], mapping: Mapping[str, str | None]) -> dict[str, cm.Verdict]:
    return {wid: peers.rca_verdict(v.get("ranks") or [], mapping, cm.PRIORITY) for wid, v in rca.items()}


def evaluate(
    ws: Sequence[LabelledWindow],
    rca: Mapping[str, Mapping[str, Any]] | None,
    tune: Sequence[LabelledWindow] = (),
    verdicts: Mapping[str, cm.Verdict] | None = None,
) -> dict[str, Any]:
    """Every method's figures per source; RCA peers under both mappings (the learned one fitted on
    ``tune``). ``verdicts``: inferslice's, by window id, when the caller has them already."""
    if verdicts is None:
        verdicts = {w.id: inferslice_verdict(w) for w in ws}
    out: dict[str, Any] = {}
    for source in sorted({w.source for w in ws}):
        part = [w for w in ws if w.source == source]
        ours = {w.id: verdicts[w.id] for w in part}
        methods: dict[str, Any] = {
            "inferslice": figures(part, ours),
            # the RCA peers' terms (caused windows, a cause must be named): beside, not a peer to beat
            FORCED: figures(part, {k: cm.forced_choice(v) for k, v in ours.items()}, ranked=True),
        }
        for name, rule in peers.RULES.items():
            methods[name] = figures(part, {w.id: rule(w.snapshot) for w in part})
        for name, per_id in (rca or {}).items():
            errors = sum(1 for w in part if (per_id.get(w.id) or {}).get("error"))
            cols = sorted({c for v in per_id.values() for c in v.get("ranks") or []})
            fam = peers.family_mapping(cols)
            truth_tune = {w.id: cm.Truth.of(w.truth, w.tier).primary for w in tune if w.source == source}
            learned = peers.learn_mapping({w: (per_id.get(w) or {}).get("ranks") or [] for w in truth_tune}, truth_tune)
            caused = [w for w in part if w.id in per_id]
            for label, mapping in (("family", fam), ("learned", learned)):
                f = figures(caused, rca_verdicts({w.id: per_id[w.id] for w in caused}, mapping), ranked=True)
                methods[f"{name} ({label} mapping)"] = f | {
                    "failed": errors,
                    "caused": len(caused),
                    "mapping": dict(sorted(mapping.items())),
                }
        out[source] = methods
    return out


def _cell(f: Mapping[str, Any], cls: str, tier: str = "all") -> dict[str, Any]:
    return dict(f["ac1"].get(cls, {}).get(tier) or {})


def targets(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each of issue 17's targets, per source, met or not, with the figure."""
    rows: list[dict[str, Any]] = []
    for source, methods in result["sources"].items():
        ours = methods["inferslice"]

        def add(name: str, ok: bool, text: str, source: str = source) -> None:
            rows.append({"source": source, "target": name, "met": ok, "figure": text})

        low = [
            f"{c}/{t} {v['ac1']:.3f} (n={v['windows']})"
            for c, per in ours["ac1"].items()
            for t, v in per.items()
            if t != "all" and (v["ac1"] or 0.0) < TARGETS["ac1"]
        ]
        add("AC@1 >= 0.97 for every class on every tier", not low, "below: " + ", ".join(low) if low else "every cell")
        small = [f"{c}/{t} n={v['windows']}" for c, per in ours["ac1"].items() for t, v in per.items() if t != "all" and v["windows"] < 100]
        add("(size) >= 100 windows per (class, tier) cell", not small, ", ".join(small) if small else "every cell")
        for pair, v in ours["compound"].items():
            ok = v["accuracy"] is not None and v["accuracy"] >= TARGETS["compound_exact"]
            add(f"exact cause set >= 0.9 on {pair}", ok, f"{v['accuracy']} over {v['windows']} windows")
        a = ours["attribution"]["true_share_positive"]
        add("attribution error <= 15 pp mean on true share > 0", (a["mean_pp"] or 1e9) <= TARGETS["attr_mean_pp"],
            f"{a['mean_pp']} pp over {a['pairs']} pairs (all pairs {ours['attribution']['all_pairs']['mean_pp']} pp)")  # fmt: skip
        add("attribution error <= 30 pp P90 on true share > 0", (a["p90_pp"] or 1e9) <= TARGETS["attr_p90_pp"],
            f"{a['p90_pp']} pp (all pairs {ours['attribution']['all_pairs']['p90_pp']} pp)")  # fmt: skip
        ece = ours["calibration"]["ece"]
        add("expected calibration error <= 0.05", ece is not None and ece <= TARGETS["ece"], f"{ece} over {ours['calibration']['windows']}")
        for cls, v in ours["confident"].items():
            add(f"confident verdict on >= 80 % of {cls} windows", (v["confident"] or 0.0) >= TARGETS["confident"], f"{v['confident']}")
        for name, f in methods.items():
            if name in ("inferslice", FORCED):
                continue
            if f.get("failed") and f["failed"] >= f.get("caused", 0):
                # a peer that ranked no window is not beaten: no claim either way (met None, not counted)
                rows.append({"source": source, "target": f">= {name} on every class (AC@1)", "met": None,
                             "figure": f"not run: failed on all {f['failed']} caused windows, no claim either way"})  # fmt: skip
                continue
            worse = []
            for cls, per in f["ac1"].items():
                theirs, mine = (per.get("all") or {}).get("ac1"), _cell(ours, cls).get("ac1")
                if theirs is not None and mine is not None and theirs > mine:
                    worse.append(f"{cls} ({theirs:.3f} vs {mine:.3f})")
            add(f">= {name} on every class (AC@1)", not worse, "loses on " + ", ".join(worse) if worse else "on every class")
    return rows


def reliability_png(result: Mapping[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sources = list(result["sources"])
    fig, axes = plt.subplots(1, len(sources), figsize=(4.2 * len(sources), 4.2), squeeze=False)
    for ax, source in zip(axes[0], sources, strict=True):
        cal = result["sources"][source]["inferslice"]["calibration"]
        ax.plot([0, 1], [0, 1], color="0.6", lw=1, ls="--", label="perfect")
        xs = [b["confidence"] for b in cal["bins"]]
        ys = [b["accuracy"] for b in cal["bins"]]
        ax.scatter(xs, ys, s=[12 + 300 * b["windows"] / max(1, cal["windows"]) for b in cal["bins"]], color="tab:blue", zorder=3)
        ax.plot(xs, ys, color="tab:blue", lw=1)
        for b in cal["bins"]:
            ax.annotate(str(b["windows"]), (b["confidence"], b["accuracy"]), textcoords="offset points", xytext=(4, -10), fontsize=7)
        ax.axvline(CONFIDENT, color="tab:red", lw=0.8, ls=":", label=f"confident bar {CONFIDENT}")
        ax.set(xlim=(0, 1), ylim=(0, 1.02), xlabel="reported confidence (bin mean)", ylabel="share of verdicts right")
        ax.set_title(f"{source}: ECE {cal['ece']} over {cal['windows']} windows", fontsize=9)
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle(f"inferslice reliability, {result['split']} seeds {result['seeds_text']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}"


def _share(cell: Mapping[str, Any]) -> str:
    """'74.1 % of 586', or 'no window'."""
    return f"{_pct(cell['ac1'])} % of {cell['windows']}" if cell["windows"] else "no window"


def markdown(result: Mapping[str, Any]) -> str:
    code = result["code"]
    lines = [
        f"# Diagnosis on the issue-17 corpus: {result['split']} seeds {result['seeds_text']}",
        "",
        f"Scored {result['scored_at']}; verdict code sha256 `{code['sha256'][:16]}` (git {str(code['git_commit'])[:12]}"
        + (", with uncommitted changes" if code["dirty"] else "")
        + f"; {len(code['files'])} files: bottleneck/, the vocabulary, the corpus reader).",
        f"Windows: {result['windows']} (per source); corpus: {', '.join(result['corpus'])}. Definitions: `bench/corpus_metrics.py`.",
        f"Truth version: {', '.join(map(str, result.get('truth_versions') or [1]))} (`corpus_truth`; none recorded: v1).",
        *(
            [f"Host-starved windows left out: {result.get('starved_windows_left_out', 0)} (CPU steal >= {result['max_steal']:.0%}"
             " over the window or a twin its truth reads; `--max-steal`)."]
            if result.get("max_steal") is not None else []
        ),
        f"RCAEval peers ranked: {', '.join(result.get('rca_peers') or []) or 'none'}. RCD {result.get('rcd', RCD_NOT_RUN)}.",
        "",
    ]  # fmt: skip
    for source, methods in result["sources"].items():
        ours = methods["inferslice"]
        tiers = sorted({t for per in ours["ac1"].values() for t in per if t != "all"})
        lines += [
            f"## {source}",
            "",
            "AC@1 per (class, tier), inferslice (windows in brackets; lenient: top verdict anywhere in the truth set):",
            "",
        ]
        lines += ["| class | " + " | ".join(tiers) + " | all | all, lenient |", "|---|" + "---|" * (len(tiers) + 2)]
        for cls in cm.CLASSES:
            per = ours["ac1"].get(cls)
            if not per:
                continue
            cells = [f"{_pct(per[t]['ac1'])} ({per[t]['windows']})" if t in per else "-" for t in tiers]
            lines.append(
                f"| {cls} | "
                + " | ".join(cells)
                + f" | {_pct(per['all']['ac1'])} ({per['all']['windows']}) | {_pct(per['all']['ac1_lenient'])} |"
            )
        shown = ours.get("cause_shown") or {}
        if shown:
            parts = []
            for cls, v in shown.items():
                yes, no = v["shown"], v["not_shown"]
                parts.append(f"{cls} {_share(yes)} (not shown: {_share(no)})")
            head = "AC@1 where a gauge of the window shows the cause (beside the figure above; `corpus_metrics.cause_shown`): "
            lines += ["", head + "; ".join(parts)]
        by_slo = ours.get("by_slo") or {}
        if by_slo:
            parts = []
            for cls, v in by_slo.items():
                br, met = v.get("breached"), v.get("met")
                said = f", {met['said_healthy']} said healthy" if met else ""
                parts.append(f"{cls} {_share(br) if br else '-'} (met: {_share(met) if met else '-'}{said})")
            head = "AC@1 on caused windows whose own P99 TTFT breached the SLO (met it, where a cause still added its excess): "
            lines += ["", head + "; ".join(parts)]
        uncounted = ours.get("by_uncounted") or {}
        if any("uncounted" in v for v in uncounted.values()):
            parts = []
            for cls, v in uncounted.items():
                un, rest = v.get("uncounted"), v.get("none")
                named = f", {un['named_uncounted']} named it" if un else ""
                parts.append(f"{cls} {_share(rest) if rest else '-'} (with one: {_share(un) if un else '-'}{named})")
            head = ("AC@1 on caused windows where no cause acted that the truth left uncounted "
                    "(with one: a compound run's other cause, its share under the truth's bar): ")  # fmt: skip
            lines += ["", head + "; ".join(parts)]
        cols = [*cm.CLASSES, "unknown"]
        lines += [
            "",
            "Confusion (truth class x inferslice's primary):",
            "",
            "| truth \\ said | " + " | ".join(cols) + " |",
            "|---|" + "---|" * len(cols),
        ]
        for truth, row in ours["confusion"].items():
            lines.append(f"| {truth} | " + " | ".join(str(row.get(c, 0)) for c in cols) + " |")
        hc = ours.get("healthy_by_clean_twin")
        if hc and hc["clean_breached"]["windows"]:
            met, br = hc["clean_met"], hc["clean_breached"]
            said = ", ".join(f"{c} {n}" for c, n in br["said"].items())
            lines += ["", f"Healthy windows whose clean twin met the SLO: {_pct(met['ac1'])} % of {met['windows']}; whose clean twin "
                      f"breached it too (no injected cause explains the breach: the truth says healthy): {_pct(br['ac1'])} % of "
                      f"{br['windows']} (said: {said}). Beside the healthy AC@1 above, not instead of it."]  # fmt: skip
        comp = "; ".join(f"{k} {_pct(v['accuracy'])} % of {v['windows']}" for k, v in ours["compound"].items() if v["windows"])
        lines += ["", "Exact cause set per compound pair: " + (comp or "no compound window")]
        a = ours["attribution"]
        lines += [f"Attribution error: {a['true_share_positive']['mean_pp']} pp mean, {a['true_share_positive']['p90_pp']} pp P90 over "
                  f"{a['true_share_positive']['pairs']} pairs with a true share > 0; all pairs {a['all_pairs']['mean_pp']} / "
                  f"{a['all_pairs']['p90_pp']} pp over {a['all_pairs']['pairs']}."]  # fmt: skip
        cal = ours["calibration"]
        lines += [f"Calibration: ECE {cal['ece']} over {cal['windows']} windows (reliability.png). Confident (>= {CONFIDENT}) per class: "
                  + ", ".join(f"{c} {_pct(v['confident'])} %" for c, v in ours["confident"].items())]  # fmt: skip
        for cls, c in ours["caps"].items():
            if c["capped_by"]:
                why = ", ".join(f"{r} ({n})" for r, n in list(c["capped_by"].items())[:4])
                median = c["requests_median"]
                said = f", median {median:.3g} requests" if median is not None else ""
                lines.append(f"Held below the bar, {cls} ({c['windows']} windows{said}): {why}")
        if ours.get("by_kind"):
            kinds = ", ".join(f"{k} {_share(v)}" for k, v in ours["by_kind"].items())
            lines += ["AC@1 per injected cause kind in the truth set (caused windows): " + kinds]
        if ours["network_causes"]:
            causes = ours["network_causes"].items()
            named = ", ".join(f"{k} -> {v['expected']} {_pct(v['accuracy'])} % of {v['windows']}" for k, v in causes)
            lines += ["Network cause named on network windows: " + named]
        lines += ["", "AC@1 per class, every method (all tiers; RCA peers on caused windows, they never say healthy); beside it,",
                  "on the caused windows, the share named right over all classes and how often each cause is named first:", ""]  # fmt: skip
        causes = [c for c in cm.CLASSES if c != "healthy"]
        head = " | ".join(cm.CLASSES) + " | compound exact | caused, right | names " + " / ".join(causes) + " |"
        lines += ["| method | " + head, "|---|" + "---|" * (len(cm.CLASSES) + 3)]
        for name, f in methods.items():
            cells = [_pct(_cell(f, c).get("ac1")) for c in cm.CLASSES]
            comp = ", ".join(f"{_pct(v['accuracy'])}" for v in f["compound"].values())
            note = f" ({f['failed']} failed)" if f.get("failed") else ""
            nm = f.get("named") or {}
            shares = " / ".join(_pct((nm.get("share") or {}).get(c, 0.0 if nm.get("windows") else None)) for c in causes)
            lines.append(f"| {name}{note} | " + " | ".join(cells) + f" | {comp} | {_pct(nm.get('accuracy'))} | {shares} |")
        lines.append("")
    lines += corpus_interval.markdown(result.get("intervals") or {}, TARGETS["ac1"])
    lines += corpus_steal.markdown(result.get("by_steal") or {})
    lines += ["## Targets", ""]
    for t in result["targets"]:
        verdict = "no claim" if t["met"] is None else "met" if t["met"] else "MISSED"
        lines.append(f"- {verdict} ({t['source']}): {t['target']}: {t['figure']}")
    return "\n".join(lines) + "\n"


RCD_RUN = (
    "run: RCAEval 1.8.1's rcd (gamma 5, 5 bins, localized, seed 0) on causal-learn 0.1.2.3 with RCAEval's own patch "
    "(bench/rcaeval-rcd/, its script/link.sh as a diff), in .venv-rcd"
)
RCD_NOT_RUN = (
    "not run: no RCD interpreter (make rcd-venv builds .venv-rcd: RCAEval 1.8.1's rcd needs causal-learn 0.1.2.3 with the patch "
    "RCAEval ships only in its git repository, bench/rcaeval-rcd/)"
)


def rankings(
    cache: Path, windows: Sequence[LabelledWindow], interpreters: Mapping[str, str | None], rerun: bool = False
) -> dict[str, dict[str, Any]] | None:
    """The RCA peers' rankings: ``cache`` as it is, plus every method that has an interpreter and that
    the cache lacks or that does not cover every case of ``windows`` (all of those again with
    ``rerun``). A method without an interpreter keeps what the cache holds, whatever ``rerun`` says.
    The cache is written after each interpreter's run, so one that fails loses nothing before it."""
    rca: dict[str, dict[str, Any]] = json.loads(cache.read_text()) if cache.exists() else {}
    cases = peers.rca_cases(windows)
    ids = {c["id"] for c in cases}
    todo = [m for m in peers.RCA_METHODS if interpreters.get(m) and (rerun or m not in rca or not ids <= set(rca[m]))]
    for python in dict.fromkeys(str(interpreters[m]) for m in todo):
        rca |= peers.run_rca(cases, python, [m for m in todo if interpreters[m] == python])
        cache.write_text(json.dumps(rca, sort_keys=True))
    return dict(sorted(rca.items())) or None  # in name order, fresh or cached: the report's rows keep their order


def score(
    corpus: Sequence[Path],
    seeds: Sequence[int],
    out: Path,
    split: str,
    root: Path,
    rca_python: str | None = None,
    tune_seeds: Sequence[int] = (),
    rerun_rca: bool = False,
    rcd_python: str | None = None,
    max_steal: float | None = None,
) -> dict[str, Any]:
    every = load(corpus)
    chosen = set(seeds)
    ws = [w for w in every if w.seed in chosen]
    left_out = starved(corpus, chosen, max_steal) if max_steal is not None else set()
    ws = [w for w in ws if w.key not in left_out]
    tune = [w for w in every if w.seed in set(tune_seeds)]
    if not ws:
        raise ValueError(f"no corpus window has a seed in {min(seeds)}-{max(seeds)}")
    out.mkdir(parents=True, exist_ok=True)
    interpreters = {m: rcd_python if m in peers.OWN_INTERPRETER else rca_python for m in peers.RCA_METHODS}
    ours = {w.id: inferslice_verdict(w) for w in ws}  # once: the figures and the steal table read the same verdicts
    rca = rankings(out / RCA_FILE, [*ws, *tune], interpreters, rerun_rca)
    result: dict[str, Any] = {
        "benchmark": "diagnosis-corpus17",
        "split": split,
        "seeds": sorted(chosen & {w.seed for w in ws}),
        "seeds_text": f"{min(seeds)}-{max(seeds)}",
        "tune_seeds": sorted(set(tune_seeds)),
        "corpus": [str(c) for c in corpus],
        "windows": len({w.key for w in ws}),
        "max_steal": max_steal,
        "starved_windows_left_out": len(left_out),
        "truth_versions": truth_versions(corpus, chosen),
        "scored_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "code": code_hash(root),
        "rca_peers": sorted(rca) if rca else [],
        "rcd": RCD_RUN if rca and "rcd" in rca else RCD_NOT_RUN,
        "sources": evaluate(ws, rca, tune, ours),
        "by_steal": corpus_steal.by_steal(ws, ours, corpus_steal.steal_of(_lines_of(corpus, chosen))),
        "intervals": corpus_interval.seed_intervals(ws, ours),
    }
    result["targets"] = targets(result)
    (out / "score.json").write_text(json.dumps(result, indent=1, sort_keys=True, default=str))
    (out / "score.md").write_text(markdown(result))
    reliability_png(result, out / "reliability.png")
    return result


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    # --no-rca: the naive rules only, and whatever rca-ranks.json in --out already holds
    python = None if args.no_rca else args.rcaeval_python or peers.peer_python(root, "rcaeval")
    rcd = None if args.no_rca else args.rcd_python or peers.peer_python(root, "rcd")
    tune = parse_seeds(args.tune_seeds) if args.tune_seeds else []
    seeds = parse_seeds(args.seeds)
    if args.expect_code:
        code = code_hash(root)
        if not code["sha256"].startswith(args.expect_code) or code["dirty"]:
            raise ValueError(
                f"the verdict code is not the frozen one: sha256 {code['sha256'][:16]} (expected {args.expect_code[:16]})"
                + (", uncommitted changes" if code["dirty"] else "")
            )
    if set(tune) & set(seeds):
        raise ValueError("--tune-seeds and --seeds overlap: the peers' mapping must not be learned on the scored seeds")
    if args.max_steal is not None and not 0.0 < args.max_steal <= 1.0:
        raise ValueError(f"--max-steal must be a share in (0, 1], got {args.max_steal}")
    return score(args.corpus, seeds, args.out, args.split, root, python, tune, args.rerun_rca, rcd, args.max_steal)


COMMANDS = ("score", "calibrate", "tune")


def add_subcommands(csub: Any) -> None:
    """``score`` and ``calibrate`` under ``inferslice bench corpus`` (beside the generator's ``generate``)."""
    text = "score the classifier and its peers on seeds of the corpus, recording the verdict code's hash"
    add_arguments(csub.add_parser("score", help=text, description=text))
    text = "fit the confidence calibration table on the tune seeds and write bottleneck/calibration.py"
    c = csub.add_parser("calibrate", help=text, description=text)
    c.add_argument("--corpus", action="append", type=Path, required=True, help="a corpus directory or windows.jsonl[.gz] (repeatable)")
    c.add_argument("--seeds", required=True, help="the tune seeds, A-B: never the test or blind ones")
    c.add_argument("--write", type=Path, default=None, help="the table file (default: bottleneck/calibration.py in the repository)")
    c.add_argument(
        "--regimes",
        default="",
        help="refit only these regimes (comma-separated, e.g. compute_limited); the others stay as the table has them",
    )
    text = "choose the classifier's thresholds on the tune seeds (coordinate descent; writes tune.json)"
    t = csub.add_parser("tune", help=text, description=text)
    t.add_argument("--corpus", action="append", type=Path, required=True, help="a corpus directory or windows.jsonl[.gz] (repeatable)")
    t.add_argument("--seeds", required=True, help="the tune seeds, A-B: never the test or blind ones")
    t.add_argument("--out", required=True, type=Path, help="directory for tune.json")


def main(args: argparse.Namespace, root: Path) -> int:
    if args.corpus_command == "score":
        result = run(args, root)
        print((args.out / "score.md").read_text(), end="")
        claims = [t for t in result["targets"] if t["met"] is not None]
        met = sum(1 for t in claims if t["met"])
        none = len(result["targets"]) - len(claims)
        print(f"{met} of {len(claims)} targets met ({none} no claim: a peer not run); results in {args.out}")
        return 0
    from inferslice.bench import calibrate, corpus_tune

    seeds = set(parse_seeds(args.seeds))
    ws = [w for w in load(args.corpus) if w.seed in seeds]
    if not ws:
        raise ValueError(f"no corpus window has a seed in {args.seeds}")
    if args.corpus_command == "tune":
        chosen, trials = corpus_tune.tune(ws)
        result = corpus_tune.write(args.out, DEFAULT, chosen, trials, args.seeds)
        print(f"{len(trials)} trials on {len(ws)} tune windows x sources; changed: {result['changed'] or 'nothing'}")
        return 0
    target = args.write or root / "bottleneck" / "calibration.py"
    sha = code_hash(root, exclude=("bottleneck/calibration.py",))["sha256"]  # the classifier the table is fitted on
    regimes = tuple(r for r in args.regimes.split(",") if r)
    out = calibrate.calibrate(ws, args.seeds, [str(c) for c in args.corpus], sha, target, regimes)
    for regime, steps in out["table"].items():
        print(f"{regime}: " + ", ".join(f"<= {u:.2f}: {p:.3f} ({n})" for u, p, n in steps))
    print(f"wrote {target}")
    return 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--corpus", action="append", type=Path, required=True, help="a corpus directory or windows.jsonl[.gz] (repeatable)")
    p.add_argument("--seeds", required=True, help="the seeds to score, A-B (e.g. the test seeds, or the blind set's)")
    p.add_argument("--split", default="test", help="what these seeds are: tune, test or blind (a label in the results)")
    p.add_argument("--tune-seeds", default=None, help="seeds the peers' learned mapping is fitted on (never the scored ones)")
    p.add_argument("--out", required=True, type=Path, help="directory for score.json, score.md, reliability.png")
    p.add_argument("--rcaeval-python", default=None, help="RCAEval's interpreter (default $INFERSLICE_RCAEVAL_PYTHON, else .venv-rcaeval)")
    p.add_argument("--rcd-python", default=None, help="RCD's interpreter (default $INFERSLICE_RCD_PYTHON, else .venv-rcd: make rcd-venv)")
    p.add_argument("--rerun-rca", action="store_true", help="rank every method again (default: only those rca-ranks.json in --out lacks)")
    p.add_argument(
        "--no-rca",
        action="store_true",
        help="run no RCAEval peer (the naive rules stay; ranks already in --out's rca-ranks.json are still reported)",
    )
    p.add_argument(
        "--max-steal",
        type=float,
        default=None,
        metavar="SHARE",
        help="leave out windows the host starved: CPU steal at SHARE or above over the window or its truth's twins (e.g. 0.1)",
    )
    p.add_argument(
        "--expect-code",
        default=None,
        metavar="SHA256",
        help="refuse to score unless the verdict code is committed and its sha256 starts with this (the frozen classifier: blind set)",
    )
