"""The CI helpers (.ci/): the demo verdict check and the JUnit summary, on made-up reports."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / ".ci" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _summary(ok: list[bool], tiers: tuple[str, ...] = ("free", "standard", "premium")) -> dict[str, object]:
    phases = ["baseline", "three regimes", "remedies"]
    verdicts = []
    flags = iter(ok)
    for phase in phases:
        for tier in tiers:
            verdicts.append({"phase": phase, "tier": tier, "expected": "healthy", "observed": "healthy", "windows": 9, "ok": next(flags)})
    return {"verdicts": verdicts, "alerts": 3, "phases": [{"name": p, "start_s": 0.0, "end_s": 1.0} for p in phases]}


def test_every_verdict_met_passes() -> None:
    bad, line = _load("demo_verdicts").problems(_summary([True] * 9))
    assert bad == [] and line.startswith("9/9 phase verdicts met")


def test_a_verdict_not_met_is_named() -> None:
    ok = [True] * 9
    ok[4] = False  # three regimes / standard
    bad, line = _load("demo_verdicts").problems(_summary(ok))
    assert len(bad) == 1 and "three regimes / standard" in bad[0] and line.startswith("8/9")


def test_a_missing_verdict_fails_even_if_the_rest_are_met() -> None:
    summary = _summary([True] * 9)
    summary["verdicts"] = summary["verdicts"][:-1]  # type: ignore[index]
    bad, _ = _load("demo_verdicts").problems(summary)
    assert bad and "one verdict per phase and tier" in bad[0]


def test_a_remedy_the_story_expects_must_have_been_applied_in_its_phase() -> None:
    summary = _summary([True] * 9)
    remedies = summary["phases"][2]  # type: ignore[index]
    remedies.update({"start_s": 10.0, "end_s": 40.0, "expect_actions": {"premium": "relocate"}})
    demo = _load("demo_verdicts")
    bad, _ = demo.problems(summary)
    assert len(bad) == 1 and "remedies / premium: no relocate applied" in bad[0]
    move = {"tier": "premium", "kind": "relocate", "state": "applied", "decided_s": 12.0, "outcome": "effective"}
    summary["actions"] = [{**move, "decided_s": 50.0}]  # after the phase: not its remedy
    assert demo.problems(summary)[0]
    summary["actions"] = [{**move, "state": "dry_run"}]  # proposed only
    assert demo.problems(summary)[0]
    summary["actions"] = [{**move, "outcome": "ineffective"}]
    assert "judged ineffective" in demo.problems(summary)[0][0]
    step = {**move, "outcome": "insufficient"}  # a step the next one followed (control/outcomes.py)
    summary["actions"] = [step, {**move, "decided_s": 20.0}]  # the designed path: a step, then the one that cured
    assert demo.problems(summary)[0] == []
    summary["actions"] = [move, {**move, "outcome": "ineffective"}]  # one cured, the other measured not to
    assert "judged ineffective" in demo.problems(summary)[0][0]
    for unproven in ("unjudged", "superseded", "insufficient", None):  # no move proven to cure: not the story's evidence
        summary["actions"] = [{**move, "outcome": unproven}]
        assert "no relocate judged effective" in demo.problems(summary)[0][0]
    summary["actions"] = [move, {**move, "outcome": "superseded"}]  # one move proven is the story
    assert demo.problems(summary)[0] == []
    summary["actions"] = [move]
    assert demo.problems(summary)[0] == []


def test_the_verdict_script_exits_by_the_report(tmp_path: Path) -> None:
    script = ROOT / ".ci" / "demo_verdicts.py"
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(_summary([True] * 9)))
    bad.write_text(json.dumps(_summary([False] + [True] * 8)))
    assert subprocess.run([sys.executable, str(script), str(good)], capture_output=True).returncode == 0
    assert subprocess.run([sys.executable, str(script), str(bad)], capture_output=True).returncode == 1
    assert subprocess.run([sys.executable, str(script), str(tmp_path / "absent.json")], capture_output=True).returncode == 1


def _run(script: Path, summary: dict[str, object], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(summary))
    return subprocess.run([sys.executable, str(script), str(path)], capture_output=True, text=True)


def test_a_miss_only_in_phases_the_host_starved_is_void_and_any_other_miss_fails(tmp_path: Path) -> None:
    script = ROOT / ".ci" / "demo_verdicts.py"
    summary = _summary([True] * 6 + [False, True, False])  # remedies / free and premium missed
    phases = summary["phases"]  # type: ignore[index]
    for phase, share in zip(phases, (0.01, 0.0, 0.45), strict=True):  # type: ignore[call-overload]
        phase["host_steal_share"] = share
    assert _run(script, summary, tmp_path).returncode == 1  # no bar recorded: an older demo, judged as before
    summary["host_steal_starved_share"] = 0.10
    done = _run(script, summary, tmp_path)
    assert done.returncode == 3 and "VOID" in done.stderr and "remedies 45%" in done.stderr
    summary["verdicts"][0]["ok"] = False  # type: ignore[index]  # baseline / free missed at 1 % steal: inferslice's miss
    assert _run(script, summary, tmp_path).returncode == 1
    summary["verdicts"][0]["ok"] = True  # type: ignore[index]
    phases[2]["host_steal_share"] = None  # unmeasured is not starved
    assert _run(script, summary, tmp_path).returncode == 1


def test_the_approve_segment_belongs_to_the_approve_phase(tmp_path: Path) -> None:
    script = ROOT / ".ci" / "demo_verdicts.py"
    summary = _summary([True] * 9)
    summary["host_steal_starved_share"] = 0.10
    summary["approval"] = {"tier": "standard", "state": "none"}
    phases = summary["phases"]  # type: ignore[index]
    phases[2].update({"control": "approve", "host_steal_share": 0.5})  # type: ignore[union-attr]
    assert _run(script, summary, tmp_path).returncode == 3
    phases[2].update({"control": "auto"})  # type: ignore[union-attr]
    phases[1].update({"control": "approve", "host_steal_share": 0.0})  # type: ignore[union-attr]
    assert _run(script, summary, tmp_path).returncode == 1


def test_junit_summary_counts_and_lists_failures_and_skips() -> None:
    xml = """<testsuites><testsuite name="pytest" tests="3" failures="1" errors="0" skipped="1">
      <testcase classname="tests.a" name="test_ok"/>
      <testcase classname="tests.a" name="test_bad"><failure message="assert 1 == 2"/></testcase>
      <testcase classname="tests.b" name="test_root"><skipped message="needs root"/></testcase>
    </testsuite></testsuites>"""
    lines = _load("junit_summary").summarise(xml)
    assert lines[0] == "pytest: 3 tests, 1 failed, 0 errors, 1 skipped"
    assert any("failure" in x and "tests.a::test_bad" in x and "assert 1 == 2" in x for x in lines)
    assert any("skipped" in x and "needs root" in x for x in lines)
    assert not any("test_ok" in x for x in lines)


def test_ci_run_is_valid_bash_and_runs_both_readme_commands() -> None:
    run = ROOT / ".ci" / "run"
    assert subprocess.run(["bash", "-n", str(run)], capture_output=True).returncode == 0
    text = run.read_text()
    assert "git clone" in text and "make demo DEMO_PHASE_S=" in text and "make test" in text


# -- no green by skipping: .ci/junit_summary.py --check-skips over every report of a CI run ------------------
ALLOWED = ROOT / ".ci" / "allowed-skips.txt"


def _report(*cases: str) -> str:
    return f'<testsuites><testsuite name="pytest" tests="{len(cases)}">{"".join(cases)}</testsuite></testsuites>'


def _skipped(cls: str, name: str, reason: str, kind: str = "pytest.skip") -> str:
    return f'<testcase classname="{cls}" name="{name}"><skipped type="{kind}" message="{reason}">{reason}</skipped></testcase>'


def _passed(cls: str, name: str) -> str:
    return f'<testcase classname="{cls}" name="{name}" time="0.1"/>'


def _check(tmp_path: Path, *reports: str) -> subprocess.CompletedProcess[str]:
    paths = []
    for i, text in enumerate(reports):
        paths.append(tmp_path / f"r{i}.xml")
        paths[-1].write_text(text)
    return subprocess.run([sys.executable, str(ROOT / ".ci" / "junit_summary.py"), "--check-skips", str(ALLOWED), *map(str, paths)],
                          capture_output=True, text=True)  # fmt: skip


def test_a_skip_for_a_missing_tool_fails_ci(tmp_path: Path) -> None:
    missing_tool = _skipped("tests.deploy.test_cli", "test_render", "kubectl is not on PATH")
    proc = _check(tmp_path, _report(_passed("tests.a", "test_ok"), missing_tool))
    assert proc.returncode == 1 and "tests.deploy.test_cli::test_render" in proc.stderr and "kubectl" in proc.stderr


def test_a_skip_for_a_missing_gpu_is_allowed(tmp_path: Path) -> None:
    no_gpu = _skipped("tests.gpu", "test_nvml", "needs a GPU: no NVIDIA device on this machine")
    proc = _check(tmp_path, _report(_passed("tests.a", "test_ok"), no_gpu))
    assert proc.returncode == 0, proc.stderr
    assert "allowed skip" in proc.stdout and "tests.gpu::test_nvml" in proc.stdout


def test_a_gpu_word_elsewhere_in_a_reason_is_not_a_licence(tmp_path: Path) -> None:
    proc = _check(tmp_path, _report(_skipped("tests.gpu", "test_probe", "nvidia-ml-py is not installed (GPU exporter)")))
    assert proc.returncode == 1 and "tests.gpu::test_probe" in proc.stderr


def test_a_skip_in_make_test_run_by_a_hook_counts_as_run(tmp_path: Path) -> None:
    make_test = _report(
        _passed("tests.a", "test_ok"),
        # xdist's loadgroup suffix on the grouped test; the hook runs it without xdist
        _skipped("tests.rayserve.test_testbed_ray", "test_premium_on_ray@testbed", "ray is not installed"),
        _skipped("tests.engine_real.test_real_vllm", "test_real", "no vLLM venv"),
    )
    hook_ray = _report(_passed("tests.rayserve.test_testbed_ray", "test_premium_on_ray"))
    proc = _check(tmp_path, make_test, hook_ray)
    assert proc.returncode == 1, proc.stdout  # the vLLM test ran nowhere
    assert "test_real_vllm::test_real" in proc.stderr and "test_testbed_ray" not in proc.stderr
    hook_vllm = _report(_passed("tests.engine_real.test_real_vllm", "test_real"))
    assert _check(tmp_path, make_test, hook_ray, hook_vllm).returncode == 0


def test_an_xfail_is_a_skip_too(tmp_path: Path) -> None:
    proc = _check(tmp_path, _report(_skipped("tests.a", "test_known_bug", "flaky under load", kind="pytest.xfail")))
    assert proc.returncode == 1 and "tests.a::test_known_bug" in proc.stderr


def test_an_unreadable_report_fails(tmp_path: Path) -> None:
    assert _check(tmp_path, "<testsuites><testsuite").returncode == 1


def test_the_dockerfile_build_stage_copies_every_installed_folder() -> None:
    """.ci/hooks/wheel.sh builds the wheel from what deploy/Dockerfile's build stage COPYs: a mapped folder
    it forgets would be missing from the image (setup.py skips a folder that is absent)."""
    import ast

    tree = ast.parse((ROOT / "setup.py").read_text())
    assigns = [n for n in ast.walk(tree) if isinstance(n, ast.Assign)]
    mapped = next(ast.literal_eval(n.value) for n in assigns if getattr(n.targets[0], "id", "") == "MAPPED")
    sources: list[str] = []
    stage = 0
    for line in (ROOT / "deploy" / "Dockerfile").read_text().splitlines():
        if line.startswith("FROM "):
            stage += 1
        elif stage == 1 and line.startswith("COPY ") and "--from" not in line:
            sources += [s.rstrip("/") for s in line.split()[1:-1]]
    wanted = {"pyproject.toml", "setup.py", "README.md", "inferslice"} | {d for d in mapped if (ROOT / d / "__init__.py").exists()}
    assert wanted <= set(sources), sorted(wanted - set(sources))
    script = (ROOT / ".ci" / "hooks" / "wheel.sh").read_text()
    assert "--no-index" in script and "wheel_smoke.py" in script and "would be ignored" in script
