"""Smoke-test an installed inferslice (a wheel in a clean venv, not the editable tree).

    VENV/bin/python .ci/wheel_smoke.py VENV WINDOWS.jsonl

Run from a directory outside the source tree: every import and every data file (console page,
topology, rules) must come from the venv's site-packages. Checks, each a line on stdout; exit 1 on
the first that fails:
- ``inferslice`` resolves to site-packages of VENV, and ``inferslice --help`` lists the subcommands;
- ``inferslice api`` serves ``GET /console`` and every static asset the page names, followed through
  the ES-module imports, each 200 with a usable content type;
- ``inferslice dashboards build`` writes the dashboards and rules, with ``--check`` (promtool, amtool)
  where those are installed;
- ``inferslice diagnose`` classifies captured windows (WINDOWS.jsonl: lines holding a ``snapshot``,
  tests/fixtures/real-vllm/) into one diagnosis per window.
Standard library only, apart from inferslice itself.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urljoin

SUBCOMMANDS = ("testbed", "load", "exporter", "diagnose", "api", "dashboards", "demo", "bench", "control", "deploy")
JS_TYPES = ("text/javascript", "application/javascript")


class SmokeFailure(Exception):
    pass


def check(ok: bool, what: str) -> None:
    if not ok:
        raise SmokeFailure(what)
    print(f"wheel smoke: ok: {what}")


def run(cmd: list[str], timeout_s: float = 120.0, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, input=stdin, check=False)


def get(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.headers.get("content-type", ""), resp.read()
    except urllib.error.HTTPError as err:
        return err.code, "", b""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def installed_package(venv: Path) -> None:
    import inferslice

    where = Path(inferslice.__file__).resolve()
    check(venv.resolve() in where.parents and "site-packages" in where.parts, f"inferslice imported from the venv: {where}")
    proc = run([str(venv / "bin" / "inferslice"), "--help"])
    missing = [c for c in SUBCOMMANDS if c not in proc.stdout]
    check(proc.returncode == 0 and not missing, f"inferslice --help lists every subcommand (missing: {missing or 'none'})")


def console_assets(base: str) -> dict[str, str]:
    """GET /console, then every asset it names and every module those import: {url: content type}."""
    status, ctype, body = get(f"{base}/console")
    check(status == 200 and "text/html" in ctype, f"GET /console: {status} {ctype}")
    page = body.decode()
    pending = [urljoin(f"{base}/console", ref) for ref in re.findall(r'(?:href|src)="(/console/static/[^"]+)"', page)]
    check(len(pending) >= 2, f"the page names its static assets ({len(pending)})")
    seen: dict[str, str] = {}
    while pending:
        url = pending.pop()
        if url in seen:
            continue
        status, ctype, body = get(url)
        check(status == 200 and len(body) > 0, f"GET {url[len(base):]}: {status}, {len(body)} bytes")
        seen[url] = ctype
        if url.endswith(".js"):
            check(any(t in ctype for t in JS_TYPES), f"{url[len(base):]} is served as JavaScript ({ctype})")
            for ref in re.findall(r'^\s*import\b[^;]*?from\s+"(\.[^"]+)"', body.decode(), flags=re.M):
                pending.append(urljoin(url, ref))
    return seen


def api_console(venv: Path, work: Path) -> None:
    port = free_port()
    log = (work / "api.log").open("w")
    api = subprocess.Popen(
        [str(venv / "bin" / "inferslice"), "api", "--host", "127.0.0.1", "--port", str(port), "--db", str(work / "api.db"),
         "--log-level", "warning"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if api.poll() is not None:
                break
            try:
                if get(f"{base}/readyz")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.2)
        if api.poll() is not None or get(f"{base}/readyz")[0] != 200:
            raise SmokeFailure(f"inferslice api did not get ready: {(work / 'api.log').read_text()[-2000:]}")
        assets = console_assets(base)
        check(any(u.endswith("uPlot.esm.js") for u in assets), "the vendored uPlot is served")
    finally:
        api.terminate()
        try:
            api.wait(timeout=10)
        except subprocess.TimeoutExpired:
            api.kill()
            api.wait()
        log.close()


def dashboards(venv: Path, work: Path) -> None:
    out = work / "dashboards"
    cmd = [str(venv / "bin" / "inferslice"), "dashboards", "build", "--out", str(out)]
    if shutil.which("promtool") and shutil.which("amtool"):
        cmd.append("--check")
    proc = run(cmd, timeout_s=300)
    check(proc.returncode == 0, f"{' '.join(cmd[1:])}: exit {proc.returncode} {proc.stderr[-1500:]}")
    files = [p for p in out.rglob("*") if p.is_file()]
    check(any(p.suffix == ".json" for p in files) and any(p.suffix in (".yml", ".yaml") for p in files),
          f"dashboards build wrote dashboards and rules ({len(files)} files)")  # fmt: skip


def diagnose(venv: Path, windows: Path) -> None:
    snapshots = [json.loads(line)["snapshot"] for line in windows.read_text().splitlines() if line.strip()]
    text = "".join(json.dumps(s) + "\n" for s in snapshots)
    proc = run([str(venv / "bin" / "inferslice"), "diagnose"], stdin=text)
    out = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    check(proc.returncode == 0 and len(out) == len(snapshots), f"diagnose: {len(out)} diagnoses for {len(snapshots)} windows")
    regimes = {d.get("regime") for d in out}
    check(None not in regimes and len(regimes) >= 2, f"every diagnosis has a regime ({sorted(map(str, regimes))})")


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    venv, windows = Path(argv[1]), Path(argv[2]).resolve()
    with tempfile.TemporaryDirectory(prefix="wheel-smoke-") as tmp:
        work = Path(tmp)
        try:
            installed_package(venv)
            api_console(venv, work)
            dashboards(venv, work)
            diagnose(venv, windows)
        except (SmokeFailure, OSError, subprocess.SubprocessError, ValueError, KeyError) as err:
            print(f"wheel smoke: FAILED: {err}", file=sys.stderr)
            return 1
    print("wheel smoke: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
