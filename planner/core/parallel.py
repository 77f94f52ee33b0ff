"""Where an engine puts its data-parallel ranks: SGLang's attention-DP groups share the GPUs of
its TP group, vLLM's --data-parallel-size ranks each have a TP group of their own; the GPUs a
deployment takes and the ranks its MoE layers span follow from that."""

from __future__ import annotations


def ranks_share_tp(engine: str) -> bool:
    """Whether the engine's data-parallel groups live inside its TP group (SGLang's
    --attn-dp-size) rather than each owning TP GPUs (vLLM --data-parallel-size)."""
    return engine == "sglang"


def deployment_gpus(engine: str, tp: int, pp: int, dp: int, attention_groups: int) -> int:
    """GPUs of one deployment of `dp` data-parallel ranks, `attention_groups` of which are
    coupled groups (1: the ranks are whole replicas, each its own TP x PP GPUs)."""
    if attention_groups > 1 and ranks_share_tp(engine):
        return tp * pp
    return tp * pp * dp


def moe_ranks(engine: str, tp: int, groups: int) -> int:
    """GPUs a deployment's MoE layers span: its TP group, times vLLM's coupled DP ranks."""
    return tp if ranks_share_tp(engine) else tp * groups


def line_max_num_seqs(seqs: int, engine: str, groups: int) -> int:
    """The launch line's max_num_seqs for `seqs` running in each of `groups` attention groups:
    SGLang's --max-running-requests is the deployment's, shared by its attention-DP groups;
    vLLM's --max-num-seqs is each rank's own."""
    return seqs * groups if ranks_share_tp(engine) else seqs


def layout_fields(engine: str, groups: int, ep: int | None) -> dict[str, object]:
    """The engine settings fields of a data-parallel / expert-parallel layout: vLLM
    data_parallel_size and --enable-expert-parallel (EP = TP x DP), SGLang attn_dp_size (its
    attention groups) and --ep-size."""
    fields: dict[str, object] = {}
    if groups > 1:
        fields["attn_dp_size" if ranks_share_tp(engine) else "data_parallel_size"] = groups
    if ep is not None and ep > 1:
        fields |= {"ep_size": ep} if ranks_share_tp(engine) else {"enable_expert_parallel": True}
    return fields


def fields_layout(engine: str, extra: dict[str, object]) -> tuple[int, bool, int | None, bool]:
    """The layout a line's engine fields state, the inverse of `layout_fields`: its
    data-parallel ranks (SGLang: attention groups, else --dp-size replicas), whether they are
    SGLang attention groups, SGLang's --ep-size, and whether vLLM's
    --enable-expert-parallel spreads the experts."""
    if ranks_share_tp(engine):
        groups = extra.get("attn_dp_size")
        dp = groups or extra.get("dp_size") or 1
        ep = extra.get("ep_size")
        return int(str(dp)), bool(groups), None if ep is None else int(str(ep)), False
    dp = extra.get("data_parallel_size") or 1
    return int(str(dp)), False, None, bool(extra.get("enable_expert_parallel"))


def deepep_wide(engine: str, moe: bool, moe_ranks: int, vendor: str) -> bool:
    """Whether the planned deployment exchanges its MoE tokens with DeepEP: SGLang's on NVIDIA
    GPUs where the MoE layers span more than one 8-GPU board (NODE_DOMAIN_GPUS: across nodes,
    or across an NVL72 rack's trays), as wide expert parallelism runs it
    (--moe-a2a-backend deepep); its default gathers every token on every rank. DeepEP is
    NVIDIA's; vLLM runs it where its line names it (--all2all-backend, as typed: the planner
    does not plan it by itself)."""
    from planner.core.step.comm import NODE_DOMAIN_GPUS  # (planner.core.step imports this)

    return engine == "sglang" and moe and moe_ranks > NODE_DOMAIN_GPUS and vendor == "nvidia"
