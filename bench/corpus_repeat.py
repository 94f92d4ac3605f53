"""How repeatable is a window's truth? Two generations of the same draws, window by window (pure core).

A corpus window's truth is itself a measurement: the counterfactual twins are separate testbed runs,
so whether removing a cause removes >= 25 % of a window's excess depends on those runs' scheduling,
losses and request timing as well as on the draw. Generating the same seeds again (the same plan,
the same requests and arrival times: ``corpus_draws`` is a pure function of the seed) measures every
window's truth a second time. This module pairs the two generations' windows by (seed, twin, tier,
window) and scores one truth as if it were a method's verdict on the other, with the very figures
the classifier is scored by (``corpus_metrics``): AC@1 per (class, tier), exact cause sets per
compound pair, attribution error on pairs whose true share is > 0.

Two comparisons, because they bound different things. The whole truth measured again moves with
the run itself, which the classifier reads too. A generation's runs judged against the *other*
generation's twins (``rejudge``) move only with the twins: that is the label noise no reading of
the window can foresee, and what a score against one measurement cannot see past.

Beside them, the classifier's own figures on the same windows in each generation (per source), and
how often its verdicts on the two generations agree.
"""

from __future__ import annotations

import argparse
import gzip
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from inferslice.bench import corpus_metrics as cm
from inferslice.bench import corpus_truth as truth
from inferslice.bench.corpus_score import files_of
from inferslice.bench.corpus_windows import LabelledWindow, inferslice_verdict, labelled, read_jsonl

Key = tuple[int, str, str, int]  # (seed, twin, tier, window): the window whichever generation measured it


class MalformedLine(ValueError):
    """A corpus line without the fields a truth is judged from (named by its id)."""


def _malformed(line: Mapping[str, Any], err: Exception) -> MalformedLine:
    return MalformedLine(f"corpus line {line.get('id', '?')!r}: {type(err).__name__} {err}")


class Counterfactuals:
    """One generation's lines indexed for re-judging a window: every window's statistics by
    (seed, twin, tier, window), each seed's twins by the causes they ran with, and each tier's
    reference (its clean twin's, the same on every line of that twin)."""

    def __init__(self, lines: Sequence[Mapping[str, Any]]) -> None:
        self.lines: dict[Key, Mapping[str, Any]] = {}
        self.runs: dict[int, dict[frozenset[str], str]] = {}
        self.references: dict[tuple[int, str], Mapping[str, float | None]] = {}
        for r in lines:
            try:
                seed, run, tier = int(r["seed"]), str(r["run"]), str(r["tier"])
                self.lines[(seed, run, tier, int(r["window"]))] = r
                present = frozenset(str(c["name"]) for c in r.get("causes") or ())
            except (KeyError, TypeError, ValueError) as err:
                raise _malformed(r, err) from None
            self.runs.setdefault(seed, {})[present] = run
            ref = (r.get("truth") or {}).get("reference_s")
            if not present and ref is not None:
                self.references.setdefault((seed, tier), ref)

    def stat(self, seed: int, causes: frozenset[str], tier: str, window: int) -> truth.WindowStat | None:
        run = self.runs.get(seed, {}).get(causes)
        line = self.lines.get((seed, run, tier, window)) if run is not None else None
        return _window_stat(line) if line is not None else None

    def reference(self, seed: int, tier: str) -> Mapping[str, float | None] | None:
        return self.references.get((seed, tier))


def _window_stat(line: Mapping[str, Any]) -> truth.WindowStat | None:
    """A line's own window statistics (``None`` for a line without them: nothing to judge)."""
    stats = line.get("stats") or {}
    try:
        return truth.WindowStat(**{f: stats[f] for f in truth.WindowStat.__dataclass_fields__})
    except KeyError:
        return None


def _slo_s(line: Mapping[str, Any]) -> float | None:
    snaps = [s for s in (line.get("snapshots") or {}).values() if s]
    return next((float(s["slo_ttft_p99_s"]) for s in snaps if s.get("slo_ttft_p99_s") is not None), None)


def rejudge(line: Mapping[str, Any], cf: Counterfactuals) -> dict[str, Any] | None:
    """A window's truth from its own run's statistics and the counterfactual runs of ``cf`` (its
    twins without each cause, its clean twin and the reference that twin measured). With ``cf`` the
    window's own generation this is the truth the generator writes (``corpus_gen.seed_windows``);
    with the other generation's, the same window judged against remeasured twins. ``None`` (left
    unjudged) when ``cf`` lacks a twin or reference it needs, or no snapshot names the tier's SLO
    (the generator reads it from the topology; a truth judged without it would differ)."""
    try:
        seed, tier, k = int(line["seed"]), str(line["tier"]), int(line["window"])
        causes = [(str(c["name"]), str(c["kind"]), str(c["class"]), str(c["tier"])) for c in line.get("causes") or ()]
    except (KeyError, TypeError, ValueError) as err:
        raise _malformed(line, err) from None
    present = frozenset(name for name, *_ in causes)
    clean, ref, slo = cf.stat(seed, frozenset(), tier, k), cf.reference(seed, tier), _slo_s(line)
    without = {name: cf.stat(seed, present - {name}, tier, k) for name, *_ in causes}
    own = _window_stat(line)
    if own is None or clean is None or ref is None or slo is None or any(v is None for v in without.values()):
        return None
    t = truth.judge(own, without, clean, ref, causes, slo)
    return {**t.to_dict(), "primary": truth.primary_regime(t.causes), "healthy": t.healthy}


def rejudged(lines: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """One corpus file's lines with every truth judged again by today's rules (``truth_version``
    right after ``truth``), and how many windows changed: truth class, cause set, anything (a line
    whose truth is the same but whose version is not counts as a change: it would be rewritten)."""
    cf = Counterfactuals(lines)
    out: list[dict[str, Any]] = []
    changed = {"windows": len(lines), "class": 0, "cause_set": 0, "any": 0, "unjudged": 0}
    for line in lines:
        t = rejudge(line, cf)
        if t is None:  # a twin the window needs is missing from the file: leave the line as it is
            changed["unjudged"] += 1
            out.append(dict(line))
            continue
        old = line.get("truth") or {}
        changed["class"] += old.get("primary") != t["primary"]
        changed["cause_set"] += set(old.get("causes") or ()) != set(t["causes"])
        stale = line.get("truth_version") != truth.TRUTH_VERSION or "truth" not in line
        changed["any"] += stale or json.dumps(old, sort_keys=True) != json.dumps(t, sort_keys=True)
        new: dict[str, Any] = {}
        for key, value in line.items():
            if key == "truth_version":
                continue
            new[key] = t if key == "truth" else value
            if key == "truth":
                new["truth_version"] = truth.TRUTH_VERSION
        if "truth" not in new:
            new |= {"truth": t, "truth_version": truth.TRUTH_VERSION}
        out.append(new)
    return out, changed


def write_lines(path: Path, lines: Sequence[Mapping[str, Any]]) -> None:
    """A corpus file, one JSON line a window; gzipped (without a timestamp: the same lines give the
    same bytes) when its name ends in .gz, as the committed corpora are. Written beside under a
    hidden name, then renamed: an interrupted write leaves the file as it was, and no partial file
    that a ``windows.jsonl*`` glob would read."""
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    tmp = path.with_name(f".{path.name}.tmp")
    if path.suffix == ".gz":
        with tmp.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as fh:
            fh.write(data)
    else:
        tmp.write_bytes(data)
    tmp.replace(path)


def truth_as_verdict(t: cm.Truth) -> cm.Verdict:
    """A remeasured truth in a method's terms: its primary, its cause set (primary first), its shares."""
    rest = tuple(c for c in cm.PRIORITY if c in t.causes and c != t.primary)
    causes = (t.primary, *rest) if t.primary != "healthy" else ()
    return cm.Verdict(primary=t.primary, causes=causes, shares=dict(t.shares), confidence=1.0)


def _by_key(ws: Sequence[LabelledWindow], source: str) -> dict[Key, LabelledWindow]:
    return {w.key: w for w in ws if w.source == source}


def truth_figures(pairs: Sequence[tuple[cm.Truth, cm.Verdict]], confident_bar: float | None = None) -> dict[str, Any]:
    """The figures one truth, or the classifier, reaches against another truth; with the confident
    bar (a verdict with a confidence) the share of each class's windows read at or above it too."""
    out = {
        "windows": len(pairs),
        "ac1": cm.ac1(pairs),
        "compound": cm.compound(pairs),
        "confusion": cm.confusion(pairs),
        "attribution": cm.attribution(pairs),
    }
    if confident_bar is not None:
        out["confident"] = cm.confident_share(pairs, confident_bar)
    return out


EXCESS_BINS_S = (0.1, 0.5)  # a fifth of the 0.5 s SLO, and the SLO itself: an excess small, large, a breach's worth


def by_kind(ta: Mapping[Key, cm.Truth], tb: Mapping[Key, cm.Truth]) -> dict[str, Any]:
    """Per cause kind: of the windows whose first truth holds it, the share whose second truth does too."""
    tally: dict[str, list[int]] = {}
    for k, t in ta.items():
        for kind in set(t.kinds):
            c = tally.setdefault(kind, [0, 0])
            c[0] += 1
            c[1] += kind in tb[k].kinds
    return {kind: {"windows": n, "kept": cm.rate(hits, n)} for kind, (n, hits) in sorted(tally.items())}


def _excess_bin(x: float | None) -> str:
    if x is None:
        return "immaterial"
    lo, hi = EXCESS_BINS_S
    return f"< {lo:g} s" if x < lo else (f"{lo:g}-{hi:g} s" if x < hi else f">= {hi:g} s")


def by_excess(ta: Mapping[Key, cm.Truth], tb: Mapping[Key, cm.Truth]) -> dict[str, Any]:
    """Truth-class agreement by the larger of the two generations' TTFT excess: where the noise lives."""
    tally: dict[str, list[int]] = {}
    for k, t in ta.items():
        xs = [x for x in (t.excess.get("ttft"), tb[k].excess.get("ttft")) if x is not None]
        c = tally.setdefault(_excess_bin(max(xs) if xs else None), [0, 0])
        c[0] += 1
        c[1] += t.primary == tb[k].primary
    order = ["immaterial", *(_excess_bin(x) for x in (0.0, *EXCESS_BINS_S))]
    return {b: {"windows": tally[b][0], "same_class": cm.rate(tally[b][1], tally[b][0])} for b in order if b in tally}


def _key(line: Mapping[str, Any]) -> Key:
    return (int(line["seed"]), str(line["run"]), str(line["tier"]), int(line["window"]))


def _same_class(pairs: Sequence[tuple[cm.Truth, cm.Verdict]]) -> float | None:
    return cm.rate(sum(t.primary == v.primary for t, v in pairs), len(pairs))


def compare(
    first_lines: Sequence[Mapping[str, Any]],
    second_lines: Sequence[Mapping[str, Any]],
    confident_bar: float,
    *,
    classifier: bool = True,
) -> dict[str, Any]:
    """Over the windows both generations measured: the second truth scored against the first (and
    the reverse); each generation's runs judged against the other's counterfactual runs (what a
    remeasured twin alone changes: noise no reading of the window itself can foresee); the
    classifier on each generation."""
    a = {_key(r): cm.Truth.of(r.get("truth") or {}, str(r["tier"])) for r in first_lines}
    b = {_key(r): cm.Truth.of(r.get("truth") or {}, str(r["tier"])) for r in second_lines}
    keys = sorted(set(a) & set(b))
    ta, tb = {k: a[k] for k in keys}, {k: b[k] for k in keys}
    same_set = sum(set(ta[k].causes) == set(tb[k].causes) for k in keys)
    fwd = [(ta[k], truth_as_verdict(tb[k])) for k in keys]
    rev = [(tb[k], truth_as_verdict(ta[k])) for k in keys]
    swapped: dict[str, Any] = {}
    for label, lines, other, t_own in (("first_runs", first_lines, second_lines, ta), ("second_runs", second_lines, first_lines, tb)):
        cf = Counterfactuals(other)
        pairs = []
        for line in lines:
            k = _key(line)
            if k in t_own and (t := rejudge(line, cf)) is not None:
                pairs.append((t_own[k], truth_as_verdict(cm.Truth.of(t, k[2]))))
        swapped[label] = {"same_class": _same_class(pairs), **truth_figures(pairs)}
    out: dict[str, Any] = {
        "windows": len(keys),
        "only_first": len(set(a) - set(b)),
        "only_second": len(set(b) - set(a)),
        "seeds": sorted({k[0] for k in keys}),
        "truth": {
            "same_class": _same_class(fwd),
            "same_cause_set": cm.rate(same_set, len(keys)),
            "kinds_kept": {"first_in_second": by_kind(ta, tb), "second_in_first": by_kind(tb, ta)},
            "by_excess": by_excess(ta, tb),
            "second_against_first": truth_figures(fwd),
            "first_against_second": truth_figures(rev),
        },
        "twins_remeasured": swapped,
        "inferslice": {},
    }
    first, second = (labelled(first_lines), labelled(second_lines)) if classifier else ([], [])
    for source in sorted({w.source for w in (*first, *second)}):
        va, vb = _by_key(first, source), _by_key(second, source)
        both = [k for k in keys if k in va and k in vb]
        da = {k: inferslice_verdict(va[k]) for k in both}
        db = {k: inferslice_verdict(vb[k]) for k in both}
        out["inferslice"][source] = {
            "windows": len(both),
            "same_verdict": cm.rate(sum(da[k].primary == db[k].primary for k in both), len(both)),
            "first": truth_figures([(ta[k], da[k]) for k in both], confident_bar),
            "second": truth_figures([(tb[k], db[k]) for k in both], confident_bar),
        }
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _pp(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def _cell(f: Mapping[str, Any], cls: str, tier: str) -> tuple[int, float | None]:
    c = f["ac1"].get(cls, {}).get(tier) or {}
    return int(c.get("windows", 0)), c.get("ac1")


def markdown(r: Mapping[str, Any], tiers: Sequence[str] = ("all", "free", "standard", "premium")) -> str:
    t, sw = r["truth"], r["twins_remeasured"]
    views = [
        ("truth 2 on 1", t["second_against_first"]),
        ("truth 1 on 2", t["first_against_second"]),
        ("run 1, twins 2", sw["first_runs"]),
        ("run 2, twins 1", sw["second_runs"]),
    ]
    sources = sorted(r["inferslice"])
    lines = [
        f"{r['windows']} windows measured in both generations (seeds {', '.join(map(str, r['seeds']))});"
        f" {r['only_first']} only in the first, {r['only_second']} only in the second.",
        f"Same truth class: {_pct(t['same_class'])} %; same cause set: {_pct(t['same_cause_set'])} %. With only the"
        f" counterfactual twins remeasured (each generation's runs judged against the other's twins): same class"
        f" {_pct(sw['first_runs']['same_class'])} / {_pct(sw['second_runs']['same_class'])} %.",
        "",
        "AC@1 per (class, tier), % (windows), of one truth as a verdict on another"
        + (f"; inferslice on each generation, {' / '.join(sources)}." if sources else "."),
        "",
        "| class / tier | " + " | ".join(v for v, _ in views) + (" | inferslice, 1st | inferslice, 2nd |" if sources else " |"),
        "|---|" + "---|" * (len(views) + (2 if sources else 0)),
    ]
    for cls in cm.CLASSES:
        for tier in tiers:
            cells = [_cell(f, cls, tier) for _, f in views]
            if not any(n for n, _ in cells):
                continue
            ours = [" / ".join(_pct(_cell(r["inferslice"][s][g], cls, tier)[1]) for s in sources) for g in ("first", "second")]
            shown = " | ".join(f"{_pct(x)} ({n})" for n, x in cells)
            lines.append(f"| {cls} / {tier} | {shown} |" + (f" {ours[0]} | {ours[1]} |" if sources else ""))
    kk = t["kinds_kept"]
    lines += ["", "Each cause kind kept when measured again, % (windows): of the windows whose first truth holds it,"
              " the share whose second does too / the reverse:", ""]  # fmt: skip
    for kind in sorted(set(kk["first_in_second"]) | set(kk["second_in_first"])):
        f, g = kk["first_in_second"].get(kind) or {}, kk["second_in_first"].get(kind) or {}
        lines.append(f"- {kind}: {_pct(f.get('kept'))} ({f.get('windows', 0)}) / {_pct(g.get('kept'))} ({g.get('windows', 0)})")
    lines += ["", "Same truth class by the larger TTFT excess of the two generations, % (windows):", ""]
    lines += [f"- {b}: {_pct(v['same_class'])} ({v['windows']})" for b, v in t["by_excess"].items()]
    lines += ["", "Exact cause set per compound pair, % (windows):", ""]
    lines += ["| pair | " + " | ".join(v for v, _ in views) + " |", "|---|" + "---|" * len(views)]
    for pair in sorted(set().union(*(f["compound"] for _, f in views))):
        pairs = [f["compound"].get(pair) or {} for _, f in views]
        lines.append(f"| {pair} | " + " | ".join(f"{_pct(c.get('accuracy'))} ({c.get('windows', 0)})" for c in pairs) + " |")
    lines += ["", "Attribution error, pp (pairs): mean / P90 on pairs whose true share is > 0; all pairs beside.", ""]
    lines += ["| what | true share > 0 | all pairs |", "|---|---|---|"]

    def att(a: Mapping[str, Any]) -> tuple[str, str]:
        p, e = a["true_share_positive"], a["all_pairs"]
        return (f"{_pp(p['mean_pp'])} / {_pp(p['p90_pp'])} ({p['pairs']})", f"{_pp(e['mean_pp'])} ({e['pairs']})")

    for label, f in views:
        lines.append(f"| {label} | " + " | ".join(att(f["attribution"])) + " |")
    for s in sources:
        for g, label in (("first", "1st"), ("second", "2nd")):
            lines.append(f"| inferslice, {s}, {label} | " + " | ".join(att(r["inferslice"][s][g]["attribution"])) + " |")
    same = [f"{s} {_pct(r['inferslice'][s]['same_verdict'])} % of {r['inferslice'][s]['windows']}" for s in sources]
    if same:
        lines += ["", "inferslice's verdict the same in both generations: " + ", ".join(same) + "."]
    return "\n".join(lines) + "\n"


def add_subcommands(csub: Any) -> None:
    text = "the same seeds generated twice: how often the remeasured truth (and the classifier) agrees, per cell"
    p = csub.add_parser("repeat", help=text, description=text)
    p.add_argument("first", type=Path, nargs="+", help="corpus directories or windows.jsonl[.gz]: the first generation")
    p.add_argument("second", type=Path, help="the same seeds generated again")
    p.add_argument("--out", type=Path, default=None, help="directory for repeat.json and repeat.md (default: print only)")
    p.add_argument("--seeds", default=None, help="only these seeds, A-B or A,B,... (default: every seed of the second)")
    p.add_argument(
        "--truth-only",
        action="store_true",
        help="leave the classifier out (when the generations' snapshots differ by more than the run, e.g. the exporter)",
    )
    text = "judge every window's truth again by today's rules from its statistics (rewrites windows.jsonl[.gz])"
    r = csub.add_parser("rejudge", help=text, description=text)
    r.add_argument("dirs", nargs="+", type=Path, help="generated corpus directories or windows.jsonl[.gz] files")
    r.add_argument("--check", action="store_true", help="write nothing; exit 1 when a window's truth would change")


def read_lines(path: Path) -> list[dict[str, Any]]:
    """A corpus directory's windows (or one windows.jsonl[.gz])."""
    files = files_of(path)
    return [r for f in files for r in read_jsonl(f)]


def _rejudge_main(args: argparse.Namespace) -> int:
    stale = 0
    for d in args.dirs:
        files = files_of(d)
        if not files:
            raise ValueError(f"no windows.jsonl[.gz] in {d}")
        for f in files:
            lines, changed = rejudged(list(read_jsonl(f)))
            stale += changed["any"]
            print(f"{f}: {changed['windows']} windows; truth changed in {changed['any']} (class {changed['class']},"
                  f" cause set {changed['cause_set']}); {changed['unjudged']} without the twins to judge")  # fmt: skip
            if not args.check:
                write_lines(f, lines)
    return 1 if args.check and stale else 0


def main(args: argparse.Namespace) -> int:
    from inferslice.diagnosis import CONFIDENT

    if args.corpus_command == "rejudge":
        return _rejudge_main(args)

    first = [r for path in args.first for r in read_lines(path)]
    second = read_lines(args.second)
    if not first or not second:
        raise ValueError(f"no corpus window in {' '.join(map(str, args.first)) if not first else args.second}")
    seeds = {int(r["seed"]) for r in second}
    if args.seeds:
        from inferslice.bench.corpus_draws import parse_seeds

        seeds &= set(parse_seeds(args.seeds))
    pick = [r for r in second if int(r["seed"]) in seeds]
    result = compare([r for r in first if int(r["seed"]) in seeds], pick, CONFIDENT, classifier=not args.truth_only)
    if not result["windows"]:
        raise ValueError("the two generations share no window (seed, twin, tier, window)")
    text = markdown(result)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "repeat.json").write_text(json.dumps(result, indent=1, sort_keys=True))
        (args.out / "repeat.md").write_text(text)
    print(text, end="")
    return 0
