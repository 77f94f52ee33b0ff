"""`planner simulate` with a deployment: the benchmark predictor (docs/simulate.md)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import MODELS, Result, bench

from planner.api.bench_instance import Deployment, deployment_instance, with_speculation
from planner.api.bench_load import Lengths, Load, Speculation
from planner.core.serve import fields_from_line
from planner.core.step import step_time_for
from planner.core.step.comm import AllReduceCost
from planner.core.step.overhead import (
    ENGINE_OVERHEAD_MS,
    HOST_MS_PER_SEQ,
    REQUEST_PATH_MS,
    bench_client_ms_per_chunk,
)
from planner.errors import InputError
from planner.sim.workload import sglang_random_lengths
from planner.sources.models import resolve_model
from planner.sources.presets import find_gpu

Cli = Callable[..., Result]

# The keys `vllm bench serve --save-result` writes for these figures.
VLLM_BENCH_KEYS = {
    "completed",
    "duration",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    *(
        f"{s}_{m}_ms"
        for s in ("mean", "median", "std", "p99")
        for m in ("ttft", "tpot", "itl", "e2el")
    ),
}


def run(
    concurrency: int,
    prompt: int = 1000,
    output: int = 200,
    requests: int | None = None,
    chunked_prefill: bool | None = None,
    **settings: Any,
) -> dict[str, Any]:
    """One closed-loop prediction of Llama-3.1-8B on an H100."""
    return bench(
        gpu="h100",
        preset="llama-3.1-8b",
        model=None,
        settings=settings,
        load=Load(concurrency=concurrency, requests=requests),
        lengths=Lengths(prompt_len=prompt, output_len=output),
        chunked_prefill=chunked_prefill,
    )


def v0_chunked_512(load: Load) -> dict[str, Any]:
    """bench() arguments for Llama-3.1-8B on an H100 under vLLM 0.6.3 (V0) with chunked
    prefill on and a 512-token budget, at `load`."""
    return {
        "gpu": "h100",
        "preset": "llama-3.1-8b",
        "model": None,
        "settings": {"version": "0.6.3", "max_num_batched_tokens": 512},
        "load": load,
        "chunked_prefill": True,
    }


def test_a_release_that_falls_back_to_v0_schedules_as_v0() -> None:
    """vLLM 0.9.0 runs an fp8 KV cache on an A100 on V0 (its V1 oracle's fallback): the
    simulated server schedules as V0 does (prompts whole in steps of their own, chunking off
    under 32K, KV admitted for the whole prompt with the watermark kept free), as the plan's
    memory and line already are; on an H100 the same release keeps V1's mixed steps. Its steps
    cost what V0's cost: V0's engine overhead, and its scheduler, input preparation and
    sampler's CPU time per sequence in series with the GPU (V1's 0.9 scheduler is in series
    too, at its own measured time)."""
    kw = {"engine": "vllm", "version": "0.9.0", "kv_cache_dtype": "fp8"}
    for gpu, v0 in (("a100-sxm4-80gb", True), ("h100", False)):
        inst, _ = deployment_instance(
            Deployment(gpu=gpu, preset="llama-3.1-8b", settings=kw | {"context_tokens": 8192})
        )
        assert (inst.prediction.settings["engine"] == "v0") == v0
        assert inst.cfg.mixed == (not v0) and inst.cfg.admit_chunk == (not v0)
        assert (inst.cfg.admit_headroom_blocks > 0) == v0
        key = "vllm-v0" if v0 else "vllm"
        assert inst.curve.overhead_ms == ENGINE_OVERHEAD_MS[key]
        # V0's all-reduce: the per-peer stand-in fitted on its rows, not V1's custom kernel's
        assert (inst.curve.allreduce == AllReduceCost()) == v0
        # V0's API server is not measured: no per-request work charged (V1's is)
        assert inst.cfg.front_door is not None
        assert (inst.cfg.front_door.server_ms == 0.0) == v0
        assert inst.curve.host_ms_per_seq == pytest.approx(HOST_MS_PER_SEQ[key])
        assert inst.curve.overlapped_host_ms_per_seq == 0.0


def test_json_has_the_benchmarks_keys(cli: Cli) -> None:
    r = cli(
        "simulate",
        "--preset",
        "llama-3.1-8b",
        "--gpu",
        "h100",
        "--concurrency",
        "4",
        "--prompt-len",
        "500",
        "--output-len",
        "100",
        "--json",
    )
    assert r.code == 0, r.err
    data = r.json()
    assert data.keys() >= VLLM_BENCH_KEYS
    assert data["completed"] == 1000 and data["total_input_tokens"] == 500_000
    assert data["total_output_tokens"] == 100_000 and data["gpus"] == 1
    assert data["output_throughput_per_gpu"] == pytest.approx(data["output_throughput"])
    assert "not a measurement" in data["estimate"]
    # the launch line the prediction ran with is the serve plan's, with the engine's own cap
    assert "--max-num-seqs 1024" in data["deployment"]["command"]


@pytest.mark.parametrize(
    ("gpu", "model", "engine", "version", "window_tokens"),
    [
        # SGLang pools Gemma 4's window layers apart from 0.5.11: 0.8 of the full pool's
        # 134,719 tokens (one-token pages), before it one pool of window layers sized as full
        ("mi300x", "google--gemma-4-31B-it", "sglang", "0.5.13", int(134_719 * 0.8)),
        ("mi300x", "google--gemma-4-31B-it", "sglang", "0.5.10", None),
        ("h200", "openai--gpt-oss-120b", "sglang", "0.5.13", int(1_056_147 * 0.8)),
        ("mi300x", "google--gemma-4-31B-it", "vllm", "0.19.0", None),  # vLLM: one pool
        ("h100", "meta-llama--Llama-3.1-8B-Instruct", "sglang", "0.5.13", None),  # no window
    ],
)
def test_sglang_hybrid_window_models_run_a_second_pool(
    gpu: str, model: str, engine: str, version: str, window_tokens: int | None
) -> None:
    got = bench(
        gpu=gpu,
        preset=None,
        model=str(MODELS / model),
        settings={"engine": engine, "version": version},
        load=Load(concurrency=2, requests=4),
        lengths=Lengths(prompt_len=100, output_len=20),
    )["deployment"]
    assert got["kv_window_tokens"] == window_tokens
    if window_tokens is not None:
        assert got["kv_window_tokens"] == int(got["kv_cache_tokens"] * 0.8)


def test_the_memory_fraction_a_deployment_pins_sizes_its_kv_pool(cli: Cli) -> None:
    """--gpu-memory-utilization (vLLM) / --mem-fraction-static (SGLang) is the deployment's:
    the line carries it and a smaller share leaves a smaller KV pool, as capacity plans it."""
    base = ("simulate", "--preset", "llama-3.1-8b", "--gpu", "h100", "--concurrency", "4",
            "--prompt-len", "500", "--output-len", "20", "--requests", "16", "--json")  # fmt: skip
    pools = {}
    for share in ("0.5", "0.8"):
        r = cli(*base, "--gpu-memory-utilization", share)
        assert r.code == 0, r.err
        deployment = r.json()["deployment"]
        assert f"--gpu-memory-utilization {share}" in deployment["command"]
        pools[share] = deployment["kv_cache_tokens"]
        # the same deployment (its running cap included) in capacity: the same pool
        plan = cli("capacity", "--preset", "llama-3.1-8b", "--gpu", "h100",
                   "--gpu-memory-utilization", share, "--max-num-seqs",
                   str(deployment["max_num_seqs"]), "--json").json()  # fmt: skip
        assert plan["engine"]["kv_cache_tokens"] == pools[share]
    assert pools["0.5"] < pools["0.8"]
    sglang = cli(*base, "--engine", "sglang", "--mem-fraction-static", "0.6")
    assert "--mem-fraction-static 0.6" in sglang.json()["deployment"]["command"]


def test_metric_percentiles_name_their_keys_as_the_benchmark_does(cli: Cli) -> None:
    """--metric-percentiles 90,95,99.9 adds p90_ / p95_ / p99.9_ keys for TTFT, TPOT, ITL and
    E2EL (vllm bench serve's names: a whole percentile without its decimals) in place of the
    default p99, each no smaller than the one before; the table prints a row for each."""
    base = [
        "simulate", "--preset", "llama-3.1-8b", "--gpu", "h100", "--rate", "6",
        "--requests", "300", "--prompt-len", "800", "--output-len", "150",
    ]  # fmt: skip
    plain = cli(*base, "--json").json()
    got = cli(*base, "--metric-percentiles", "90,95,99.9", "--json").json()
    for metric in ("ttft", "tpot", "itl", "e2el"):
        tails = [got[f"{p}_{metric}_ms"] for p in ("median", "p90", "p95", "p99.9")]
        assert tails == sorted(tails)
        assert f"p99_{metric}_ms" in plain and f"p99_{metric}_ms" not in got
        assert got[f"median_{metric}_ms"] == plain[f"median_{metric}_ms"]
    table = cli(*base, "--metric-percentiles", "95").out
    assert "P95 TTFT (ms):" in table and "P99 TTFT (ms):" not in table
    for text in ("0", "90,nan", "abc", ",".join(["50"] * 11)):
        r = cli(*base, "--metric-percentiles", text, "--json")
        assert r.code == 2 and r.json()["field"] == "--metric-percentiles"
    r = cli(*base, "--bench-client", "genai-perf", "--json")
    assert r.code == 2 and r.json()["field"] == "--bench-client"


def test_the_benchmark_clients_own_flags_pose_the_same_run(cli: Cli) -> None:
    """A `vllm bench serve` / `sglang.bench_serving` command's load and length flags are
    accepted as typed; --random-range-ratio reads as the benchmark client reads it: the one
    --bench-client names (vllm bench serve against SGLang, vLLM's 2024 script), else the
    engine's own."""
    model = ["--preset", "llama-3.1-8b", "--gpu", "h100", "--json"]
    ours = ["--concurrency", "8", "--requests", "40", "--prompt-len", "512", "--output-len", "128"]
    theirs = [
        "--max-concurrency", "8", "--num-prompts", "40", "--random-input-len", "512",
        "--random-output-len", "128",
    ]  # fmt: skip
    for engine, client, ratio, same, span in (
        ("vllm", [], "0.5", "--len-spread", (256, 768)),  # [L (1 - r), L (1 + r)]
        ("sglang", [], "0.5", "--len-range", (256, 512)),  # [r L, L]
        ("sglang", ["--bench-client", "vllm"], "0.5", "--len-spread", (256, 768)),
        ("vllm", ["--bench-client", "vllm-2024"], "0.5", "--len-range", (256, 512)),
        ("sglang", ["--bench-client", "none"], "0.5", "--len-range", (256, 512)),
    ):
        run = ["simulate", *model, "--engine", engine, *client]
        a = cli(*run, *ours, same, ratio).json()
        b = cli(*run, *theirs, "--random-range-ratio", ratio).json()
        assert a == b
        prompts = b["workload"]["prompt_tokens"]
        assert (prompts["min"], prompts["max"]) == span
    both = cli("simulate", *model, *ours, "--random-range-ratio", "0.5", "--len-range", "0.2")
    assert both.code == 2 and both.json()["field"] == "--random-range-ratio"
    rate = cli("simulate", *model, *ours[2:], "--request-rate", "-1")
    assert rate.code == 2 and "--rate/--request-rate" in rate.json()["error"]
    # vllm bench serve's default --request-rate inf: every request at once, as when none given
    burst = cli("simulate", *model, *ours[2:], "--request-rate", "inf").json()
    assert burst == cli("simulate", *model, *ours[2:]).json()
    assert burst["request_rate"] is None and burst["median_ttft_ms"] > 0
    alone = cli("simulate", "--rate", "inf", "--json")
    assert alone.code == 2 and alone.json()["field"] == "--rate"
    assert "give --gpu" in alone.json()["error"]
    for text in ("-inf", "nan"):
        r = cli("simulate", *model, *ours[2:], "--rate", text)
        assert r.code == 2 and r.json()["field"].startswith("--rate")
    # only simulate reads inf as the benchmark's default: slo's validation rate stays finite
    slo = cli("slo", "--tpot", "50", *model[:4], "--validate", "--rate", "inf", "--json")
    assert slo.code == 2 and "finite number" in slo.json()["error"]
    # vllm bench serve's --burstiness B is gamma gaps of shape B: CV 1 / sqrt(B)
    lengths = ours[2:]
    bursty = cli("simulate", *model, *lengths, "--request-rate", "8", "--burstiness", "0.25")
    assert bursty.json() == cli("simulate", *model, *lengths, "--rate", "8", "--cv", "2").json()
    for extra, text in (
        (["--burstiness", "0"], "gamma shape > 0"),
        (["--burstiness", "1", "--cv", "2"], "give one of them"),
    ):
        r = cli("simulate", *model, *lengths, "--rate", "8", *extra)
        assert r.code == 2 and text in r.json()["error"]


def test_the_benchmarks_dataset_and_layout_flags_paste_in(cli: Cli) -> None:
    """`--dataset-name random|sharegpt`, `--ignore-eos` and the engines' layout flags
    (`--data-parallel-size`, `--pipeline-parallel-size`, vLLM's `--enable-expert-parallel`)
    pose the run the planner's own names pose; what they cannot pose is one error each."""
    model = ["--preset", "llama-3.1-8b", "--gpu", "h100", "--json"]
    load = ["--max-concurrency", "8", "--num-prompts", "40"]
    lengths = ["--random-input-len", "512", "--random-output-len", "128"]
    ours = cli("simulate", *model, *load, *lengths).json()
    theirs = cli(
        "simulate", *model, *load, "--dataset-name", "random", *lengths, "--ignore-eos",
        "--data-parallel-size", "1", "--pipeline-parallel-size", "1",
    ).json()  # fmt: skip
    assert theirs == ours
    # without --ignore-eos the benchmark's outputs stop at EOS: the output says it ran them out
    eos = cli("simulate", *model, *load, "--dataset-name", "random", *lengths).json()
    assert [n for n in eos["notes"] if n not in ours["notes"]] == [
        "--dataset-name random without --ignore-eos: the benchmark's outputs stop at EOS, "
        "short of --random-output-len; here they run to it (--output-mean with your run's "
        "mean output poses the shorter ones)"
    ]
    # SGLang's docs type the lengths as argparse's prefixes: --random-input / --random-output
    short = ["--random-input", "512", "--random-output", "128", "--ignore-eos"]
    assert cli("simulate", *model, *load, "--dataset-name", "random", *short).json() == ours
    sharegpt = cli("simulate", *model, *load, "--dataset-name", "sharegpt", "--ignore-eos")
    assert sharegpt.json() == cli("simulate", *model, *load, "--workload", "sharegpt").json()
    # vLLM's --enable-expert-parallel: the experts span TP x DP, as --ep TP x DP
    moe = ["--preset", "qwen3-30b-a3b", "--gpu", "h100", "--tp", "2", "--json", *load, *lengths]
    flag = cli("simulate", *moe, "--enable-expert-parallel").json()
    assert flag == cli("simulate", *moe, "--ep", "2").json()
    assert flag != cli("simulate", *moe).json()
    # SGLang's launch names: --tp-size, --context-length, --attn-dp-size N (--dp N
    # --dp-attention); each engine's graph cap goes on its line
    sglang = ["--preset", "qwen3-30b-a3b", "--gpu", "h100", "--engine", "sglang", "--json"]
    sglang += [*load, *lengths]
    named = cli("simulate", *sglang, "--tp-size", "2", "--attn-dp-size", "2", "--context-length",
                "8192").json()  # fmt: skip
    assert (
        named
        == cli(
            "simulate", *sglang, "--tp", "2", "--dp", "2", "--dp-attention", "--context", "8192"
        ).json()
    )
    enabled = cli("simulate", *sglang, "--tp", "2", "--dp-size", "2", "--enable-dp-attention",
                  "--context-length", "8192").json()  # fmt: skip
    assert enabled == named
    capped = cli("simulate", *sglang, "--cuda-graph-max-bs", "64").json()
    assert capped["deployment"]["command"].endswith("--cuda-graph-max-bs 64")
    vllm = cli("simulate", *moe, "--max-cudagraph-capture-size", "128").json()
    assert "--max-cudagraph-capture-size 128" in vllm["deployment"]["command"]
    for extra, field in (
        (["--dataset-name", "burstgpt", *lengths], "--dataset-name"),
        (["--dataset-name", "random", "--random-input-len", "512"], "--dataset-name"),
        (["--dataset-name", "sharegpt", "--random-input-len", "512"], "--random-input-len"),
        (["--dataset-name", "sharegpt", "--workload", "sharegpt"], "--dataset-name"),
        ([*lengths, "--ignore-eos", "--output-mean", "64"], "--ignore-eos"),
        ([*lengths, "--enable-expert-parallel", "--ep", "1"], "--ep"),
        ([*lengths, "--enable-expert-parallel", "--engine", "sglang"], "--enable-expert-parallel"),
        ([*lengths, "--attn-dp-size", "2"], "--attn-dp-size"),
        ([*lengths, "--cuda-graph-max-bs", "64"], "--cuda-graph-max-bs"),
        (
            [*lengths, "--engine", "sglang", "--max-cudagraph-capture-size", "64"],
            "--max-cudagraph-capture-size",
        ),
    ):
        r = cli("simulate", *model, *load, *extra)
        assert r.code == 2 and r.json()["field"] == field, extra
    # without a deployment they describe nothing simulate's policy comparison runs
    for flag in (
        ("--dataset-name", "sharegpt"),
        ("--enable-expert-parallel",),
        ("--attn-dp-size", "2"),
    ):
        alone = cli("simulate", *flag, "--json")
        assert alone.code == 2 and alone.json()["field"] == flag[0]


def test_a_cached_prefix_is_read_by_every_step_but_prefilled_once(cli: Cli) -> None:
    """vllm bench serve's --random-prefix-len P is one P-token prefix opening every request:
    after the first request computes it, the prefix cache serves it, so a prompt's prefill
    runs its own tokens (their attention over the prefix beside them) while each decode step
    reads the whole context, as if the prompt had been prefilled whole."""
    base = ["simulate", "--preset", "llama-3.1-8b", "--gpu", "h100", "--concurrency", "1"]
    base += ["--output-len", "10", "--requests", "10", "--json"]

    def figures(*flags: str) -> tuple[float, float, int]:
        got = cli(*base, *flags).json()
        return got["median_ttft_ms"], got["median_tpot_ms"], got["total_input_tokens"]

    own = figures("--prompt-len", "1000")
    whole = figures("--prompt-len", "9000")
    cached = figures("--prompt-len", "1000", "--random-prefix-len", "8000")
    assert cached == figures(
        "--prompt-len", "1000", "--prefix-share", "1", "--prefix-tokens", "8000"
    )
    assert figures("--prompt-len", "1000", "--random-prefix-len", "0") == own
    ttft, tpot, tokens = cached
    assert tokens == whole[2] == 9 * own[2]
    # prefilled: more than its own 1,000 tokens alone (their keys include the prefix's), far
    # less than the 9,000 whole; decoded: every step reads the 9,000-token context
    assert own[0] < ttft < 0.25 * whole[0]
    assert tpot == pytest.approx(whole[1], rel=1e-9) and tpot > own[1]
    both = cli(*base, "--prompt-len", "1000", "--random-prefix-len", "8", "--prefix-tokens", "8")
    assert both.code == 2 and both.json()["field"] == "--random-prefix-len"
    # vLLM V0 ran without prefix caching unless asked: every prompt prefills its prefix
    v0 = [*base, "--engine-version", "0.6.3", "--prompt-len"]
    missed = cli(*v0, "1000", "--random-prefix-len", "8000").json()
    assert missed["median_ttft_ms"] == cli(*v0, "9000").json()["median_ttft_ms"]
    assert missed["prefix_cache"]["gpu_hits"] == 0
    assert any("--enable-prefix-caching" in note for note in missed["notes"])


def test_prefix_caching_follows_the_line_and_the_release(cli: Cli) -> None:
    """Whether a shared prefix is served from the cache is the engine's: vLLM's
    --enable-prefix-caching / --no-enable-prefix-caching and SGLang's --disable-radix-cache
    decide it where given (and the deployment's line carries them, in the form the release
    parses), else the release's default: V1 on, V0 off, and hybrid models (Mamba / linear
    attention) off in V1 before 0.26."""
    base = ["simulate", "--concurrency", "1", "--output-len", "10", "--requests", "10"]
    base += ["--json", "--prompt-len"]
    llama = [*base, "1000", "--preset", "llama-3.1-8b", "--gpu", "h100"]

    def run(*flags: str) -> dict[str, Any]:
        got = cli(*llama, "--random-prefix-len", "8000", *flags)
        assert got.code == 0, got.output
        return got.json()

    whole_ttft = cli(*base, "9000", "--preset", "llama-3.1-8b", "--gpu", "h100").json()
    cached, off = run(), run("--no-enable-prefix-caching")
    assert cached["prefix_cache"]["gpu_hits"] == 9  # every request after the first
    assert off["prefix_cache"]["gpu_hits"] == 0
    assert off["median_ttft_ms"] == whole_ttft["median_ttft_ms"] > 5 * cached["median_ttft_ms"]
    assert off["deployment"]["command"].endswith("--no-enable-prefix-caching")
    assert any("--no-enable-prefix-caching" in n for n in off["notes"])
    assert run("--enable-prefix-caching")["median_ttft_ms"] == cached["median_ttft_ms"]
    # V0: off unless asked; its line has no negative form (a store_true flag), only the bare one
    v0_off = run("--engine-version", "0.6.3", "--no-enable-prefix-caching")
    assert "prefix-caching" not in v0_off["deployment"]["command"]
    assert v0_off["prefix_cache"]["gpu_hits"] == 0
    v0_on = run("--engine-version", "0.6.3", "--enable-prefix-caching")
    assert v0_on["prefix_cache"]["gpu_hits"] == 9
    assert v0_on["deployment"]["command"].endswith("--enable-prefix-caching")
    # SGLang's radix cache
    sglang = ["--engine", "sglang"]
    assert run(*sglang)["prefix_cache"]["gpu_hits"] == 9
    radix_off = run(*sglang, "--disable-radix-cache")
    assert radix_off["prefix_cache"]["gpu_hits"] == 0
    assert radix_off["deployment"]["command"].endswith("--disable-radix-cache")
    for flag, engine in (
        ("--disable-radix-cache", "vllm"),
        ("--enable-prefix-caching", "sglang"),
        ("--no-enable-prefix-caching", "sglang"),
    ):
        wrong = cli(*llama, "--engine", engine, flag)
        assert wrong.code == 2 and wrong.json()["field"] == flag
    # a hybrid model (Qwen3-Next's linear-attention layers) caches from vLLM 0.26 only
    hybrid = [*base, "1000", "--preset", "qwen3-next-80b-a3b", "--gpu", "h200", "--tp", "2"]
    hybrid += ["--random-prefix-len", "8000", "--engine-version"]
    assert cli(*hybrid, "0.25.0").json()["prefix_cache"]["gpu_hits"] == 0
    assert cli(*hybrid, "0.26.0").json()["prefix_cache"]["gpu_hits"] == 9
    asked = cli(*hybrid, "0.25.0", "--enable-prefix-caching").json()
    assert asked["prefix_cache"]["gpu_hits"] == 9


def test_the_hybrid_radix_cache_strategy_is_the_lines(cli: Cli) -> None:
    """SGLang 0.5.14+'s --mamba-radix-cache-strategy: auto resolves to extra_buffer for
    Qwen3-Next (5 state slots a running request: the cap falls to K // 5); no_buffer, which
    SGLang takes only without the overlap scheduler, keeps K // 3; both commands carry it on
    the line and read it back; what SGLang refuses is one error naming the flag."""
    base = ["--preset", "qwen3-next-80b-a3b", "--gpu", "h200", "--tp", "2", "--engine"]
    base += ["sglang", "--engine-version", "0.5.23", "--json"]

    def capped(*flags: str) -> tuple[int, str]:
        got = cli("capacity", *base, *flags)
        assert got.code == 0, got.output
        plan = got.json()
        return plan["engine"]["settings"]["max_running_requests"], plan["flags"]["sglang"]

    auto, auto_line = capped()
    no_buffer, line = capped(
        "--mamba-radix-cache-strategy", "no_buffer", "--disable-overlap-schedule"
    )
    slots = cli("capacity", *base).json()["engine"]["settings"]["max_mamba_cache_size"]
    assert (auto, no_buffer) == (slots // 5, slots // 3)
    assert "--mamba-radix-cache-strategy" not in auto_line
    assert line.endswith("--disable-overlap-schedule --mamba-radix-cache-strategy no_buffer")
    assert fields_from_line("sglang", line)["mamba_radix_cache_strategy"] == "no_buffer"
    ran = cli(
        "simulate", *base, "--concurrency", "1", "--prompt-len", "100", "--output-len", "4",
        "--requests", "2", "--mamba-radix-cache-strategy", "no_buffer",
        "--disable-overlap-schedule",
    )  # fmt: skip
    assert ran.code == 0, ran.output
    assert ran.json()["deployment"]["command"] == line
    for flags in (
        ("--mamba-radix-cache-strategy", "no_buffer"),  # the overlap scheduler is on
        ("--mamba-radix-cache-strategy", "fifo"),
    ):
        wrong = cli("capacity", *base, *flags)
        assert wrong.code == 2 and wrong.json()["field"] == "--mamba-radix-cache-strategy"
    # before 0.5.14 the flag had another name (--mamba-scheduler-strategy, not modelled)
    old = [arg if arg != "0.5.23" else "0.5.10" for arg in base]
    wrong = cli("capacity", *old, "--mamba-radix-cache-strategy", "auto")
    assert wrong.code == 2 and wrong.json()["field"] == "--mamba-radix-cache-strategy"


def test_host_work_outside_the_gpu_steps_is_said(cli: Cli) -> None:
    """vLLM's --enforce-eager and SGLang's --disable-cuda-graph launch every kernel from the
    host (priced at the host's launches, a floor), and SGLang's --disable-overlap-schedule runs
    its scheduler between GPU steps (6.9 us a running request, measured): the run says so and
    its steps are longer; the line carries the flag and each engine refuses the other's."""
    base = ["simulate", "--preset", "llama-3.1-8b", "--gpu", "h100", "--concurrency", "4"]
    base += ["--requests", "8", "--prompt-len", "100", "--output-len", "10", "--json"]
    for engine, flag, said in (
        ("vllm", "--enforce-eager", "every step launches each kernel from the host"),
        ("sglang", "--disable-cuda-graph", "every step launches each kernel from the host"),
        ("sglang", "--disable-overlap-schedule", "SGLang's scheduler prepares each step"),
    ):
        got = cli(*base, "--engine", engine, flag).json()
        assert any(n.startswith(f"{flag}: {said}") for n in got["notes"]), got["notes"]
        assert flag in got["deployment"]["command"]
        plain = cli(*base, "--engine", engine).json()
        assert not any(said in n for n in plain["notes"])
        # an 8B's GPU work hides the eager launches; the serial scheduler adds to it
        if flag == "--disable-overlap-schedule":
            assert got["median_tpot_ms"] > plain["median_tpot_ms"]
    # SGLang before 0.3.6 had no overlap scheduler on by default: the same cost, its reason
    old = cli(*base, "--engine", "sglang", "--engine-version", "0.3.0").json()
    assert any(n.startswith("SGLang 0.3.0 has no overlap scheduler") for n in old["notes"])
    wrong = cli(*base, "--engine", "vllm", "--disable-cuda-graph")
    assert wrong.code == 2 and wrong.json()["field"] == "--disable-cuda-graph"
    # vLLM V0 under --enforce-eager too (its graphs are otherwise its fixed capture list's)
    v0 = cli(*base, "--engine-version", "0.6.3", "--enforce-eager").json()
    assert any(n.startswith("--enforce-eager: every step launches") for n in v0["notes"])


def test_eager_steps_of_a_small_model_take_the_hosts_launches(cli: Cli) -> None:
    """Under --enforce-eager a 0.6B model's decode step is shorter on the GPU than the host's
    launches of its kernels: its TPOT rises to them (at least 286 kernels x 6.05 us); an 8B's
    GPU work outlasts its launches and its TPOT stays where the graphs put it."""
    base = ["simulate", "--gpu", "h100", "--concurrency", "1", "--requests", "8"]
    base += ["--prompt-len", "100", "--output-len", "50", "--json"]
    small = ("--model", str(MODELS / "Qwen--Qwen3-0.6B"))
    graphed = cli(*base, *small).json()
    eager = cli(*base, *small, "--enforce-eager").json()
    assert eager["median_tpot_ms"] > graphed["median_tpot_ms"]
    assert eager["median_tpot_ms"] >= 286 * 0.00605
    (note,) = eager["notes"]
    assert "priced at least the host's 1.73 ms of launches (286 kernels" in note
    eight = ("--preset", "llama-3.1-8b")
    on = cli(*base, *eight).json()["median_tpot_ms"]
    assert cli(*base, *eight, "--enforce-eager").json()["median_tpot_ms"] == on


def test_the_shared_prefix_datasets_pose_their_prefix(cli: Cli) -> None:
    """--dataset-name sonnet (vllm bench serve) and generated-shared-prefix (sglang.bench_serving)
    pose what the planner's own prefix flags pose: each prompt's own tokens after a prefix
    every request (sonnet) or every group (generated-shared-prefix) shares; a dataset's flags
    without it, or a prefix beside its own, are one error naming the flag."""
    base = ["simulate", "--preset", "llama-3.1-8b", "--gpu", "h100", "--concurrency", "8", "--json"]
    keys = ("completed", "total_input_tokens", "median_ttft_ms", "median_tpot_ms", "prefix_cache")

    def figures(*flags: str) -> tuple[object, ...]:
        got = cli(*base, *flags).json()
        return tuple(got[k] for k in keys)

    sonnet = figures("--dataset-name", "sonnet", "--ignore-eos", "--num-prompts", "64")
    assert sonnet == figures(
        "--prompt-len", "350", "--output-len", "150", "--random-prefix-len", "200",
        "--num-prompts", "64",
    )  # fmt: skip
    gsp = ["--dataset-name", "generated-shared-prefix", "--gsp-num-groups", "8"]
    grouped = figures(*gsp, "--gsp-prompts-per-group", "4", "--num-prompts", "1000")
    assert grouped == figures(
        "--prompt-len", "128", "--output-len", "256", "--prefix-share", "1",
        "--prefix-tokens", "2048", "--prefixes", "8", "--requests", "32",
    )  # fmt: skip
    assert grouped[0] == 32 and grouped[4]["misses"] == 8  # each group's first misses
    for flags, field in (
        (["--gsp-num-groups", "8", "--prompt-len", "9", "--output-len", "9"], "--gsp-num-groups"),
        ([*gsp, "--prefix-tokens", "64"], "--prefix-tokens"),
        (["--dataset-name", "sonnet", "--sonnet-input-len", "150"], "--sonnet-input-len"),
        (["--dataset-name", "sonnet", "--sonnet-output-len", "0"], "--sonnet-output-len"),
        # past the model's context: the dataset's flag, not the planner's it became
        (["--dataset-name", "sonnet", "--sonnet-input-len", "200000"], "--sonnet-input-len"),
        ([*gsp, "--gsp-prompts-per-group", "200000"], "--gsp-prompts-per-group"),
    ):
        refused = cli(*base, *flags)
        assert refused.code == 2 and refused.json()["field"] == field


def w8a8_int8_llama(folder: Path) -> str:
    """A compressed-tensors int8 W8A8 export of Llama-3.1-8B-Instruct's config, in `folder`."""
    config = json.loads((MODELS / "meta-llama--Llama-3.1-8B-Instruct" / "config.json").read_text())
    group = {
        "weights": {"type": "int", "num_bits": 8, "strategy": "channel"},
        "input_activations": {"type": "int", "num_bits": 8, "strategy": "token"},
    }
    q = {"quant_method": "compressed-tensors", "config_groups": {"group_0": group}}
    (folder / "config.json").write_text(json.dumps(config | {"quantization_config": q}))
    return str(folder)


def test_the_int8_variant_is_the_int8_checkpoint(cli: Cli, tmp_path: Path) -> None:
    """--weight-dtype int8 sizes and runs a W8A8 int8 export of the model as that export's own
    config does (a byte a weight, the card's INT8 rate); a card before compute capability
    7.5 is refused by name, as vLLM's int8 GEMM refuses it."""
    pose = ["--gpu", "a100", "--concurrency", "4", "--prompt-len", "2000", "--output-len", "16"]
    pose += ["--requests", "8", "--json"]
    export = cli("simulate", "--model", w8a8_int8_llama(tmp_path), *pose).json()
    variant = cli(
        "simulate", "--model", str(MODELS / "meta-llama--Llama-3.1-8B-Instruct"),
        "--weight-dtype", "int8", *pose,
    ).json()  # fmt: skip
    for key in ("median_ttft_ms", "median_tpot_ms", "output_throughput"):
        assert variant[key] == pytest.approx(export[key], rel=1e-9), key
    bf16 = cli("simulate", "--preset", "llama-3.1-8b", *pose).json()
    assert variant["median_ttft_ms"] < 0.8 * bf16["median_ttft_ms"]
    old = cli("capacity", "--preset", "llama-3.1-8b", "--gpu", "v100", "--weight-dtype", "int8")
    assert old.code == 2 and "--weight-dtype" in old.err and "7.5" in old.err


def test_a_rate_below_16_bits_is_said(cli: Cli, tmp_path: Path) -> None:
    """Blackwell Ultra multiplies int8 at 153.5 TOPS against 2,250 TFLOP/s in 16 bits: a W8A8
    int8 checkpoint there prefills slower than the 16-bit one, and the run says why."""
    w8a8_int8_llama(tmp_path)
    pose = ["--concurrency", "1", "--prompt-len", "4000", "--output-len", "8", "--json"]
    runs = {
        model: cli("simulate", "--model", model, "--gpu", "b300", *pose).json()
        for model in (str(tmp_path), str(MODELS / "meta-llama--Llama-3.1-8B-Instruct"))
    }
    int8, bf16 = runs.values()
    assert int8["median_ttft_ms"] > bf16["median_ttft_ms"]
    assert any("153.5 TFLOP/s" in note for note in int8["notes"])
    assert not any("TFLOP/s" in note for note in bf16["notes"])


def test_concurrency_one_is_one_prefill_then_the_step_model() -> None:
    prompt, output = 1000, 200
    got = run(1, prompt, output, requests=20)
    curve = step_time_for(resolve_model("llama-3.1-8b", None), find_gpu("h100"), engine="vllm")
    # TTFT: one prefill of the whole prompt (8,192-token budget), nothing else in the step,
    # and the request's path through the server and back (REQUEST_PATH_MS)
    prefill = curve.mixed_ms(0, 0, prompt, prompt * (prompt + 1) / 2)
    assert got["request_path_ms"] == REQUEST_PATH_MS == 7.0
    # (one client: no request waits at the front door, whose service is inside that path)
    assert got["front_door"]["client_ms"] == pytest.approx(0.86)
    assert got["median_ttft_ms"] == pytest.approx(prefill + REQUEST_PATH_MS, rel=1e-6)
    # end to end: that, then output - 1 decode steps
    assert got["median_e2el_ms"] == pytest.approx(
        got["median_ttft_ms"] + (output - 1) * got["median_tpot_ms"], rel=0.01
    )
    # TPOT: the step at one sequence, its KV read growing from prompt + 1 to prompt + output
    mid = curve.step_ms(1, prompt + output // 2)
    assert got["median_tpot_ms"] == pytest.approx(mid, rel=0.01)


@pytest.mark.parametrize("version", [None, "0.6.3"])
def test_littles_law(version: str | None) -> None:
    # vLLM V0 too, whose clients see each step's tokens (and send the next request) a step late
    n = 8
    settings = {"version": version} if version else {}
    got = run(n, 300, 100, requests=50 * n, **settings)
    in_system = got["request_throughput"] * got["mean_e2el_ms"] / 1000.0
    assert in_system == pytest.approx(n, rel=0.02)


def test_sglangs_receive_interval_holds_new_requests_for_decode_steps(
    cli: Callable[..., Result],
) -> None:
    """SGLang's --scheduler-recv-interval N takes in new requests every N decode steps (at
    once after a step with prefill, or idle): a request reaching a decoding server waits up to
    N steps, so TTFT grows with N while TPOT barely moves, and the requests in the system
    (Little's law: throughput x mean latency, the closed loop's ramp and drain aside) do not
    change."""
    run_args = (
        "simulate", "--preset", "gpt-oss-20b", "--gpu", "b200", "--engine", "sglang",
        "--concurrency", "64", "--prompt-len", "1000", "--output-len", "1000",
        "--len-range", "0.8", "--requests", "256", "--json",
    )  # fmt: skip
    got = {
        n: cli(*run_args, *(("--scheduler-recv-interval", str(n)) if n else ())).json()
        for n in (0, 1, 10, 30)
    }
    assert got[1]["median_ttft_ms"] == got[0]["median_ttft_ms"]  # 1 is the default

    def in_system(m: dict[str, Any]) -> float:
        return float(m["request_throughput"] * m["mean_e2el_ms"] / 1000.0)

    assert in_system(got[1]) == pytest.approx(64, rel=0.05)
    step_ms = got[1]["median_itl_ms"]
    assert got[10]["median_ttft_ms"] > got[1]["median_ttft_ms"] + 2 * step_ms
    assert got[30]["median_ttft_ms"] > got[10]["median_ttft_ms"] + 5 * step_ms
    for n in (10, 30):
        assert got[n]["median_tpot_ms"] == pytest.approx(got[1]["median_tpot_ms"], rel=0.05)
        assert in_system(got[n]) == pytest.approx(in_system(got[1]), rel=0.01)
        line = got[n]["deployment"]["command"]
        assert line.endswith(f" --scheduler-recv-interval {n}")
        assert fields_from_line("sglang", line)["scheduler_recv_interval"] == n
    # all at once from an idle server: taken in at once whatever N
    fixed = [a for a in run_args if a not in ("--len-range", "0.8")]
    idle = cli(*fixed, "--scheduler-recv-interval", "30").json()
    assert idle["median_ttft_ms"] == cli(*fixed).json()["median_ttft_ms"]
    vllm = (*run_args[:5], "--engine", "vllm", *run_args[7:])
    refused = cli(*vllm, "--scheduler-recv-interval", "4")
    assert refused.code == 2
    assert refused.json()["error"].startswith("--scheduler-recv-interval: an SGLang flag")


def test_throughput_never_falls_with_concurrency_until_preemption() -> None:
    last = 0.0
    for n in (1, 2, 4, 8, 16, 32, 64, 128):
        got = run(n, 1000, 200)
        assert got["preemptions"] == 0
        assert got["output_throughput"] >= last * 0.999, n
        last = got["output_throughput"]


def test_fp8_weights_are_never_slower_on_an_fp8_card() -> None:
    for n in (1, 16, 128):
        bf16 = run(n, 1000, 200)
        fp8 = run(n, 1000, 200, weight_dtype="fp8")
        assert fp8["median_tpot_ms"] <= bf16["median_tpot_ms"]
        assert fp8["output_throughput"] >= bf16["output_throughput"]


def test_a_batch_past_the_captured_cuda_graphs_is_flagged() -> None:
    """vLLM captures decode graphs up to min(2 x max_num_seqs, 512) sequences: 64 clients stay
    inside them (no note), 600 do not (the note names the limit and the flag that moves it);
    SGLang's limit is its --cuda-graph-max-bs."""
    inside = run(64, 200, 50, requests=128)
    assert inside["peak_running_seqs"] == 64 and inside["notes"] == []
    past = run(600, 200, 50, requests=1200)
    assert past["peak_running_seqs"] == 600
    (note,) = past["notes"]
    assert "past the 512" in note and "--max-cudagraph-capture-size" in note
    sglang = run(600, 200, 50, requests=1200, engine="sglang")
    assert "--cuda-graph-max-bs" in sglang["notes"][0]
    assert run(200, 200, 50, requests=400, engine="sglang")["notes"] == []
    # vLLM V0 captured decode-only batches: with chunked prefill its mixed steps run eager
    for chunked, expected in ((True, 1), (False, 0)):
        v0 = run(16, 200, 50, requests=32, chunked_prefill=chunked, version="0.6.3")
        graphs = [n for n in v0["notes"] if "in series with the GPU" not in n]
        assert len(graphs) == expected
        assert all("mix prefill chunks into decodes" in n for n in graphs)


def test_a_scheduler_in_series_with_the_gpu_slows_each_step_per_sequence() -> None:
    """vLLM V1 before 0.14 schedules and prepares inputs between GPU steps (6.8 us per
    running sequence, benchmarks/data/host-overhead.jsonl) and says so; 0.14 overlaps it
    (async scheduling)."""
    sync = run(128, 200, 100, requests=256, version="0.13.0")
    overlapped = run(128, 200, 100, requests=256, version="0.14.0")
    (note,) = [n for n in sync["notes"] if "in series with the GPU" in n]
    assert "6.8 us of CPU per running sequence" in note
    assert not [n for n in overlapped["notes"] if "in series with the GPU" in n]
    # 128 sequences x 6.8 us = 0.87 ms more per decode step
    gap = sync["median_tpot_ms"] - overlapped["median_tpot_ms"]
    assert gap == pytest.approx(128 * 0.0068, rel=0.1)


def _llama_over_replicas(dp: int, load: Load) -> dict[str, Any]:
    """Llama-3.1-8B on `dp` H100 replicas, 500 / 100 tokens, under `load`."""
    return bench(
        gpu="h100",
        preset="llama-3.1-8b",
        model=None,
        settings={},
        dp=dp,
        load=load,
        lengths=Lengths(prompt_len=500, output_len=100),
    )


def test_data_parallel_replicas_multiply_throughput_not_latency() -> None:
    one = run(8, 500, 100)
    two = _llama_over_replicas(2, Load(concurrency=16))
    assert two["gpus"] == 2
    assert two["median_tpot_ms"] == pytest.approx(one["median_tpot_ms"], rel=0.02)
    assert two["output_throughput_per_gpu"] == pytest.approx(
        one["output_throughput_per_gpu"], rel=0.02
    )


@pytest.mark.parametrize(("clients", "dp"), [(3, 4), (6, 4), (16, 4)])
def test_replicas_serve_only_the_clients_there_are(clients: int, dp: int) -> None:
    """A closed loop of fewer clients than the replicas hold at the run's share (3 over 4
    ranks: one each on three; 6 over 4: two on two, one on the others) keeps the idle ranks'
    share unserved: Little's law holds for the whole benchmark, and the throughput is the
    clients' own (each one's latency as a rank running the larger share serves it)."""

    got = _llama_over_replicas(dp, Load(concurrency=clients, requests=24 * clients))
    in_system = got["request_throughput"] * got["mean_e2el_ms"] / 1000.0
    assert in_system == pytest.approx(clients, rel=0.03)
    assert got["completed"] == 24 * clients
    share = -(-clients // dp)  # the larger share a rank runs
    one = run(share, 500, 100, requests=24 * share)
    per_client = one["output_throughput"] / share
    assert got["output_throughput"] == pytest.approx(clients * per_client, rel=0.03)
    # released at a rate the clients keep up with (--request-rate with --max-concurrency),
    # the benchmark runs at the rate: its clients are not what bounds it
    paced = _llama_over_replicas(dp, Load(concurrency=clients, rate_per_s=2.0, requests=48))
    assert paced["request_throughput"] == pytest.approx(2.0, rel=0.1)


def test_replicas_complete_the_requests_asked_for() -> None:
    """100 requests over 8 replicas: the busiest rank's share is 13 (every 8th, from the
    first), but the benchmark sends 100, so it prints 100 and their tokens, not 8 x 13 = 104."""
    got = _llama_over_replicas(8, Load(rate_per_s=10.0, requests=100))
    assert got["completed"] == 100
    assert (got["total_input_tokens"], got["total_output_tokens"]) == (50_000, 10_000)
    assert got["output_throughput"] == pytest.approx(10_000 / got["duration"])


def test_unmixed_prefill_steps_make_decodes_wait() -> None:
    """SGLang (and vLLM V0) run prefill-only steps: decodes wait through them, where vLLM's V1
    engine carries the prefill chunk in the decode step. With a = 5 ms per step, the four
    decoding requests lose one step's fixed cost per prefill step they wait through."""
    import numpy as np

    from planner.sim.config import SimConfig
    from planner.sim.cost import CostModel
    from planner.sim.engine import execute
    from planner.sim.workload import Trace

    n = 5
    trace = Trace(
        np.array([0.0, 0.0, 0.0, 0.0, 0.05]),
        np.array([10, 10, 10, 10, 1000]),
        np.array([100, 100, 100, 100, 2]),
        np.zeros(n, dtype=np.int64),
    )
    cost = CostModel(a_ms=5.0, b_ms=0.1, prefill_ms_per_token=0.05, overhead_ms=0.0)
    finish = {}
    for mixed in (True, False):
        cfg = SimConfig(policy="chunked", step_token_budget=256, chunk_tokens=256, mixed=mixed)
        finish[mixed] = execute(trace, cost, cfg).finish_ms[:4]
    waited = finish[False] - finish[True]
    # 1,000 prompt tokens in 256-token chunks: 4 prefill-only steps, each charging the 5 ms
    # fixed cost once more than the mixed steps that carried the same chunks
    assert waited == pytest.approx(np.full(4, 4 * 5.0), abs=1.0)


def test_sglang_stops_a_prefill_batch_at_max_prefill_tokens() -> None:
    """SGLang's PrefillAdder takes no request once the batch's prompt tokens reach
    max_prefill_tokens (16,384), the last one passing it: 40 prompts of 1,000 tokens at once
    under a 65,536-token chunk prefill 17 + 17 + 6 in three steps, where the chunk alone would
    take all 40 in one; and a SGLang plan with such a chunk carries the server's cap."""
    import numpy as np

    from planner.api.bench_instance import plan_instance
    from planner.sim.config import SimConfig
    from planner.sim.cost import CostModel
    from planner.sim.engine import execute
    from planner.sim.workload import Trace

    n = 40
    trace = Trace(np.zeros(n), np.full(n, 1000), np.full(n, 5), np.zeros(n, dtype=np.int64))
    cost = CostModel(a_ms=5.0, b_ms=0.1, prefill_ms_per_token=0.01, overhead_ms=0.0)
    base = SimConfig(policy="chunked", step_token_budget=65536, chunk_tokens=65536, mixed=False)
    capped = base.model_copy(update={"prefill_input_cap": 16384, "max_batch": 64})
    groups = {}
    for name, cfg in (("chunk", base.model_copy(update={"max_batch": 64})), ("cap", capped)):
        first = execute(trace, cost, cfg).first_ms
        groups[name] = sorted(np.unique(first, return_counts=True)[1].tolist(), reverse=True)
    assert groups == {"chunk": [40], "cap": [17, 17, 6]}

    def cap(engine: str, chunk: int, most: int | None = None) -> int | None:
        values: dict[str, Any] = {
            "engine": engine,
            "max_num_batched_tokens": chunk,
            "context_tokens": 8192,
        }
        if engine == "sglang":  # its default reserve for a 32K chunk leaves no memory
            values["memory_fraction"] = 0.85
        if most is not None:  # --max-prefill-tokens
            values["extra"] = {"max_prefill_tokens": most}
        inst = plan_instance(
            gpu="h100",
            preset="llama-3.1-8b",
            model=None,
            revision=None,
            values=values,
            spec=resolve_model("llama-3.1-8b", None),
            longest=1010,
            ep=None,
            calibration=None,
            seed=0,
        )
        return inst.cfg.prefill_input_cap

    assert cap("sglang", 32768) == 16384
    assert cap("sglang", 16384) is None and cap("vllm", 32768) is None
    assert cap("sglang", 65536, most=32768) == 32768  # the flag's
    assert cap("sglang", 32768, most=32768) is None


def test_max_prefill_tokens_is_sglangs_flag(cli: Cli) -> None:
    """--max-prefill-tokens goes on SGLang's line (pasted back, the same deployment; its
    default left off) and is refused under vLLM, naming it."""
    base = ("capacity", "--preset", "llama-3.1-8b", "--gpu", "h100", "--json")
    line = cli(*base, "--engine", "sglang", "--max-prefill-tokens", "32768").json()["flags"]
    assert line["sglang"].endswith(" --max-prefill-tokens 32768")
    assert fields_from_line("sglang", line["sglang"])["max_prefill_tokens"] == 32768
    plain = cli(*base, "--engine", "sglang").json()["flags"]["sglang"]
    assert "--max-prefill-tokens" not in plain
    refused = cli(*base, "--max-prefill-tokens", "32768")
    assert refused.code == 2 and refused.json()["field"] == "--max-prefill-tokens"


def test_multi_step_pays_the_overhead_once_per_round() -> None:
    """vLLM V0's --num-scheduler-steps n: one scheduling pass runs n decode steps, so each
    decode step carries 1/n of the engine's per-step overhead (a = 5, b = 0.1 per sequence,
    overhead 3 ms: TPOT at one sequence is 5.1 + 3 / n), while an unmixed prefill step is a
    round of its own and pays it whole."""
    import numpy as np

    from planner.sim.config import SimConfig
    from planner.sim.cost import CostModel
    from planner.sim.engine import execute
    from planner.sim.workload import Trace

    trace = Trace(np.array([0.0]), np.array([100]), np.array([101]), np.zeros(1, dtype=np.int64))
    cost = CostModel(a_ms=5.0, b_ms=0.1, prefill_ms_per_token=0.01, overhead_ms=3.0)
    for steps in (1, 4, 10):
        cfg = SimConfig(policy="chunked", mixed=False, scheduler_steps=steps)
        run = execute(trace, cost, cfg)
        assert run.first_ms[0] == pytest.approx(3.0 + 5.0 + 100 * 0.01)  # a full-cost prefill
        tpot = (run.finish_ms[0] - run.first_ms[0]) / 100
        assert tpot == pytest.approx(5.1 + 3.0 / steps)


def test_multi_step_admits_only_between_rounds() -> None:
    """A request arriving in the middle of a multi-step round waits for the round's end
    before its prefill (the scheduler runs once per round): with rounds of 8 decode steps of
    5.1 ms, one arriving half a step into the first round waits 7.5 steps more than under
    single-step scheduling."""
    import numpy as np

    from planner.sim.config import SimConfig
    from planner.sim.cost import CostModel
    from planner.sim.engine import execute
    from planner.sim.workload import Trace

    prefill_ms = 5.0 + 100 * 0.01
    arrival_ms = prefill_ms + 0.5 * 5.1
    trace = Trace(
        np.array([0.0, arrival_ms / 1000]),
        np.array([100, 100]),
        np.array([200, 200]),
        np.zeros(2, dtype=np.int64),
    )
    cost = CostModel(a_ms=5.0, b_ms=0.1, prefill_ms_per_token=0.01, overhead_ms=0.0)
    admitted = {}
    for steps in (1, 8):
        run = execute(trace, cost, SimConfig(policy="chunked", mixed=False, scheduler_steps=steps))
        admitted[steps] = run.first_ms[1] - prefill_ms  # when its prefill step began
    assert admitted[1] == pytest.approx(prefill_ms + 1 * 5.1)
    assert admitted[8] == pytest.approx(prefill_ms + 8 * 5.1)


def test_multi_step_on_08_to_0100_runs_v0_and_the_line_says_so() -> None:
    """vLLM 0.8.0 - 0.10.0 still take --num-scheduler-steps and fall back to V0 for it: the plan
    runs V0 (prefill-only steps, V0's overheads) and the line carries the flag, as it does on
    0.6.3; without it the same release runs V1."""
    common: dict[str, Any] = {
        "gpu": "h100",
        "preset": "llama-3.1-8b",
        "model": None,
        "load": Load(concurrency=8, requests=32),
        "lengths": Lengths(prompt_len=500, output_len=100),
    }
    for version in ("0.6.3", "0.9.0", "0.10.0"):
        got = bench(**common, settings={"version": version}, scheduler_steps=8)
        assert got["deployment"]["command"].endswith("--num-scheduler-steps 8"), version
        assert got["deployment"]["scheduler"].startswith("prefill-only steps"), version
    plain = bench(**common, settings={"version": "0.9.0"})
    assert "--num-scheduler-steps" not in plain["deployment"]["command"]
    assert plain["deployment"]["scheduler"].startswith("prefill chunks mixed")


def test_multi_step_raises_v0_throughput_under_load() -> None:
    """Posed as a user would (vLLM 0.6.3, prefill-only steps, a saturating Poisson load),
    multi-step scheduling never lowers throughput and lowers TPOT: fewer prefill steps stall
    the decodes and the per-step overhead is paid once per round."""
    common: dict[str, Any] = {
        "gpu": "h100",
        "preset": "llama-3.1-8b",
        "model": None,
        "settings": {"version": "0.6.3"},
        "load": Load(rate_per_s=40.0, requests=400),
        "lengths": Lengths(workload="sharegpt"),
        "chunked_prefill": False,
    }
    one = bench(**common)
    eight = bench(**common, scheduler_steps=8)
    assert eight["deployment"]["num_scheduler_steps"] == 8
    assert "--num-scheduler-steps 8" in eight["deployment"]["scheduler"]
    assert eight["median_tpot_ms"] < one["median_tpot_ms"]
    assert eight["output_throughput"] >= one["output_throughput"] * 0.99


def test_multi_step_with_chunked_prefill_prefills_only_in_a_rounds_first_step() -> None:
    """vLLM 0.6.3+ with chunked prefill and --num-scheduler-steps n: a round's first step
    carries the prefill chunks beside the decodes, the rest decode only, so under a saturating
    load the longer the round, the fewer prompts a second gets through: throughput falls and
    the first token waits longer, while each decode step pays 1/n of the overhead."""
    common = v0_chunked_512(Load(rate_per_s=40.0, requests=400)) | {
        "lengths": Lengths(prompt_len=400, output_len=200, len_range=0.25)
    }
    got = {n: bench(**common, scheduler_steps=n) for n in (1, 4, 16)}
    assert "--num-scheduler-steps 16" in got[16]["deployment"]["scheduler"]
    assert got[16]["output_throughput"] < got[4]["output_throughput"]
    assert got[16]["median_ttft_ms"] > got[4]["median_ttft_ms"] > got[1]["median_ttft_ms"]
    assert got[16]["median_itl_ms"] < got[1]["median_itl_ms"]


@pytest.mark.parametrize(
    ("workload", "inputs", "outputs"),
    [
        # 215,312 input / 197,144 output tokens over 1,000 prompts run to the caps (vLLM PR
        # #23696); a base model's run: 215,195 / 122,195 (dstack's raw results)
        ("sharegpt", 215_312, 197_144),
        ("sharegpt-base", 215_195, 122_195),
    ],
)
def test_sharegpt_preset_means_match_the_published_totals(
    workload: str, inputs: int, outputs: int
) -> None:
    got = sharegpt_run(workload)
    assert got["total_input_tokens"] == pytest.approx(inputs, rel=0.05)
    assert got["total_output_tokens"] == pytest.approx(outputs, rel=0.05)


def drawn(**lengths: Any) -> dict[str, Any]:
    """2,000 requests of prompts around 1,000 and outputs around 100 tokens, drawn as asked."""
    return bench(
        gpu="h100",
        preset="llama-3.1-8b",
        model=None,
        settings={},
        load=Load(concurrency=4, requests=2000),
        lengths=Lengths(prompt_len=1000, output_len=100, **lengths),
    )


def test_len_range_draws_between_f_l_and_l() -> None:
    got = drawn(len_range=0.5)
    assert got["total_input_tokens"] / 2000 == pytest.approx(750, rel=0.03)


def test_sglangs_client_sends_its_own_random_draw(cli: Cli) -> None:
    """SGLang's bench_serving draws its random dataset's lengths itself (seed 1 by default):
    the SGLang cookbook's MiniMax-M2.7 runs at 1,000 / 1,000 tokens and the default range ratio
    print 6,101 input tokens for 10 prompts and 249,831 for 500, and 4,220 and 252,662
    generated, one a request more than drawn (sgl-project/sgl-cookbook @7b5bd9c,
    docs/autoregressive/MiniMax/MiniMax-M2.7.md)."""
    for n, prompts, outputs in ((10, 6_101, 4_220 - 10), (500, 249_831, 252_662 - 500)):
        prompt, output = sglang_random_lengths(n, 1000, 1000, 0.0)
        assert (int(prompt.sum()), int(output.sum())) == (prompts, outputs)
    model = ["--preset", "llama-3.1-8b", "--gpu", "h100", "--concurrency", "1", "--json"]
    lengths = [
        "--dataset-name", "random", "--num-prompts", "10", "--random-input-len", "1000",
        "--random-output-len", "1000", "--ignore-eos",
    ]  # fmt: skip
    sglang = cli("simulate", *model, *lengths, "--engine", "sglang").json()
    assert (sglang["total_input_tokens"], sglang["total_output_tokens"]) == (6_101, 4_210)
    assert "sglang.bench_serving draws at --seed 1" in sglang["workload"]["description"]
    # its default ratio (0.0) is what the command poses without the flag, and given, the same
    assert (
        sglang
        == cli(
            "simulate", *model, *lengths, "--engine", "sglang", "--random-range-ratio", "0"
        ).json()
    )
    # another seed draws other lengths; vLLM's client fixes them at the default ratio
    other = cli("simulate", *model, *lengths, "--engine", "sglang", "--seed", "2").json()
    assert other["total_input_tokens"] != 6_101
    assert "--seed 2" in other["workload"]["description"]
    vllm = cli("simulate", *model, *lengths).json()
    assert vllm["total_input_tokens"] == 10_000 and "length_sampler" not in vllm["workload"]
    # vllm bench serve against SGLang: its client's lengths, fixed at its default
    read_by_vllm = cli("simulate", *model, *lengths, "--engine", "sglang", "--bench-client", "vllm")
    assert read_by_vllm.json()["total_input_tokens"] == 10_000


def test_rate_with_concurrency_paces_the_closed_loop() -> None:
    """vllm bench serve --request-rate R --max-concurrency N: requests are released at the
    rate and wait for one of N clients. With clients to spare it is the open loop at R; with
    one client each request waits for the last; an unbounded rate is the plain closed loop."""

    def run(concurrency: int | None, rate: float | None) -> dict[str, Any]:
        return bench(
            gpu="h100",
            preset="llama-3.1-8b",
            model=None,
            settings={},
            load=Load(concurrency=concurrency, rate_per_s=rate, requests=200),
            lengths=Lengths(prompt_len=1000, output_len=200),
        )

    open_loop, spare = run(None, 2.0), run(64, 2.0)
    for key in ("duration", "median_ttft_ms", "median_tpot_ms", "p99_e2el_ms"):
        assert spare[key] == open_loop[key], key
    one = run(1, 2.0)
    assert one["duration"] > 1.5 * open_loop["duration"]  # 1.4 s a request, 0.5 s apart
    assert one["median_tpot_ms"] <= open_loop["median_tpot_ms"]  # never two decoding at once
    closed, unpaced = run(8, float("inf")), run(8, None)
    assert closed["duration"] == unpaced["duration"]
    assert spare["request_rate"] == 2.0 and spare["max_concurrency"] == 64


def test_len_spread_draws_around_l_as_vllm_bench_serve_does() -> None:
    """`vllm bench serve --random-range-ratio 0.5` draws in [0.5 L, 1.5 L] (mean L), where
    SGLang's bench_serving draws in [0.5 L, L] (mean 0.75 L)."""
    got = drawn(len_spread=0.5)
    assert got["total_input_tokens"] / 2000 == pytest.approx(1000, rel=0.03)
    assert got["workload"]["prompt_tokens"]["min"] == 500
    assert got["workload"]["prompt_tokens"]["max"] == 1500


def sharegpt_run(workload: str, **lengths: Any) -> dict[str, Any]:
    """Llama-3.1-8B on an H100 at 4 req/s over a ShareGPT preset, with `lengths`' overrides."""
    return bench(
        gpu="h100",
        preset="llama-3.1-8b",
        model=None,
        settings={},
        load=Load(rate_per_s=4.0),
        lengths=Lengths(workload=workload, **lengths),
    )


def test_means_rescale_the_workload_to_the_runs_lengths() -> None:
    """A ShareGPT run whose outputs stopped at EOS (122 tokens a request, not the references'
    ~197): the trace keeps its shape, scaled to the reported means; shorter outputs mean
    shorter requests, so the same rate holds fewer running and each finishes sooner."""

    plain = sharegpt_run("sharegpt")
    got = sharegpt_run("sharegpt", prompt_mean=300.0, output_mean=122.2)
    assert got["total_input_tokens"] / got["completed"] == pytest.approx(300, abs=0.5)
    assert got["total_output_tokens"] / got["completed"] == pytest.approx(122.2, abs=0.5)
    assert got["median_e2el_ms"] < plain["median_e2el_ms"]
    assert "outputs scaled to mean 122.2" in got["workload"]["description"]
    # ranged lengths rescale too; their mean is no longer the range's middle
    ranged = bench(
        gpu="h100",
        preset="llama-3.1-8b",
        model=None,
        settings={},
        load=Load(concurrency=4, requests=500),
        lengths=Lengths(prompt_len=1000, output_len=100, len_range=0.5, prompt_mean=500.0),
    )
    assert ranged["total_input_tokens"] / 500 == pytest.approx(500, abs=0.5)


def test_outputs_that_stop_at_eos_are_geometric_under_their_cap() -> None:
    # --output-len 1024 --output-mean 300: a run without --ignore-eos. The model stops with
    # the same chance p after every token: mean 300, none past 1024, and the share that runs to
    # the cap is (1 - p)^1023 (~3%).
    import numpy as np

    from planner.sim.workload import LengthDist

    dist = LengthDist(distribution="eos", median=1024, max=1024, mean=300.0)
    p = dist.stop_probability()
    assert (1 - (1 - p) ** 1024) / p == pytest.approx(300, rel=1e-6)
    drawn = dist.draw(np.random.default_rng(0), 100_000)
    assert drawn.max() == 1024 and drawn.mean() == pytest.approx(300, rel=0.01)
    # the median the echo reports is the distribution's own (~ln 2 x 300 tokens), not the cap
    assert LengthDist.stopping_at_eos(1024, 300.0).median == pytest.approx(np.median(drawn), abs=2)
    assert (drawn == 1024).mean() == pytest.approx((1 - p) ** 1023, rel=0.1)

    def closed_loop(lengths: Lengths) -> dict[str, Any]:
        return bench(
            gpu="h100",
            preset="llama-3.1-8b",
            model=None,
            settings={},
            load=Load(concurrency=16, requests=2000),
            lengths=lengths,
        )

    got = closed_loop(Lengths(prompt_len=512, output_len=1024, output_mean=300.0))
    assert got["total_output_tokens"] / 2000 == pytest.approx(300, rel=0.04)
    assert "stops at EOS (mean 300), at most 1024" in got["workload"]["description"]
    assert got["workload"]["output_tokens"]["median"] < 300  # not the 1,024-token cap
    fixed = closed_loop(Lengths(prompt_len=512, output_len=300))
    # the same tokens, but the clients drift apart: no lockstep prefill of all 16 at once
    assert got["median_ttft_ms"] < fixed["median_ttft_ms"]


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["--concurrency", "4"], "--prompt-len"),
        (["--prompt-len", "10", "--output-len", "10", "--prompt-mean", "5"], "a fixed length"),
        (["--prompt-len", "10", "--output-len", "10", "--output-mean", "10"], "below 10"),
        (["--workload", "sharegpt", "--prompt-mean", "0.5"], "--prompt-mean"),
        (["--prompt-len", "10", "--output-len", "10", "--len-spread", "1"], "--len-spread"),
        (
            ["--prompt-len", "10", "--output-len", "10", "--len-spread", ".5", "--len-range", ".5"],
            "not both",
        ),
        (["--prompt-len", "10", "--output-len", "10", "--pp", "33"], "--pp"),
        (["--prompt-len", "10", "--output-len", "10", "--compare", "static,chunked"], "--compare"),
        (["--prompt-len", "200000", "--output-len", "10"], "--prompt-len"),
        (["--prompt-len", "10", "--output-len", "10", "--engine", "trt"], "--engine"),
        (["--prompt-len", "10", "--output-len", "10", "--ep", "3"], "--ep"),
        (["--prompt-len", "10", "--output-len", "10", "--sweep", "max_batch=4"], "--sweep"),
        (["--prompt-len", "10", "--output-len", "10", "--len-range", "2"], "--len-range"),
        # multi-step scheduling is vLLM V0's (0.6.0-0.10.0), not V1's or SGLang's
        (
            ["--prompt-len", "10", "--output-len", "10", "--num-scheduler-steps", "8"],
            "has no multi-step scheduling",
        ),
        (
            [
                "--prompt-len",
                "10",
                "--output-len",
                "10",
                *["--engine", "sglang", "--num-scheduler-steps", "8"],
            ],
            "sglang has none",
        ),
        (
            [
                "--prompt-len",
                "10",
                "--output-len",
                "10",
                *["--engine-version", "0.5.4", "--num-scheduler-steps", "8"],
            ],
            "predates",
        ),
        (
            [
                "--prompt-len",
                "10",
                "--output-len",
                "10",
                *["--engine-version", "0.6.3", "--num-scheduler-steps", "0"],
            ],
            "--num-scheduler-steps",
        ),
        (
            [
                "--prompt-len",
                "10",
                "--output-len",
                "10",
                *[
                    "--engine-version",
                    "0.6.1",
                    "--num-scheduler-steps",
                    "8",
                    "--enable-chunked-prefill",
                ],
            ],
            "predates multi-step scheduling with chunked",
        ),
    ],
)
def test_bad_deployment_input_exits_2(cli: Cli, args: list[str], text: str) -> None:
    r = cli("simulate", "--preset", "llama-3.1-8b", "--gpu", "h100", *args)
    assert r.code == 2, r.err
    assert text in r.err and r.err.count("\n") == 1


@pytest.mark.parametrize(
    "args",
    [
        ("--concurrency", "4"),
        ("--tp", "2"),
        ("--engine", "sglang"),
        ("--dp-attention",),
        ("--max-num-seqs", "8"),
        ("--kv-dtype", "fp8"),
        ("--disagg-link", "rdma"),
        ("--prefixes", "3"),
        ("--bench-client", "none"),
        # a switch typed off is typed too (its unset value is None, not False)
        ("--no-enable-chunked-prefill",),
        ("--pp", "1"),
    ],
)
def test_benchmark_flags_without_a_deployment_exit_2(cli: Cli, args: tuple[str, ...]) -> None:
    """A deployment's options without --gpu would change nothing in the policy study."""
    r = cli("simulate", "--rate", "2", "--requests", "20", *args)
    flag = args[0].replace("--no-", "--")
    assert r.code == 2 and flag in r.err and "--gpu" in r.err


@pytest.mark.parametrize(
    ("flag", "value", "instead"),
    [
        ("--max-batch", "8", "--max-num-seqs"),
        ("--step-token-budget", "512", "--max-num-batched-tokens"),
        ("--kv-blocks", "700", "the KV pool is the engine's"),
        ("--tpot", "50", "planner fleet"),
        ("--a-ms", "5", "calibrate --bench"),
        ("--policy", "chunked", "the engine's scheduler"),
    ],
)
def test_policy_study_options_are_refused_with_a_deployment(
    cli: Cli, flag: str, value: str, instead: str
) -> None:
    """Typed with --gpu they would change nothing (the engine's scheduler, pool and step model
    run): one error naming the flag and what the deployment takes instead, even at the policy
    study's default value."""
    args = ("--prompt-len", "100", "--output-len", "20", "--requests", "10")
    r = cli("simulate", "--preset", "llama-3.1-8b", "--gpu", "h100", *args, flag, value)
    assert r.code == 2 and flag in r.err and instead in r.err, r.err
    assert r.err.count("\n") == 1
    # without a deployment the same option runs the policy study
    assert cli("simulate", "--rate", "2", "--requests", "20", flag, value).code == 0


def test_sweep_gives_one_point_per_concurrency(cli: Cli) -> None:
    r = cli(
        "simulate",
        "--preset",
        "llama-3.1-8b",
        "--gpu",
        "h100",
        "--prompt-len",
        "500",
        "--output-len",
        "100",
        "--sweep",
        "concurrency=1,8,32",
        "--requests",
        "64",
        "--json",
    )
    points = r.json()["sweep"]
    assert [p["max_concurrency"] for p in points] == [1, 8, 32]
    per_user = [p["tokens_per_s_per_user"] for p in points]
    per_gpu = [p["output_throughput_per_gpu"] for p in points]
    assert per_user == sorted(per_user, reverse=True) and per_gpu == sorted(per_gpu)


def _results(tmp_path: Path, scale: float, offset: float, loads: tuple[int, ...]) -> list[str]:
    """Benchmark results of a 'real' deployment whose HBM reads take `scale` x the model's and
    whose steps carry `offset` ms more, written as `vllm bench serve --save-result` JSON."""
    from planner.core.engines.calibration import Calibration, StepCalibration

    paths = []
    for n in loads:
        kwargs: dict[str, Any] = {
            "gpu": "h100",
            "preset": "llama-3.1-8b",
            "model": None,
            "settings": {},
            "load": Load(concurrency=n, requests=6 * n),
            "lengths": Lengths(prompt_len=800, output_len=120),
        }
        d = bench(**kwargs)["deployment"]
        truth = Calibration(
            engine=d["engine"],
            engine_version=d["engine_version"],
            gpu=d["gpu"],
            model=d["model"],
            tensor_parallel_size=1,
            pipeline_parallel_size=1,
            step=StepCalibration(memory_scale=scale, step_offset_ms=offset, basis="t", results=1),
        )
        got = bench(**kwargs, calibration=truth)
        keys = (
            "completed",
            "total_input_tokens",
            "total_output_tokens",
            "median_tpot_ms",
            "output_throughput",
            "max_concurrency",
            "request_rate",
            "duration",
        )
        path = tmp_path / f"c{n}.json"
        path.write_text(json.dumps({"backend": "vllm", **{k: got[k] for k in keys}}))
        paths.append(str(path))
    return paths


def test_calibrate_bench_round_trip(cli: Cli, tmp_path: Path) -> None:
    """From results at concurrency 4 and 48, concurrency 16 of the same deployment is
    predicted within 10% (TPOT and throughput); the uncalibrated model is further off."""
    c4, c16, c48 = _results(tmp_path, 1.35, 1.5, (4, 16, 48))
    profile = tmp_path / "p.yaml"
    r = cli(
        "calibrate",
        "--bench",
        c4,
        "--bench",
        c48,
        "--gpu",
        "h100",
        "--preset",
        "llama-3.1-8b",
        "--save",
        str(profile),
        "--json",
    )
    assert r.code == 0, r.err
    step = r.json()["profile"]["step"]
    assert step["memory_scale"] == pytest.approx(1.35, rel=0.05)
    measured = json.loads(Path(c16).read_text())
    args = (
        "simulate",
        "--preset",
        "llama-3.1-8b",
        "--gpu",
        "h100",
        "--concurrency",
        "16",
        "--requests",
        "96",
        "--prompt-len",
        "800",
        "--output-len",
        "120",
        "--json",
    )
    plain = cli(*args).json()
    fitted = cli(*args, "--calibration", str(profile)).json()
    for key in ("median_tpot_ms", "output_throughput"):
        assert fitted[key] == pytest.approx(measured[key], rel=0.10)
        assert abs(plain[key] - measured[key]) > abs(fitted[key] - measured[key])
    # a disaggregated deployment's pools take the same profile (the card's and engine's)
    pools = [
        cli(*args, "--disagg", "1p1d", *c).json() for c in ((), ("--calibration", str(profile)))
    ]
    assert pools[1]["calibration"] == fitted["calibration"] and pools[0]["calibration"] is None
    assert pools[1]["median_tpot_ms"] > 1.2 * pools[0]["median_tpot_ms"]
    # capacity --tpot and slo cap the batch on the same calibrated step (slower: fewer seqs)
    where = ("--preset", "llama-3.1-8b", "--gpu", "h100", "--tpot", "40", "--json")
    capped = [
        cli("capacity", *where, *cal).json()["engine"]["settings"]["max_num_seqs"]
        for cal in ((), ("--calibration", str(profile)))
    ]
    slo = cli("slo", *where, "--calibration", str(profile)).json()
    assert capped[1] == slo["operating_concurrency"] < capped[0]
    # spec and capacity --spec-alpha price speculation on that calibrated step too
    where = ("--preset", "llama-3.1-8b", "--gpu", "h100", "--json")
    cal = ("--calibration", str(profile))
    spec = [cli("spec", "--alpha", "0.7", *where, *c).json()["chosen"] for c in ((), cal)]
    line = cli("capacity", *where, *cal, "--spec-alpha", "0.7").json()["speculation"]
    assert spec[1]["speedup"] == line["speedup"] != spec[0]["speedup"]


def test_a_bursty_result_is_replayed_at_its_burstiness(tmp_path: Path) -> None:
    """`vllm bench serve --burstiness 0.25` saves its gamma shape; calibrate replays the run
    with gaps of CV 2, not as Poisson arrivals."""
    from planner.api.bench_calibrate import _replay
    from planner.api.bench_instance import Deployment
    from planner.sources.bench_result import read_bench_results

    got = bench(**_KWARGS, load=Load(rate_per_s=6.0, cv=2.0, requests=200))
    keys = ("completed", "total_input_tokens", "total_output_tokens", "median_tpot_ms")
    body = {k: got[k] for k in keys} | {"output_throughput": got["output_throughput"]}
    path = tmp_path / "bursty.json"
    path.write_text(json.dumps(body | {"request_rate": 6.0, "burstiness": 0.25}))
    (record,) = read_bench_results(str(path))
    assert record.burstiness == 0.25
    replay = _replay(record, Deployment.split(_KWARGS)[0], None)
    assert "Gamma" in replay["workload"]["description"]
    assert replay["workload"]["cv"] == pytest.approx(2.0)


def test_a_result_is_replayed_with_the_client_that_read_it(tmp_path: Path) -> None:
    """A result names its client: vllm bench serve writes `endpoint_type` (an OpenAI stream
    whatever the backend), sglang.bench_serving `backend` alone (its own backend reads the
    native stream, sglang-oai an OpenAI one); a file naming neither is the engine's own."""
    from planner.sources.bench_result import read_bench_results

    body = {
        "completed": 10, "total_input_tokens": 8000, "total_output_tokens": 1200,
        "median_tpot_ms": 9.0, "output_throughput": 900.0,
    }  # fmt: skip
    for extra, client in (
        ({"endpoint_type": "openai", "backend": "sglang"}, "vllm"),
        ({"backend": "sglang"}, "sglang"),
        ({"backend": "sglang-native"}, "sglang"),
        ({"backend": "sglang-oai"}, "vllm"),
        ({}, None),
    ):
        path = tmp_path / "r.json"
        path.write_text(json.dumps(body | extra))
        (record,) = read_bench_results(str(path))
        assert record.client == client, extra


def test_a_result_with_a_number_past_floats_range_is_one_clear_error(tmp_path: Path) -> None:
    """JSON spells integers of any size: one past float's range in a figure, the rate or the
    burstiness is refused naming the file (exit 2), not an OverflowError."""
    from planner.errors import InputError
    from planner.sources.bench_result import read_bench_results

    body = {
        "completed": 10, "total_input_tokens": 8000, "total_output_tokens": 1200,
        "median_tpot_ms": 9.0, "output_throughput": 900.0,
    }  # fmt: skip
    huge = int("9" * 400)
    path = tmp_path / "r.json"
    for bad in ({"total_input_tokens": huge}, {"burstiness": huge}):
        path.write_text(json.dumps(body | bad))
        with pytest.raises(InputError, match="not a"):
            read_bench_results(str(path))
    path.write_text(json.dumps(body | {"request_rate": huge}))
    (record,) = read_bench_results(str(path))
    assert record.request_rate is None  # every request at once, as "inf"


_KWARGS: dict[str, Any] = {
    "gpu": "h100",
    "preset": "llama-3.1-8b",
    "model": None,
    "settings": {},
    "lengths": Lengths(prompt_len=800, output_len=120),
}


def test_calibration_from_another_deployment_is_refused(cli: Cli, tmp_path: Path) -> None:
    (c4,) = _results(tmp_path, 1.2, 0.0, (4,))
    profile = tmp_path / "p.yaml"
    assert (
        cli(
            "calibrate",
            "--bench",
            c4,
            "--gpu",
            "h100",
            "--preset",
            "llama-3.1-8b",
            "--save",
            str(profile),
        ).code
        == 0
    )
    for other in (
        ["--gpu", "a100", "--preset", "llama-3.1-8b"],
        ["--gpu", "h100", "--preset", "qwen3-8b"],
    ):
        r = cli(
            "simulate",
            *other,
            "--concurrency",
            "2",
            "--prompt-len",
            "100",
            "--output-len",
            "10",
            "--calibration",
            str(profile),
        )
        assert r.code == 2 and "--calibration: the profile was measured" in r.err


@pytest.mark.parametrize(
    ("body", "text"),
    [
        ('{"completed": 100, "total_input_tokens": 1000', "line 1"),  # truncated
        (
            '{"completed": 100, "total_input_tokens": 1000, "total_output_tokens": 500, '
            '"median_tpot_ms": NaN, "output_throughput": 10.0}',
            "median_tpot_ms is nan",
        ),
        ('{"ttft_s": [0.1, 0.2], "tool": "genai-perf"}', "completed is missing"),
        (
            '{"completed": 100, "total_input_tokens": 1000, "total_output_tokens": 500, '
            '"median_tpot_ms": 10.0, "output_throughput": 10.0, "burstiness": -1}',
            "burstiness must be a gamma shape > 0",
        ),
        ("", "empty"),
    ],
)
def test_bad_result_files_exit_2(cli: Cli, tmp_path: Path, body: str, text: str) -> None:
    path = tmp_path / "r.json"
    path.write_text(body)
    r = cli("calibrate", "--bench", str(path), "--gpu", "h100", "--preset", "llama-3.1-8b")
    assert r.code == 2, r.err
    assert text in r.err and r.err.count("\n") == 1


def test_slo_reads_the_same_step_calibration(cli: Cli, tmp_path: Path) -> None:
    """slo's derived step model with a --bench profile is the simulator's calibrated curve."""
    from planner.api.bench_instance import apply_step_calibration
    from planner.sources.calibration import load_calibration

    (c4,) = _results(tmp_path, 1.3, 1.0, (4,))
    profile = tmp_path / "p.yaml"
    assert (
        cli(
            "calibrate",
            "--bench",
            c4,
            "--gpu",
            "h100",
            "--preset",
            "llama-3.1-8b",
            "--save",
            str(profile),
        ).code
        == 0
    )
    args = (
        "slo",
        "--tpot",
        "50",
        "--preset",
        "llama-3.1-8b",
        "--gpu",
        "h100",
        "--batch",
        "1,64",
        "--json",
    )
    plain = cli(*args).json()
    fitted = cli(*args, "--calibration", str(profile)).json()
    step = load_calibration(str(profile)).step
    curve = step_time_for(resolve_model("llama-3.1-8b", None), find_gpu("h100"), engine="vllm")
    for b in (1, 64):
        want = apply_step_calibration(curve, step).step_ms(b, 2000)  # slo's --mean-len 2000
        assert fitted["step_ms_at"][str(b)] == pytest.approx(want)
        assert fitted["step_ms_at"][str(b)] > plain["step_ms_at"][str(b)]
    assert "calibrated on your serving results" in fitted["source"]
    r = cli(
        "slo",
        "--tpot",
        "50",
        "--preset",
        "qwen3-8b",
        "--gpu",
        "h100",
        "--calibration",
        str(profile),
    )
    assert r.code == 2 and "--calibration: the profile was measured with model" in r.err


def test_without_a_rate_every_request_goes_at_once(cli: Cli) -> None:
    """vllm bench serve's default request rate is inf: with neither --rate nor --concurrency
    every request is sent at t = 0, so the first TTFTs queue behind each other's prefill."""
    r = cli(
        "simulate",
        "--preset",
        "llama-3.1-8b",
        "--gpu",
        "h100",
        "--prompt-len",
        "2000",
        "--output-len",
        "20",
        "--requests",
        "300",
        "--json",
    )
    data = r.json()
    assert data["max_concurrency"] is None and data["request_rate"] is None
    assert "closed loop" not in data["workload"]["description"]
    assert data["p99_ttft_ms"] > 10 * data["median_tpot_ms"]  # 600,000 prompt tokens queued


def test_whole_prompts_wait_for_a_step_with_room() -> None:
    """Chunked prefill off (or V0's multi-step rounds): two 300-token prompts under a 512-token
    budget run one whole prompt a step, so the first one's first token comes after a 300-token
    step, where chunking fills the first step with 512 tokens (300 + 212 of the second)."""
    import numpy as np

    from planner.sim.config import SimConfig
    from planner.sim.cost import CostModel
    from planner.sim.engine import execute
    from planner.sim.workload import Trace

    trace = Trace(np.zeros(2), np.array([300, 300]), np.array([2, 2]), np.zeros(2, dtype=np.int64))
    cost = CostModel(a_ms=5.0, b_ms=0.0, prefill_ms_per_token=0.1, overhead_ms=0.0)
    first = {}
    for whole in (False, True):
        cfg = SimConfig(
            policy="chunked", step_token_budget=512, chunk_tokens=512, whole_prompts=whole
        )
        first[whole] = execute(trace, cost, cfg).first_ms
    assert first[False][0] == pytest.approx(5.0 + 51.2)
    assert first[True][0] == pytest.approx(5.0 + 30.0)
    # the second prompt's last token is prefilled in the second step either way
    assert first[True][1] == pytest.approx(2 * 5.0 + 60.0)
    assert first[False][1] == pytest.approx(2 * 5.0 + 60.0)


def test_multi_step_rounds_ignore_prompts_longer_than_the_budget() -> None:
    """vLLM V0's multi-step rounds with chunked prefill do not chunk prompts and finish a
    prompt longer than --max-num-batched-tokens at once with no output: the rest are served,
    the client counts every request completed (the ignored with no output), and the output
    says how many were ignored; a workload of only such prompts is one error."""
    common = v0_chunked_512(Load(rate_per_s=10.0, requests=200)) | {"scheduler_steps": 8}
    with pytest.raises(InputError, match="ignore every prompt longer"):
        bench(**common, lengths=Lengths(prompt_len=600, output_len=50))
    whole = bench(**common, lengths=Lengths(prompt_len=500, output_len=50))
    assert whole["completed"] == 200 and whole["ignored_requests"] == 0
    # prompts uniform in [300, 600]: those over 512 (about 88 / 301 of them) are ignored; the
    # outputs (uniform in [25, 50]) are the served requests' alone
    mixed_lengths = Lengths(prompt_len=600, output_len=50, len_range=0.5)
    mixed = bench(**common, lengths=mixed_lengths)
    ignored = mixed["ignored_requests"]
    served = 200 - ignored
    assert mixed["completed"] == 200
    assert 0.2 * 200 < ignored < 0.4 * 200
    assert 25 * served <= mixed["total_output_tokens"] <= 50 * served
    # their prompts are among the input tokens the client counts (uniform in [300, 600])
    assert 300 * 200 <= mixed["total_input_tokens"] <= 600 * 200
    assert mixed["request_throughput"] == pytest.approx(200 / mixed["duration"])
    assert any(f"{ignored:,} of 200 requests" in note for note in mixed["notes"])
    # how the client of that era counts them: TTFT 0 (vLLM 0.6.3 backend_request_func.py,
    # stamped on a chunk with text), which `vllm bench serve` does not (timed at the finishing
    # chunk, not priced: left out of its figures)
    assert any("TTFT of 0" in note for note in mixed["notes"])
    era = bench(**common, lengths=mixed_lengths, client="vllm-2024")
    now = bench(**common, lengths=mixed_lengths, client="vllm")
    assert era["mean_ttft_ms"] == pytest.approx(now["mean_ttft_ms"] * served / 200, rel=1e-6)
    assert era["mean_e2el_ms"] == pytest.approx(now["mean_e2el_ms"] * served / 200, rel=1e-6)
    # left to its default, the budget under multi-step rounds is the context: none is ignored
    default = bench(
        **common | {"settings": {"version": "0.6.3"}},
        lengths=Lengths(prompt_len=600, output_len=50, len_range=0.5),
    )
    assert default["ignored_requests"] == 0
    assert default["deployment"]["max_num_batched_tokens"] == 8192


def test_v0_runs_the_chunked_prefill_its_plan_resolves() -> None:
    """vLLM V0 turns chunked prefill on above a 32K context: the simulated server mixes its
    prefill chunks into decode steps there (the note on V0's mixed steps says so) and runs
    prefill-only steps at 8K, as the plan's line for each context does."""
    runs = {
        context: run(16, 200, 50, requests=32, version="0.6.3", context_tokens=context)
        for context in (8192, 65536)
    }
    assert not any("mix prefill chunks into decodes" in n for n in runs[8192]["notes"])
    assert any("mix prefill chunks into decodes" in n for n in runs[65536]["notes"])
    with pytest.raises(InputError, match="SGLang chunks prompts"):
        run(4, 200, 50, requests=8, chunked_prefill=False, engine="sglang")


def gpt_oss_20b_on_b200(
    clients: int, dp: int = 1, client: str | None = "none", **settings: Any
) -> dict[str, Any]:
    """A closed loop of gpt-oss-20b on B200s: 200-token prompts, 100-token outputs, two
    requests per client (a batch large enough for the API server to matter); the benchmark
    client not priced unless `client` names one."""
    return bench(
        gpu="b200",
        preset="gpt-oss-20b",
        model=None,
        settings=settings,
        dp=dp,
        load=Load(concurrency=clients, requests=2 * clients),
        lengths=Lengths(prompt_len=200, output_len=100),
        client=client,
    )


def test_the_api_server_sets_the_pace_past_what_it_streams_per_step() -> None:
    """gpt-oss-20b on a B200 at 1,024 clients: the GPU step is shorter than the 24 us per
    token vLLM's API server spends streaming 1,024 tokens (benchmarks/data/host-overhead.jsonl),
    so TPOT follows the API server and the output says so; at 16 clients it does not."""
    wide = gpt_oss_20b_on_b200(1024, version="0.14.0")
    assert wide["median_tpot_ms"] >= 0.95 * 1024 * 0.024
    assert any("API server" in n for n in wide["notes"])
    assert not any("API server" in n for n in gpt_oss_20b_on_b200(16, version="0.14.0")["notes"])


def test_one_api_server_streams_every_data_parallel_rank_before_vllm_0_15() -> None:
    """vLLM before 0.15 starts one API server for all --data-parallel-size ranks; from 0.15
    one per rank. Two ranks of 512 sequences each: the single server streams 1,024 tokens a
    step (24 us each), the pair of servers 512 each."""
    one_server = gpt_oss_20b_on_b200(1024, dp=2, version="0.14.0")
    per_rank = gpt_oss_20b_on_b200(1024, dp=2, version="0.15.0")
    assert one_server["median_tpot_ms"] >= 0.95 * 1024 * 0.024
    assert per_rank["median_tpot_ms"] < 0.8 * one_server["median_tpot_ms"]
    assert any("all 2 ranks' tokens" in n for n in one_server["notes"])
    assert not any("all 2 ranks' tokens" in n for n in per_rank["notes"])


def test_an_api_server_the_planner_has_not_measured_is_named_where_it_could_bind() -> None:
    """vLLM V0's API server is not measured: where streaming the peak batch's tokens at vLLM
    V1's measured 24 us each would outlast the GPU step, the output says TPOT may be
    optimistic instead of borrowing the number; at a small batch it says nothing. SGLang's is
    measured (18 us a token, a floor) and priced like vLLM V1's."""

    def llama_1b(clients: int, scheduler_steps: int = 1, **settings: Any) -> dict[str, Any]:
        return bench(
            gpu="h100",
            preset=None,
            model=str(MODELS / "meta-llama--Llama-3.2-1B-Instruct"),
            settings=settings,
            load=Load(concurrency=clients, requests=2 * clients),
            lengths=Lengths(prompt_len=200, output_len=100),
            client="none",
            scheduler_steps=scheduler_steps,
        )

    # V0's own serial work per sequence (35.8 us) outlasts V1's API server (24 us a token)
    # in a single-step engine; a multi-step round pays it once, and its steps are shorter
    assert not any("API server" in n for n in llama_1b(1024, version="0.6.3")["notes"])
    rounds = llama_1b(1024, version="0.6.3", scheduler_steps=8)["notes"]
    (note,) = [n for n in rounds if "API server" in n]
    assert note.startswith("vLLM 0.6.3's API server is not priced") and "optimistic" in note
    (host,) = [n for n in rounds if "in series with the GPU" in n]
    assert "input preparation" in host and "once per round of 8 steps" in host
    assert not any("API server" in n for n in llama_1b(16, version="0.6.3")["notes"])
    sglang = gpt_oss_20b_on_b200(1024, engine="sglang")
    (note,) = [n for n in sglang["notes"] if "API server" in n]
    assert "SGLang's API server" in note and "--tokenizer-worker-num" in note
    assert sglang["median_tpot_ms"] >= 0.95 * 1024 * 0.018


def test_the_benchmark_client_reads_every_stream_at_its_own_pace() -> None:
    """vllm bench serve reads all 1,024 streams in one process, 32 us a chunk
    (benchmarks/data/host-overhead.jsonl): slower than vLLM's API server (24 us a token), so
    the TPOT it prints is its pace and the output says so; `none` prints the engine's. Two DP
    ranks stream to the same client: it reads both ranks' chunks every step."""
    engine_pace = gpt_oss_20b_on_b200(1024, version="0.14.0")
    client_pace = gpt_oss_20b_on_b200(1024, client=None, version="0.14.0")
    # (the first wave of 1,024 requests enters over 1,024 front-door times, 0.9 s)
    assert client_pace["median_tpot_ms"] >= 0.9 * 1024 * 0.032
    assert engine_pace["median_tpot_ms"] < 0.9 * client_pace["median_tpot_ms"]
    assert client_pace["output_throughput"] < engine_pace["output_throughput"]
    (note,) = [n for n in client_pace["notes"] if "benchmark client" in n]
    assert "--bench-client none" in note
    assert not any("benchmark client" in n for n in engine_pace["notes"])
    # the step model it reports is the service's, as `slo` prices it, either way
    assert client_pace["step_ms"] == engine_pace["step_ms"]
    assert (client_pace["bench_client"], engine_pace["bench_client"]) == ("vllm", "none")
    # the same client against vLLM 0.15's API server per rank: 2 x 512 chunks a step
    two_ranks = gpt_oss_20b_on_b200(1024, dp=2, client="vllm", version="0.15.0")
    assert two_ranks["median_tpot_ms"] >= 0.95 * 1024 * 0.032
    with pytest.raises(InputError, match="vllm, sglang, vllm-2024 or none"):
        gpt_oss_20b_on_b200(4, client="genai-perf")


def test_sglang_native_stream_costs_its_client_more_as_the_output_grows() -> None:
    """sglang.bench_serving reads SGLang's native stream, whose every chunk carries the whole
    output so far: 35 us a chunk at its start, +0.033 us per token already generated (85-116
    us measured after 2,000); an OpenAI-stream client reads one token a chunk, 32 us whatever
    the length."""
    assert bench_client_ms_per_chunk("sglang", 0) == pytest.approx(0.035)
    assert bench_client_ms_per_chunk("sglang", 2000) == pytest.approx(0.101)
    assert bench_client_ms_per_chunk("vllm", 2000) == bench_client_ms_per_chunk("vllm", 0)
    short = gpt_oss_20b_on_b200(1024, client="sglang", engine="sglang")
    openai = gpt_oss_20b_on_b200(1024, client="vllm", engine="sglang")
    assert short["median_tpot_ms"] > openai["median_tpot_ms"]


def test_the_sharegpt_presets_are_the_samplers_measured_lengths() -> None:
    """Both presets list the 1,000 prompt lengths vLLM's ShareGPT sampler drew (dstack's raw
    results); sharegpt-base pairs each with what a base model made of it: 37.8% ended at their
    first token (listed as 1), the other 622 as measured (mean 196.5), and the long prompts
    mostly drew empty answers (101 of the 152 over 512 tokens, 5,129 tokens among them). A run
    of 1,000 draws each request once, both lengths together; a longer one draws with
    replacement; either list replaced, the outputs that streamed text are drawn apart."""
    import numpy as np

    from planner.api.simulate import load_workload
    from planner.sim.workload import generate

    ref, base = load_workload("sharegpt"), load_workload("sharegpt-base")
    prompts = ref.prompt_tokens
    assert (len(prompts.values), sum(prompts.values)) == (1000, 215_196)
    assert base.prompt_tokens == prompts and base.paired
    outputs = base.output_tokens.values
    assert (len(outputs), outputs.count(1)) == (1000, 378)
    streamed = base.streamed_outputs().values
    assert (len(streamed), round(sum(streamed) / len(streamed), 1)) == (622, 196.5)
    long = [o for p, o in zip(prompts.values, outputs, strict=True) if p > 512]
    assert (len(long), long.count(1), sum(o for o in long if o > 1)) == (152, 101, 5_129)
    assert (ref.empty_output_share, base.empty_output_share) == (0.0, 0.378)
    trace = generate(base)
    pairs = sorted(zip(trace.prompt_tokens.tolist(), trace.output_tokens.tolist(), strict=True))
    assert pairs == sorted(zip(prompts.values, outputs, strict=True))
    once = prompts.draw(np.random.default_rng(3), 1000)
    assert sorted(once.tolist()) == sorted(prompts.values)
    again = generate(base.model_copy(update={"requests": 3000})).prompt_tokens
    assert set(again.tolist()) <= set(prompts.values) and len(again) == 3000
    assert "paired request by request" in base.summary()
    assert "38% end at their first token" in base.summary()


def test_a_paired_workload_keeps_its_empty_outputs_unless_another_share_is_asked() -> None:
    """sharegpt-base as measured: its 378 empty outputs are the ones the base model gave (the
    client counts them no tokens). --empty-outputs draws a share afresh over every request,
    the measured empty ones given lengths that streamed text; --output-mean scales the others
    and leaves the empty ones empty; --prompt-len breaks the pairs and draws the streamed
    outputs with the share as the workload's."""

    def run_with(**lengths: Any) -> dict[str, Any]:
        return sharegpt_run("sharegpt-base", **lengths)

    measured = run_with()
    assert measured["total_output_tokens"] == 122_589 - 378  # the empty ones count none
    assert measured["workload"]["paired"] is True
    drawn = run_with(empty_share=0.1)
    assert drawn["total_output_tokens"] == pytest.approx(0.9 * 1000 * 196.5, rel=0.1)
    assert "10% end at their first token" in drawn["workload"]["description"]
    assert "38%" not in drawn["workload"]["description"]
    scaled = run_with(output_mean=100.0)
    assert scaled["total_output_tokens"] == pytest.approx(100.0 * 1000 - 378, rel=0.01)
    apart = run_with(prompt_len=200)
    assert apart["total_output_tokens"] == pytest.approx(0.622 * 1000 * 196.5, rel=0.1)
    assert "paired" not in apart["workload"]


def test_empty_outputs_stream_no_text_and_a_text_client_counts_their_ttft_as_zero() -> None:
    """A base model on chat prompts ends some requests at their first token (EOS: no text).
    They still cost a prefill; their outputs count no tokens; a client that stamps TTFT on the
    first chunk with text (sglang.bench_serving, vLLM's 2024 script) records 0 for them and
    keeps them in its TTFT figures, so its median falls below every real first token's."""

    def run_with(share: float | None, client: str) -> dict[str, Any]:
        return bench(
            gpu="h100",
            preset="llama-3.1-8b",
            model=None,
            settings={},
            load=Load(concurrency=16, requests=400),
            lengths=Lengths(prompt_len=512, output_len=64, empty_share=share),
            client=client,
        )

    plain = run_with(None, "vllm")
    newer = run_with(0.4, "vllm")
    older = run_with(0.4, "vllm-2024")
    empty = 400 - newer["total_output_tokens"] // 64
    assert 120 < empty < 200  # about 40% of 400, each an output of no text
    assert newer["total_output_tokens"] == (400 - empty) * 64
    # the same run read by both clients: vllm bench serve stamps the first chunk (empty text
    # too), so each TTFT is at least the request's way in; the 2024 script records 0 for the
    # empty ones, about 40% of its TTFTs
    assert newer["median_ttft_ms"] > REQUEST_PATH_MS
    assert older["median_ttft_ms"] < newer["median_ttft_ms"]
    assert older["mean_ttft_ms"] < newer["mean_ttft_ms"] * (400 - empty / 2) / 400
    assert older["p99_ttft_ms"] == pytest.approx(newer["p99_ttft_ms"], rel=0.05)
    assert plain["total_output_tokens"] == 400 * 64
    # TPOT is over the requests that streamed more than one token: the same for both clients
    assert older["median_tpot_ms"] == pytest.approx(newer["median_tpot_ms"], rel=1e-9)
    assert "40% end at their first token" in older["workload"]["description"]


def test_empty_outputs_need_a_generated_workload(cli: Cli, tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"arrival_s": 0, "prompt_tokens": 10, "output_tokens": 5}\n')
    r = cli(
        "simulate", "--preset", "llama-3.1-8b", "--gpu", "h100", "--trace", str(trace),
        "--empty-outputs", "0.3", "--json",
    )  # fmt: skip
    assert r.code == 2 and "--empty-outputs" in r.json()["error"]
    r = cli(
        "simulate", "--preset", "llama-3.1-8b", "--gpu", "h100", "--concurrency", "4",
        "--prompt-len", "64", "--output-len", "8", "--bench-client", "curl", "--json",
    )  # fmt: skip
    assert r.code == 2 and "vllm-2024" in r.json()["error"]


def test_a_deployment_speculates_as_spec_prices_it(cli: Cli) -> None:
    """simulate --spec-alpha with a deployment: each decode step is the target verifying k
    drafts on the step model plus the drafts' forwards, so at one client the TPOT falls by the
    speedup `planner spec` prints there; at alpha 0 nothing is accepted and it rises by the
    cost of drafting and verifying, 1 + k c + k v."""
    where = ("--preset", "llama-3.1-70b", "--gpu", "h100", "--tp", "4")
    run = (
        "simulate", *where, "--concurrency", "1", "--requests", "20", "--prompt-len", "1000",
        "--output-len", "300", "--json",
    )  # fmt: skip
    plain = cli(*run).json()["median_tpot_ms"]
    fast = cli(*run, "--spec-alpha", "0.7").json()
    assert fast["speculation"]["k"] == 4 and "verifies 4 drafts" in " ".join(fast["notes"])
    spec = cli(
        "spec", "--alpha", "0.7", "--k", "4", *where, "--concurrency", "1", "--mean-len", "1150",
        "--json",
    ).json()  # fmt: skip
    assert plain / fast["median_tpot_ms"] == pytest.approx(spec["chosen"]["speedup"], rel=0.05)
    load = spec["load"][0]
    cost = 1 + 4 * (load["draft_cost"] + load["verify_cost_best_k"])
    slow = cli(*run, "--spec-alpha", "0").json()["median_tpot_ms"]
    assert slow / plain == pytest.approx(cost, rel=0.02)
    refused = cli(*run, "--spec-k", "3")
    assert refused.code == 2 and "--spec-alpha" in refused.json()["error"]


@pytest.mark.parametrize(("engine", "method"), [("vllm", "eagle3"), ("sglang", "ngram")])
def test_a_speculating_run_prints_the_line_it_speculates_with(
    cli: Cli, engine: str, method: str
) -> None:
    """The deployment's line carries the method's flags for the run's k, as `planner spec`
    prints them for that k; a method the engine or the model has not is refused by name."""
    run = ("simulate", "--preset", "llama-3.1-8b", "--gpu", "h100", "--engine", engine,
           "--concurrency", "2", "--requests", "10", "--prompt-len", "100", "--output-len",
           "20", "--spec-alpha", "0.7", "--spec-k", "3", "--json")  # fmt: skip
    got = cli(*run, "--spec-method", method).json()
    flags = cli("spec", "--alpha", "0.7", "--k", "3", "--method", method, "--json").json()
    assert got["deployment"]["command"].endswith(" " + flags["flags"][engine])
    assert got["speculation"]["method"] == method
    assert cli(*run[:-1]).code == 0  # eagle3 unless named
    for refused in ("mtp", "bogus"):  # llama has no MTP layers
        r = cli(*run, "--spec-method", refused)
        assert r.code == 2 and r.json()["field"] == "--spec-method"


@pytest.mark.parametrize(
    ("version", "pp", "late"),
    [
        ("0.5.2", 1, False),  # before async output processing (0.6.0)
        ("0.6.3", 1, True),  # V0: a step's tokens leave with the next step
        ("0.6.3", 2, False),  # V0 turns it off under pipeline parallelism
        ("0.10.1", 1, False),  # V1's engine core returns a step's outputs as it ends
    ],
)
def test_vllm_v0_delivers_tokens_a_step_late(version: str, pp: int, late: bool) -> None:
    inst, _ = deployment_instance(
        Deployment(
            gpu="h100",
            preset="llama-3.1-8b",
            model=None,
            settings={"engine": "vllm", "version": version, "tp": 1, "pp": pp},
        )
    )
    assert inst.cfg.outputs_one_step_late is late
    speculating = with_speculation(inst, Speculation(alpha=0.7, k=3, draft_cost=0.05))
    assert speculating.cfg.outputs_one_step_late is False  # off under speculative decoding


def test_an_emulated_weight_format_on_amd_is_said_to_be_optimistic(cli: Cli) -> None:
    """Where the engine emulates the weights' format on AMD (NVIDIA's NVFP4; an MXFP4 export
    on a card without MX formats) the run says its steps leave the dequantization out;
    OpenAI's weight-only MXFP4 is multiplied natively and says nothing of it."""
    run = ("simulate", "--engine", "vllm", "--concurrency", "4", "--prompt-len", "100",
           "--output-len", "10", "--requests", "8", "--json")  # fmt: skip
    nvfp4 = cli(*run, "--preset", "deepseek-v3", "--gpu", "mi355x", "--tp", "8",
                "--weight-dtype", "nvfp4")  # fmt: skip
    assert any("NVFP4 on AMD Instinct runs emulated" in n for n in nvfp4.json()["notes"])
    mx = cli(*run, "--preset", "deepseek-v3", "--gpu", "mi300x", "--tp", "8",
             "--weight-dtype", "mxfp4")  # fmt: skip
    assert any("emulate this MXFP4 export" in n for n in mx.json()["notes"])
    on_gfx950 = cli(*run, "--preset", "deepseek-v3", "--gpu", "mi355x", "--tp", "8",
                    "--weight-dtype", "mxfp4")  # fmt: skip
    oss = cli(*run, "--model", str(MODELS / "openai--gpt-oss-120b"), "--gpu", "mi300x")
    for r in (on_gfx950, oss):
        assert r.code == 0, r.err
        assert not any("emulat" in n for n in r.json()["notes"])
