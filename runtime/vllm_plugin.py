"""The `vllm.general_plugins` entry point: make "fsmcompile" a structured-outputs backend.

vLLM picks a structured-outputs backend from a closed list in three places: the
`StructuredOutputsConfig.backend` Literal (validated by pydantic), the front end's
`SamplingParams._validate_structured_outputs` (which sends any unknown name to xgrammar)
and the engine's `StructuredOutputManager.grammar_init` (which builds one of its own
classes). `register` patches those three, and only on the vLLM versions whose code they
were written against (`SUPPORTED_VERSIONS`): on another version it patches nothing and
logs a warning, or refuses to start when `FSMCOMPILE_VLLM_BACKEND` asks for the backend.

Opt in with `--structured-outputs-config '{"backend": "fsmcompile"}'`, or set
`FSMCOMPILE_VLLM_BACKEND=1` to route the default backend ("auto") to fsmcompile. vLLM
calls `register` in every process it starts (API server, engine core, workers); it is
idempotent.
"""

from __future__ import annotations

import functools
import logging
import os
from typing import Any, Literal, get_args

from fsmcompile.errors import BudgetExceededError, SpecError

from .vllm_specs import BACKEND_NAME, check_spec, spec_for

__all__ = ["ENV_VAR", "SUPPORTED_VERSIONS", "register", "selects_fsmcompile"]

logger = logging.getLogger(__name__)

ENV_VAR = "FSMCOMPILE_VLLM_BACKEND"
SUPPORTED_VERSIONS = ((0, 32, 0), (0, 33, 0))
"""vLLM releases whose structured-output code the patches were checked against."""

_TRUE = frozenset({"1", "true", "yes", "on"})
_PATCHED = "_fsmcompile_patched"


def env_opt_in() -> bool:
    """Whether `FSMCOMPILE_VLLM_BACKEND` routes vLLM's "auto" backend to fsmcompile."""
    return os.environ.get(ENV_VAR, "").strip().lower() in _TRUE


def selects_fsmcompile(configured: str) -> bool:
    """Whether a `StructuredOutputsConfig.backend` value means this backend."""
    return configured == BACKEND_NAME or (configured == "auto" and env_opt_in())


def vllm_release(version: str) -> tuple[int, ...]:
    """The numeric release of a vLLM version string ("0.32.0+cpu" → (0, 32, 0))."""
    from packaging.version import InvalidVersion, Version

    try:
        return Version(version).release[:3]
    except InvalidVersion:
        return ()


def register() -> None:
    """Install the backend into this process's vLLM (the plugin's entry point).

    Raises:
        RuntimeError: the vLLM version is not one of `SUPPORTED_VERSIONS` and
            `FSMCOMPILE_VLLM_BACKEND` asks for the backend.
    """
    import vllm

    release = vllm_release(vllm.__version__)
    if release not in SUPPORTED_VERSIONS:
        supported = ", ".join(".".join(map(str, v)) for v in SUPPORTED_VERSIONS)
        message = (
            f"the fsmcompile structured-outputs backend supports vLLM {supported}; this is "
            f"vLLM {vllm.__version__}, so it is not installed"
        )
        if env_opt_in():
            raise RuntimeError(f"{message} (unset {ENV_VAR} to start without it)")
        logger.warning("%s", message)
        return
    _accept_config_value()
    _patch_front_end()
    _patch_engine()


def _accept_config_value() -> None:
    """Add "fsmcompile" to the `backend` Literal and rebuild the pydantic validator."""
    from pydantic.dataclasses import rebuild_dataclass
    from vllm.config.structured_outputs import StructuredOutputsConfig as config_cls

    field = config_cls.__dataclass_fields__["backend"]
    choices = get_args(field.type)
    if BACKEND_NAME in choices:
        return
    widened = Literal[(*choices, BACKEND_NAME)]  # type: ignore[valid-type]
    field.type = widened
    config_cls.__annotations__["backend"] = widened
    pydantic_fields = getattr(config_cls, "__pydantic_fields__", {})
    if "backend" in pydantic_fields:
        pydantic_fields["backend"].annotation = widened
    rebuild_dataclass(config_cls, force=True)


def _patch_front_end() -> None:
    """Check fsmcompile requests in the API process, where a bad spec becomes HTTP 400."""
    from vllm.sampling_params import SamplingParams

    original = SamplingParams._validate_structured_outputs
    if getattr(original, _PATCHED, False):
        return

    @functools.wraps(original)
    def validate(
        self: Any, model_config: Any, structured_outputs_config: Any, tokenizer: Any
    ) -> None:
        if (
            structured_outputs_config is None
            or self.structured_outputs is None
            or not selects_fsmcompile(structured_outputs_config.backend)
        ):
            original(self, model_config, structured_outputs_config, tokenizer)
            return
        validate_request(self, model_config, structured_outputs_config, tokenizer)

    setattr(validate, _PATCHED, True)
    SamplingParams._validate_structured_outputs = validate


def validate_request(
    params: Any, model_config: Any, structured_outputs_config: Any, tokenizer: Any
) -> None:
    """vLLM's request checks for this backend: set `_backend`, parse and lower the spec.

    Raises:
        VLLMValidationError: the request cannot be served (HTTP 400), with fsmcompile's
            message (it names the position: regex `pos`, schema pointer, grammar line).
    """
    from vllm.exceptions import VLLMValidationError
    from vllm.v1.structured_output.request import get_structured_output_key

    so_params = params.structured_outputs
    if getattr(model_config, "is_diffusion", False):
        raise VLLMValidationError("structured outputs are not supported for diffusion models")
    if tokenizer is None:
        raise VLLMValidationError(
            "structured outputs need a tokenizer, so they cannot be used with skip_tokenizer_init"
        )
    if so_params._backend not in (None, BACKEND_NAME):
        raise VLLMValidationError(
            f"request-level structured output backend selection is not supported: the "
            f"request names '{so_params._backend}', the engine uses '{BACKEND_NAME}'"
        )
    if so_params.json_object is False:
        raise VLLMValidationError("structured_outputs.json_object must be True if set")
    try:
        option, text = get_structured_output_key(so_params)
        check_spec(spec_for(option.name, text))
    except (SpecError, BudgetExceededError) as exc:
        raise VLLMValidationError(f"fsmcompile: {exc}", parameter="structured_outputs") from exc
    except ValueError as exc:
        raise VLLMValidationError(str(exc), parameter="structured_outputs") from exc
    so_params._backend = BACKEND_NAME
    so_params._backend_was_auto = structured_outputs_config.backend == "auto"
    so_params.__post_init__()  # as vLLM does: the params must survive serialization


def _patch_engine() -> None:
    """Build `FsmcompileBackend` in the engine's `StructuredOutputManager`.

    At start-up when the config selects this backend (so an unreadable tokenizer stops
    the engine there), else at the first request that names it.
    """
    from vllm.v1.structured_output import StructuredOutputManager as manager_cls

    init, grammar_init = manager_cls.__init__, manager_cls.grammar_init
    if getattr(init, _PATCHED, False):
        return

    @functools.wraps(init)
    def patched_init(self: Any, vllm_config: Any) -> None:
        init(self, vllm_config)
        configured = vllm_config.structured_outputs_config.backend
        if selects_fsmcompile(configured) and not vllm_config.model_config.skip_tokenizer_init:
            _install_backend(self)

    @functools.wraps(grammar_init)
    def patched_grammar_init(self: Any, request: Any) -> None:
        if self.backend is None and request.structured_output_request is not None:
            params = request.sampling_params.structured_outputs
            if params is not None and params._backend == BACKEND_NAME:
                _install_backend(self)
        grammar_init(self, request)

    setattr(patched_init, _PATCHED, True)
    manager_cls.__init__ = patched_init
    manager_cls.grammar_init = patched_grammar_init


def _install_backend(manager: Any) -> None:
    from .vllm_backend import FsmcompileBackend

    config = manager.vllm_config
    manager.backend = FsmcompileBackend(
        config, tokenizer=manager.tokenizer, vocab_size=config.model_config.get_vocab_size()
    )
    if hasattr(manager, "backend_name"):  # vLLM 0.33 checks requests against it
        manager.backend_name = BACKEND_NAME
