#!/usr/bin/env bash
# Static checks: ruff, mypy (strict) and the import-layering contracts.
# mypy and import-linter cannot follow setup.py's package_dir mapping (exporters/ ->
# inferslice.exporters), so build a tree of symlinks that mirrors the installed layout and check that.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${VENV_BIN:-$root/.venv/bin}
tree="$root/.typecheck"
rm -rf "$tree" && mkdir -p "$tree/inferslice"
for f in "$root"/inferslice/*; do ln -s "$f" "$tree/inferslice/$(basename "$f")"; done
for d in common exporters collectors dashboards bottleneck control deploy testbed service cli bench; do
  if [ -f "$root/$d/__init__.py" ]; then ln -s "$root/$d" "$tree/inferslice/$d"; fi
done
echo "== ruff"; "$bin/ruff" check "$root"
echo "== mypy"; (cd "$tree" && "$bin/mypy" --config-file "$root/pyproject.toml" -p inferslice)
echo "== import-linter"; (cd "$tree" && PYTHONPATH="$tree" "$bin/lint-imports" "$root/pyproject.toml" --no-cache)
