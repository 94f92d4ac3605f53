#!/usr/bin/env bash
# CI hook: the installed package, not the editable tree. The Dockerfile's path without a container
# runtime (none here): the files its build stage COPYs (deploy/Dockerfile, read here, so a folder it
# forgets fails this hook), `pip wheel` of the project and its dependencies into a folder, a clean venv
# that installs from that folder alone (--no-index), then .ci/wheel_smoke.py from outside the tree:
# --help, `inferslice api` with GET /console and every static asset, `dashboards build`, `diagnose` on
# captured windows (tests/fixtures/real-vllm/). The build must not warn "Package would be ignored".
set -euo pipefail
root=$(pwd)
WORK=${CI_WORK:-$(mktemp -d)}
stage="$WORK/wheel-src"
wheels="$WORK/wheels"
venv="$WORK/wheel-venv"
rm -rf "$stage" "$wheels" "$venv"
mkdir -p "$stage" "$wheels"
SECONDS=0

# COPY lines of the first stage (up to the second FROM), all but the last word: the sources.
mapfile -t sources < <(awk '/^FROM /{n++} n==1 && /^COPY / && !/--from/ {for (i = 2; i < NF; i++) print $i}' deploy/Dockerfile)
if [ ${#sources[@]} -eq 0 ]; then echo "wheel: no COPY lines in deploy/Dockerfile's build stage" >&2; exit 1; fi
for src in "${sources[@]}"; do cp -a --parents "${src%/}" "$stage/"; done
echo "wheel: staged what deploy/Dockerfile copies: ${sources[*]}"

python3 -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip
if ! (cd "$stage" && "$venv/bin/pip" wheel --wheel-dir "$wheels" .) >"$WORK/wheel-build.log" 2>&1; then
  echo "wheel: FAILED: pip wheel:" >&2; tail -20 "$WORK/wheel-build.log" >&2; exit 1
fi
if grep -q "would be ignored" "$WORK/wheel-build.log"; then
  echo "wheel: FAILED: setuptools ignores package data (declare it in setup.py's DATA_PACKAGES):" >&2
  grep -A1 "would be ignored" "$WORK/wheel-build.log" >&2; exit 1
fi
echo "wheel: built $(find "$wheels" -name 'inferslice-*.whl' -printf '%f') and $(find "$wheels" -name '*.whl' | wc -l) wheels in ${SECONDS}s"
"$venv/bin/pip" install -q --no-index --find-links "$wheels" inferslice
echo "wheel: installed into a clean venv (no index) after ${SECONDS}s"

cd "$WORK"  # nothing of the source tree on sys.path
"$venv/bin/python" "$root/.ci/wheel_smoke.py" "$venv" "$root/tests/fixtures/real-vllm/standard-cap-cut-windows.jsonl"
echo "wheel: ${SECONDS}s in all"
