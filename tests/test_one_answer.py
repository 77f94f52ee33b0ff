"""One deployment, one answer: capacity, slo and spec print the same pool and max_num_seqs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import Result

Cli = Callable[..., Result]

PAIRS = [
    ("llama-3.1-8b", "h100"),
    ("gqa-70b", "mi300x"),
    ("qwen3-8b", "a100-sxm4-80gb"),
    ("mistral-7b-v0.1", "l40s"),
    ("qwen3-30b-a3b", "h200"),
]


@pytest.mark.parametrize(("preset", "gpu"), PAIRS)
def test_capacity_slo_and_spec_agree_on_the_pool(cli: Cli, preset: str, gpu: str) -> None:
    where = ("--preset", preset, "--gpu", gpu, "--json")
    capacity = cli("capacity", *where).json()
    slo = cli("slo", "--tpot", "500", *where).json()  # a loose TPOT: memory binds
    spec = cli("spec", "--alpha", "0.7", *where).json()
    held = capacity["max_seqs_paged"]
    # slo's pool is its line's, at the step budget the TPOT sets: capacity --tpot's
    assert slo["memory_cap"] == cli("capacity", "--tpot", "500", *where).json()["max_seqs_paged"]
    assert slo["memory_cap"] >= held  # a budget at most the engine's own frees memory
    assert spec["scan_limit"] == min(held, 4096)  # scanned up to the pool (--max-batch 4096)
    assert spec["operating_concurrency"] == capacity["operating_concurrency"]
    assert slo["operating_concurrency"] == min(slo["memory_cap"], slo["batch_cap"])


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_tpot_that_binds_plans_one_pool_in_capacity_and_slo(cli: Cli, engine: str) -> None:
    """Where the TPOT, not memory, binds, both commands print a line whose --max-num-seqs is
    the latency cap, and both report the pool the engine plans with that line (its smaller
    max_num_seqs frees sampler rows and CUDA graphs: more than the engine's default holds)."""
    where = ("--preset", "llama-3.1-70b", "--gpu", "h100", "--tp", "4", "--engine", engine)
    where += ("--tpot", "50", "--json")
    capacity = cli("capacity", *where).json()
    slo = cli("slo", *where).json()
    default = cli("capacity", *where[:-3], "--json").json()["max_seqs_paged"]
    assert slo["binding"] == "latency" and slo["operating_concurrency"] < slo["memory_cap"]
    assert slo["memory_cap"] == capacity["max_seqs_paged"] > default
    assert slo["operating_concurrency"] == capacity["operating_concurrency"]


@pytest.mark.parametrize(
    ("engine", "flag"), [("vllm", "--gpu-memory-utilization"), ("sglang", "--mem-fraction-static")]
)
def test_a_memory_share_is_one_pool_in_every_command(cli: Cli, engine: str, flag: str) -> None:
    """The engine's memory share, typed as the engine spells it, shrinks the pool capacity,
    slo, spec and simulate plan, and all four plan the same one (simulate launched with
    capacity's line, as test_simulate_runs_the_pool_capacity_plans launches it)."""
    where = ("--preset", "llama-3.1-8b", "--gpu", "h100", "--engine", engine, "--json")
    default = cli("capacity", *where).json()
    capacity = cli("capacity", *where, flag, "0.8").json()
    held = capacity["max_seqs_paged"]
    assert held < default["max_seqs_paged"]
    tight = cli("capacity", "--tpot", "500", *where, flag, "0.8").json()["max_seqs_paged"]
    assert cli("slo", "--tpot", "500", *where, flag, "0.8").json()["memory_cap"] == tight
    spec = cli("spec", "--alpha", "0.7", *where, flag, "0.8").json()
    assert spec["operating_concurrency"] == capacity["operating_concurrency"]
    seqs, context = capacity["operating_concurrency"], capacity["settings"]["context_tokens"]
    sim = cli(
        "simulate", *where, flag, "0.8", "--max-num-seqs", str(seqs), "--context", str(context),
        "--prompt-len", "512", "--output-len", "128", "--concurrency", "4", "--requests", "8",
    ).json()  # fmt: skip
    assert sim["deployment"]["kv_cache_tokens"] == capacity["engine"]["kv_cache_tokens"]


def test_slo_refuses_what_shapes_a_derived_model_without_one(cli: Cli) -> None:
    """As spec does: without a model and GPU these would change nothing."""
    for extra in (
        ("--tp", "2"),
        ("--kv-dtype", "fp8"),
        ("--weight-dtype", "fp8"),
        ("--context", "4096"),
        ("--gpu-memory-utilization", "0.8"),
        ("--overhead-ms", "1"),
    ):
        r = cli("slo", "--tpot", "50", *extra)
        assert r.code == 2 and extra[0] in r.err, (extra, r.err)
    assert cli("slo", "--tpot", "50", "--a-ms", "5", "--b-ms", "0.1").code == 0


@pytest.mark.parametrize(
    ("deployment", "engine_spelling", "planner_spelling", "laid_out"),
    [
        (
            ("--preset", "qwen3-30b-a3b", "--gpu", "h100", "--tp", "8"),
            ("--enable-expert-parallel",),
            ("--ep", "8"),
            "ep",
        ),
        (
            ("--preset", "deepseek-v3", "--gpu", "h200", "--tp", "8", "--engine", "sglang"),
            ("--attn-dp-size", "8"),
            ("--dp", "8", "--dp-attention"),
            "attention_groups",
        ),
    ],
    ids=["vllm-expert-parallel", "sglang-attention-dp"],
)
def test_slo_and_spec_read_the_engines_layout_flags_as_their_own(
    cli: Cli,
    deployment: tuple[str, ...],
    engine_spelling: tuple[str, ...],
    planner_spelling: tuple[str, ...],
    laid_out: str,
) -> None:
    """A pasted line's layout flags (vLLM's --enable-expert-parallel, SGLang's --attn-dp-size)
    lay the deployment out as --ep / --dp --dp-attention do, as capacity and simulate read
    them."""
    for command in (("slo", "--tpot", "50"), ("spec", "--alpha", "0.7")):
        pasted = cli(*command, *deployment, *engine_spelling, "--json")
        ours = cli(*command, *deployment, *planner_spelling, "--json")
        assert pasted.code == 0 and ours.code == 0, pasted.err + ours.err
        assert pasted.json() == ours.json()
        if command[0] == "slo":
            assert pasted.json()["layout"][laid_out] == 8  # not the TP-only deployment


def _flags(line: str) -> list[str]:
    """The flags of a printed launch line, without the entry point and the model."""
    from planner.core.flags import launch_flags

    return launch_flags(line)


GPUS = ("h100", "mi300x", "a100-sxm4-80gb")


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_printed_lines_paste_back_into_capacity_and_drift(
    cli: Cli, engine: str, tmp_path: Path
) -> None:
    """Every shipped model on each of three GPUs: the line capacity prints, fed back verbatim,
    is accepted and reproduces the same line (so the same plan), and `drift --against-args`
    finds it clean against the plan capacity saved."""
    from planner.sources.presets import preset_names

    checked = 0
    lock = tmp_path / "plan.yaml"
    for preset in preset_names("models"):
        for gpu in GPUS:
            where = ("--preset", preset, "--gpu", gpu, "--engine", engine, "--json")
            first = cli("capacity", *where, "--save", str(lock))
            if first.code != 0:  # does not fit on this card: nothing to paste
                continue
            line = first.json()["flags"][engine]
            again = cli("capacity", *where, *_flags(line))
            assert again.code == 0, (preset, gpu, again.err)
            assert again.json()["flags"][engine] == line, (preset, gpu)
            drift = cli("drift", str(lock), "--against-args", line, "--json")
            assert drift.code == 0, (preset, gpu, drift.out)
            checked += 1
    assert checked >= 50


# Deployments whose printed lines carry each kind of flag: a vLLM and an SGLang line, a
# checkpoint's own quantization, attention DP, expert parallelism, pipeline stages, eager mode,
# a KV cache sized in bytes, a run dtype, a hybrid model's Mamba share.
PASTED = [
    ("--preset", "llama-3.1-8b", "--gpu", "h100", "--engine", "vllm"),
    ("--preset", "llama-3.1-8b", "--gpu", "h100", "--engine", "sglang"),
    ("--preset", "gpt-oss-120b", "--gpu", "h100", "--engine", "vllm"),
    ("--preset", "deepseek-v3", "--gpu", "h200", "--engine", "sglang", "--tp", "8", "--dp", "8",
     "--dp-attention"),
    ("--preset", "deepseek-v3", "--gpu", "h200", "--engine", "vllm", "--tp", "8",
     "--enable-expert-parallel"),
    ("--preset", "llama-3.1-70b", "--gpu", "h100", "--engine", "vllm", "--tp", "4", "--pp", "2"),
    ("--preset", "llama-3.1-8b", "--gpu", "h100", "--engine", "vllm", "--enforce-eager"),
    ("--preset", "llama-3.1-8b", "--gpu", "h100", "--engine", "vllm", "--kv-cache-memory-bytes",
     "20000000000"),
    ("--preset", "llama-3.1-8b", "--gpu", "l4", "--engine", "vllm", "--dtype", "half"),
    ("--preset", "qwen3-next-80b-a3b", "--gpu", "h200", "--engine", "sglang", "--tp", "2",
     "--mamba-full-memory-ratio", "0.8"),
]  # fmt: skip


@pytest.mark.parametrize("deployment", PASTED, ids=lambda d: "-".join(d[1:6:2]))
def test_printed_lines_paste_into_simulate(cli: Cli, deployment: tuple[str, ...]) -> None:
    """The line capacity prints, its flags pasted into simulate, is the deployment simulate
    benchmarks: the same line and the same KV pool."""
    capacity = cli("capacity", *deployment, "--json").json()
    engine = deployment[5]
    line = capacity["flags"][engine]
    sim = cli(
        "simulate", *deployment[:6], *_flags(line), "--prompt-len", "100", "--output-len", "10",
        "--concurrency", "2", "--requests", "4", "--json",
    )  # fmt: skip
    assert sim.code == 0, (line, sim.err)
    assert sim.json()["deployment"]["command"] == line
    assert sim.json()["deployment"]["kv_cache_tokens"] == capacity["engine"]["kv_cache_tokens"]


@pytest.mark.parametrize(("preset", "gpu"), PAIRS)
def test_simulate_runs_the_pool_capacity_plans(cli: Cli, preset: str, gpu: str) -> None:
    # the benchmark predictor launched with capacity's own line holds capacity's KV pool
    capacity = cli("capacity", "--preset", preset, "--gpu", gpu, "--json").json()
    engine = capacity["engine"]
    seqs = engine["settings"]["max_num_seqs"]
    context = engine["settings"]["max_model_len"]
    sim = cli(
        "simulate", "--preset", preset, "--gpu", gpu, "--max-num-seqs", str(seqs),
        "--context", str(context), "--prompt-len", "512", "--output-len", "128",
        "--concurrency", "4", "--requests", "8", "--json",
    ).json()  # fmt: skip
    deployment = sim["deployment"]
    assert deployment["kv_cache_tokens"] == engine["kv_cache_tokens"]
    assert deployment["max_num_seqs"] == seqs
    assert f"--max-num-seqs {seqs}" in deployment["command"]


@pytest.mark.parametrize(("preset", "gpu"), PAIRS)
def test_capacity_and_spec_print_one_speedup(cli: Cli, preset: str, gpu: str) -> None:
    # both price speculation on the engine's step model at the line's max_num_seqs
    where = ("--preset", preset, "--gpu", gpu, "--json")
    capacity = cli("capacity", *where, "--spec-alpha", "0.7").json()["speculation"]
    spec = cli("spec", "--alpha", "0.7", *where).json()
    chosen = spec["chosen"]
    assert (chosen["k"], chosen["concurrency"]) == (capacity["k"], capacity["concurrency"])
    assert chosen["speedup"] == capacity["speedup"]
    stop = spec["disable_above_concurrency"][0]["concurrency"]
    assert stop == capacity["disable_above_concurrency"]


@pytest.mark.parametrize(
    "deployment",
    [
        ("--weight-dtype", "fp8", "--tp", "4"),
        ("--kv-dtype", "fp8", "--tp", "4"),
        ("--engine", "sglang", "--tp", "4"),
        ("--engine-version", "0.6.3", "--tp", "4"),
    ],
)
def test_spec_takes_the_deployment_capacity_takes(cli: Cli, deployment: tuple[str, ...]) -> None:
    """spec prices speculation on the same line as capacity for the same precision, engine
    and release: one operating point, one speedup, one concurrency it stops paying above
    (EAGLE, which every one of these releases runs; V0 has no EAGLE-3)."""
    where = ("--preset", "llama-3.1-70b", "--gpu", "h100", *deployment, "--json")
    plan = cli("capacity", *where, "--spec-alpha", "0.7", "--spec-method", "eagle").json()
    capacity = plan["speculation"]
    spec = cli("spec", "--alpha", "0.7", "--method", "eagle", *where).json()
    assert spec["operating_concurrency"] == plan["operating_concurrency"]
    chosen = spec["chosen"]
    assert (chosen["k"], chosen["concurrency"]) == (capacity["k"], capacity["concurrency"])
    assert chosen["speedup"] == capacity["speedup"]
    stop = spec["disable_above_concurrency"][0]["concurrency"]
    assert stop == capacity["disable_above_concurrency"]


def test_spec_refuses_deployment_options_without_a_deployment(cli: Cli) -> None:
    for flag, value in (("--weight-dtype", "fp8"), ("--engine", "sglang")):
        r = cli("spec", "--alpha", "0.7", flag, value, "--json")
        assert r.code == 2 and r.json()["field"] == flag
    r = cli("spec", "--alpha", "0.7", "--preset", "llama-3.1-8b", "--gpu", "h100",
            "--engine", "lmdeploy", "--json")  # fmt: skip
    assert r.code == 2 and r.json()["field"] == "--engine"


@pytest.mark.parametrize(("preset", "gpu"), PAIRS)
def test_fleet_candidates_hold_the_pool_capacity_plans(cli: Cli, preset: str, gpu: str) -> None:
    # a fleet candidate's line is a capacity plan: pasted into capacity at the same mean
    # context it gives the same KV pool, the same max_num_seqs and the same line
    fleet = cli(
        "fleet", "--preset", preset, "--gpu", gpu, "--tp", "1", "--rate", "2",
        "--tpot", "200", "--ttft", "5000", "--context", "8192", "--json",
    ).json()  # fmt: skip
    rows = [c for c in fleet["candidates"] if c.get("kv_cache_tokens") and not c.get("disagg")]
    assert rows
    for row in rows:
        # the candidate's line pasted into capacity at the workload's mean context
        same = cli(
            "capacity", "--preset", preset, "--gpu", gpu, "--json",
            "--mean-len", str(row["mean_tokens"]), *_flags(row["command"]),
        ).json()  # fmt: skip
        assert same["engine"]["kv_cache_tokens"] == row["kv_cache_tokens"]
        assert same["engine"]["settings"]["max_num_seqs"] == row["max_num_seqs"]
        assert same["flags"]["vllm"].split()[3:] == row["command"].split()[3:]


@pytest.mark.parametrize("tpot", ["12", "30", "50"])
def test_capacity_tpot_and_slo_run_one_batch(cli: Cli, tpot: str) -> None:
    # one latency cap, prefill included: at TPOT 30 ms on Llama-3.1-8B / H100 the decode
    # steps allow 229 sequences, 156 with the prompts the reference workload's requests bring
    where = ("--preset", "llama-3.1-8b", "--gpu", "h100", "--tpot", tpot, "--json")
    capacity = cli("capacity", *where).json()["engine"]["settings"]["max_num_seqs"]
    slo = cli("slo", *where).json()
    assert capacity == slo["operating_concurrency"]
    assert f"--max-num-seqs {capacity} " in slo["flags"]["vllm"]
    # one line: the step budget slo sets (decodes plus the prompt tokens inside TPOT) too
    assert cli("capacity", *where).json()["flags"] == slo["flags"]
    budget = int(slo["flags"]["vllm"].split("--max-num-batched-tokens ")[1].split()[0])
    first = slo["step_budget"]["at_batch"]  # set at the cap the default line's pool allows
    assert budget == slo["step_budget"]["tokens"] and first <= capacity
    room = slo["prefill_room_at_full_batch_tokens"]  # at the cap run
    assert room <= budget - first <= slo["max_prefill_chunk_tokens"]
    if tpot == "30":
        assert slo["batch_cap"] == 229 and capacity == 156
        # the room a step of 156 leaves is at least the prompts they bring per step
        ratio = slo["prompt_tokens_per_output_token"]
        assert slo["prefill_room_at_full_batch_tokens"] >= 156 * ratio


def test_capacity_tpot_with_speculation_leaves_each_decode_its_drafts(cli: Cli) -> None:
    # a vLLM step schedules 1 + k tokens a decoding sequence under speculation: the TPOT's step
    # budget (the decodes plus the prompt room) is not set there, the engine's own stays
    line = cli("capacity", "--preset", "llama-3.1-70b", "--gpu", "h100", "--tp", "4", "--tpot",
               "50", "--spec-alpha", "0.8", "--spec-method", "ngram", "--json").json()  # fmt: skip
    k = line["speculation"]["k"]
    seqs = line["engine"]["settings"]["max_num_seqs"]
    budget = int(line["flags"]["vllm"].split("--max-num-batched-tokens ")[1].split()[0])
    assert k >= 1 and budget >= seqs * (1 + k)


@pytest.mark.parametrize("dtype", ["nvfp4", "mxfp4", "int4"])
def test_capacity_tpot_and_slo_cap_a_variant_checkpoint_alike(cli: Cli, dtype: str) -> None:
    # an NVFP4 export multiplies at the B200's fp4 rate, MXFP4 and AWQ at their activations'
    where = ("--preset", "llama-3.1-70b", "--gpu", "b200", "--tp", "2", "--weight-dtype", dtype)
    for tpot in ("20", "40"):
        line = cli("capacity", *where, "--tpot", tpot, "--json").json()
        slo = cli("slo", *where, "--tpot", tpot, "--json").json()
        assert line["engine"]["settings"]["max_num_seqs"] == slo["operating_concurrency"]


LAYOUTS = [
    # vLLM DP ranks of a MoE model: experts over TP x DP
    ["--preset", "qwen3-30b-a3b", "--gpu", "h100", "--engine", "vllm", "--tp", "2", "--dp", "2",
     "--ep", "4"],
    # SGLang data-parallel attention: two groups of attention TP 1 inside TP 2
    ["--preset", "deepseek-v2-lite", "--gpu", "h100", "--engine", "sglang", "--tp", "2",
     "--dp", "2", "--dp-attention"],
    ["--preset", "llama-3.1-8b", "--gpu", "h100", "--engine", "vllm", "--pp", "2"],
    # no layout beyond TP: the same instance, in every precision capacity and simulate take
    ["--preset", "llama-3.1-70b", "--gpu", "b200", "--engine", "vllm", "--tp", "2"],
    ["--preset", "llama-3.1-70b", "--gpu", "b200", "--engine", "sglang", "--tp", "2",
     "--weight-dtype", "nvfp4"],
    ["--preset", "llama-3.1-70b", "--gpu", "b200", "--engine", "vllm", "--tp", "2",
     "--weight-dtype", "mxfp4"],
    ["--preset", "llama-3.1-70b", "--gpu", "h100", "--engine", "vllm", "--tp", "4",
     "--weight-dtype", "fp8"],
]  # fmt: skip


@pytest.mark.parametrize("layout", LAYOUTS)
def test_slo_and_simulate_run_one_step_model_for_a_layout(cli: Cli, layout: list[str]) -> None:
    """slo takes capacity's and simulate's parallelism options and prices a step as simulate
    does for the same deployment (its engine instance), at the same context."""
    slo = cli("slo", "--tpot", "50", *layout, "--mean-len", "2000", "--batch", "1,64", "--json")
    sim = cli(
        "simulate", *layout, "--prompt-len", "1500", "--output-len", "500", "--concurrency", "2",
        "--requests", "4", "--json",
    ).json()  # fmt: skip
    got = slo.json()
    assert got["step_ms_at"]["1"] == pytest.approx(sim["step_ms"]["1"], rel=1e-12)
    assert got["step_ms_at"]["64"] == pytest.approx(sim["step_ms"]["64"], rel=1e-12)
    groups = got["layout"]["attention_groups"]
    assert groups == (2 if "--dp" in layout else 1)
    # the deployment's own line; SGLang's running cap is the deployment's: the groups' batches
    # together
    engine = layout[layout.index("--engine") + 1] if "--engine" in layout else "vllm"
    flag = "--max-running-requests" if engine == "sglang" else "--max-num-seqs"
    seqs = got["operating_concurrency"]
    want = seqs * groups if engine == "sglang" else seqs
    assert set(got["flags"]) == {engine}
    assert f"{flag} {want} " in got["flags"][engine]
    if engine == "sglang":  # the groups share the chunk too (server_args divides it by them),
        # each group's share whole pages (SGLang asserts the chunk divides by the page)
        words = got["flags"][engine].split()
        page = int(words[words.index("--page-size") + 1]) if "--page-size" in words else 1
        share = max(page, max(1, got["max_prefill_chunk_tokens"]) // page * page)
        assert f"--chunked-prefill-size {share * groups} " in got["flags"][engine]


@pytest.mark.parametrize("layout", LAYOUTS[:3])
def test_capacity_tpot_caps_a_layout_as_slo_does(cli: Cli, layout: list[str]) -> None:
    """capacity --tpot prices the same engine instance as slo: PP stages, vLLM DP ranks with
    experts over TP x DP, SGLang attention groups (a TP-only step model capped Llama-3.1-8B
    at PP 2 to 1 sequence where slo ran 128)."""
    for tpot in ("20", "40"):
        where = (*layout, "--tpot", tpot, "--mean-len", "2000", "--json")
        line = cli("capacity", *where).json()
        settings = line["engine"]["settings"]
        seqs = settings.get("max_num_seqs") or settings["max_running_requests"]
        if tpot == "20":
            assert line["binding"] == "latency"
        slo = cli("slo", *where).json()
        assert seqs == slo["operating_concurrency"]
        assert line["flags"] == slo["flags"]  # one line: the same caps and step budget


@pytest.mark.parametrize("layout", LAYOUTS[:3])
def test_spec_prices_speculation_on_the_layout_capacity_plans(cli: Cli, layout: list[str]) -> None:
    """spec takes the PP / DP / EP options and prices speculation on the same engine instance
    as capacity --spec-alpha: one speedup and one concurrency it stops paying above."""
    where = (*layout, "--mean-len", "2000", "--json")
    capacity = cli("capacity", *where, "--spec-alpha", "0.7").json()["speculation"]
    spec = cli("spec", "--alpha", "0.7", *where).json()
    chosen = spec["chosen"]
    assert (chosen["k"], chosen["concurrency"]) == (capacity["k"], capacity["concurrency"])
    assert chosen["speedup"] == capacity["speedup"]
    assert (
        spec["disable_above_concurrency"][0]["concurrency"]
        == (capacity["disable_above_concurrency"])
    )


def test_slo_refuses_a_layout_it_cannot_lay_out(cli: Cli) -> None:
    no_gpu = cli("slo", "--tpot", "50", "--dp", "2", "--json")
    assert no_gpu.code == 2 and "--pp/--dp/--ep" in no_gpu.json()["error"]
    vllm = cli(
        "slo", "--tpot", "50", "--preset", "deepseek-v2-lite", "--gpu", "h100", "--tp", "2",
        "--dp", "2", "--dp-attention", "--json",
    )  # fmt: skip
    assert vllm.code == 2 and "--dp-attention" in vllm.json()["error"]
    ep = cli(
        "slo", "--tpot", "50", "--preset", "qwen3-30b-a3b", "--gpu", "h100", "--tp", "2",
        "--ep", "3", "--json",
    )  # fmt: skip
    assert ep.code == 2 and "--ep" in ep.json()["error"]


def test_every_command_takes_the_four_bit_formats_capacity_takes(cli: Cli) -> None:
    """NVFP4 and MXFP4 are 4-bit weights to the textbook ledger (its fp4), variant checkpoints
    to the engine's; no command refuses a name another accepts."""
    where = ("--preset", "llama-3.1-70b", "--gpu", "b200", "--tp", "2", "--json")
    textbook = {
        dtype: cli("capacity", "--ledger", "textbook", *where, "--weight-dtype", dtype).json()
        for dtype in ("fp4", "nvfp4", "mxfp4")
    }
    assert textbook["nvfp4"]["weights_bytes_per_gpu"] == textbook["fp4"]["weights_bytes_per_gpu"]
    assert textbook["mxfp4"]["weights_bytes_per_gpu"] == textbook["fp4"]["weights_bytes_per_gpu"]
    for dtype in ("nvfp4", "mxfp4"):
        for command in (("capacity",), ("slo", "--tpot", "50")):
            r = cli(*command, *where, "--weight-dtype", dtype)
            assert r.code == 0, (command, dtype, r.out)


def test_sixteen_bit_weights_are_a_sixteen_bit_checkpoint_as_it_is(cli: Cli) -> None:
    """--weight-dtype bf16 (or fp16) on a 16-bit checkpoint is that checkpoint as stored, in
    every command; on a quantized one it is refused naming the flag (the engines do not
    dequantize a checkpoint to serve it)."""
    where = ("--preset", "llama-3.1-70b", "--gpu", "h100", "--tp", "4", "--json")
    for command in (("capacity",), ("slo", "--tpot", "50", "--batch", "1,64")):
        plain = cli(*command, *where).json()
        for dtype in ("bf16", "fp16"):
            got = cli(*command, *where, "--weight-dtype", dtype).json()
            assert got == plain, (command, dtype)
    fp8 = cli("capacity", "--preset", "qwen3-235b-a22b-fp8", "--gpu", "h100", "--tp", "8",
              "--weight-dtype", "bf16", "--json")  # fmt: skip
    assert fp8.code == 2 and fp8.json()["field"] == "--weight-dtype"
    assert "serve as stored" in fp8.json()["error"]


def test_a_checkpoints_own_format_named_is_that_checkpoint_as_stored(cli: Cli) -> None:
    """gpt-oss ships MXFP4 experts and 16-bit attention: --weight-dtype mxfp4 (or its line's
    own --quantization mxfp4) names that checkpoint, not an export re-stored at 4 bits."""
    where = ("--preset", "gpt-oss-120b", "--gpu", "h100", "--json")
    plain = cli("capacity", *where).json()
    for named in (("--weight-dtype", "mxfp4"), ("--quantization", "mxfp4")):
        assert cli("capacity", *where, *named).json() == plain, named
    assert plain["flags"]["vllm"].endswith("--quantization mxfp4")


def test_diagnose_prices_the_step_slo_and_simulate_price(cli: Cli) -> None:
    """diagnose's step model for a deployment is the engine instance slo prices (weights as
    the engine loads them, its release's overheads): one t(B) and one TPOT cap."""
    from planner.api.diagnose import effects_for

    fx = effects_for(
        plan_path=None, preset="llama-3.1-70b", model=None, gpu="h100", settings={"tp": 4}
    )
    slo = cli("slo", "--tpot", "50", "--preset", "llama-3.1-70b", "--gpu", "h100", "--tp", "4",
              "--batch", "1,64", "--json").json()  # fmt: skip
    assert fx.step_ms is not None and fx.batch_cap is not None
    assert fx.step_ms(1) == pytest.approx(slo["step_ms_at"]["1"], rel=1e-12)
    assert fx.step_ms(64) == pytest.approx(slo["step_ms_at"]["64"], rel=1e-12)
    assert fx.batch_cap(50) == slo["batch_cap"]


@pytest.mark.parametrize(
    ("layout", "own"),
    [
        (["--engine", "vllm", "--tp", "2", "--dp", "2"], ["--enable-expert-parallel"]),
        (["--engine", "sglang", "--tp", "4"], ["--ep-size", "4"]),
    ],
)
def test_capacity_takes_ep_as_slo_and_simulate_do(
    cli: Cli, layout: list[str], own: list[str]
) -> None:
    """`capacity --ep N` is the engine's own expert-parallel flag (vLLM's experts over TP x
    DP, SGLang's --ep-size); a size the layout does not give, or both spellings, is refused."""
    where = ["--preset", "qwen3-30b-a3b", "--gpu", "h100", *layout, "--json"]
    assert cli("capacity", *where, "--ep", "4").json() == cli("capacity", *where, *own).json()
    for extra in (["--ep", "3"], ["--ep", "4", *own]):
        bad = cli("capacity", *where, *extra)
        assert bad.code == 2 and bad.json()["field"] == "--ep"


def test_slo_validates_a_cap_on_the_run_simulate_predicts(cli: Cli) -> None:
    """slo --validate runs each cap as simulate runs that deployment at that --max-num-seqs
    and the line's step budget: the engine instance's scheduler, token budget and KV pool, on
    the same requests."""
    where = ("--preset", "llama-3.1-8b", "--gpu", "h100")
    slo = cli("slo", "--tpot", "30", *where, "--validate", "--rate", "20", "--json").json()
    assert slo["validation"]["simulator"].startswith("the engine instance")
    for row in slo["validation"]["caps"][:2]:
        sim = cli(
            "simulate", *where, "--max-num-seqs", str(row["max_batch"]), "--rate", "20",
            "--max-num-batched-tokens", str(slo["step_budget"]["tokens"]),
            "--workload", "reference", "--bench-client", "none", "--metric-percentiles", "95",
            "--json",
        ).json()  # fmt: skip
        assert row["tpot_p95_ms"] == pytest.approx(sim["p95_tpot_ms"], rel=1e-12)
        assert row["ttft_p95_ms"] == pytest.approx(sim["p95_ttft_ms"], rel=1e-12)
        assert row["tok_s"] == pytest.approx(sim["output_throughput"], rel=1e-12)


def test_slo_and_spec_plan_a_model_that_needs_its_pipeline_stages(cli: Cli) -> None:
    """DeepSeek-V3 does not fit one TP-8 group of H100s; at PP 2 the engine starts it. slo and
    spec plan that deployment as capacity does (the textbook plan of one TP group no longer
    refuses it): one memory cap and one speedup."""
    where = ("--preset", "deepseek-v3", "--gpu", "h100", "--tp", "8", "--pp", "2", "--json")
    line = cli("capacity", *where, "--spec-alpha", "0.7", "--spec-method", "mtp").json()
    seqs = line["engine"]["settings"]["max_num_seqs"]
    slo = cli("slo", "--tpot", "200", *where).json()
    assert slo["memory_cap"] == seqs and slo["layout"]["pp"] == 2
    spec = cli("spec", "--alpha", "0.7", "--method", "mtp", *where).json()
    assert spec["operating_concurrency"] == seqs
    assert spec["chosen"]["speedup"] == line["speculation"]["speedup"]
    # without the stages it is refused, as before
    one_group = cli("slo", "--tpot", "200", *where[:6], "--json")
    assert one_group.code != 0 and "raise --tp" in one_group.json()["error"]


def test_the_memory_flag_named_in_refusals_is_the_lines_own() -> None:
    from planner.api.slo import memory_flag
    from planner.core.serve import SGLANG_FLAGS, VLLM_FLAGS

    assert memory_flag("vllm") == dict(VLLM_FLAGS)["gpu_memory_utilization"]
    assert memory_flag("sglang") == dict(SGLANG_FLAGS)["mem_fraction_static"]


def test_capacity_tpot_and_slo_plan_moris_chunk_alike(cli: Cli) -> None:
    """SGLang refuses to start AMD's MoRI with more than 4,096 prompt tokens a rank, and its
    default chunk on an MI300X is 16,384: a line with no chunk would not start. slo's line and
    capacity --tpot's set their own chunk (the largest inside TPOT): both plan at MoRI's
    largest and print one line within it, where slo named a flag it does not take and capacity
    refused; capacity without --tpot still says which flag to pass."""
    from helpers import MODELS

    r1 = str(MODELS / "deepseek-ai--DeepSeek-R1")
    where = ("--model", r1, "--gpu", "mi300x", "--engine", "sglang", "--tp", "8", "--ep", "8",
             "--moe-a2a-backend", "mori", "--tpot", "50", "--json")  # fmt: skip
    line = cli("capacity", *where)
    slo = cli("slo", *where)
    assert line.code == 0 and slo.code == 0, line.err + slo.err
    assert line.json()["flags"] == slo.json()["flags"]
    chunk = int(line.json()["flags"]["sglang"].split("--chunked-prefill-size ")[1].split()[0])
    assert 0 < chunk <= 4096
    bare = cli("capacity", *where[:-3], "--json")
    assert bare.code == 2 and bare.json()["field"] == "--chunked-prefill-size"
    assert "pass --chunked-prefill-size 4096 or less" in bare.json()["error"]


def test_spec_prices_the_moe_exchange_capacity_plans(cli: Cli) -> None:
    """spec takes the engines' MoE exchange flags as capacity, slo and simulate do: with
    SGLang's MoRI named, its speculation is priced on the step capacity --spec-alpha prices (it
    refused the flag, and without it priced the gather); the other engine's flag is refused."""
    from helpers import MODELS

    r1 = str(MODELS / "deepseek-ai--DeepSeek-R1")
    where = ("--model", r1, "--gpu", "mi300x", "--engine", "sglang", "--tp", "8", "--dp", "8",
             "--dp-attention", "--moe-a2a-backend", "mori", "--json")  # fmt: skip
    capacity = cli("capacity", *where, "--spec-alpha", "0.7").json()["speculation"]
    spec = cli("spec", "--alpha", "0.7", *where)
    assert spec.code == 0, spec.err
    chosen = spec.json()["chosen"]
    assert (chosen["k"], chosen["concurrency"]) == (capacity["k"], capacity["concurrency"])
    assert chosen["speedup"] == capacity["speedup"]
    gathered = cli("spec", "--alpha", "0.7", *where[:-3], "--json").json()["chosen"]
    assert gathered["speedup"] != chosen["speedup"]
    vllm = cli("spec", "--alpha", "0.7", "--model", r1, "--gpu", "h200",
               "--moe-a2a-backend", "deepep")  # fmt: skip
    assert vllm.code == 2 and "--moe-a2a-backend: an SGLang flag" in vllm.err
