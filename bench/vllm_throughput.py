"""vLLM offline throughput with and without JSON Schema constraints, fsmcompile against XGrammar.

Four configurations, each in its own process with its own offline `LLM` (one engine per
process keeps their memory and compile caches apart):

* `unconstrained`: no constraint;
* `fsmcompile_backend`: `structured_outputs` json through the fsmcompile backend;
* `xgrammar_backend`: the same through vLLM's XGrammar backend (`disable_any_whitespace`,
  so both write compact JSON and the grammars are alike);
* `fsmcompile_processor`: fsmcompile's logits processor, the schema in `extra_args`.

Every configuration gets the same 32 prompts, the same three schemas, the same seeds,
`max_tokens` and EOS logit bias, on the tiny random-weight Qwen2 model with the real Qwen2
tokenizer (`tests/vllm/tiny_model.py`). The first batch pays for the grammar compiles (a
fresh, empty fsmcompile disk cache per process) and is reported apart; the throughput
columns are the median of the warm batches after it, with CPU time per output token beside
wall time (on a shared box the wall time of one batch varies a lot). Constrained outputs
that ended at EOS are parsed and checked with `jsonschema`.

Run in the vLLM venv (`scripts/vllm_env.sh`):
`nice -n 5 /work/venvs/vllm-e2e/bin/python -m bench.vllm_throughput`.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
CONFIGS = ("unconstrained", "fsmcompile_backend", "xgrammar_backend", "fsmcompile_processor")
PROCESSOR = "fsmcompile.runtime.vllm:FSMLogitsProcessor"
BATCH = 32
MAX_TOKENS = 64
EOS_BIAS = 4.0  # the same for every configuration: lets the random model end some outputs
WARM_REPS = 5  # odd: the median is one batch
CHILD_TIMEOUT_S = 420

FLAT = {
    "type": "object",
    "properties": {"id": {"type": "integer"}, "ok": {"type": "boolean"}},
    "required": ["id", "ok"],
    "additionalProperties": False,
}
ORDER = {
    "type": "object",
    "properties": {
        "status": {"enum": ["new", "paid", "shipped"]},
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}},
                "required": ["sku", "qty"],
            },
            "maxItems": 3,
        },
        "total": {"type": "number"},
    },
    "required": ["status", "items"],
}
RATIOS = (
    ("(b)/(a)", "fsmcompile_backend", "unconstrained"),
    ("(b)/(c)", "fsmcompile_backend", "xgrammar_backend"),
    ("(d)/(a)", "fsmcompile_processor", "unconstrained"),
)
PROMPTS = ("Person record as JSON:", "Flag as JSON:", "Order as JSON:", "Answer:")


def schemas() -> list[dict[str, Any]]:
    """Person (grammars/examples/person.json), a flat id/flag object, an order with items."""
    person = json.loads((ROOT / "grammars" / "examples" / "person.json").read_text())
    return [person, FLAT, ORDER]


def tiny_model(out_dir: Path) -> Path:
    """The tests' random-weight Qwen2 checkpoint, built once under bench/results."""
    path = ROOT / "tests" / "vllm" / "tiny_model.py"
    spec = importlib.util.spec_from_file_location("tiny_model", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return Path(module.build_tiny_qwen2(out_dir))


def make_llm(config: str, model: Path) -> Any:
    from vllm import LLM

    extra: dict[str, Any] = {}
    if config == "fsmcompile_backend":
        from fsmcompile.runtime.vllm_plugin import register

        register()
        extra["structured_outputs_config"] = {"backend": "fsmcompile"}
    elif config == "xgrammar_backend":
        extra["structured_outputs_config"] = {
            "backend": "xgrammar",
            "disable_any_whitespace": True,
        }
    elif config == "fsmcompile_processor":
        extra["logits_processors"] = [PROCESSOR]
    return LLM(
        model=str(model),
        max_model_len=512,
        max_num_seqs=BATCH,
        enforce_eager=True,
        dtype="float32",
        seed=0,
        **extra,
    )


def requests(config: str, eos: int) -> tuple[list[str], list[Any], list[dict[str, Any]]]:
    """The batch: prompt, sampling params and schema of each request."""
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    prompts, params, used = [], [], []
    specs = schemas()
    for i in range(BATCH):
        schema = specs[i % len(specs)]
        kwargs: dict[str, Any] = {}
        if config in ("fsmcompile_backend", "xgrammar_backend"):
            kwargs["structured_outputs"] = StructuredOutputsParams(json=schema)
        elif config == "fsmcompile_processor":
            kwargs["extra_args"] = {"fsmcompile": {"json_schema": schema}}
        params.append(
            SamplingParams(
                max_tokens=MAX_TOKENS,
                temperature=1.0,
                seed=i,
                logit_bias={eos: EOS_BIAS},
                **kwargs,
            )
        )
        prompts.append(PROMPTS[i % len(PROMPTS)])
        used.append(schema)
    return prompts, params, used


def cpu_seconds() -> float:
    """User + system CPU of this process and its engine processes: on a shared box it
    varies far less than wall time, since other work's load mostly adds waiting."""
    import psutil

    me = psutil.Process()
    total = 0.0
    for process in [me, *me.children(recursive=True)]:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def run_batch(llm: Any, batch: tuple[list[str], list[Any], list[Any]]) -> dict[str, Any]:
    """Generate once; time it, count output tokens, check the outputs that ended at EOS."""
    import jsonschema

    prompts, params, used = batch
    cpu_before = cpu_seconds()
    started = time.perf_counter()
    outputs = llm.generate(prompts, params, use_tqdm=False)
    elapsed = time.perf_counter() - started
    cpu = cpu_seconds() - cpu_before
    tokens = sum(len(o.outputs[0].token_ids) for o in outputs)
    ended = valid = 0
    for output, schema in zip(outputs, used, strict=True):
        if output.outputs[0].finish_reason != "stop":
            continue
        ended += 1
        try:
            jsonschema.validate(json.loads(output.outputs[0].text), schema)
            valid += 1
        except (ValueError, jsonschema.ValidationError):
            pass
    return {
        "s": elapsed,
        "cpu_s": cpu,
        "tokens": tokens,
        "requests": len(outputs),
        "ended": ended,
        "valid": valid,
    }


def child(config: str, model: Path, out: Path) -> None:
    """One configuration: start the engine, a first (compiling) batch, then warm batches."""
    started = time.perf_counter()
    llm = make_llm(config, model)
    startup = time.perf_counter() - started
    eos = llm.get_tokenizer().eos_token_id
    batch = requests(config, eos)
    first = run_batch(llm, batch)
    warm = [run_batch(llm, batch) for _ in range(WARM_REPS)]
    result = {"config": config, "startup_s": startup, "first": first, "warm": warm}
    out.write_text(json.dumps(result, indent=2))
    llm.llm_engine.engine_core.shutdown()


def run_child(config: str, model: Path, out: Path) -> dict[str, Any]:
    """Run one configuration in its own process, with a fresh, empty fsmcompile disk cache."""
    with tempfile.TemporaryDirectory(prefix="fsmcompile-cache-") as cache_dir:
        return _run_child(config, model, out, cache_dir)


def _run_child(config: str, model: Path, out: Path, cache_dir: str) -> dict[str, Any]:
    env = {
        **os.environ,
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_CPU_OMP_THREADS_BIND": "nobind",
        "TOKENIZERS_PARALLELISM": "false",
        "FSMCOMPILE_CACHE_DIR": cache_dir,
    }
    env.pop("FSMCOMPILE_VLLM_BACKEND", None)
    command = [
        sys.executable,
        "-m",
        "bench.vllm_throughput",
        "--child",
        config,
        "--model",
        str(model),
        "--out",
        str(out),
    ]
    log = out.with_suffix(".log")
    with open(log, "wb") as sink:
        subprocess.run(
            command,
            env=env,
            cwd=ROOT,
            stdout=sink,
            stderr=subprocess.STDOUT,
            timeout=CHILD_TIMEOUT_S,
            check=True,
        )
    return dict(json.loads(out.read_text()))


def summarize(result: dict[str, Any]) -> dict[str, float | str]:
    """Warm figures are the median batch (the box is shared: single batches are noisy)."""
    warm = sorted(result["warm"], key=lambda b: b["s"])
    median = warm[len(warm) // 2]
    by_cpu = sorted(warm, key=lambda b: b["cpu_s"])[len(warm) // 2]
    first = result["first"]
    checked = [first, *warm]
    constrained = result["config"] != "unconstrained"
    return {
        "config": result["config"],
        "startup_s": result["startup_s"],
        "first_s": first["s"],
        "first_tok_s": first["tokens"] / first["s"],
        "warm_s": f"{median['s']:.2f} ({warm[0]['s']:.2f}-{warm[-1]['s']:.2f})",
        "tok_s": median["tokens"] / median["s"],
        "req_s": median["requests"] / median["s"],
        "tokens_per_req": median["tokens"] / median["requests"],
        "cpu_ms_tok": 1000 * by_cpu["cpu_s"] / by_cpu["tokens"],
        "valid": (
            f"{sum(b['valid'] for b in checked)}/{sum(b['ended'] for b in checked)}"
            f" ended of {sum(b['requests'] for b in checked)}"
            if constrained
            else "-"
        ),
    }


def load_average() -> str:
    return " / ".join(f"{load:.2f}" for load in os.getloadavg())


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| config | engine start s | first batch s (compiles) | first tok/s "
        "| warm batch s, median (min-max) | warm tok/s | warm req/s | warm CPU ms/token "
        "| tokens/req | valid/ended (all batches) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['config']} | {r['startup_s']:.1f} | {r['first_s']:.2f} | "
            f"{r['first_tok_s']:.0f} | {r['warm_s']} | {r['tok_s']:.0f} | {r['req_s']:.2f} | "
            f"{r['cpu_ms_tok']:.2f} | {r['tokens_per_req']:.1f} | {r['valid']} |"
        )
    by = {r["config"]: r for r in rows}
    lines.append("")
    for label, a, b in RATIOS:
        if a in by and b in by:
            tok, req = (by[a][key] / by[b][key] for key in ("tok_s", "req_s"))
            cpu = by[a]["cpu_ms_tok"] / by[b]["cpu_ms_tok"]
            lines.append(
                f"- {label} {a} / {b}: {tok:.2f}x tok/s, {req:.2f}x req/s, {cpu:.2f}x CPU per token"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", choices=CONFIGS, help=argparse.SUPPRESS)
    parser.add_argument("--model", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=RESULTS / "vllm")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    args = parser.parse_args()
    if args.child:
        child(args.child, args.model, args.out)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    model = tiny_model(args.out / "tiny-qwen2")
    load_start = load_average()
    rows = []
    for config in args.configs.split(","):
        print(f"{time.strftime('%H:%M:%S', time.gmtime())} UTC {config} ...", flush=True)
        rows.append(summarize(run_child(config, model, args.out / f"{config}.json")))
    text = (
        f"vLLM offline, tiny random Qwen2 (real tokenizer), batch {BATCH}, max_tokens "
        f"{MAX_TOKENS}, EOS bias {EOS_BIAS}, temperature 1 with seeds 0..{BATCH - 1}, "
        f"{WARM_REPS} warm batches after the first; load average (1, 5, 15 min) at start "
        f"{load_start}, at end {load_average()}\n\n{table(rows)}\n"
    )
    (args.out / "latest.md").write_text(text)
    (args.out / "latest.json").write_text(json.dumps(rows, indent=2))
    print(text)


if __name__ == "__main__":
    main()
