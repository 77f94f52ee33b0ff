"""The engines' own flags more than one command takes: which engine owns each flag and the
settings field it sets, so `simulate` and `slo` pass them alike (and refuse one under the
other engine alike)."""

from __future__ import annotations

from planner.errors import InputError

# The engines' own flags a deployment takes: (the engine, its flag, the settings field), by
# the command's parameter that holds it.
ENGINE_EXTRA_FLAGS = {
    "moe_a2a_backend": ("sglang", "--moe-a2a-backend", "moe_a2a_backend"),
    "ep_num_redundant_experts": (
        "sglang",
        "--ep-num-redundant-experts",
        "ep_num_redundant_experts",
    ),
    "enable_two_batch_overlap": (
        "sglang",
        "--enable-two-batch-overlap",
        "enable_two_batch_overlap",
    ),
    "moe_dense_tp_size": ("sglang", "--moe-dense-tp-size", "moe_dense_tp_size"),
    "enable_dp_lm_head": ("sglang", "--enable-dp-lm-head", "enable_dp_lm_head"),
    "cuda_graph_max_bs": ("sglang", "--cuda-graph-max-bs", "cuda_graph_max_bs_decode"),
    "scheduler_recv_interval": (
        "sglang",
        "--scheduler-recv-interval",
        "scheduler_recv_interval",
    ),
    "max_prefill_tokens": ("sglang", "--max-prefill-tokens", "max_prefill_tokens"),
    "max_cudagraph_capture_size": (
        "vllm",
        "--max-cudagraph-capture-size",
        "max_cudagraph_capture_size",
    ),
    "enforce_eager": ("vllm", "--enforce-eager", "enforce_eager"),
    "async_scheduling": ("vllm", "--async-scheduling", "async_scheduling"),
    "enable_prefix_caching": ("vllm", "--enable-prefix-caching", "enable_prefix_caching"),
    "disable_radix_cache": ("sglang", "--disable-radix-cache", "disable_radix_cache"),
    "disable_cuda_graph": ("sglang", "--disable-cuda-graph", "disable_cuda_graph"),
    "disable_overlap_schedule": (
        "sglang",
        "--disable-overlap-schedule",
        "disable_overlap_schedule",
    ),
    "all2all_backend": ("vllm", "--all2all-backend", "all2all_backend"),
    "enable_dbo": ("vllm", "--enable-dbo", "enable_dbo"),
    "kv_cache_memory_bytes": ("vllm", "--kv-cache-memory-bytes", "kv_cache_memory_bytes"),
    "mamba_full_memory_ratio": ("sglang", "--mamba-full-memory-ratio", "mamba_full_memory_ratio"),
    "max_mamba_cache_size": ("sglang", "--max-mamba-cache-size", "max_mamba_cache_size"),
    "mamba_radix_cache_strategy": (
        "sglang",
        "--mamba-radix-cache-strategy",
        "mamba_radix_cache_strategy",
    ),
}


# The flags a launch line over hosts carries (planner.core.serve.command_line), accepted so it
# pastes back: (the engine, its flag, the settings field it sets; None: accepted and unused,
# each host's own rank and the head host's address), by the command's parameter.
HOST_FLAGS: dict[str, tuple[str, str, str | None]] = {
    "nnodes": ("sglang", "--nnodes", "nnodes"),
    "node_rank": ("sglang", "--node-rank", None),
    "dist_init_addr": ("sglang", "--dist-init-addr", None),
    "distributed_executor_backend": (
        "vllm",
        "--distributed-executor-backend",
        "distributed_executor_backend",
    ),
    "data_parallel_size_local": (
        "vllm",
        "--data-parallel-size-local",
        "data_parallel_size_local",
    ),
    "data_parallel_address": ("vllm", "--data-parallel-address", None),
}


def host_settings(engine: str, params: dict[str, object]) -> dict[str, object]:
    """The serve settings a line over hosts states, from a command's parameters by name (its
    `locals()` or flags); one of the other engine's flags is one error naming it."""
    settings: dict[str, object] = {}
    for name, (owner, flag, field) in HOST_FLAGS.items():
        if params[name] is None:
            continue
        if engine != owner:
            which = "an SGLang" if owner == "sglang" else "a vLLM"
            raise InputError(flag, f"{which} flag (--engine {owner})")
        if field is not None:
            settings[field] = params[name]
    return settings


# The flags among them that take a --no- form (a BooleanOptionalAction: on, off, or the release's
# default when left out).
NEGATABLE = ("async_scheduling", "enable_prefix_caching")


# The MoE exchange flags (and the layout flags that go with them) `slo` and `spec` take by these
# parameter names, as capacity and simulate take them.
EXCHANGE_PARAMS = (
    "all2all_backend",
    "enable_dbo",
    "moe_a2a_backend",
    "enable_two_batch_overlap",
    "ep_num_redundant_experts",
    "moe_dense_tp_size",
    "enable_dp_lm_head",
)


def stated_exchange(params: dict[str, object]) -> dict[str, object]:
    """The exchange flags a command was given, from its parameters by name (a command's
    `locals()`): the unset ones (None, or a switch left off) left out."""
    return {k: v for k in EXCHANGE_PARAMS if (v := params[k]) is not None and v is not False}


def engine_extra(engine: str, stated: dict[str, object]) -> dict[str, object]:
    """The engine's own settings fields from the flags a command was given (`stated`: by
    parameter name, the unset ones left out); one of the other engine's flags is one error
    naming it."""
    extra: dict[str, object] = {}
    for name, value in stated.items():
        owner, flag, field = ENGINE_EXTRA_FLAGS[name]
        if value is False and name in NEGATABLE:  # typed as its --no- form
            flag = "--no-" + flag.removeprefix("--")
        if engine != owner:
            which = "an SGLang" if owner == "sglang" else "a vLLM"
            raise InputError(flag, f"{which} flag (--engine {owner})")
        extra[field] = value
    return extra
