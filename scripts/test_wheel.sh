#!/usr/bin/env bash
# Install the repaired wheel from dist/ (scripts/wheel.sh) into a fresh venv with no C
# compiler, then run the tests against that installed package, not the tree.
#
#   bash scripts/test_wheel.sh [pytest args...]     (make test runs the suite this way)
#
# The venv sees $PYTHON's site-packages, so numpy, torch and the test tools installed by
# `make setup` are not installed twice; the editable fsmcompile there loses to the wheel
# (a venv's own site-packages comes first on sys.path, and the editable finder only answers
# what no path entry holds). CC=/bin/false, cc and gcc that are /bin/false, and
# --only-binary make any attempt to compile fail. The tests run from the repository root
# with the tree's tests/ (they read tests/data, grammars/ and ../shared), under
# PYTHONSAFEPATH=1 (Python 3.11+) so neither the current directory nor a script's own
# folder lands first on sys.path, in pytest and every Python it starts;
# FSMCOMPILE_TEST_INSTALLED=1 makes tests/conftest.py stop the run when fsmcompile is
# imported from the tree anyway.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
venv=$(realpath -m "${WHEEL_VENV:-build/wheel-venv}")
shopt -s nullglob
wheels=(dist/fsmcompile-*manylinux*.whl)
if [ "${#wheels[@]}" -ne 1 ]; then
  echo "test_wheel: want one repaired wheel in dist/, found ${#wheels[@]} (run make wheel)" >&2
  exit 2
fi

rm -rf "$venv"
"$PYTHON" -m venv --without-pip --system-site-packages "$venv" # pip comes from $PYTHON
# No compiler by any name, for the install and the tests alike.
mkdir "$venv/no-compiler"
for tool in cc gcc c++ g++ clang clang++; do ln -s /bin/false "$venv/no-compiler/$tool"; done
export PATH="$venv/no-compiler:$PATH" CC=/bin/false CXX=/bin/false
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-cache-dir \
  --only-binary=:all: "${wheels[0]}[runtime,test]"

# Some tests import bench/ (the benchmarks, not part of the package) from the tree: a folder
# holding only a link to it goes on the path, so the tree's fsmcompile/ stays off it.
mkdir "$venv/tree"
ln -s "$PWD/bench" "$venv/tree/bench"
export PYTHONPATH="$venv/tree${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONSAFEPATH=1 FSMCOMPILE_TEST_INSTALLED=1
"$venv/bin/python" -c 'import fsmcompile; print(f"test_wheel: testing {fsmcompile.__file__}")'
"$venv/bin/python" -m pytest -p no:cacheprovider "$@"
