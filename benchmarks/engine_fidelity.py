"""Predicted vs logged KV-cache tokens for every case in the calibration set.

Each case is predicted from its settings, the model's config.json and the GPU catalog alone
(no logged memory term is used), then compared with the tokens the engine logged.

    python benchmarks/engine_fidelity.py [--cases tests/data/calibration/cases.jsonl] [--models DIR]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))  # rows.py, beside this file

from rows import catalog_gpu, checkpoint_config, engine_release, model_reference  # noqa: E402

DEFAULT_MODELS = ROOT / "tests" / "data" / "models"

# Which vendored config each case's model uses (the calibration cases' README).
CONFIGS = {
    "meta-llama/Llama-3.1-8B-Instruct": "meta-llama--Llama-3.1-8B-Instruct",
    "Qwen/Qwen2.5-7B-Instruct-AWQ": "Qwen--Qwen2.5-7B-Instruct",
    "Qwen/Qwen2.5-1.5B-Instruct": "Qwen--Qwen2.5-1.5B-Instruct",
    "Qwen/Qwen2.5-7B-Instruct": "Qwen--Qwen2.5-7B-Instruct",
    "Qwen/Qwen3-30B-A3B": "Qwen--Qwen3-30B-A3B",
    "deepseek-ai/DeepSeek-V2-Lite-Chat": "deepseek-ai--DeepSeek-V2-Lite",
    "google/gemma-3-4b-it": "google--gemma-3-4b-it",
    "openai/gpt-oss-20b": "openai--gpt-oss-20b",
    "meta-llama/Llama-2-7b-hf": "meta-llama--Llama-2-7b-hf",
    "unsloth/Llama-3.2-3B-Instruct": "meta-llama--Llama-3.2-3B-Instruct",
    "unsloth/Qwen3-8B-FP8": "Qwen--Qwen3-8B",
    # Qwen2-7B-Instruct is not vendored; Qwen2.5-7B-Instruct has the same shapes (28 layers,
    # hidden 3584, 4 KV heads, intermediate 18944, vocab 152064, untied embeddings).
    "Qwen/Qwen2-7B-Instruct": "Qwen--Qwen2.5-7B-Instruct",
    # Mistral-7B-Instruct-v0.2 is not vendored; v0.3 has the same KV shape (32 layers, 8 KV
    # heads, head_dim 128, no sliding window) and a vocabulary 768 tokens larger.
    "mistralai/Mistral-7B-Instruct-v0.2": "mistralai--Mistral-7B-Instruct-v0.3",
}
# Card names as the logs print them -> the catalog (an unnamed 80 GB card is taken as an H100).
GPUS = {
    "A100-80GB": "a100-80gb",
    "NVIDIA A100 80GB": "a100-80gb",
    "unknown 80GB-class GPU": "h100",
    "NVIDIA H100": "h100",  # "80GB class": SXM and PCIe report the same 80 GiB total
}


# Cases run from a Python script (vLLM's LLM class) rather than `vllm serve`, by what the source
# says: the 4080 record is an offline experiment log whose 8192-token profile (1.04 GiB
# activation peak) is the LLM-class default; `vllm serve` would have profiled 2048 tokens.
LLM_CLASS_CASES = {"vllm-4080-qwen25-7b-awq"}


def launcher_settings(case: dict[str, Any]) -> dict[str, Any]:
    """Settings the case's launcher chose that the case's fields do not carry.

    Unsloth (and TRL's colocate mode) start vLLM through the LLM class inside the training
    process, so the CUDA libraries are resident before vLLM's baseline (`colocated`); LoRA and
    the rank are read from the logged non-default args when present (vLLM's default rank, 16,
    otherwise).
    """
    text = " ".join(str(case.get(k) or "") for k in ("source", "evidence", "notes"))
    out: dict[str, Any] = {"usage_context": "llm" if case["id"] in LLM_CLASS_CASES else "serve"}
    if re.search(r"unsloth|colocat", text, re.IGNORECASE):
        out |= {"colocated": True, "usage_context": "llm"}
    if re.search(r"'enable_lora': True|enables LoRA|LoRA enabled", text):
        out["enable_lora"] = True
        if found := re.search(r"'max_lora_rank': (\d+)", text):
            out["max_lora_rank"] = int(found.group(1))
    if found := re.search(r"Chunked prefill tokens = (\d+)\. Num Sequences = (\d+)", text):
        out["max_num_batched_tokens"] = int(found.group(1))
        out["max_num_seqs"] = int(found.group(2))
    return out


def config_for(case: dict[str, Any], models: Path = DEFAULT_MODELS) -> str:
    """The config for a case's model (or its base model): a vendored config.json in `models`,
    a quantized export's base there, else the checkpoint as `planner --model` reads it (the
    Hub, or its cache offline)."""
    names = [str(n) for n in (case.get("model"), case.get("base_model")) if n]
    for name in names:
        folder = models / CONFIGS.get(name, name.replace("/", "--"))
        if (folder / "config.json").is_file():
            return str(folder / "config.json")
    for name in names:
        base, _ = checkpoint_config(name, models)  # a quantized export's base
        if base is not None and (base / "config.json").is_file():
            return str(base / "config.json")
    for name in names:
        reference, _ = model_reference(name, models)
        if reference is not None:
            return reference
    raise LookupError(f"no config.json for {case.get('model')}")


def case_settings(case: dict[str, Any], models: Path = DEFAULT_MODELS) -> dict[str, Any]:
    """The engine flags and versions a case ran with, as engine_plan keywords (a field the case
    does not carry is the engine's default)."""
    case = {k: v for k, v in case.items() if v is not None}
    described = str(case.get("gpu") or "")
    gpu = re.sub(r"\s*\(.*$", "", described).strip()
    gpu = next((v for k, v in GPUS.items() if gpu.startswith(k)), None) or (
        catalog_gpu(gpu, described, {}) or gpu
    )
    text = str(case.get("engine_version") or "")
    # the engine's number in a version or image tag ("rocm/vllm:rocm6.4.1_vllm_0.10.0" is
    # 0.10.0); a case that names none ran V0's last default, 0.6.4. V0's mode where the case
    # says so or runs 0.2, 0.6 or 0.7 (as the cases were checked; the rules pick it otherwise)
    version = engine_release(case) or "0.6.4"
    v0 = "V0" in text or version.split(".")[:2] in (["0", "2"], ["0", "6"], ["0", "7"])
    out: dict[str, Any] = {"gpu": gpu, "model": config_for(case, models)}
    quant = str(case.get("quantization") or "").split(" ")[0] or None
    if quant in ("awq", "gptq", "fp8"):
        out["quantization"] = quant
    kv = case.get("kv_cache_dtype") or "auto"
    engine = str(case.get("engine") or "").lower()
    if engine not in ("vllm", "sglang"):
        raise LookupError(f"engine {case.get('engine')!r} is not modelled")
    if engine == "vllm":
        out |= {
            "engine": "vllm",
            "version": version,
            "gpu_memory_utilization": case.get("gpu_memory_utilization"),
            "max_model_len": case.get("max_model_len"),  # None: the model's own (vLLM's default)
            "max_num_seqs": case.get("max_num_seqs"),
            "max_num_batched_tokens": case.get("max_num_batched_tokens"),
            "block_size": case.get("block_size"),
            "kv_cache_dtype": kv,
            "enforce_eager": bool(case.get("enforce_eager")),
            "tensor_parallel_size": case.get("tensor_parallel_size") or 1,
            "pipeline_parallel_size": case.get("pipeline_parallel_size") or 1,
        }
        for key, value in launcher_settings(case).items():
            if out.get(key) is None:  # what the case records wins
                out[key] = value
        if v0:
            out["engine_mode"] = "v0"
    else:
        out |= {
            "engine": "sglang",
            "version": version,
            "mem_fraction_static": case.get("mem_fraction_static"),
            # the context the server ran (its log's context_len; its request pool sizes by it)
            "context_length": case.get("sglang_context_len") or case.get("max_model_len"),
            "kv_cache_dtype": kv,
            "tp_size": case.get("tensor_parallel_size") or 1,
            "pp_size": case.get("pipeline_parallel_size") or 1,
        }
    return out


def predict(case: dict[str, Any], models: Path = DEFAULT_MODELS) -> Any:
    from planner.api import engine_plan

    kw = case_settings(case, models)
    mode = kw.pop("engine_mode", None)
    if mode:
        kw["engine_mode"] = mode
    return engine_plan(**{k: v for k, v in kw.items() if v is not None})


def main() -> None:
    from planner.errors import PlannerError

    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", default=str(ROOT / "tests/data/calibration/cases.jsonl"))
    parser.add_argument("--models", type=Path, default=DEFAULT_MODELS)
    args = parser.parse_args()
    cases = [json.loads(line) for line in Path(args.cases).read_text().splitlines() if line.strip()]
    errors: dict[str, list[float]] = {}
    print(f"{'case':36s} {'engine':7s} {'logged':>10s} {'predicted':>10s} {'error':>8s}")
    for case in cases:
        name, engine = str(case.get("id") or "?"), str(case.get("engine") or "?")
        # the tokens the engine logged, else its GPU blocks (compared block for block)
        logged = case.get("kv_cache_tokens") or case.get("sglang_tokens")
        unit = "tokens"
        if not logged and case.get("num_gpu_blocks"):
            logged, unit = case["num_gpu_blocks"], "blocks"
        try:
            if not isinstance(logged, int) or logged <= 0:
                raise LookupError("no logged KV-cache tokens or blocks")
            pred = predict(case, args.models)
        except (LookupError, PlannerError) as exc:  # a model or card we have no data for
            print(f"{name:36s} {engine:7s} skipped: {exc}")
            continue
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            # a case whose fields are not the schema's: counted as skipped, never fatal
            print(f"{name:36s} {engine:7s} not readable: {type(exc).__name__} {exc}")
            continue
        got = pred.kv_cache_tokens if unit == "tokens" else pred.num_gpu_blocks
        err = (got - logged) / logged
        errors.setdefault(engine, []).append(abs(err))
        blocks = "  (GPU blocks)" if unit == "blocks" else ""
        print(f"{name:36s} {engine:7s} {logged:>10,} {got:>10,} {err:+8.2%}{blocks}")
    for engine, errs in errors.items():
        p90 = statistics.quantiles(errs, n=10, method="inclusive")[-1] if len(errs) > 1 else errs[0]
        print(
            f"{engine}: {len(errs)} cases, median |error| {statistics.median(errs):.2%}, "
            f"p90 {p90:.2%}, worst {max(errs):.2%}"
        )


if __name__ == "__main__":
    main()
