"""Fixed per-step costs: the kernels every decoder layer launches and the engine's own
scheduling overhead per step."""

from __future__ import annotations

from planner.core.specs import KvKind, ModelSpec

# Fixed cost per decoder layer per step: kernel launch and tail latency of the ~10 kernels a
# layer runs (norms, RoPE, attention, activations, and the GEMMs' own), present even inside a
# CUDA graph. 17 us fits the public Ampere rows (benchmarks/data/step-time.jsonl); Hopper's is
# measured and split from its GEMMs' (planner/core/step/family.py: HOPPER_KERNEL_MS_PER_LAYER).
KERNEL_MS_PER_LAYER = 0.017
# GEMM kernels a decoder layer launches, by what it holds (vLLM and SGLang model code): a GQA /
# MHA attention block its fused QKV and O projections; an MLA block five in its absorbed decode
# form (the fused q_a / kv_a down-projection, q_b, the two batched up-projections W_UK and
# W_UV, O); a dense MLP its fused gate_up and down; a MoE block its router and the grouped
# GEMM's two stages (a shared expert's two more are not counted: configs do not all name one).
# Linear-attention and Mamba blocks are counted as two (in and out).
GEMMS_PER_MLA_BLOCK = 5
GEMMS_PER_ATTENTION_BLOCK = 2
GEMMS_PER_DENSE_MLP = 2
GEMMS_PER_MOE_BLOCK = 3


def gemm_launches_per_layer(model: ModelSpec) -> float:
    """GEMM kernels a decoder layer launches outside its MoE block (GEMMS_PER_MOE_BLOCK),
    averaged over the layers: every attention block, and the MLPs of the layers without routed
    experts."""
    layers = model.num_layers
    attention = sum(
        g.num_layers * (GEMMS_PER_MLA_BLOCK if g.kind is KvKind.MLA else GEMMS_PER_ATTENTION_BLOCK)
        for g in model.kv_groups
    )
    routed = model.moe_layers or (layers if model.num_experts else 0)
    dense_mlps = GEMMS_PER_DENSE_MLP * max(layers - routed, 0)
    return (attention + dense_mlps) / layers


def mla_layer_share(model: ModelSpec) -> float:
    """The share of a model's decoder layers whose attention is MLA."""
    mla = sum(g.num_layers for g in model.kv_groups if g.kind is KvKind.MLA)
    return mla / model.num_layers if model.num_layers else 0.0


# Per-step engine overhead not hidden behind the GPU (scheduling, sampling, input prep), ms,
# fitted per engine on the public rows: vLLM's V1 engine overlaps most of it (async
# scheduling); V0 (before 0.8) and SGLang's Python scheduler add more; LMDeploy's C++
# TurboMind little. SGLang's figure is an assumption between the two vLLM engines.
ENGINE_OVERHEAD_MS = {"vllm": 0.2, "vllm-v0": 0.5, "sglang": 0.35, "lmdeploy": 0.2}
# vLLM's V1 engine became the default in 0.8.0 (vLLM v0.8.0 release notes).
VLLM_V1_SINCE = (0, 8, 0)


# The engine's own CPU time per running request per step, where it runs in series with the GPU, ms:
# its scheduler and its worker's input preparation. Measured with the engines' scheduler classes on
# a CPU (AMD EPYC, Python 3.11, B = 32-1,024 requests decoding after 1,000-token prompts;
# benchmarks/host_overhead.py, benchmarks/data/host-overhead.jsonl): vLLM V0 0.6.3.post1
# Scheduler.schedule() 11.5 us; V1 schedule() + update_from_output() 6.1 us in 0.10.1 and 5.1 us in
# 0.13.0 (5.6, their mean). V0's driver worker then prepares the step's inputs in series too:
# ModelInputForGPUBuilder and SamplingMetadata.prepare, 18.4 us a sequence (0.6.3.post1, B =
# 32-1,024 at 1,200 tokens of context, the median of four runs' marginals, 13.5-22.7:
# `host_overhead.py --v0-input-prep`); after the forward its Sampler builds the sampling tensors,
# the sampled tokens' logprobs and ranks and an output object per sequence before the next step
# is scheduled: 5.9 us a sequence (0.6.3.post1, the median of four runs' marginals, 4.8-6.9:
# `--v0-sampler`). V1's worker prepares its inputs with numpy over a persistent
# batch: 1.2 us a request (_update_states + _prepare_inputs, 0.10.1's CPU model runner: `--v1-input-
# prep`). V1 overlaps the scheduler with the GPU from 0.14 (async scheduling on by default unless PP
# > 1: vllm/config/vllm.py, 0.14.0) and, under PP, in every release (its batch queue keeps PP
# batches in flight while it schedules the next: EngineCore.step_with_batch_queue,
# max_concurrent_batches = PP, read in 0.10.1; V0 ran one virtual engine per stage, scheduled while
# the others' batches ran); SGLang's overlap scheduler (0.3.6 on). Those steps pay none of it in
# series; it floors them instead (host_ms_per_seq: its second figure).
V0_SCHEDULE_MS_PER_SEQ = 0.0115
V0_INPUT_PREP_MS_PER_SEQ = 0.0184
V0_SAMPLER_MS_PER_SEQ = 0.0059
V1_SCHEDULE_MS_PER_SEQ = 0.0056
V1_INPUT_PREP_MS_PER_SEQ = 0.0012
# SGLang's scheduler, timed the same way with its own classes (0.5.13, B = 8-1,024 requests
# decoding after 1,000-token prompts on a radix cache; benchmarks/sglang_scheduler_overhead.py,
# benchmarks/data/host-overhead.jsonl): update_running_batch's filter, decode-memory check and
# prepare_for_decode, the overlap loop's batch copy and process_batch_result_decode (each
# request's token, its finish state, the output built and pickled for the detokenizer): 6.9 us
# a request (7.1 ms a step at B = 1,024). The forward's own CPU work is not in it: a floor. Its
# overlap scheduler (event_loop_overlap, SGLANG_OVERLAP_SINCE below) runs it while the GPU runs
# the next step; --disable-overlap-schedule puts it between steps.
SGLANG_SCHEDULE_MS_PER_SEQ = 0.0069
# SGLang's overlap scheduler is on by default from 0.3.6 (server_args.py: 0.3.4 and 0.3.5 have an
# opt-in --enable-overlap-schedule, 0.3.6 --disable-overlap-schedule; 0.3.0 has neither), and
# data-parallel attention turned it off through 0.4.1 ("Overlap schedule is disabled", dropped in
# 0.4.2). Releases before, and those runs, schedule in series (at 0.5.13's measured time).
SGLANG_OVERLAP_SINCE = (0, 3, 6)
SGLANG_DP_ATTENTION_OVERLAP_SINCE = (0, 4, 2)
HOST_MS_PER_SEQ = {
    "vllm-v0": V0_SCHEDULE_MS_PER_SEQ + V0_INPUT_PREP_MS_PER_SEQ + V0_SAMPLER_MS_PER_SEQ,
    "vllm": V1_SCHEDULE_MS_PER_SEQ + V1_INPUT_PREP_MS_PER_SEQ,
    "sglang": SGLANG_SCHEDULE_MS_PER_SEQ,
}
VLLM_ASYNC_SCHEDULING_SINCE = (0, 14, 0)
# The flag itself, off by default before 0.14: --async-scheduling arrived in vLLM 0.10.0
# (SchedulerConfig.async_scheduling, "EXPERIMENTAL", vllm/config.py; its AsyncScheduler; the
# 0.9.2 wheel has no such flag), refused there with PP > 1 or speculative decoding
# (vllm/engine/arg_utils.py 0.10.0); 0.14 refuses it with PP > 1 and speculation other than
# EAGLE / MTP (vllm/config/vllm.py).
VLLM_ASYNC_SCHEDULING_FLAG_SINCE = (0, 10, 0)


# vLLM V1's API server, per token it streams, ms: decoding the engine core's output message,
# OutputProcessor (detokenizing), building and serializing the OpenAI stream chunk, and writing
# it over HTTP (uvicorn). It runs in its own process (one unless data-parallel:
# --api-server-count), beside the engine, so a step's tokens reach the clients no faster than
# it handles them. Measured on a CPU with each release's own code (AMD EPYC, Python 3.11,
# B = 32-1,024 tokens a step; benchmarks/frontend_overhead.py, benchmarks/data/
# host-overhead.jsonl): 21.9 / 22.7 / 21.4 / 29.6 us in 0.10.1 / 0.13.0 / 0.14.0 / 0.30.0
# (output processing 14.2-18.9, HTTP 6.8-10.7): 24, their mean. SGLang streams from its
# TokenizerManager (the HTTP server's process; one for all DP ranks unless
# --tokenizer-worker-num): 10.6 us a token at B = 1,024 at the start of an output
# (benchmarks/sglang_frontend_overhead.py, 0.5.13: `_handle_batch_output`, the request's
# `_wait_one_response`, the native stream's `dumps_json`) + 7.3 us of uvicorn per chunk (the
# median of the four HTTP figures above): 18. A floor: its default stream resends the whole
# output in every chunk, 15 / 21 us a token after 500 / 2,000 tokens, which this does not
# price. vLLM V0: not measured.
FRONTEND_MS_PER_TOKEN = {"vllm": 0.024, "sglang": 0.018}
# --stream-interval N sends a request's tokens N at a time after its first: vLLM 0.11.1+ (its
# OutputProcessor returns no output until N new tokens gathered, or the first, or the last:
# vllm/v1/engine/output_processor.py, 0.11.1 and 0.14.0; the flag is absent from 0.11.0's
# arg_utils.py) and
# SGLang (the scheduler sends an output where len(output_ids) % N == 1:
# managers/scheduler_output_processor_mixin.py, 0.5.4). The API server's work for a chunk then
# runs once per N tokens. Of vLLM's, the engine's message and the incremental detokenizer stay per
# token: runs of `benchmarks/frontend_overhead.py --stream-interval N` in one environment (vLLM
# 0.14.0; benchmarks/data/host-overhead.jsonl, 2026-12-05) time the output processing at 25.7 /
# 10.1 / 6.5 us a token at N = 1 / 4 / 10 (4.4 us a token + 21.3 a chunk; N = 4 then reads 9.7),
# beside 10.5 us of HTTP a chunk: 0.12 of the whole per token. That environment runs slower than
# the one FRONTEND_MS_PER_TOKEN was measured in (14.2 us at N = 1 for the same release): only the
# ratio is taken. SGLang's measured parts (the TokenizerManager's batch output, the
# response, the JSON dump, uvicorn) all run once per output message: none per token.
FRONTEND_PER_TOKEN_SHARE = {"vllm": 0.12, "sglang": 0.0}
VLLM_STREAM_INTERVAL_SINCE = (0, 11, 1)


# The benchmark client's CPU time per chunk it reads, ms. `vllm bench serve` and SGLang's
# `bench_serving` read every stream of a run in one asyncio process (aiohttp's line reader, the
# request function's JSON parse and timestamps), so a step's B chunks take B times this on the
# client, in parallel with the server; when that outlasts the step, the ITL, TPOT and duration
# it prints are its own pace. Measured with each client's own request function on a CPU (AMD
# EPYC, Python 3.11, B = 64-1,024 streams; benchmarks/client_overhead.py, benchmarks/data/
# host-overhead.jsonl): vLLM's 26-38 us per chunk (0.10.1 and 0.30.0; 32, the median); SGLang
# 0.5.13's native stream resends the whole output in every chunk, 32-50 us per chunk at the
# start of an output, 36-49 after 500 tokens and 85-116 after 2,000: 35 us + 0.033 us per token
# already generated (its `--backend sglang-oai` reads OpenAI deltas, as vLLM's does).
# Production clients are many processes: only `simulate`, which predicts what the benchmark
# prints, counts it.
# vLLM's 2024 benchmark_serving.py ("vllm-2024": planner.sim.bench.TEXT_TTFT_CLIENTS) reads
# the OpenAI stream with the same loop: vLLM's figure.
BENCH_CLIENT_MS_PER_CHUNK = {"vllm": 0.032, "sglang": 0.035, "vllm-2024": 0.032}
BENCH_CLIENT_MS_PER_GENERATED_TOKEN = {"sglang": 0.000033}


# A new request's serial CPU work before the engine sees it, ms. vLLM V1's one API server
# process accepts the connection, validates the completions body, builds the engine's request
# (Processor.process_inputs), registers its output state and sends it over ZMQ; the benchmark
# client's one asyncio process opens a connection and posts it. Measured with each one's own
# code on a CPU (AMD EPYC, Python 3.11, vLLM 0.10.1; benchmarks/request_overhead.py, benchmarks/
# data/host-overhead.jsonl): the API server's event loop 181 us at a 263-token prompt and 355
# at 2,322 beside tokenizing (0.084 us a prompt token, 159 us beside it) + 160 us of HTTP; the
# client 0.85 ms a request with a new session each (the 2024 script; SGLang's bench_serving
# opens one per request the same way) and 0.88 ms with `vllm bench serve`'s one session when a
# burst opens a connection per request: one figure for every client, 0.86, their mean. Three
# runs on the 2-core measuring machine spread 160-290 us (HTTP) and 0.85-1.41 ms (client);
# these are the recorded run's. Tokenizing (0.79 us a token here) is not counted: the server
# runs it on its own thread, in batches the Rust tokenizer spreads over cores (0.10's
# AsyncMicrobatchTokenizer). Requests sent together thus reach the scheduler most of a
# millisecond apart.
# SGLang's HTTP server and TokenizerManager share one event loop, which tokenizes in line by
# default (no --enable-dynamic-batch-tokenizer, one --tokenizer-worker-num): normalizing the
# GenerateReqInput, registering its state, tokenizing, building the TokenizedGenerateReqInput
# and pickling it to the scheduler took 408 / 339 / 423 us at a 263-token prompt and 1,991 /
# 2,896 / 2,288 at 2,322 (SGLang 0.5.13, three runs on the same machine, of which tokenizing
# 218-347 and 1,541-2,557; benchmarks/sglang_request_overhead.py): through the medians, 168 us
# + 0.913 us a prompt token, + the same 160 us of HTTP (uvicorn and FastAPI). vLLM V0's server:
# not measured (0).
API_SERVER_MS_PER_REQUEST = {"vllm": 0.159 + 0.160, "sglang": 0.168 + 0.160}
API_SERVER_MS_PER_PROMPT_TOKEN = {"vllm": 0.000084, "sglang": 0.000913}
BENCH_CLIENT_MS_PER_REQUEST = 0.86


def api_server_ms_per_request(
    engine: str, version: tuple[int, int, int] | None, v0: bool = False
) -> tuple[float, float]:
    """The API server's serial work per new request, ms, and per prompt token (zeros where not
    measured: vLLM's V0 server, a 0.8 - 0.10 release falling back to it included (`v0`), and
    engines other than vLLM and SGLang)."""
    if engine not in API_SERVER_MS_PER_REQUEST or version is None:
        return 0.0, 0.0
    if engine_key(engine, version, v0) == "vllm-v0":
        return 0.0, 0.0
    return API_SERVER_MS_PER_REQUEST[engine], API_SERVER_MS_PER_PROMPT_TOKEN[engine]


def bench_client_ms_per_chunk(client: str, mean_generated: float) -> float:
    """A benchmark client's CPU time per chunk, ms ("vllm": one token a chunk, as vllm bench
    serve reads any OpenAI stream; "sglang": sglang.bench_serving's native stream), at
    `mean_generated` tokens already generated per chunk (the run's mean)."""
    fixed = BENCH_CLIENT_MS_PER_CHUNK[client]
    return fixed + BENCH_CLIENT_MS_PER_GENERATED_TOKEN.get(client, 0.0) * mean_generated


def frontend_ms_per_token(
    engine: str, version: tuple[int, int, int] | None, stream_interval: int = 1, v0: bool = False
) -> float:
    """The API server's time per streamed token, ms (0 where not measured, V0's included; no
    release: the newest, a V1 one for vLLM), its per-chunk share once per `stream_interval`
    tokens."""
    key = engine_key(engine, version, v0)
    whole = FRONTEND_MS_PER_TOKEN.get(key, 0.0)
    share = FRONTEND_PER_TOKEN_SHARE.get(key, 0.0)
    return whole * (share + (1.0 - share) / max(1, stream_interval))


def api_server_label(engine: str) -> tuple[str, str]:
    """Whose API server streams the tokens, and the flag that runs more of them."""
    if engine == "sglang":
        return "SGLang's", "--tokenizer-worker-num"
    return "vLLM's", "--api-server-count"


def async_scheduling_default(version: tuple[int, int, int], pp: int = 1) -> bool:
    """Whether a vLLM release schedules the next step while the GPU runs this one unasked."""
    return version >= VLLM_ASYNC_SCHEDULING_SINCE and pp == 1


def schedules_beside_gpu(
    engine: str,
    version: tuple[int, int, int] | None,
    pp: int = 1,
    async_scheduling: bool | None = None,
    v0: bool = False,
) -> bool:
    """Whether the engine's scheduler runs while the GPU runs a step (vLLM: async scheduling as
    resolved, None being the release's default, or a pipeline's batch queue; V0 (`v0`, also a
    0.8 - 0.10 release that falls back to it) only under a pipeline; SGLang: its overlap
    scheduler as resolved, None being the release's default: sglang_overlap)."""
    if engine == "sglang":
        if async_scheduling is not None:
            return async_scheduling
        return sglang_overlap(version, disabled=False, dp_attention=False)
    if engine != "vllm" or version is None or pp > 1:
        return True
    if v0:
        return False
    if async_scheduling is None:
        async_scheduling = async_scheduling_default(version, pp)
    return bool(async_scheduling) and version >= VLLM_ASYNC_SCHEDULING_FLAG_SINCE


def sglang_overlap(
    version: tuple[int, int, int] | None, disabled: bool, dp_attention: bool
) -> bool:
    """Whether SGLang runs its overlap scheduler: the release's default, not turned off by
    --disable-overlap-schedule (or a setting that implies it, `disabled`) or, through 0.4.1, by
    data-parallel attention."""
    if version is None:
        return not disabled
    early_dp = dp_attention and version < SGLANG_DP_ATTENTION_OVERLAP_SINCE
    return not (disabled or version < SGLANG_OVERLAP_SINCE or early_dp)


def scheduler_ms_per_seq(
    engine: str, version: tuple[int, int, int] | None, v0: bool = False
) -> float:
    """The scheduler's measured CPU time per running request per step, ms (0 where not
    measured: engines other than vLLM and SGLang, a vLLM release not known)."""
    if engine == "sglang":
        return HOST_MS_PER_SEQ["sglang"]
    if engine != "vllm" or version is None:
        return 0.0
    return HOST_MS_PER_SEQ[engine_key(engine, version, v0)]


def host_ms_per_seq(
    engine: str,
    version: tuple[int, int, int] | None,
    pp: int = 1,
    async_scheduling: bool | None = None,
    v0: bool = False,
) -> tuple[float, float]:
    """The scheduler's CPU time per running request per step, ms, as (in series, beside the
    GPU): in series it adds to the step; beside the GPU (schedules_beside_gpu) it is hidden,
    but a step cannot finish sooner than the scheduler readies the next one. (0, 0) where it
    is not measured."""
    ms = scheduler_ms_per_seq(engine, version, v0)
    if schedules_beside_gpu(engine, version, pp, async_scheduling, v0):
        return 0.0, ms
    return ms, 0.0


def engine_key(engine: str, version: tuple[int, int, int] | None = None, v0: bool = False) -> str:
    """The ENGINE_OVERHEAD_MS entry for an engine: vLLM's V0 before 0.8, and where a release of
    0.8 - 0.10 falls back to it (`v0`: planner.core.engines.vllm.v0_fallback)."""
    if engine == "vllm" and (v0 or (version is not None and version < VLLM_V1_SINCE)):
        return "vllm-v0"
    return engine if engine in ENGINE_OVERHEAD_MS else "vllm"


# A request's trip outside the GPU, counted in its TTFT and end-to-end latency (and, in a closed
# loop, in the client's wait before its next request): the HTTP server, tokenizing the prompt,
# the hand-off to the engine and, after the first token, detokenizing and streaming it back.
# 7 ms, measured on public vLLM 0.30 runs (benchmarks/data/step-time.jsonl, silybench H100
# Qwen3-8B, 128-token prompts): TTFT p95 14.1 ms at 1 client and 24.8 at 4 against the step
# model's 6.9 and 17.8 ms of prefill. SGLang runs the same path (tokenizer, scheduler and
# detokenizer processes over ZMQ): taken as the same, an estimate.
REQUEST_PATH_MS = 7.0
