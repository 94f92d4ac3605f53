"""``inferslice bench``: the benchmarks of ``inferslice.bench``, each as ratios to a same-run baseline.

    inferslice bench exporter [--sizes 100,1000] [--repeat 15]     (root, prometheus-node-exporter)
    inferslice bench classifier [--n 20000] [--api]
    inferslice bench engine [--tier T] [--concurrency C] [--duration-s 60]
    inferslice bench diagnosis [--diagnosis-out DIR] [--repetitions 2] [--windows 4,6,8] [--set NAME=VALUE]
                                                                    (root: runs on the testbed, ~5 min)
    inferslice bench diagnosis --rescore [--set NAME=VALUE]        (replay a finished run's windows, seconds)
    inferslice bench diagnosis --corpus [--rerun-rca]              (the labelled corpus: accuracy, peers, attribution)
    inferslice bench control [--out DIR] [--seeds 1,2,3] [--scenarios ...] [--policies ...]   (model, ~30 s)
    inferslice bench console [--out DIR] [--no-browser]                (API cost of a live update, page load in chromium)
    inferslice bench scale [--pops 100] [--tiers 10] [--rounds 4]  (1,000 slices: exporter, diagnosis round, PromQL)
    inferslice bench all --out DIR                                  (each as DIR/<name>.json + DIR/summary.md)
    inferslice bench docs [--check] [--root DIR] [FILE ...]        (the docs' marked figures from bench/results/)
    inferslice bench corpus score --corpus DIR --seeds A-B --split test|blind --tune-seeds C-D --out DIR
                                                                    (issue 17's figures, the verdict code's hash recorded)
    inferslice bench corpus calibrate --corpus DIR --seeds C-D      (fit bottleneck/calibration.py on the tune seeds)

Each prints a markdown summary; ``--json FILE`` (``-`` for stdout) also writes the raw result.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from inferslice.errors import ConfigError, PermanentError

HELP = "benchmarks, reported as ratios against a baseline run in the same process"
NAMES = ("exporter", "classifier", "engine")


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated interface counts, got {text!r}") from None
    if not sizes or any(n < 1 for n in sizes):
        raise argparse.ArgumentTypeError(f"expected positive interface counts, got {text!r}")
    return sizes


def _runs(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of runs, got {text!r}") from None
    if n < 9:
        raise argparse.ArgumentTypeError(f"a median of paired runs needs at least 9, got {n}")
    return n


def _add_exporter(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sizes", type=_sizes, default=(100, 1000), help="interface counts (default 100,1000)")
    p.add_argument(
        "--repeat", type=_runs, default=15, help="paired runs (each scrapes every variant once), median reported (default 15, at least 9)"
    )


def _add_classifier(p: argparse.ArgumentParser) -> None:
    p.add_argument("--n", type=int, default=20000, help="snapshots (default 20000)")
    p.add_argument("--api", action="store_true", help="also the API latency benchmark (uvicorn child, ~duration s)")
    p.add_argument("--rate", type=float, default=200.0, help="API requests per second (default 200)")
    p.add_argument("--duration", type=float, default=10.0, help="API load seconds (default 10)")


def _add_engine(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topology", default=None, help="tiers file (default: the packaged one)")
    p.add_argument("--tier", action="append", default=None, help="tier to simulate (repeatable; default all)")
    p.add_argument("--concurrency", type=int, action="append", default=None, help="client count (repeatable)")
    p.add_argument("--duration-s", type=float, default=60.0, help="simulated seconds per point (default 60)")


def _add_diagnosis(p: argparse.ArgumentParser) -> None:
    p.add_argument("--diagnosis-out", default="bench/results/diagnosis", help="directory for the run's windows and report")
    p.add_argument("--repetitions", type=int, default=2, help="changes per injection (default 2)")
    p.add_argument("--state-dir", default=None, help="testbed state directory (default /run/inferslice)")
    p.add_argument("--diagnosis-topology", default=None, help="tiers file when the benchmark brings the testbed up")
    p.add_argument("--windows", default="4,6,8", help="comma-separated window lengths (s), evaluated side by side")
    p.add_argument("--sources", default="prometheus,embedded", help="comma-separated sources, evaluated side by side")
    p.add_argument("--baseline-s", type=float, default=None, help="healthy load before the first change")
    p.add_argument("--hold-s", type=float, default=None, help="how long each change holds")
    p.add_argument("--recover-s", type=float, default=None, help="how long each reverse change holds")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="override a classifier threshold (repeatable)")
    p.add_argument(
        "--injection-tier", action="append", default=None, metavar="TIER", help="inject only on this tier (repeatable; default all)"
    )
    p.add_argument("--injection-clients", action="append", default=[], metavar="TIER=N", help="a tier's steady client count (repeatable)")
    p.add_argument("--rescore", action="store_true", help="replay the recorded windows in --diagnosis-out instead of running")
    p.add_argument("--corpus", action="store_true", help="score the classifier and its peers on the labelled corpus (no testbed)")
    p.add_argument("--rcaeval-python", default=None, help="interpreter with RCAEval (default $INFERSLICE_RCAEVAL_PYTHON, .venv-rcaeval)")
    p.add_argument("--rerun-rca", action="store_true", help="rerun the RCAEval peers instead of reusing rca-ranks.json")


def _thresholds(pairs: list[str]) -> Any:
    import dataclasses

    from inferslice.bottleneck import DEFAULT, Thresholds

    names = {f.name for f in dataclasses.fields(Thresholds)}
    values = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        if key not in names:
            raise ConfigError(f"unknown threshold {key!r} (have {', '.join(sorted(names))})", "--set")
        values[key] = float(value)
    return dataclasses.replace(DEFAULT, **values)


def _run_diagnosis(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    import dataclasses
    import os

    from inferslice.bench import diagnosis
    from inferslice.common.registry import DEFAULT_STATE_DIR

    out = Path(args.diagnosis_out)
    thresholds = _thresholds(args.set)
    if args.corpus:
        from inferslice.bench import corpus_eval, corpus_peers, corpus_run

        repo = Path(__file__).resolve().parent.parent
        python = args.rcaeval_python or corpus_peers.peer_python(repo, "rcaeval")
        result = corpus_run.run(out, out.parent, python, rerun_rca=args.rerun_rca)
        return result, corpus_eval.markdown(result)
    if args.rescore:
        result = diagnosis.rescore(out, thresholds, args.diagnosis_topology)
        (out / "rescored").mkdir(parents=True, exist_ok=True)
        diagnosis.write(result, out / "rescored")
        return result, diagnosis.markdown(result)
    if os.geteuid() != 0:
        raise ConfigError("the diagnosis benchmark runs on the testbed, which needs root")
    given = (("baseline_s", args.baseline_s), ("hold_s", args.hold_s), ("recover_s", args.recover_s))
    overrides = {k: v for k, v in given if v is not None}
    settings = dataclasses.replace(
        diagnosis.BenchSettings(repetitions=args.repetitions),
        windows_s=tuple(float(w) for w in args.windows.split(",") if w.strip()),
        sources=tuple(s.strip() for s in args.sources.split(",") if s.strip()),
        **overrides,
    )
    clients: dict[str, int] = {}
    for pair in args.injection_clients:
        tier, _, n = pair.partition("=")
        if not n.strip().isdigit():
            raise ConfigError(f"expected TIER=N, got {pair!r}", "--injection-clients")
        clients[tier.strip()] = int(n)
    try:
        injections = diagnosis.select_injections(args.injection_tier, clients)
    except PermanentError as err:
        raise ConfigError(str(err), "--injection-tier") from err
    state_dir = Path(args.state_dir) if args.state_dir else DEFAULT_STATE_DIR
    result = diagnosis.run(out, settings, injections, state_dir=state_dir, topology_path=args.diagnosis_topology, thresholds=thresholds)
    return result, diagnosis.markdown(result)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="bench", metavar="BENCHMARK", required=True)
    p = sub.add_parser("diagnosis", help="time to the first correct diagnosis of injected regimes, on the testbed")
    _add_diagnosis(p)
    p.add_argument("--json", metavar="FILE", default=None, help="also write the raw result as JSON ('-': stdout)")
    for name, add, text in (
        ("exporter", _add_exporter, "network exporter scrape vs node_exporter's netdev collector"),
        ("classifier", _add_classifier, "classifier throughput vs parsing alone (and API latency with --api)"),
        ("engine", _add_engine, "engine model calibration, each tier against its own concurrency-1 run"),
    ):
        p = sub.add_parser(name, help=text, description=text)
        add(p)
        p.add_argument("--json", metavar="FILE", default=None, help="also write the raw result as JSON ('-': stdout)")
    text = "control policies (inferslice, its ablations, Ray Serve, KEDA, llm-d WVA, TTFT threshold, the composite peers) x nine scenarios"
    p = sub.add_parser("control", help=text, description=text)
    from inferslice.bench import control as control_bench  # here: only `bench control` pays for the controller's imports

    control_bench.add_arguments(p)
    text = "the operator console at 10 tiers x 20 PoPs: API cost of a live update, page load in chromium"
    p = sub.add_parser("console", help=text, description=text)
    from inferslice.bench import console as console_bench

    console_bench.add_arguments(p)
    text = "100 PoPs x 10 tiers: exporter series and scrape cost per node, one diagnosis round for 1,000 slices, PromQL work"
    p = sub.add_parser("scale", help=text, description=text)
    from inferslice.bench import scale as scale_bench

    scale_bench.add_arguments(p)
    text = "the randomised counterfactual diagnosis corpus (issue 17): generate windows on the testbed, calibrate, tune, score"
    p = sub.add_parser("corpus", help=text, description=text)
    csub = p.add_subparsers(dest="corpus_command", metavar="ACTION", required=True)
    g = csub.add_parser("generate", help="run seeds' twins on the testbed and label every window by counterfactual",
                        description="run seeds' twins on the testbed and label every window by counterfactual")
    g.add_argument("--seeds", required=True, help="seeds A-B (inclusive), or A, or A-B,C,...")
    g.add_argument("--out", required=True, type=Path, help="directory for windows.jsonl, seeds/, generate.json (resumes)")
    g.add_argument("--topology", default=None, help="base topology (default: testbed/topology.yaml)")
    g.add_argument("--state-dir", type=Path, default=Path("/run/inferslice-corpus"), help="the testbed's state directory")
    g.add_argument("--engine", default=None, metavar="TIER=vllm",
                   help="serve TIER with a real vLLM (CPU) and draw single causes on it (cap, load, CPU quota)")
    g.add_argument("--vllm-venv", default=None, help="the vLLM venv (default $INFERSLICE_VLLM_VENV or ./.venv-vllm)")
    s = csub.add_parser("summary", help="windows per (class, tier) cell and compound pair, yield per seed, testbed time",
                        description="windows per (class, tier) cell and compound pair, yield per seed, testbed time")
    s.add_argument("dirs", nargs="+", type=Path, help="generated corpus directories (windows.jsonl[.gz], generate.json)")
    s.add_argument("--json", action="store_true", help="print the summary as JSON")
    from inferslice.bench import corpus_score

    corpus_score.add_subcommands(csub)  # calibrate, tune, score
    from inferslice.bench import corpus_repeat

    corpus_repeat.add_subcommands(csub)  # repeat, rejudge
    from inferslice.bench import corpus_fieldcheck

    corpus_fieldcheck.add_subcommands(csub)
    text = "rewrite the figures marked <!-- fig:... --> in the docs from the committed results (bench/docfigs.py)"
    p = sub.add_parser("docs", help=text, description=text)
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 listing every figure that differs from its result")
    p.add_argument("--root", default=".", help="the repository root the markers' paths are relative to (default: .)")
    p.add_argument("files", nargs="*", help="markdown files (default: README.md, docs/**/*.md, bench/results/**/*.md)")
    p = sub.add_parser("all", help="every benchmark; JSON + markdown into --out", description="every benchmark")
    p.add_argument("--out", required=True, help="directory for <name>.json and summary.md")
    p.add_argument("--only", default=",".join(NAMES), help=f"comma-separated subset of {','.join(NAMES)}")
    _add_exporter(p)
    _add_classifier(p)
    _add_engine(p)
    _add_diagnosis(p)


def _run_one(name: str, args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    if name == "exporter":
        from inferslice.bench import network_exporter

        try:
            result = network_exporter.run(args.sizes, args.repeat)
        except network_exporter.Unavailable as err:
            return {"benchmark": "exporter", "skipped": str(err)}, f"skipped: {err}\n"
        return result, network_exporter.markdown(result)
    if name == "classifier":
        from inferslice.bench import classifier

        result = classifier.run(args.n, api=args.api, rate=args.rate, duration_s=args.duration)
        return result, classifier.markdown(result)
    if name == "engine":
        from inferslice.bench import engine

        levels = tuple(args.concurrency) if args.concurrency else engine.DEFAULT_LEVELS
        result = engine.run(args.topology, tuple(args.tier) if args.tier else None, levels, args.duration_s)
        return result, engine.markdown(result)
    if name == "diagnosis":
        return _run_diagnosis(args)
    raise ConfigError(f"unknown benchmark {name!r} (expected one of {', '.join(NAMES)})")


def _json(result: dict[str, Any]) -> str:
    def clean(x: Any) -> Any:  # NaN is not JSON; a point with no samples becomes null
        if isinstance(x, float) and not math.isfinite(x):
            return None
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        return x

    return json.dumps(clean(result), indent=2, sort_keys=True) + "\n"


def _run_docs(args: argparse.Namespace) -> int:
    from inferslice.bench import docfigs

    root = Path(args.root)
    files = [Path(f) for f in args.files] if args.files else docfigs.doc_files(root)
    try:
        stale, seen = docfigs.update(root.resolve(), [f.resolve() for f in files], write=not args.check)
    except (OSError, PermanentError) as err:
        print(f"inferslice bench docs: {err}", file=sys.stderr)
        return 1
    for s in stale:
        print(f"{s.file}:{s.line}: {s.shown!r} -> {s.expected!r}  ({s.spec})")
    verb = "stale" if args.check else "rewritten"
    print(f"{seen} figures in {len(files)} files, {len(stale)} {verb}", file=sys.stderr)
    return 1 if (args.check and stale) else 0


def run(args: argparse.Namespace) -> int:
    if args.bench == "docs":
        return _run_docs(args)
    if args.bench == "corpus" and args.corpus_command in ("repeat", "rejudge"):
        from inferslice.bench import corpus_repeat

        try:
            return corpus_repeat.main(args)
        except ValueError as err:
            raise ConfigError(str(err)) from None
    if args.bench == "corpus" and args.corpus_command == "fieldcheck":
        from inferslice.bench import corpus_fieldcheck

        try:
            return corpus_fieldcheck.main(args, Path(__file__).resolve().parents[1])
        except ValueError as err:
            raise ConfigError(str(err)) from None
    if args.bench == "corpus" and args.corpus_command not in ("generate", "summary"):  # calibrate, tune, score
        from inferslice.bench import corpus_score  # (its COMMANDS; summary and generate are handled below)

        try:
            return corpus_score.main(args, Path(__file__).resolve().parents[1])
        except ValueError as err:
            raise ConfigError(str(err)) from None
    if args.bench == "control":  # writes its own summary.json, plots and report.md into --out
        from inferslice.bench import control as control_bench

        return control_bench.run(args)
    if args.bench == "corpus" and args.corpus_command == "summary":
        from inferslice.bench import corpus_summary

        for d in args.dirs:
            path = d / "windows.jsonl" if (d / "windows.jsonl").exists() else d / "windows.jsonl.gz"
            if not path.exists():
                raise ConfigError(f"no windows.jsonl[.gz] in {d}", "dirs")
            meta = json.loads((d / "generate.json").read_text()) if (d / "generate.json").exists() else None
            counts = corpus_summary.summarize(corpus_summary.read_windows(path), meta)
            print(json.dumps(counts, indent=1) if args.json else f"## {d}\n\n" + corpus_summary.markdown(counts))
        return 0
    if args.bench == "corpus":  # writes windows.jsonl, seeds/ and generate.json into --out
        from inferslice.bench import corpus_draws, corpus_gen

        try:
            seeds = corpus_draws.parse_seeds(args.seeds)
        except ValueError as err:
            raise ConfigError(str(err), "--seeds") from None
        settings = corpus_gen.GenSettings()
        if args.engine:
            tier, _, engine = args.engine.partition("=")
            if engine != "vllm" or not tier:
                raise ConfigError(f"expected TIER=vllm, got {args.engine!r}", "--engine")
            settings = corpus_gen.GenSettings(real_tier=tier, vllm_venv=args.vllm_venv)
        meta = corpus_gen.generate(seeds, args.out, args.state_dir, args.topology, settings)
        done = {s: v for s, v in meta["seeds"].items() if int(s) in seeds}
        print(f"{len(done)} seeds, {sum(v['windows'] for v in done.values())} windows in {args.out / corpus_gen.WINDOWS_FILE}")
        return 0
    if args.bench == "console":  # writes console.json and console.md into --out
        from inferslice.bench import console as console_bench

        return console_bench.run(args)
    if args.bench == "scale":  # needs prometheus for the prometheus source; two cores to pin apart
        from inferslice.bench import scale as scale_bench

        return scale_bench.run(args)
    if args.bench != "all":
        result, summary = _run_one(args.bench, args)
        if args.json == "-":
            sys.stdout.write(_json(result))  # JSON alone on stdout: the summary goes to stderr
            sys.stderr.write(summary)
        else:
            sys.stdout.write(summary)
            if args.json:
                Path(args.json).write_text(_json(result))
        return 0
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    for name in names:
        if name not in (*NAMES, "diagnosis"):
            raise ConfigError(f"unknown benchmark {name!r} (expected one of {', '.join(NAMES)})", "--only")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sections = ["# inferslice benchmarks", ""]
    for name in names:
        print(f"inferslice bench: {name} ...", file=sys.stderr, flush=True)
        result, summary = _run_one(name, args)
        (out / f"{name}.json").write_text(_json(result))
        sections += [f"## {name}", "", summary]
    (out / "summary.md").write_text("\n".join(sections))
    sys.stdout.write("\n".join(sections))
    return 0
