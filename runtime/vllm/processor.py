"""`FSMLogitsProcessor`: one class path for both of vLLM's model runners.

vLLM 0.32 and 0.33 have two logits-processor interfaces: the V1 model runner's
(`vllm.v1.sample.logits_processor.LogitsProcessor`: built with `(vllm_config, device,
is_pin_memory)`, told about the batch by `update_state(BatchUpdate)`) and the V2 model
runner's (`vllm.v1.worker.gpu.sample.logits_processor.LogitsProcessor`: built with
`(vllm_config, req_states)`, told about each request by `add_request(slot, params)`).
Which runner an engine uses depends on its platform and settings, and both loaders check
`issubclass` against their own base, so this class derives from both; constructing it
picks the matching implementation (`V1Processor` or `V2Processor`, both subclasses) from
the constructor's arguments. Users pass one path:
`--logits-processors fsmcompile.runtime.vllm:FSMLogitsProcessor`.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from typing import TYPE_CHECKING, Any

from fsmcompile.errors import FsmcompileError

from .spec import RequestSpec

SUPPORTED_VLLM_VERSIONS = ("0.32", "0.33")
"""vLLM minor releases whose runner interfaces this adapter was written and tested for."""


class UnsupportedVllmError(FsmcompileError, ImportError):
    """The installed vLLM is not a release this adapter supports."""


def check_vllm_version(version: str) -> None:
    """Raise unless `version` (e.g. "0.32.0", "0.33.1+cpu") is a supported release.

    Raises:
        UnsupportedVllmError: naming the installed and the supported versions.
    """
    found = re.match(r"(\d+)\.(\d+)", version)
    if found is None or f"{found[1]}.{found[2]}" not in SUPPORTED_VLLM_VERSIONS:
        supported = ", ".join(f"{v}.x" for v in SUPPORTED_VLLM_VERSIONS)
        raise UnsupportedVllmError(
            f"fsmcompile.runtime.vllm supports vLLM {supported}; found vLLM {version}"
        )


def _installed_vllm() -> Any:
    """The vllm package, or None without one (the processor stays usable for tests).

    A directory named vllm without `__init__.py` on the path (this project's
    `tests/vllm`) is a namespace package, not vLLM: it has no origin file.
    """
    found = importlib.util.find_spec("vllm")
    if found is None or found.origin in (None, "namespace"):
        return None
    return importlib.import_module("vllm")


if TYPE_CHECKING:

    class _V1Base:
        pass

    class _V2Base:
        pass

else:
    _vllm = _installed_vllm()
    if _vllm is not None:
        check_vllm_version(str(getattr(_vllm, "__version__", "unknown")))
        from vllm.v1.sample.logits_processor import LogitsProcessor as _V1Base
        from vllm.v1.worker.gpu.sample.logits_processor import LogitsProcessor as _V2Base
    else:

        class _V1Base:
            pass

        class _V2Base:
            pass


class FSMLogitsProcessor(_V1Base, _V2Base):
    """Masks the logits of every request that carries an fsmcompile spec.

    Rows without a spec are never touched. Not argmax-invariant: masking changes the
    greedy choice. Construct it as either runner does; the instance is a `V1Processor`
    for `(vllm_config, device, is_pin_memory)` and a `V2Processor` for
    `(vllm_config, req_states)`.
    """

    def __new__(cls, vllm_config: Any, *args: Any, **kwargs: Any) -> FSMLogitsProcessor:
        if cls is FSMLogitsProcessor:
            if len(args) + len(kwargs) == 1 and (args or "req_states" in kwargs):
                from .v2 import V2Processor

                cls = V2Processor
            else:
                from .v1 import V1Processor

                cls = V1Processor
        return super().__new__(cls)

    @classmethod
    def validate_params(cls, sampling_params: Any) -> None:
        """Reject a malformed spec at the API boundary (the server answers HTTP 400).

        Checks the shape, JSON text, regex syntax (up to a few KB) and the `index`
        directory rule; compiling happens in the engine process.

        Raises:
            SpecError: (a ValueError) the spec is malformed, with its position.
        """
        spec = RequestSpec.from_params(sampling_params)
        if spec is not None:
            spec.check()

    def is_argmax_invariant(self) -> bool:
        """False: masking changes which token has the highest logit."""
        return False


__all__ = [
    "SUPPORTED_VLLM_VERSIONS",
    "FSMLogitsProcessor",
    "UnsupportedVllmError",
    "check_vllm_version",
]
