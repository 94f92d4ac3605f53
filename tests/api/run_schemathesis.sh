#!/usr/bin/env bash
# Schemathesis (all checks; examples, coverage, fuzzing and stateful phases) against a live
# `inferslice api` on 127.0.0.1 with a bearer token. Exit status: schemathesis's (0 = no failure).
#   tests/api/run_schemathesis.sh [MAX_EXAMPLES] [extra schemathesis args...]
# Needs the test extra (schemathesis). Leaves nothing behind: the API is stopped by PID, its
# database and token live in a temporary directory that is removed.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${VENV_BIN:-$root/.venv/bin}
max_examples=${1:-50}
shift || true
work=$(mktemp -d)
port=$("$bin/python" -c 'from inferslice.common.ports import free_port; print(free_port())')
token=$("$bin/python" -c 'import secrets; print(secrets.token_urlsafe(24))')
printf '%s\n' "$token" > "$work/token"
chmod 600 "$work/token"
"$bin/inferslice" api --host 127.0.0.1 --port "$port" --db "$work/api.db" --token-file "$work/token" --log-level warning \
  > "$work/api.log" 2>&1 &
api_pid=$!
cleanup() { kill "$api_pid" 2>/dev/null || true; wait "$api_pid" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
base="http://127.0.0.1:$port"
for _ in $(seq 100); do
  if "$bin/python" -c "import httpx,sys; sys.exit(httpx.get('$base/readyz', timeout=1).status_code != 200)" 2>/dev/null; then break; fi
  sleep 0.1
done
# --header carries the token to every request; the ignored_auth check also sends them without it.
# Run from the scratch directory: schemathesis keeps its replay cassettes in ./.schemathesis.
cd "$work"
"$bin/schemathesis" run "$base/openapi.json" \
  --checks all --phases examples,coverage,fuzzing,stateful \
  --header "Authorization: Bearer $token" \
  --max-examples "$max_examples" --seed 1 --workers 1 \
  --suppress-health-check too_slow,filter_too_much \
  "$@"
