"""`planner simulate`: its options, read into a benchmark of a deployment (planner.api.bench) or
the reference workload through static / continuous / chunked scheduling; simulate_render prints
the result."""

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError

from planner.cli.engine_flags import ENGINE_EXTRA_FLAGS, engine_extra, host_settings
from planner.cli.numbers import (
    CONTEXT_FLAGS,
    TP_FLAGS,
    All2AllBackend,
    AsyncScheduling,
    AttentionDataParallel,
    DataParallelAddress,
    DataParallelSizeLocal,
    DisableCudaGraph,
    DisableOverlapSchedule,
    DisableRadixCache,
    DistInitAddr,
    DistributedExecutorBackend,
    EnableDbo,
    EnableDpLmHead,
    EnableExpertParallel,
    EnableHierarchicalCache,
    EnablePrefixCaching,
    EnableTwoBatchOverlap,
    EngineDtype,
    EpNumRedundantExperts,
    HicacheRatio,
    HicacheSize,
    HubTimeout,
    JsonOut,
    KvOffloadingBackend,
    KvOffloadingSize,
    MambaFullMemoryRatio,
    MambaRadixCacheStrategy,
    MaxMambaCacheSize,
    MaxPrefillTokens,
    MemoryFraction,
    MoeA2aBackend,
    MoeDenseTpSize,
    Nnodes,
    NodeRank,
    Prefixes,
    PrefixShareOption,
    PrefixTokens,
    ReservedGib,
    Revision,
    SchedulerRecvInterval,
    StreamInterval,
    TrustRemoteCode,
    apply_hub_timeout,
    defaults_of,
    engine_layout,
    gamma_cv,
    max_model_len_value,
    reserved_bytes,
)
from planner.cli.numbers import prefix_share as parse_prefix
from planner.cli.render import emit_json
from planner.cli.simulate_render import emit_csv, render, render_bench, save_sweep_chart

if TYPE_CHECKING:
    from planner.api.bench_load import Lengths, Load, Speculation
    from planner.sim.disagg import DisaggLayout
    from planner.sim.prefix import PrefixShare


# vllm bench serve's and sglang.bench_serving's --dataset-name values simulate poses, and the
# workload each one stands for (random: the fixed lengths --random-input-len / -output-len give).
# The shared-prefix ones (planner.api.bench_load.sonnet_run / gsp_run) take their own flags, by
# SimulateFlags field below, in those functions' order.
SONNET_DATASET = "sonnet"
GSP_DATASET = "generated-shared-prefix"
DATASET_WORKLOADS = {
    "random": None,
    "sharegpt": "sharegpt",
    SONNET_DATASET: None,
    GSP_DATASET: None,
}
SONNET_FLAGS = ("sonnet_input_len", "sonnet_prefix_len", "sonnet_output_len")
# The planner's flags a shared-prefix dataset's own become (_shared_prefix_dataset), so an error
# the run raises names the flag typed.
DATASET_FLAG_NAMES = {
    SONNET_DATASET: {
        "--prompt-len": "--sonnet-input-len",
        "--output-len": "--sonnet-output-len",
        "--prefix-tokens": "--sonnet-prefix-len",
    },
    GSP_DATASET: {
        "--prompt-len": "--gsp-system-prompt-len",  # its prompts: the system prompt and more
        "--output-len": "--gsp-output-len",
        "--prefix-tokens": "--gsp-system-prompt-len",
        "--prefixes": "--gsp-num-groups",
        "--requests": "--gsp-prompts-per-group",
    },
}
GSP_FLAGS = (
    "gsp_num_groups",
    "gsp_prompts_per_group",
    "gsp_system_prompt_len",
    "gsp_question_len",
    "gsp_output_len",
)


# Load / Lengths field -> the flag that sets it.
BENCH_FLAGS = {
    "concurrency": "--concurrency/--max-concurrency",
    "rate_per_s": "--rate/--request-rate",
    "cv": "--cv",
    "burstiness": "--burstiness",
    "requests": "--requests/--num-prompts",
    "seed": "--seed",
    "prompt_len": "--prompt-len/--random-input-len",
    "output_len": "--output-len/--random-output-len",
    "len_range": "--len-range",
    "len_spread": "--len-spread",
    "prompt_mean": "--prompt-mean",
    "output_mean": "--output-mean",
    "empty_share": "--empty-outputs",
    # planner.api.bench_load.Speculation
    "alpha": "--spec-alpha",
    "k": "--spec-k",
    "draft_cost": "--draft-cost",
}


POLICIES = ("static", "continuous", "chunked")


def simulate(
    workload: Annotated[
        str | None,
        typer.Option(
            help="Workload preset (presets/workloads) [default: reference].", show_default=False
        ),
    ] = None,
    dataset_name: Annotated[
        str | None,
        typer.Option(
            "--dataset-name",
            help="vllm bench serve's and sglang.bench_serving's dataset: random (with "
            "--random-input-len / --random-output-len), sharegpt (--workload sharegpt), sonnet "
            "(--sonnet-*) or generated-shared-prefix (--gsp-*): the last two a shared prefix "
            "served from the prefix cache.",
        ),
    ] = None,
    ignore_eos: Annotated[
        bool,
        typer.Option(
            "--ignore-eos",
            help="Outputs run to their length, as --output-len and the workloads' lengths "
            "always do here (accepted for the benchmark's command line).",
        ),
    ] = False,
    trace: Annotated[
        str | None, typer.Option(help="JSONL trace: arrival_s, prompt_tokens, output_tokens.")
    ] = None,
    rate: Annotated[
        float | None,
        typer.Option(
            "--rate",
            "--request-rate",
            help="Arrival rate, requests/s [with a GPU, default: all at once]; with "
            "--concurrency, the rate requests are released at.",
        ),
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option(
            "--concurrency",
            "--max-concurrency",
            help="Closed loop: N clients, each sends its next request when one ends.",
        ),
    ] = None,
    cv: Annotated[
        float | None, typer.Option(help="Gamma arrivals with this CV of the gaps (1: Poisson).")
    ] = None,
    metric_percentiles: Annotated[
        str | None,
        typer.Option(help="Tail percentiles to print, e.g. 90,95,99 (vllm bench serve's) [99]."),
    ] = None,
    burstiness: Annotated[
        float | None,
        typer.Option(help="vllm bench serve's gamma shape: --cv 1/sqrt(B) (below 1 is burstier)."),
    ] = None,
    bench_client: Annotated[
        str | None,
        typer.Option(
            help="The benchmark client reading every stream in one process, priced where it "
            "reads slower than the engine streams: vllm (vllm bench serve, or any client of "
            "the OpenAI stream), sglang (sglang.bench_serving's native stream), vllm-2024 "
            "(vLLM's 2024 benchmark_serving.py: like sglang's, an output with no text counts "
            "TTFT 0) or none (the engine's own pace) [the engine's own].",
        ),
    ] = None,
    prompt_len: Annotated[
        int | None,
        typer.Option(
            "--prompt-len",
            "--random-input-len",
            "--random-input",
            help="Fixed prompt length, tokens.",
        ),
    ] = None,
    output_len: Annotated[
        int | None,
        typer.Option(
            "--output-len",
            "--random-output-len",
            "--random-output",
            help="Fixed output length, tokens (runs to it: ignore-eos; with --output-mean, the "
            "cap outputs stop at EOS under).",
        ),
    ] = None,
    len_range: Annotated[
        float | None,
        typer.Option(help="Lengths uniform in [F x L, L] (SGLang bench_serving's range ratio)."),
    ] = None,
    len_spread: Annotated[
        float | None,
        typer.Option(help="Lengths uniform in [L(1-R), L(1+R)] (vllm bench serve's range ratio)."),
    ] = None,
    random_range_ratio: Annotated[
        float | None,
        typer.Option(
            help="The benchmark client's range ratio (--bench-client, else the engine's "
            "own): --len-spread for vllm bench serve, --len-range for sglang.bench_serving "
            "and vLLM's 2024 benchmark_serving.py."
        ),
    ] = None,
    prompt_mean: Annotated[
        float | None,
        typer.Option(help="Scale the workload's prompt lengths to this mean (your run's)."),
    ] = None,
    output_mean: Annotated[
        float | None,
        typer.Option(
            help="Outputs stopped at EOS: scale the workload's to this mean; with --output-len, "
            "lengths stop at EOS with this mean, capped at it (no --ignore-eos)."
        ),
    ] = None,
    empty_outputs: Annotated[
        float | None,
        typer.Option(
            help="Share of requests whose first token is EOS: no text, a prefill and one step "
            "(a base model on chat prompts; the rest stream at least one token)."
        ),
    ] = None,
    requests: Annotated[
        int | None, typer.Option("--requests", "--num-prompts", help="Number of requests.")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Trace seed.")] = None,
    policy: Annotated[
        str | None, typer.Option(help="static, continuous or chunked [chunked].")
    ] = None,
    compare: Annotated[
        str | None, typer.Option(help="Policies side by side: static,continuous,chunked.")
    ] = None,
    sweep: Annotated[str | None, typer.Option(help="max_batch=4,8,16,...")] = None,
    max_batch: Annotated[int | None, typer.Option(help="Running-sequence cap [32].")] = None,
    chunk_tokens: Annotated[
        int | None, typer.Option(help="Largest prefill chunk (chunked) [512].")
    ] = None,
    step_token_budget: Annotated[
        int | None, typer.Option(help="Tokens per step (chunked) [512].")
    ] = None,
    kv_blocks: Annotated[int | None, typer.Option(help="Paged KV pool size in blocks.")] = None,
    block_size: Annotated[
        int | None,
        typer.Option(
            "--block-size",
            "--page-size",
            help="Tokens per KV block [16; with --gpu: the engine's block / page size, its "
            "default unless given].",
        ),
    ] = None,
    preemption: Annotated[str | None, typer.Option(help="recompute or swap [recompute].")] = None,
    shared_prefix_fraction: Annotated[
        float | None, typer.Option(help="Share of requests with a cached shared prefix.")
    ] = None,
    shared_prefix_tokens: Annotated[int | None, typer.Option(help="Shared prefix length.")] = None,
    spec_alpha: Annotated[float | None, typer.Option(help="Speculative acceptance rate.")] = None,
    spec_k: Annotated[int | None, typer.Option(help="Draft tokens per step [4].")] = None,
    draft_cost: Annotated[
        float | None, typer.Option(help="Draft cost per target forward [0.05].")
    ] = None,
    spec_method: Annotated[
        str | None,
        typer.Option(
            help="With a deployment: the speculation method its line names (as `planner spec`) "
            "[eagle3]."
        ),
    ] = None,
    slo_ttft_ms: Annotated[
        float | None,
        typer.Option("--slo-ttft-ms", "--ttft", help="TTFT budget for goodput, ms [1000]."),
    ] = None,
    slo_tpot_ms: Annotated[
        float | None,
        typer.Option("--slo-tpot-ms", "--tpot", help="TPOT budget for goodput, ms [50]."),
    ] = None,
    a_ms: Annotated[float | None, typer.Option(help="Fixed step cost a, ms.")] = None,
    b_ms: Annotated[float | None, typer.Option(help="Per-sequence step cost b, ms.")] = None,
    prefill_ms_per_token: Annotated[float | None, typer.Option(help="Prefill cost, ms.")] = None,
    overhead_ms: Annotated[float | None, typer.Option(help="Launch overhead per step, ms.")] = None,
    preset: Annotated[
        str | None, typer.Option(help="Derive cost and KV pool from a preset.")
    ] = None,
    model: Annotated[str | None, typer.Option(help="... or from a config / Hub id.")] = None,
    revision: Revision = None,
    gpu: Annotated[str | None, typer.Option(help="GPU for the derived cost model.")] = None,
    tp: Annotated[
        int | None,
        typer.Option(*TP_FLAGS, help="Tensor-parallel size [1]."),
    ] = None,
    pp: Annotated[
        int | None,
        typer.Option("--pp", "--pipeline-parallel-size", help="Pipeline-parallel size [1]."),
    ] = None,
    dp: Annotated[
        int | None,
        typer.Option(
            "--dp",
            "--data-parallel-size",
            "--dp-size",
            help="Data-parallel ranks (GPUs = TP x PP x DP; vLLM: a MoE model's experts span "
            "them all). With --dp-attention: SGLang's attention-DP groups inside --tp [1].",
        ),
    ] = None,
    ep: Annotated[
        int | None,
        typer.Option(
            "--ep",
            "--ep-size",
            help="Expert-parallel size: the GPUs the MoE layers span (TP x DP; SGLang: TP).",
        ),
    ] = None,
    enable_expert_parallel: EnableExpertParallel = False,
    attn_dp_size: AttentionDataParallel = None,
    cuda_graph_max_bs: Annotated[
        int | None,
        typer.Option(
            "--cuda-graph-max-bs", help="SGLang: the largest decode batch it captures a graph for."
        ),
    ] = None,
    max_cudagraph_capture_size: Annotated[
        int | None,
        typer.Option(
            "--max-cudagraph-capture-size",
            "--cuda-graph-sizes",
            help="vLLM: the largest batch it captures a CUDA graph for (--cuda-graph-sizes N "
            "before 0.11.1).",
        ),
    ] = None,
    enforce_eager: Annotated[
        bool, typer.Option("--enforce-eager", help="vLLM: no CUDA graphs.")
    ] = False,
    async_scheduling: AsyncScheduling = None,
    enable_prefix_caching: EnablePrefixCaching = None,
    disable_radix_cache: DisableRadixCache = False,
    disable_cuda_graph: DisableCudaGraph = False,
    disable_overlap_schedule: DisableOverlapSchedule = False,
    all2all_backend: All2AllBackend = None,
    enable_dbo: EnableDbo = False,
    stream_interval: StreamInterval = None,
    scheduler_recv_interval: SchedulerRecvInterval = None,
    max_prefill_tokens: MaxPrefillTokens = None,
    kv_cache_memory_bytes: Annotated[
        int | None, typer.Option(help="vLLM: the KV cache's size, bytes (instead of the share).")
    ] = None,
    mamba_full_memory_ratio: MambaFullMemoryRatio = None,
    max_mamba_cache_size: MaxMambaCacheSize = None,
    mamba_radix_cache_strategy: MambaRadixCacheStrategy = None,
    dtype: EngineDtype = None,
    reserved_gib: ReservedGib = None,
    dp_attention: Annotated[
        bool,
        typer.Option(
            "--dp-attention/--no-dp-attention",
            "--enable-dp-attention",
            help="SGLang data-parallel attention (--attn-dp-size / --enable-dp-attention): --dp "
            "groups of attention TP = tp / dp, MoE over all --tp GPUs.",
        ),
    ] = False,
    weight_dtype: Annotated[
        str | None,
        typer.Option(
            "--weight-dtype",
            "--quantization",
            help="fp8 (online), or a variant checkpoint: fp4/nvfp4, mxfp4, int4.",
        ),
    ] = None,
    kv_dtype: Annotated[
        str | None, typer.Option("--kv-dtype", "--kv-cache-dtype", help="auto, bf16, fp8.")
    ] = None,
    engine: Annotated[str | None, typer.Option(help="vllm or sglang [vllm].")] = None,
    engine_version: Annotated[
        str | None, typer.Option(help="Engine release (default: the newest modelled).")
    ] = None,
    max_num_seqs: Annotated[
        int | None,
        typer.Option(
            "--max-num-seqs", "--max-running-requests", help="Running cap (default: the plan's)."
        ),
    ] = None,
    max_num_batched_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-num-batched-tokens",
            "--chunked-prefill-size",
            help="Tokens per step (default: the engine's).",
        ),
    ] = None,
    ep_num_redundant_experts: EpNumRedundantExperts = None,
    moe_a2a_backend: MoeA2aBackend = None,
    enable_two_batch_overlap: EnableTwoBatchOverlap = False,
    moe_dense_tp_size: MoeDenseTpSize = None,
    enable_dp_lm_head: EnableDpLmHead = False,
    memory_fraction: MemoryFraction = None,
    context: Annotated[
        str | None,
        typer.Option(
            *CONTEXT_FLAGS,
            metavar="<int|auto>",
            help="Server max model length, tokens, or auto (vLLM 0.14+: the longest the KV "
            "cache holds).",
        ),
    ] = None,
    num_scheduler_steps: Annotated[
        int | None,
        typer.Option(help="vLLM V0 (0.6-0.7) multi-step scheduling: decode steps per round."),
    ] = None,
    enable_chunked_prefill: Annotated[
        bool | None,
        typer.Option(
            help="vLLM: split prompts across steps (off: whole prompts, a budget holding the "
            "context) [release default: V1 on; V0 on above 32K]."
        ),
    ] = None,
    calibration: Annotated[
        str | None,
        typer.Option(help="A profile from `planner calibrate --bench` (step-time terms)."),
    ] = None,
    prefix_share: PrefixShareOption = None,
    prefix_tokens: PrefixTokens = None,
    prefixes: Prefixes = 1,
    random_prefix_len: Annotated[
        int | None,
        typer.Option(
            help="vllm bench serve's random prefix: every request opens with the same P "
            "tokens before its --random-input-len, served from the prefix cache once the "
            "first has computed them (--prefix-share 1 --prefix-tokens P) [0]."
        ),
    ] = None,
    sonnet_input_len: Annotated[
        int | None,
        typer.Option(help="--dataset-name sonnet: tokens a prompt holds in all [550]."),
    ] = None,
    sonnet_prefix_len: Annotated[
        int | None,
        typer.Option(help="--dataset-name sonnet: the opening every prompt shares, tokens [200]."),
    ] = None,
    sonnet_output_len: Annotated[
        int | None, typer.Option(help="--dataset-name sonnet: output tokens [150].")
    ] = None,
    gsp_num_groups: Annotated[
        int | None,
        typer.Option(help="--dataset-name generated-shared-prefix: system prompts [64]."),
    ] = None,
    gsp_prompts_per_group: Annotated[
        int | None,
        typer.Option(
            help="--dataset-name generated-shared-prefix: prompts each (the run sends groups x "
            "this, whatever --num-prompts says) [16]."
        ),
    ] = None,
    gsp_system_prompt_len: Annotated[
        int | None,
        typer.Option(help="--dataset-name generated-shared-prefix: system prompt tokens [2048]."),
    ] = None,
    gsp_question_len: Annotated[
        int | None,
        typer.Option(help="--dataset-name generated-shared-prefix: question tokens [128]."),
    ] = None,
    gsp_output_len: Annotated[
        int | None,
        typer.Option(help="--dataset-name generated-shared-prefix: output tokens [256]."),
    ] = None,
    kv_offloading_size: KvOffloadingSize = None,
    kv_offloading_backend: KvOffloadingBackend = None,
    enable_hierarchical_cache: EnableHierarchicalCache = False,
    hicache_ratio: HicacheRatio = None,
    hicache_size: HicacheSize = None,
    disagg: Annotated[
        str | None,
        typer.Option(help="Prefill/decode disaggregation: xPyD, e.g. 1P3D (docs/disagg.md)."),
    ] = None,
    prefill_tp: Annotated[
        int | None, typer.Option(help="TP of each prefill instance [default: --tp].")
    ] = None,
    decode_tp: Annotated[
        int | None, typer.Option(help="TP of each decode instance [default: --tp].")
    ] = None,
    prefill_ep: Annotated[
        int | None,
        typer.Option(help="Expert parallelism of each prefill instance: 1 or its TP [1]."),
    ] = None,
    decode_ep: Annotated[
        int | None,
        typer.Option(help="Expert parallelism of each decode instance: 1 or its TP [1]."),
    ] = None,
    prefill_dp: Annotated[
        int | None,
        typer.Option(
            "--prefill-dp",
            "--prefill-dp-attention",
            help="Data-parallel ranks in each prefill instance: SGLang attention-DP groups "
            "inside its TP (divides it; MoE models), vLLM --data-parallel-size ranks of TP "
            "GPUs each [1].",
        ),
    ] = None,
    decode_dp: Annotated[
        int | None,
        typer.Option(
            "--decode-dp",
            "--decode-dp-attention",
            help="Data-parallel ranks in each decode instance (as --prefill-dp) [1].",
        ),
    ] = None,
    disagg_transfer_backend: Annotated[
        str | None,
        typer.Option(
            "--disaggregation-transfer-backend",
            help="SGLang: the pools' KV transfer backend, mooncake (over RDMA, also inside a "
            "node) or nixl (NVLink inside a node) [mooncake].",
        ),
    ] = None,
    disagg_link: Annotated[
        str | None,
        typer.Option(
            help="KV transfer link: nvlink (one node) or rdma (a 400G NIC per GPU) "
            "[default: rdma for SGLang's Mooncake and across nodes, else nvlink]."
        ),
    ] = None,
    prefill_args: Annotated[
        str | None,
        typer.Option(
            help="The prefill pool's own engine flags, as on its line (e.g. '--chunked-prefill-"
            "size 16384 --mem-fraction-static 0.85'): they override the shared ones there."
        ),
    ] = None,
    decode_args: Annotated[
        str | None,
        typer.Option(
            help="The decode pool's own engine flags, as on its line (e.g. '--max-running-"
            "requests 256 --cuda-graph-max-bs 256'): they override the shared ones there."
        ),
    ] = None,
    trust_remote_code: TrustRemoteCode = False,
    nnodes: Nnodes = None,
    node_rank: NodeRank = None,
    dist_init_addr: DistInitAddr = None,
    distributed_executor_backend: DistributedExecutorBackend = None,
    data_parallel_size_local: DataParallelSizeLocal = None,
    data_parallel_address: DataParallelAddress = None,
    hub_timeout: HubTimeout = None,
    json_out: JsonOut = False,
    csv_out: Annotated[bool, typer.Option("--csv", help="Print CSV rows.")] = False,
    plot: Annotated[
        str | None, typer.Option(help="Save the sweep chart as an image (plot extra).")
    ] = None,
) -> None:
    """Throughput, latency percentiles and goodput of scheduling policies on one trace."""
    flags = SimulateFlags(**locals())
    apply_hub_timeout(hub_timeout)
    flags = _normalized(flags)
    if flags.gpu is not None:
        _run_benchmark(flags, flags.gpu)
    else:
        _run_policies(flags)


@dataclass(frozen=True)
class SimulateFlags:
    """Every flag `planner simulate` was given, under its parameter's name: the command's two
    modes (a deployment benchmark with --gpu, a policy simulation without) each read theirs."""

    workload: str | None
    dataset_name: str | None
    ignore_eos: bool
    trace: str | None
    rate: float | None
    concurrency: int | None
    cv: float | None
    metric_percentiles: str | None
    burstiness: float | None
    bench_client: str | None
    prompt_len: int | None
    output_len: int | None
    len_range: float | None
    len_spread: float | None
    random_range_ratio: float | None
    prompt_mean: float | None
    output_mean: float | None
    empty_outputs: float | None
    requests: int | None
    seed: int | None
    policy: str | None
    compare: str | None
    sweep: str | None
    max_batch: int | None
    chunk_tokens: int | None
    step_token_budget: int | None
    kv_blocks: int | None
    block_size: int | None
    preemption: str | None
    shared_prefix_fraction: float | None
    shared_prefix_tokens: int | None
    spec_alpha: float | None
    spec_k: int | None
    draft_cost: float | None
    spec_method: str | None
    slo_ttft_ms: float | None
    slo_tpot_ms: float | None
    a_ms: float | None
    b_ms: float | None
    prefill_ms_per_token: float | None
    overhead_ms: float | None
    preset: str | None
    model: str | None
    revision: str | None
    gpu: str | None
    tp: int | None
    pp: int | None
    dp: int | None
    ep: int | None
    enable_expert_parallel: bool
    attn_dp_size: int | None
    cuda_graph_max_bs: int | None
    max_cudagraph_capture_size: int | None
    enforce_eager: bool
    async_scheduling: bool | None
    enable_prefix_caching: bool | None
    disable_radix_cache: bool
    disable_cuda_graph: bool
    disable_overlap_schedule: bool
    all2all_backend: str | None
    enable_dbo: bool
    stream_interval: int | None
    scheduler_recv_interval: int | None
    max_prefill_tokens: int | None
    kv_cache_memory_bytes: int | None
    mamba_full_memory_ratio: float | None
    max_mamba_cache_size: int | None
    mamba_radix_cache_strategy: str | None
    dtype: str | None
    reserved_gib: float | None
    dp_attention: bool
    weight_dtype: str | None
    kv_dtype: str | None
    engine: str | None
    engine_version: str | None
    max_num_seqs: int | None
    max_num_batched_tokens: int | None
    ep_num_redundant_experts: int | None
    moe_a2a_backend: str | None
    enable_two_batch_overlap: bool
    moe_dense_tp_size: int | None
    enable_dp_lm_head: bool
    memory_fraction: float | None
    context: str | None
    num_scheduler_steps: int | None
    enable_chunked_prefill: bool | None
    calibration: str | None
    prefix_share: float | None
    prefix_tokens: int | None
    prefixes: int
    random_prefix_len: int | None
    sonnet_input_len: int | None
    sonnet_prefix_len: int | None
    sonnet_output_len: int | None
    gsp_num_groups: int | None
    gsp_prompts_per_group: int | None
    gsp_system_prompt_len: int | None
    gsp_question_len: int | None
    gsp_output_len: int | None
    kv_offloading_size: float | None
    kv_offloading_backend: str | None
    enable_hierarchical_cache: bool
    hicache_ratio: float | None
    hicache_size: float | None
    disagg: str | None
    prefill_tp: int | None
    decode_tp: int | None
    prefill_ep: int | None
    decode_ep: int | None
    prefill_dp: int | None
    decode_dp: int | None
    disagg_transfer_backend: str | None
    disagg_link: str | None
    prefill_args: str | None
    decode_args: str | None
    trust_remote_code: bool
    nnodes: int | None
    node_rank: str | None
    dist_init_addr: str | None
    distributed_executor_backend: str | None
    data_parallel_size_local: int | None
    data_parallel_address: str | None
    hub_timeout: float | None
    json_out: bool
    csv_out: bool
    plot: str | None


def _normalized(f: SimulateFlags) -> SimulateFlags:
    """The flags in the planner's own terms: the served weight dtype, the workload a
    --dataset-name names, the engines' own layout flags (vLLM's --enable-expert-parallel,
    SGLang's --attn-dp-size) as --ep / --dp --dp-attention, and --rate inf as no rate (every
    request at once)."""
    from planner.api.capacity import served_weight_dtype
    from planner.errors import InputError

    workload = _dataset_workload(f.dataset_name, f.workload, f.prompt_len, f.output_len)
    if f.ignore_eos and f.output_mean is not None:
        raise InputError(
            "--ignore-eos", "outputs run to their length; --output-mean stops them at EOS: give one"
        )
    ep, dp, dp_attention = f.ep, f.dp, f.dp_attention
    # the engines' own layout flags, where a deployment takes them (without one, each is
    # refused by _refuse_deployment_flags by its own name)
    if f.gpu is not None:
        ep, dp, dp_attention = engine_layout(
            f.engine, f.tp, dp, ep, dp_attention, f.enable_expert_parallel, f.attn_dp_size
        )
        f = _shared_prefix_dataset(f)
    rate = f.rate
    if rate == float("inf"):  # vllm bench serve --request-rate inf: every request at once
        if f.gpu is None:
            raise InputError("--rate", "inf (every request at once) poses a deployment: give --gpu")
        rate = None
    return replace(
        f,
        weight_dtype=served_weight_dtype(f.weight_dtype),
        workload=workload,
        ep=ep,
        dp=dp,
        dp_attention=dp_attention,
        rate=rate,
    )


def _run_benchmark(f: SimulateFlags, gpu: str) -> None:
    """A deployment benchmark (--gpu): the engine's own scheduler, KV pool and step model
    under the benchmark's load, printed as the benchmark prints it."""
    from planner.api.bench import benchmark
    from planner.api.bench_instance import Deployment
    from planner.errors import InputError

    engine = "vllm" if f.engine is None else f.engine
    if engine not in ("vllm", "sglang"):
        raise InputError("--engine", f"{engine!r}; accepted: vllm, sglang")
    if f.compare is not None:
        raise InputError(
            "--compare",
            "with a deployment (--gpu) simulate runs the engine's own scheduler; drop --gpu "
            "to compare policies on a given cost model",
        )
    _refuse_policy_options(
        {
            "--policy": f.policy,
            "--max-batch": f.max_batch,
            "--chunk-tokens": f.chunk_tokens,
            "--step-token-budget": f.step_token_budget,
            "--kv-blocks": f.kv_blocks,
            "--preemption": f.preemption,
            "--shared-prefix-fraction": f.shared_prefix_fraction,
            "--shared-prefix-tokens": f.shared_prefix_tokens,
            "--slo-ttft-ms/--ttft": f.slo_ttft_ms,
            "--slo-tpot-ms/--tpot": f.slo_tpot_ms,
            "--a-ms": f.a_ms,
            "--b-ms": f.b_ms,
            "--prefill-ms-per-token": f.prefill_ms_per_token,
            "--overhead-ms": f.overhead_ms,
        }
    )
    points = _sweep_values(f.sweep, "concurrency", "concurrency=1,4,16,64")
    tp = 1 if f.tp is None else f.tp
    settings = _engine_settings(f, engine, tp)
    layout = _disagg_layout(
        engine,
        tp,
        f.disagg,
        prefill_tp=f.prefill_tp,
        decode_tp=f.decode_tp,
        prefill_ep=f.prefill_ep,
        decode_ep=f.decode_ep,
        prefill_dp=f.prefill_dp,
        decode_dp=f.decode_dp,
        disagg_link=f.disagg_link,
        disagg_transfer_backend=f.disagg_transfer_backend,
        pool_args=(f.prefill_args, f.decode_args),
    )
    load, lengths, speculation = _bench_load(f, engine)
    profile = None
    if f.calibration is not None:
        from planner.sources.calibration import load_calibration

        profile = load_calibration(f.calibration)
    where = Deployment(
        gpu=gpu,
        preset=f.preset,
        model=f.model,
        revision=f.revision,
        settings={k: v for k, v in settings.items() if v is not None},
        dp=1 if f.dp is None else f.dp,
        ep=f.ep,
        dp_attention=f.dp_attention,
        chunked_prefill=f.enable_chunked_prefill,
        scheduler_steps=1 if f.num_scheduler_steps is None else f.num_scheduler_steps,
        calibration=profile,
    )
    try:
        bench = benchmark(
            where,
            load=load,
            lengths=lengths,
            sweep=points,
            prefix=_prefix(f),
            disagg=layout,
            percentiles=parse_percentiles(f.metric_percentiles),
            client=f.bench_client,
            speculation=speculation,
        )
    except InputError as exc:
        # a shared-prefix dataset's lengths went in under the planner's names: name its own
        named = DATASET_FLAG_NAMES.get(str(f.dataset_name), {}).get(exc.field.split("/")[0])
        if named is None:
            raise
        raise InputError(named, exc.message) from exc
    # sglang.bench_serving ignores EOS unless told not to; vllm bench serve only when told
    stops = f.dataset_name is not None and f.dataset_name != GSP_DATASET
    if stops and not f.ignore_eos and f.output_mean is None:
        cap = {"random": "--random-output-len", SONNET_DATASET: "--sonnet-output-len"}.get(
            str(f.dataset_name), "its reference lengths"
        )
        bench["notes"].append(
            f"--dataset-name {f.dataset_name} without --ignore-eos: the benchmark's outputs "
            f"stop at EOS, short of {cap}; here they run to it (--output-mean with your "
            "run's mean output poses the shorter ones)"
        )
    if f.json_out:
        emit_json(bench)
    else:
        render_bench(bench)


def _sweep_values(sweep: str | None, key: str, example: str) -> list[int] | None:
    """--sweep KEY=v1,v2,... as integers (None without --sweep); another key, or a value that
    is not an integer, is one error naming the flag."""
    from planner.errors import InputError

    if not sweep:
        return None
    name, _, values = sweep.partition("=")
    if name.strip() != key or not values:
        raise InputError("--sweep", f"{sweep!r}; accepted: {example}")
    try:
        return [int(v) for v in values.split(",") if v.strip()]
    except ValueError as exc:
        raise InputError("--sweep", f"{sweep!r}: integers expected") from exc


def _engine_settings(f: SimulateFlags, engine: str, tp: int) -> dict[str, Any]:
    """The serve plan's settings the flags state (unset ones: the plan's defaults); an engine's
    own flag under the other engine is one error naming it."""
    from planner.cli.capacity import engine_kv_dtype, offload_settings

    settings: dict[str, Any] = {
        "engine": engine,
        "version": f.engine_version,
        "tp": tp,
        "pp": 1 if f.pp is None else f.pp,
        "kv_cache_dtype": engine_kv_dtype(engine, f.kv_dtype, f.engine_version),
        "weight_dtype": f.weight_dtype,
        "max_num_seqs": f.max_num_seqs,
        "max_num_batched_tokens": f.max_num_batched_tokens,
        "memory_fraction": f.memory_fraction,
        "block_size": f.block_size,
        "dtype": f.dtype,
    }
    stated = {name: getattr(f, name) for name in ENGINE_EXTRA_FLAGS}
    extra = engine_extra(engine, {k: v for k, v in stated.items() if v != _DEFAULTS[k]})
    if extra:
        settings["extra"] = extra
    settings |= host_settings(engine, vars(f))
    if f.stream_interval is not None:  # both engines' flag
        settings.setdefault("extra", {})["stream_interval"] = f.stream_interval
    if f.reserved_gib:  # memory other processes hold on each GPU, as capacity charges it
        settings.setdefault("extra", {})["reserved_bytes"] = reserved_bytes(f.reserved_gib)
    if f.context is not None:
        from planner.core.engines.vllm import MAX_MODEL_LEN_AUTO

        length = max_model_len_value(f.context, "--context")
        if length == MAX_MODEL_LEN_AUTO:
            settings["max_model_len_auto"] = True
        else:
            settings["context_tokens"] = length
    settings["offload"] = offload_settings(
        gpu=f.gpu,
        kv_offloading_size=f.kv_offloading_size,
        kv_offloading_backend=f.kv_offloading_backend,
        lmcache_config=None,
        hicache=f.enable_hierarchical_cache,
        hicache_ratio=f.hicache_ratio,
        hicache_size=f.hicache_size,
        host_memory_gib=None,
    )
    return settings


def _bench_load(f: SimulateFlags, engine: str) -> "tuple[Load, Lengths, Speculation | None]":
    """The benchmark's load, lengths and speculation from the flags, each bad value one error
    naming its flag (BENCH_FLAGS)."""
    from planner.api.bench_load import Lengths, Load
    from planner.errors import InputError, validation_text

    cv = gamma_cv(f.cv, f.burstiness)
    len_range, len_spread = f.len_range, f.len_spread
    if f.random_range_ratio is not None:
        if len_range is not None or len_spread is not None:
            raise InputError(
                "--random-range-ratio", "is --len-range or --len-spread: give one of them"
            )
        # the client's own meaning (the one named, else the engine's): sglang.bench_serving
        # and the 2024 script draw in [r L, L], vllm bench serve in [L (1 - r), L (1 + r)]
        # (docs/simulate.md)
        if _range_client(f.bench_client, engine) in RANGE_BELOW_CLIENTS:
            len_range = f.random_range_ratio
        else:
            len_spread = f.random_range_ratio
    elif (
        f.dataset_name == "random"
        and _range_client(f.bench_client, engine) == "sglang"
        and len_range is None
    ):
        # a pasted sglang.bench_serving command without the flag: its default ratio, 0.0,
        # draws uniform in [1, L] (vllm bench serve's default 0 and the 2024 script's 1.0
        # leave lengths fixed)
        len_range = SGLANG_DEFAULT_RANGE_RATIO if len_spread is None else None
    try:
        load = Load(
            concurrency=f.concurrency,
            rate_per_s=f.rate,
            cv=cv,
            requests=f.requests,
            seed=f.seed,
        )
        lengths = Lengths(
            workload=None if f.trace is not None else f.workload,
            prompt_len=f.prompt_len,
            output_len=f.output_len,
            len_range=len_range,
            len_spread=len_spread,
            trace=f.trace,
            prompt_mean=f.prompt_mean,
            output_mean=f.output_mean,
            empty_share=f.empty_outputs,
        )
        speculation = _speculation(f.spec_alpha, f.spec_k, f.draft_cost, f.spec_method)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = str(err["loc"][0]) if err["loc"] else "load"
        raise InputError(BENCH_FLAGS.get(key, key), validation_text(err)) from exc
    if (
        lengths.workload is None
        and lengths.trace is None
        and (f.prompt_len is None or f.output_len is None)
    ):
        raise InputError(
            "--prompt-len",
            "a deployment benchmark needs --prompt-len and --output-len, --workload "
            "(e.g. sharegpt) or --trace",
        )
    return load, lengths, speculation


# The flags that describe a deployment benchmark, by the SimulateFlags field that holds them:
# without --gpu each is one error naming it (it would otherwise be ignored).
DEPLOYMENT_FLAGS = {
    "revision": "--revision",
    "concurrency": "--concurrency",
    "burstiness": "--burstiness",
    "metric_percentiles": "--metric-percentiles",
    "bench_client": "--bench-client",
    "prompt_len": "--prompt-len",
    "output_len": "--output-len",
    "len_range": "--len-range",
    "len_spread": "--len-spread",
    "random_range_ratio": "--random-range-ratio",
    "prompt_mean": "--prompt-mean",
    "output_mean": "--output-mean",
    "empty_outputs": "--empty-outputs",
    "weight_dtype": "--weight-dtype",
    "engine_version": "--engine-version",
    "calibration": "--calibration",
    "prefix_share": "--prefix-share",
    "disagg": "--disagg",
    "prefix_tokens": "--prefix-tokens",
    "random_prefix_len": "--random-prefix-len",
    **{name: "--" + name.replace("_", "-") for name in (*SONNET_FLAGS, *GSP_FLAGS)},
    "kv_offloading_size": "--kv-offloading-size",
    "kv_offloading_backend": "--kv-offloading-backend",
    "enable_hierarchical_cache": "--enable-hierarchical-cache",
    "hicache_ratio": "--hicache-ratio",
    "hicache_size": "--hicache-size",
    "num_scheduler_steps": "--num-scheduler-steps",
    "enable_chunked_prefill": "--enable-chunked-prefill",
    "tp": "--tp",
    "pp": "--pp",
    "dp": "--dp",
    "ep": "--ep",
    "dp_attention": "--dp-attention",
    "kv_dtype": "--kv-dtype",
    "engine": "--engine",
    "max_num_seqs": "--max-num-seqs",
    "max_num_batched_tokens": "--max-num-batched-tokens",
    "memory_fraction": "--gpu-memory-utilization",
    "ep_num_redundant_experts": "--ep-num-redundant-experts",
    "enable_two_batch_overlap": "--enable-two-batch-overlap",
    "moe_a2a_backend": "--moe-a2a-backend",
    "moe_dense_tp_size": "--moe-dense-tp-size",
    "enable_dp_lm_head": "--enable-dp-lm-head",
    "context": "--context",
    "prefill_tp": "--prefill-tp",
    "decode_tp": "--decode-tp",
    "prefill_ep": "--prefill-ep",
    "decode_ep": "--decode-ep",
    "prefill_dp": "--prefill-dp",
    "decode_dp": "--decode-dp",
    "disagg_link": "--disagg-link",
    "prefill_args": "--prefill-args",
    "decode_args": "--decode-args",
    "disagg_transfer_backend": "--disaggregation-transfer-backend",
    "prefixes": "--prefixes",
    "dataset_name": "--dataset-name",
    "ignore_eos": "--ignore-eos",
    "enable_expert_parallel": "--enable-expert-parallel",
    "attn_dp_size": "--attn-dp-size",
    "cuda_graph_max_bs": "--cuda-graph-max-bs",
    "max_cudagraph_capture_size": "--max-cudagraph-capture-size",
    "enforce_eager": "--enforce-eager",
    "async_scheduling": "--async-scheduling",
    "enable_prefix_caching": "--enable-prefix-caching",
    "disable_radix_cache": "--disable-radix-cache",
    "disable_cuda_graph": "--disable-cuda-graph",
    "disable_overlap_schedule": "--disable-overlap-schedule",
    "all2all_backend": "--all2all-backend",
    "enable_dbo": "--enable-dbo",
    "stream_interval": "--stream-interval",
    "scheduler_recv_interval": "--scheduler-recv-interval",
    "max_prefill_tokens": "--max-prefill-tokens",
    "trust_remote_code": "--trust-remote-code",
    "nnodes": "--nnodes",
    "node_rank": "--node-rank",
    "dist_init_addr": "--dist-init-addr",
    "distributed_executor_backend": "--distributed-executor-backend",
    "data_parallel_size_local": "--data-parallel-size-local",
    "data_parallel_address": "--data-parallel-address",
    "kv_cache_memory_bytes": "--kv-cache-memory-bytes",
    "mamba_full_memory_ratio": "--mamba-full-memory-ratio",
    "max_mamba_cache_size": "--max-mamba-cache-size",
    "mamba_radix_cache_strategy": "--mamba-radix-cache-strategy",
    "dtype": "--dtype",
    "reserved_gib": "--reserved-gib",
    "spec_method": "--spec-method",
}


# Each flag's value when it is not typed (the command's defaults).
_DEFAULTS = defaults_of(simulate)


def _refuse_deployment_flags(f: SimulateFlags) -> None:
    """A deployment-benchmark flag typed without --gpu is one error naming it."""
    from planner.errors import InputError

    for name, flag in DEPLOYMENT_FLAGS.items():
        if getattr(f, name) != _DEFAULTS[name]:
            raise InputError(flag, "describes a deployment benchmark: add --gpu and a model")


def _run_policies(f: SimulateFlags) -> None:
    """A policy simulation (no --gpu): static, continuous and chunked scheduling on a given or
    derived cost model, with goodput against the SLO."""
    from planner.api import simulation
    from planner.errors import InputError

    _refuse_deployment_flags(f)
    names = [p.strip() for p in f.compare.split(",")] if f.compare else [f.policy or "chunked"]
    for name in names:
        if name not in POLICIES:
            raise InputError(
                "--compare" if f.compare else "--policy",
                f"{name!r}; accepted: {', '.join(POLICIES)}",
            )
    if f.preemption not in (None, "recompute", "swap"):
        raise InputError("--preemption", f"{f.preemption!r}; accepted: recompute, swap")
    caps = _sweep_values(f.sweep, "max_batch", "max_batch=4,8,16")
    given = {
        "a_ms": f.a_ms,
        "b_ms": f.b_ms,
        "prefill_ms_per_token": f.prefill_ms_per_token,
        "overhead_ms": f.overhead_ms,
    }
    cost: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
    if cost and not (f.preset or f.model):
        cost["source"] = "given"
    given_sim: dict[str, Any] = {
        "max_batch": f.max_batch,
        "chunk_tokens": f.chunk_tokens,
        "step_token_budget": f.step_token_budget,
        "block_tokens": f.block_size,
        "preemption": f.preemption,
        "spec_k": f.spec_k,
        "spec_draft_cost": f.draft_cost,
        "slo_ttft_ms": f.slo_ttft_ms,
        "slo_tpot_ms": f.slo_tpot_ms,
    }
    # unset ones take the simulator's defaults (SimConfig); these two are None when unset
    sim: dict[str, Any] = {k: v for k, v in given_sim.items() if v is not None}
    sim |= {"kv_blocks": f.kv_blocks, "spec_alpha": f.spec_alpha}
    result = simulation(
        workload=f.workload or "reference",
        trace_path=f.trace,
        overrides={
            "rate_per_s": f.rate,
            "arrival": "gamma" if f.cv is not None else None,
            "cv": f.cv,
            "requests": f.requests,
            "seed": f.seed,
            "shared_prefix_fraction": f.shared_prefix_fraction,
            "shared_prefix_tokens": f.shared_prefix_tokens,
        },
        policies=names,
        sweep=caps,
        cost=cost,
        sim=sim,
        gpu=f.gpu,
        preset=f.preset,
        model=f.model,
        capacity_settings={"tp": 1},
    )
    if f.plot is not None:
        save_sweep_chart(result, f.plot)
    if f.json_out:
        emit_json(result)
    elif f.csv_out:
        emit_csv(result)
    else:
        render(result)


def _prefix(f: SimulateFlags) -> "PrefixShare | None":
    """The shared prefix a deployment benchmark poses: --prefix-share / --prefix-tokens /
    --prefixes, or vllm bench serve's --random-prefix-len P (one prefix of P tokens that
    opens every request: its random dataset draws it once for the run, before each prompt's
    own tokens; 0, its default, none)."""
    from planner.errors import InputError

    if f.random_prefix_len is None:
        return parse_prefix(f.prefix_share, f.prefix_tokens, f.prefixes)
    if f.prefix_share is not None or f.prefix_tokens is not None:
        raise InputError(
            "--random-prefix-len", "is --prefix-share 1 --prefix-tokens P: give one of them"
        )
    if f.random_prefix_len < 0:
        raise InputError("--random-prefix-len", f"must be >= 0 (got {f.random_prefix_len})")
    if f.random_prefix_len == 0:
        return None
    return parse_prefix(1.0, f.random_prefix_len, 1)


# Options of the policy simulation that a deployment benchmark takes from the engine instead,
# and what to type there.
DEPLOYMENT_EQUIVALENT = {
    "--policy": "the engine's scheduler runs (vLLM: --enable-chunked-prefill or not)",
    "--max-batch": "--max-num-seqs / --max-running-requests caps the running set",
    "--chunk-tokens": "--max-num-batched-tokens / --chunked-prefill-size sets the chunk",
    "--step-token-budget": "--max-num-batched-tokens sets the step budget",
    "--kv-blocks": "the KV pool is the engine's, from the model and the GPU",
    "--preemption": "the engine preempts as it does (vLLM recomputes, SGLang retracts)",
    "--shared-prefix-fraction": "--prefix-share / --prefix-tokens pose a shared prefix",
    "--shared-prefix-tokens": "--prefix-share / --prefix-tokens pose a shared prefix",
    "--slo-ttft-ms/--ttft": "the benchmark prints latencies, not goodput (`planner fleet` "
    "sizes to an SLO)",
    "--slo-tpot-ms/--tpot": "the benchmark prints latencies, not goodput (`planner fleet` "
    "sizes to an SLO)",
    "--a-ms": "the step model is derived (`planner calibrate --bench` fits it)",
    "--b-ms": "the step model is derived (`planner calibrate --bench` fits it)",
    "--prefill-ms-per-token": "the step model is derived (`planner calibrate --bench` fits it)",
    "--overhead-ms": "the step model is derived (`planner calibrate --bench` fits it)",
}


def _speculation(
    alpha: float | None, k: int | None, draft_cost: float | None, method: str | None
) -> "Speculation | None":
    """--spec-alpha / --spec-k / --draft-cost / --spec-method for a deployment (None without
    --spec-alpha; the others alone are an error naming it). A value out of range raises
    pydantic's error, which the caller names by BENCH_FLAGS."""
    from planner.api.bench_load import Speculation
    from planner.errors import InputError

    if alpha is None:
        for flag, value in (
            ("--spec-k", k),
            ("--draft-cost", draft_cost),
            ("--spec-method", method),
        ):
            if value is not None:
                raise InputError(flag, "sets speculative decoding: give --spec-alpha too")
        return None
    given = {"alpha": alpha, "k": k, "draft_cost": draft_cost, "method": method}
    return Speculation(**{key: v for key, v in given.items() if v is not None})


def _disagg_layout(
    engine: str,
    tp: int,
    disagg: str | None,
    *,
    prefill_tp: int | None,
    decode_tp: int | None,
    prefill_ep: int | None,
    decode_ep: int | None,
    prefill_dp: int | None,
    decode_dp: int | None,
    disagg_link: str | None,
    disagg_transfer_backend: str | None,
    pool_args: tuple[str | None, str | None] = (None, None),
) -> "DisaggLayout | None":
    """The prefill/decode pools --disagg and each pool's --prefill-* / --decode-* options
    describe (a DisaggLayout; None without --disagg), each bad value one error naming its
    flag; the pool options, the link and SGLang's transfer backend are refused without it."""
    from planner.errors import InputError

    pools = (prefill_tp, decode_tp, prefill_ep, decode_ep, prefill_dp, decode_dp)
    layout = None
    if disagg is not None:
        from planner.core.parallel import moe_ranks, ranks_share_tp
        from planner.sim.disagg import DisaggLayout, parse_layout

        for flag, pool_tp in (("--prefill-tp", prefill_tp), ("--decode-tp", decode_tp)):
            if pool_tp is not None and pool_tp < 1:
                raise InputError(flag, f"must be >= 1 (got {pool_tp})")

        try:
            x, y = parse_layout(disagg)
            layout = DisaggLayout(
                prefill=x, decode=y, prefill_tp=prefill_tp or tp, decode_tp=decode_tp or tp
            )
        except ValidationError as exc:
            where = str(exc.errors()[0]["loc"][0])
            flag = {"prefill_tp": "--prefill-tp", "decode_tp": "--decode-tp"}.get(where, "--disagg")
            raise InputError(flag, exc.errors()[0]["msg"].lower()) from exc
        except ValueError as exc:
            raise InputError(
                "--disagg", f"{disagg!r}; expected xPyD (1P1D, 2P6D ...) with x, y >= 1"
            ) from exc
        for flag, groups in (("--prefill-dp", prefill_dp), ("--decode-dp", decode_dp)):
            if groups is not None and groups < 1:
                raise InputError(flag, f"must be >= 1 (got {groups})")
        for flag, pool_ep, pool_tp, ranks in (
            ("--prefill-ep", prefill_ep, layout.prefill_tp, prefill_dp or 1),
            ("--decode-ep", decode_ep, layout.decode_tp, decode_dp or 1),
        ):
            # an instance's MoE layers span its TP GPUs, and vLLM's DP ranks' too
            span = moe_ranks(engine, pool_tp, ranks)
            if pool_ep is not None and pool_ep not in (1, span):
                raise InputError(
                    flag,
                    f"{pool_ep}: a pool's expert parallelism spans its instance's MoE ranks "
                    f"(1 or {span})",
                )
        layout = layout.model_copy(
            update={
                "prefill_ep": prefill_ep or 1,
                "decode_ep": decode_ep or 1,
                "prefill_dp": prefill_dp or 1,
                "decode_dp": decode_dp or 1,
                "dp_within_tp": ranks_share_tp(engine),
                "link": disagg_link,
                "transfer_backend": disagg_transfer_backend,
                "prefill_args": pool_args[0],
                "decode_args": pool_args[1],
            }
        )
    else:
        names = "--prefill-tp --decode-tp --prefill-ep --decode-ep --prefill-dp --decode-dp"
        names += " --disagg-link --prefill-args --decode-args"
        values = (*pools, disagg_link, *pool_args)
        given = [n for n, v in zip(names.split(), values, strict=True) if v is not None]
        if given:
            raise InputError(given[0], "needs --disagg (a pool's option)")
    if disagg_transfer_backend is not None:
        from planner.core.disagg import SGLANG_TRANSFER_BACKENDS

        flag = "--disaggregation-transfer-backend"
        if disagg is None:
            raise InputError(flag, "needs --disagg")
        if engine != "sglang":
            raise InputError(flag, "an SGLang flag (vLLM's pools run the NIXL connector)")
        if disagg_transfer_backend not in SGLANG_TRANSFER_BACKENDS:
            raise InputError(
                flag,
                f"{disagg_transfer_backend!r}; accepted: {', '.join(SGLANG_TRANSFER_BACKENDS)}",
            )
    return layout


# The benchmark clients whose --random-range-ratio r draws lengths uniform in [r L, L]:
# sglang.bench_serving (`sample_random_requests`, python/sglang/bench_serving.py) and vLLM's
# 2024 benchmarks/benchmark_serving.py (`np.random.randint(int(input_len * range_ratio),
# input_len + 1)`, default 1.0: fixed; the copy in dstackai/benchmarks @06c957a,
# amd/tgi_vs_vllm/scripts). vllm bench serve draws in [L (1 - r), L (1 + r)]
# (vllm/benchmarks/datasets.py RandomDataset, 0.14.0; default 0.0: fixed).
RANGE_BELOW_CLIENTS = frozenset({"sglang", "vllm-2024"})


def _range_client(client: str | None, engine: str) -> str:
    """The client whose --random-range-ratio a run's flag means: the one named, else the
    engine's own (`none`, the engine's pace, reads the engine's own client's lengths)."""
    return client if client not in (None, "none") else engine


# sglang.bench_serving's --random-range-ratio when not given (python/sglang/bench_serving.py;
# the SGLang cookbook's runs without it draw 6,101 prompt tokens for 10 prompts of up to
# 1,000: planner.sim.workload.SGLANG_BENCH_SEED).
SGLANG_DEFAULT_RANGE_RATIO = 0.0


def _shared_prefix_dataset(f: SimulateFlags) -> SimulateFlags:
    """The flags with a shared-prefix dataset (--dataset-name sonnet or generated-shared-prefix,
    planner.api.bench_load) posed in the planner's own terms: each prompt's own tokens as
    --prompt-len after a shared prefix (--prefix-share 1 --prefix-tokens --prefixes), fixed
    outputs, and the requests generated-shared-prefix sends. A dataset's flags without it, or
    a prefix given beside its own, are one error naming the flag."""
    from planner.api.bench_load import gsp_run, sonnet_run
    from planner.errors import InputError

    own = {SONNET_DATASET: SONNET_FLAGS, GSP_DATASET: GSP_FLAGS}
    for dataset, names in own.items():
        given = next((n for n in names if getattr(f, n) is not None), None)
        if given is not None and f.dataset_name != dataset:
            raise InputError(
                "--" + given.replace("_", "-"),
                f"describes the {dataset} dataset (--dataset-name {dataset})",
            )
    if f.dataset_name not in own:
        return f
    for flag, value in (
        ("--random-prefix-len", f.random_prefix_len),
        ("--prefix-share", f.prefix_share),
        ("--prefix-tokens", f.prefix_tokens),
        ("--prefixes", None if f.prefixes == 1 else f.prefixes),
    ):
        if value is not None:
            raise InputError(flag, f"--dataset-name {f.dataset_name} poses its own shared prefix")
    values = [getattr(f, n) for n in own[str(f.dataset_name)]]
    run = sonnet_run(*values) if f.dataset_name == SONNET_DATASET else gsp_run(*values)
    return replace(
        f,
        prompt_len=run.prompt_len,
        output_len=run.output_len,
        prefix_share=1.0,
        prefix_tokens=run.prefix_tokens,
        prefixes=run.prefixes,
        requests=f.requests if run.requests is None else run.requests,
    )


def _dataset_workload(
    dataset: str | None, workload: str | None, prompt_len: int | None, output_len: int | None
) -> str | None:
    """The workload a benchmark's --dataset-name names (--workload where none is given)."""
    from planner.errors import InputError

    if dataset is None:
        return workload
    if dataset not in DATASET_WORKLOADS:
        raise InputError(
            "--dataset-name",
            f"{dataset!r}; accepted: {', '.join(DATASET_WORKLOADS)} (or --trace with your own "
            "lengths)",
        )
    if workload is not None:
        raise InputError("--dataset-name", "is --workload: give one of them")
    if dataset == "random" and (prompt_len is None or output_len is None):
        raise InputError(
            "--dataset-name", "random needs --random-input-len and --random-output-len"
        )
    if dataset != "random" and (prompt_len is not None or output_len is not None):
        own = {SONNET_DATASET: "--sonnet-*", GSP_DATASET: "--gsp-*"}.get(dataset)
        raise InputError(
            "--random-input-len" if prompt_len is not None else "--random-output-len",
            f"describes the random dataset; {dataset}'s lengths are its own "
            + (
                f"({own} flags)"
                if own
                else "(--prompt-mean / --output-mean scale them to your run's)"
            ),
        )
    return DATASET_WORKLOADS[dataset]


def _refuse_policy_options(given: dict[str, object]) -> None:
    """A policy-simulation option typed with a deployment (--gpu) is one error naming it and
    what the deployment takes instead: it would otherwise be ignored."""
    from planner.errors import InputError

    for flag, value in given.items():
        if value is not None:
            raise InputError(
                flag,
                f"a policy-simulation option; with a deployment (--gpu) "
                f"{DEPLOYMENT_EQUIVALENT[flag]} (drop it, or drop --gpu)",
            )


# Tail percentiles one run prints at most (vllm bench serve takes any list; ten is plenty).
MAX_PERCENTILES = 10


def parse_percentiles(text: str | None) -> tuple[float, ...] | None:
    """--metric-percentiles "90,95,99" -> (90.0, 95.0, 99.0), each in (0, 100], in order."""
    from planner.errors import InputError

    if text is None:
        return None
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError as exc:
        raise InputError("--metric-percentiles", f"{text!r}: numbers, e.g. 90,95,99") from exc
    if not values or len(values) > MAX_PERCENTILES:
        raise InputError(
            "--metric-percentiles", f"{text!r}: 1 to {MAX_PERCENTILES} percentiles, e.g. 90,99"
        )
    for v in values:
        if not 0 < v <= 100:
            raise InputError("--metric-percentiles", f"{v:g} is not a percentile in (0, 100]")
    return tuple(dict.fromkeys(values))
