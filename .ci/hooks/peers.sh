#!/usr/bin/env bash
# CI hook: the diagnosis peers that need an environment of their own. RCD (RCAEval 1.8.1) runs only on
# causal-learn 0.1.2.3 with RCAEval's patch (bench/rcaeval-rcd/): `make rcd-venv` builds .venv-rcd in
# the clone and applies it, then tests/bench/test_rcd_peer.py runs RCD for real. That test skips in
# `make test` for want of exactly this install, so a failed install fails the hook. About 30 s warm
# (pip cache), a minute or two cold, on this 2-core machine.
set -uo pipefail
VENV_BIN=${VENV_BIN:-.venv/bin}
WORK=${CI_WORK:-$(mktemp -d)}
JUNIT_DIR=${CI_JUNIT_DIR:-$WORK/junit}
mkdir -p "$JUNIT_DIR"
SECONDS=0
echo "peers: building RCD's environment (make rcd-venv)"
if ! make --no-print-directory rcd-venv >"$WORK/rcd-venv.log" 2>&1; then
  echo "peers: FAILED: make rcd-venv:" >&2; grep -v "^WARNING: Location" "$WORK/rcd-venv.log" | tail -8 >&2
  exit 1
fi
echo "peers: .venv-rcd ready after ${SECONDS}s"
INFERSLICE_RCD_PYTHON="$PWD/.venv-rcd/bin/python" "$VENV_BIN/pytest" -q -p no:cacheprovider tests/bench/test_rcd_peer.py -rA \
  --junitxml="$JUNIT_DIR/peers-rcd.xml"
rc=$?
echo "peers: ${SECONDS}s in all"
exit $rc
