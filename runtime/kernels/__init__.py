"""The one dispatcher over the bitmask-apply kernels: triton (CUDA), torch, numpy.

Callers validate first (`fsmcompile.runtime.bitmask.apply_token_bitmask_inplace`); the
kernels trust their inputs. Each backend is imported inside its branch, so importing this
package imports neither torch nor triton.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Literal

import numpy as np

Backend = Literal["triton", "torch", "numpy"]

_NUMPY_VIEWABLE = ("float32", "float64", "float16")


@lru_cache(maxsize=1)
def triton_available() -> bool:
    """Whether the Triton kernel can run here (triton importable and CUDA present)."""
    try:
        import torch

        if not torch.cuda.is_available():
            return False
        import triton  # noqa: F401
    except Exception:  # any import-time failure means "not available", never a crash
        return False
    return True


def choose_backend(logits: Any) -> Backend:
    """The kernel `apply_bitmask_inplace` uses for these logits."""
    if isinstance(logits, np.ndarray):
        return "numpy"
    if logits.device.type == "cuda" and logits.stride(-1) == 1 and triton_available():
        return "triton"
    if logits.device.type == "cpu" and str(logits.dtype).removeprefix("torch.") in _NUMPY_VIEWABLE:
        # On CPU, np.unpackbits beats the shift-and-mask torch ops (see bench/mask_apply).
        return "numpy"
    return "torch"


def apply_bitmask_inplace(logits: Any, bitmask: Any, indices: Any | None) -> None:
    """Mask logits in place with the fastest kernel for their type and device.

    Args:
        logits: float[B, V] numpy array or torch tensor.
        bitmask: int32[R, W] of the same kind and device.
        indices: int64[R] logits rows, or None for R == B.
    """
    backend = choose_backend(logits)
    if backend == "triton":
        from . import triton as triton_kernel

        triton_kernel.apply_bitmask_inplace(
            logits, bitmask.contiguous(), None if indices is None else indices.contiguous()
        )
    elif backend == "torch":
        from . import torch as torch_kernel

        torch_kernel.apply_bitmask_inplace(logits, bitmask, indices)
    else:
        from . import numpy as numpy_kernel

        if isinstance(logits, np.ndarray):
            numpy_kernel.apply_bitmask_inplace(logits, bitmask, indices)
        else:
            numpy_kernel.apply_bitmask_inplace(
                logits.numpy(),
                bitmask.numpy(),
                None if indices is None else indices.numpy(),
            )


__all__ = ["Backend", "apply_bitmask_inplace", "choose_backend", "triton_available"]
