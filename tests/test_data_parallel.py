"""Data parallelism inside one deployment: vLLM --data-parallel-size on a MoE model (experts over
TP x DP) and SGLang's data-parallel attention (attention TP = tp / attn_dp), in the engine model,
the launch line and the step model."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import MODELS, Result, bench

from planner.api import serve_report
from planner.api.bench_instance import Deployment, deployment_instance
from planner.api.bench_report import fabric_notes
from planner.core.engines.common import EnginePrediction
from planner.core.serve import ServePlan, command_line, fields_from_line
from planner.core.step import step_time_for
from planner.core.step.attention_dp import AttentionDp
from planner.core.step.comm import DEEPEP_NVLINK
from planner.core.step.moe import MoeExchange
from planner.errors import InputError
from planner.sources.models import resolve_model
from planner.sources.presets import find_gpu
from planner.units import ceil_div

Cli = Callable[..., Result]
QWEN3_MOE = str(MODELS / "Qwen--Qwen3-30B-A3B")
DEEPSEEK = str(MODELS / "deepseek-ai--DeepSeek-R1")


def _plan(
    engine: str, tp: int, extra: dict[str, object], model: str = QWEN3_MOE, **kw: object
) -> ServePlan:
    gpu = "h200" if model == DEEPSEEK else "h100"
    settings = {"engine": engine, "tp": tp, "extra": extra} | kw
    plan, _ = serve_report(
        gpu=gpu, preset=None, model=model, revision=None, gpu_memory_gib=None, settings=settings
    )
    assert plan.prediction is not None
    return plan


def _prediction(engine: str, tp: int, extra: dict[str, object], **kw: object) -> EnginePrediction:
    p = _plan(engine, tp, extra, **kw).prediction
    assert p is not None
    return p


def test_the_parts_data_parallel_attention_splits_are_counted_from_the_config() -> None:
    spec = resolve_model(None, QWEN3_MOE, None)
    # Qwen3-30B-A3B: hidden 2048, 48 layers, 128 experts of width 768, 32 query heads and 4
    # KV heads of 128. Experts: gate, up, down = 3 x 2048 x 768 per expert and layer.
    assert spec.expert_params == 3 * 2048 * 768 * 48 * 128 == 28_991_029_248
    # Attention: Q (2048 x 32 x 128), K and V (2048 x 4 x 128 each), O (32 x 128 x 2048).
    per_layer = 2048 * 32 * 128 + 2 * 2048 * 4 * 128 + 32 * 128 * 2048
    assert spec.attention_params == 48 * per_layer == 905_969_664


def test_vllm_data_parallel_spreads_only_the_experts_over_tp_x_dp() -> None:
    spec = resolve_model(None, QWEN3_MOE, None)
    one = _prediction("vllm", 1, {})
    dp4 = _prediction("vllm", 1, {"data_parallel_size": 4})
    experts = round(spec.expert_params * spec.weights_bytes / spec.params_total)
    # each DP rank keeps attention and the rest whole (TP 1) and a quarter of the experts
    assert one.weights_bytes - dp4.weights_bytes == experts - ceil_div(experts, 4)
    assert dp4.kv_cache_tokens > one.kv_cache_tokens
    assert dp4.term_sources["weights_bytes"] == "derived"
    # whole experts (EP) weigh the same as sharded ones
    ep = _prediction("vllm", 1, {"data_parallel_size": 4, "enable_expert_parallel": True})
    assert ep.weights_bytes == dp4.weights_bytes


def test_vllm_data_parallel_on_a_dense_model_is_replicas() -> None:
    llama = str(MODELS / "meta-llama--Llama-3.1-8B-Instruct")
    one = _prediction("vllm", 1, {}, model=llama)
    dp2 = _prediction("vllm", 1, {"data_parallel_size": 2}, model=llama)
    assert dp2.weights_bytes == one.weights_bytes and dp2.kv_cache_tokens == one.kv_cache_tokens


def test_sglang_dp_attention_keeps_attention_at_tp_over_attn_dp() -> None:
    spec = resolve_model(None, QWEN3_MOE, None)
    tp4 = _prediction("sglang", 4, {}, memory_fraction=0.85)
    dpa = _prediction("sglang", 4, {"attn_dp_size": 4}, memory_fraction=0.85)
    per_param = spec.weights_bytes / spec.params_total
    experts = round(spec.expert_params * per_param)
    attention = round(spec.attention_params * per_param)
    embedding = round(spec.embedding_params * per_param)
    rest = spec.weights_bytes - experts - attention - embedding
    rope = tp4.weights_bytes - ceil_div(spec.weights_bytes, 4)
    expected = ceil_div(experts, 4) + attention + ceil_div(rest, 4) + embedding + rope
    assert dpa.weights_bytes == expected
    # the KV heads are split over the attention TP group (one GPU) instead of four: each GPU
    # keeps all 4 KV heads of its own requests' tokens, 4x the bytes per token of TP 4
    assert dpa.bytes_per_block == 4 * tp4.bytes_per_block


@pytest.mark.parametrize(
    ("model", "split_since", "before"),
    [(QWEN3_MOE, "0.5.9", "0.5.8"), (DEEPSEEK, "0.5.8", "0.5.7")],
)
def test_sglang_dp_attention_splits_the_embedding_over_the_attention_group_by_release(
    model: str, split_since: str, before: str
) -> None:
    """Two attention-DP groups of attention TP 2 on 4 GPUs: the input embedding is whole on
    every GPU until the model file splits it over the attention-TP group (DeepSeek-V2 / V3
    from 0.5.8, Qwen MoE from 0.5.9); one GPU then holds half of it."""
    spec = resolve_model(None, model, None)
    tp = 8 if model == DEEPSEEK else 4
    got = {
        v: _prediction("sglang", tp, {"attn_dp_size": 2}, model=model, version=v).weights_bytes
        for v in (before, split_since)
    }
    embedding = round(spec.embedding_params * spec.weights_bytes / spec.params_total)
    assert got[before] - got[split_since] == embedding - ceil_div(embedding, tp // 2)


def test_sglang_dp_attention_line_by_release_and_its_running_cap() -> None:
    new = _plan("sglang", 8, {"attn_dp_size": 8}, model=DEEPSEEK)
    old = _plan("sglang", 8, {"attn_dp_size": 8}, model=DEEPSEEK, version="0.5.2")
    assert "--attn-dp-size 8" in new.command and "--enable-dp-attention" not in new.command
    assert "--dp-size 8 --enable-dp-attention" in old.command
    assert "--attn-dp-size" not in old.command
    for plan in (new, old):
        p = plan.prediction
        assert p is not None
        per_group = int(str(p.settings["max_running_requests"]))
        # the flag is the deployment's; each of the 8 groups runs its eighth
        assert f"--max-running-requests {per_group * 8}" in plan.command
        # pasted back, the line is the same deployment
        fields = fields_from_line("sglang", plan.command)
        assert fields["attn_dp_size"] == 8 and "dp_size" not in fields


def test_sglang_dp_attention_must_divide_tp() -> None:
    with pytest.raises(InputError, match="divide the TP size"):
        _plan("sglang", 4, {"attn_dp_size": 3})


def test_sglang_dp_attention_at_one_group_is_plain_tp_in_simulate_as_in_capacity(cli: Cli) -> None:
    """SGLang turns --enable-dp-attention off at --dp-size 1 (server_args.py 0.5.2-0.5.10,
    arg_groups/overrides.py 0.5.15; attn_dp_size > 1 from 0.5.23): simulate runs plain TP and
    capacity plans it, neither printing the flag, rather than one refusing what the other
    plans."""
    where = ["--model", DEEPSEEK, "--gpu", "h200", "--engine", "sglang", "--tp", "8", "--json"]
    run = ["simulate", *where, "--concurrency", "4", "--prompt-len", "100", "--output-len", "10"]
    run += ["--requests", "8"]
    flagged = cli(*run, "--dp", "1", "--enable-dp-attention").json()
    plain = cli(*run).json()
    assert flagged["median_tpot_ms"] == plain["median_tpot_ms"]
    assert flagged["deployment"]["command"] == plain["deployment"]["command"]
    assert "--enable-dp-attention" not in plain["deployment"]["command"]
    capacity = cli("capacity", *where, "--dp", "1", "--enable-dp-attention").json()
    line = capacity["flags"]["sglang"]
    assert "--tp-size 8" in line and "--enable-dp-attention" not in line
    assert (
        capacity["engine"]["kv_cache_tokens"]
        == cli("capacity", *where).json()["engine"]["kv_cache_tokens"]
    )


def test_vllm_data_parallel_line_round_trips() -> None:
    spec = resolve_model(None, QWEN3_MOE, None)
    fields = {"tensor_parallel_size": 2, "data_parallel_size": 4, "enable_expert_parallel": True}
    line = command_line(spec, "vllm", fields)
    assert "--data-parallel-size 4" in line and "--enable-expert-parallel" in line
    assert fields_from_line("vllm", line) == fields


def test_step_model_attention_dp_routes_every_groups_tokens() -> None:
    spec = resolve_model(None, DEEPSEEK, None)
    gpu = find_gpu("h200")
    tp8 = step_time_for(spec, gpu, tp=8, engine="sglang")
    dpa = step_time_for(spec, gpu, tp=1, dp=AttentionDp(groups=8), engine="sglang")
    # 8 groups of 4 sequences route 32 tokens to the experts: as many experts as TP 8 at 32
    assert dpa.experts_read(4) * 1.0 == pytest.approx(tp8.experts_read(4))
    assert dpa.expert_weights_bytes(4) == pytest.approx(tp8.expert_weights_bytes(32), rel=1e-6)
    # each GPU reads only its group's KV (the MLA latent is whole under TP 8 too)
    assert dpa.terms(4, 2000).kv_read_bytes == tp8.terms(4, 2000).kv_read_bytes
    assert dpa.terms(4, 2000).kv_read_bytes * 8 == tp8.terms(32, 2000).kv_read_bytes
    # the MoE layers gather over 8 GPUs even with attention on one
    assert dpa.allreduce_ms(4) > 0
    # attention is whole on every GPU: more dense weights per GPU than TP 8
    assert dpa.dense_weights_bytes > tp8.dense_weights_bytes


def test_a_prefill_on_one_attention_group_meets_the_others_decode_tokens() -> None:
    """One group prefills 8,192 tokens while the 7 others decode 16 sequences each: the MoE
    layers meet 8,192 + 112 tokens, not 8 x 8,192, and each GPU's experts multiply an eighth
    of them. SGLang runs the dense FFNs and shared experts on the gathered batch too; vLLM's
    DP ranks keep them with their own attention."""
    spec = resolve_model(None, DEEPSEEK, None)
    dpa = step_time_for(spec, find_gpu("h200"), tp=1, dp=AttentionDp(groups=8), engine="sglang")
    prompt, others = 8192, 7 * 16
    assert dpa.gathered(prompt, others) == 8304 and dpa.gathered(prompt) == 8 * prompt
    assert dpa.experts_routed(prompt, others) == dpa.experts_read(8304)
    body, experts, head = dpa.linear_parts(prompt)
    body_alone, experts_alone, head_alone = dpa.linear_parts(prompt, others=others)
    assert head_alone == head
    # DeepSeek-R1's 3 dense FFNs, 58 shared experts and routers: 3.85 B of the 37.6 B active
    # parameters; MLA's 11.4 B stay with the group's attention
    assert dpa.gathered_params_per_gpu == pytest.approx(3.85e9, rel=1e-3)
    assert body * 0.7 < body_alone < body
    vllm = step_time_for(spec, find_gpu("h200"), tp=1, dp=AttentionDp(groups=8), engine="vllm")
    assert vllm.gathered_params_per_gpu == 0
    assert vllm.linear_parts(prompt, others=others)[0] == vllm.linear_parts(prompt)[0]
    # at 8,304 tokens every expert is read: the multiply shrinks from 8,192 tokens a GPU to
    # 8,304 / 8, and the grouped GEMMs stay compute-bound (their weight stream is below it)
    assert experts_alone < experts / 4
    assert dpa.allreduce_ms(prompt, others) < dpa.allreduce_ms(prompt)
    pairs = prompt * (prompt + 1) / 2
    alone = dpa.mixed_ms(0, 0, prompt, pairs, others=others)
    assert alone < dpa.mixed_ms(0, 0, prompt, pairs)
    # the others prefilling as much is the symmetric step
    assert dpa.mixed_ms(0, 0, prompt, pairs, others=7 * prompt) == dpa.mixed_ms(0, 0, prompt, pairs)
    # without attention DP `others` means nothing
    tp8 = step_time_for(spec, find_gpu("h200"), tp=8, engine="sglang")
    assert tp8.mixed_ms(0, 0, prompt, pairs, others=others) == tp8.mixed_ms(0, 0, prompt, pairs)


def _simulate(cli: Cli, model: str, gpu: str, *args: str) -> dict[str, Any]:
    r = cli(
        "simulate", "--model", model, "--gpu", gpu, "--concurrency", "64",
        "--prompt-len", "1000", "--output-len", "200", "--requests", "256", "--json", *args,
    )  # fmt: skip
    assert r.code == 0, r.err
    data: dict[str, Any] = r.json()
    return data


def test_simulate_sglang_dp_attention_runs_on_the_tp_gpus(cli: Cli) -> None:
    tp8 = _simulate(cli, DEEPSEEK, "h200", "--engine", "sglang", "--tp", "8")
    dpa = _simulate(cli, DEEPSEEK, "h200", "--engine", "sglang", "--tp", "8", "--dp", "8",
                    "--dp-attention")  # fmt: skip
    assert dpa["gpus"] == tp8["gpus"] == 8
    d = dpa["deployment"]
    assert d["dp_attention"] and "--attn-dp-size 8" in d["command"]
    # as launched each group runs the cap SGLang computes for it; the flag is the deployment's
    assert d["max_num_seqs"] == tp8["deployment"]["max_num_seqs"] == 4096
    assert f"--max-running-requests {8 * 4096}" in d["command"]
    # eight groups, each with its own pool: more KV than TP 8's one (MLA whole on every GPU)
    assert 8 * d["kv_cache_tokens"] > tp8["deployment"]["kv_cache_tokens"]
    assert dpa["completed"] == 256
    # one sequence: every GPU reads the whole attention (TP 8 reads an eighth), a slower step
    assert dpa["step_ms"]["1"] > tp8["step_ms"]["1"]


def _closed_loop(cli: Cli, model: str, clients: int, *args: str) -> dict[str, Any]:
    r = cli(
        "simulate", "--model", model, "--gpu", "h200", "--engine", "sglang", "--tp", "8",
        "--concurrency", str(clients), "--prompt-len", "1000", "--output-len", "100",
        "--requests", str(4 * clients), "--json", *args,
    )  # fmt: skip
    assert r.code == 0, r.err
    data: dict[str, Any] = r.json()
    return data


def test_fewer_clients_than_attention_groups_leave_groups_idle(cli: Cli) -> None:
    """SGLang hands a closed loop's clients round-robin: 1 or 4 clients over 8 groups leave
    groups idle, whose MoE layers bring no tokens (their zero rows route as one), so the step
    grows with the clients instead of pricing every group as loaded as the busiest."""
    dpa = ("--dp", "8", "--dp-attention")
    runs = {n: _closed_loop(cli, DEEPSEEK, n, *dpa) for n in (1, 4, 8)}
    tpot = [runs[n]["median_tpot_ms"] for n in (1, 4, 8)]
    assert tpot[0] < tpot[1] < tpot[2]
    assert all(runs[n]["peak_running_seqs"] == 1 for n in (1, 4, 8))
    (idle,) = [n for n in runs[4]["notes"] if "step together" in n]
    assert "0.43 as loaded each (the closed loop's clients leave ranks idle" in idle
    assert "zero rows route as one token" in idle
    (loaded,) = [n for n in runs[8]["notes"] if "step together" in n]
    assert "others, as loaded," in loaded
    # DeepEP dispatches no rows for an idle group
    deepep = _closed_loop(cli, DEEPSEEK, 4, *dpa, "--moe-a2a-backend", "deepep")
    (note,) = [n for n in deepep["notes"] if "step together" in n]
    assert "0.43 as loaded each" in note and "zero rows" not in note
    (alone,) = [n for n in runs[1]["notes"] if "step together" in n]
    assert "the others, idle (the closed loop's clients leave ranks idle" in alone
    # one client on DP attention: its GPU reads the whole attention, TP 8 an eighth of it
    assert tpot[0] > _closed_loop(cli, DEEPSEEK, 1)["median_tpot_ms"]


def test_an_open_loop_prices_the_other_groups_at_their_mean_occupancy(cli: Cli) -> None:
    """Poisson arrivals over 8 attention-DP groups: each group fills apart from the simulated
    one, so its MoE layers meet the others' mean occupancy, not the simulated group's count of
    the moment mirrored seven times. At 0.25 requests a second of 1,000 / 100 tokens about 0.4
    requests are in flight over the 8 groups: a decode step is close to one client's alone
    (the zero rows of idle groups route as one token), well below eight clients' (every group
    one), which mirroring the running group's one request gave."""
    r = cli(
        "simulate", "--model", DEEPSEEK, "--gpu", "h200", "--engine", "sglang", "--tp", "8",
        "--dp", "8", "--dp-attention", "--rate", "0.25", "--prompt-len", "1000",
        "--output-len", "100", "--requests", "60", "--seed", "1", "--json",
    )  # fmt: skip
    assert r.code == 0, r.err
    sparse: dict[str, Any] = r.json()
    one, eight = (_closed_loop(cli, DEEPSEEK, n, "--dp", "8", "--dp-attention") for n in (1, 8))
    assert sparse["median_tpot_ms"] == pytest.approx(one["median_tpot_ms"], rel=0.05)
    assert sparse["median_tpot_ms"] < 0.9 * eight["median_tpot_ms"]
    (note,) = [n for n in sparse["notes"] if "step together" in n]
    assert "as loaded on average" in note and "not the simulated one's count of the moment" in note


def test_vllm_idle_dp_ranks_by_model_runner(cli: Cli) -> None:
    """vLLM's idle DP ranks run dummy batches padded to the busiest rank's tokens. Model
    runner V2 (the default from 0.30) zeroes their ids, which route as one token: the decode
    step grows with the clients. The V1 runner leaves stale ids, routed as real tokens: the
    decode step stays the symmetric one, while from 0.17 a prefill is not padded (its TTFT
    grows with the clients); through 0.16 a prefill is padded too."""

    def run(version: str, clients: int) -> dict[str, Any]:
        r = cli(
            "simulate", "--model", DEEPSEEK, "--gpu", "h200", "--tp", "1", "--dp", "8",
            "--ep", "8", "--engine-version", version, "--concurrency", str(clients),
            "--prompt-len", "1000", "--output-len", "100", "--requests", str(4 * clients),
            "--json",
        )  # fmt: skip
        assert r.code == 0, r.err
        data: dict[str, Any] = r.json()
        return data

    def tpot_ttft(version: str) -> list[tuple[float, float]]:
        runs = [run(version, clients) for clients in (1, 4, 8)]
        return [(d["median_tpot_ms"], d["median_ttft_ms"]) for d in runs]

    v2, v1, padded = tpot_ttft("0.34"), tpot_ttft("0.20"), tpot_ttft("0.16")
    assert v2[0][0] < v2[1][0] < v2[2][0]
    assert v1[0][0] == pytest.approx(v1[2][0]) and v1[0][1] < v1[1][1] < v1[2][1]
    assert padded[0] == pytest.approx(padded[2])
    assert v2[2] == pytest.approx(v1[2])  # as loaded (8 clients over 8 ranks): the same


def test_attention_groups_sglang_turns_on_by_itself_share_the_clients(cli: Cli) -> None:
    """SGLang 0.5.4 runs DeepSeek-V3.2's sparse attention with --dp-size TP by itself: the
    clients spread over its 8 groups as they do under the flag (8 each of 64), not all 64 on
    one group beside seven as loaded."""
    v32 = str(MODELS / "deepseek-ai--DeepSeek-V3.2")
    own = _closed_loop(cli, v32, 64, "--engine-version", "0.5.4")
    flag = _closed_loop(cli, v32, 64, "--engine-version", "0.5.4", "--dp", "8", "--dp-attention")
    assert own["deployment"]["dp_attention"] and own["gpus"] == flag["gpus"] == 8
    assert own["peak_running_seqs"] == flag["peak_running_seqs"] == 8
    assert own["median_tpot_ms"] == pytest.approx(flag["median_tpot_ms"])
    assert own["median_ttft_ms"] == pytest.approx(flag["median_ttft_ms"])


def test_simulate_vllm_dp_on_moe_spreads_the_experts_and_prints_the_flag(cli: Cli) -> None:
    one = _simulate(cli, QWEN3_MOE, "h100", "--tp", "1")
    dp4 = _simulate(cli, QWEN3_MOE, "h100", "--tp", "1", "--dp", "4", "--ep", "4")
    assert dp4["gpus"] == 4
    command = dp4["deployment"]["command"]
    assert "--data-parallel-size 4" in command and "--enable-expert-parallel" in command
    # a quarter of the experts per GPU leaves each rank more KV than a whole replica's
    assert dp4["deployment"]["kv_cache_tokens"] > one["deployment"]["kv_cache_tokens"]
    # before the V1 engine (0.8) DP ranks were separate servers: whole replicas, no flag
    # (DeepSeek-V2-Lite: a MoE model 0.6.3 serves; its registry lists Qwen3-MoE from 0.8.4)
    lite = str(MODELS / "deepseek-ai--DeepSeek-V2-Lite")
    new = _simulate(cli, lite, "h100", "--tp", "1", "--dp", "4", "--ep", "4")
    old = _simulate(cli, lite, "h100", "--tp", "1", "--dp", "4", "--engine-version", "0.6.3")
    assert "--data-parallel-size" not in old["deployment"]["command"]
    assert "--data-parallel-size 4" in new["deployment"]["command"]
    assert old["deployment"]["kv_cache_tokens"] < new["deployment"]["kv_cache_tokens"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--model", DEEPSEEK, "--gpu", "h200", "--tp", "8", "--dp", "8", "--dp-attention"),
         "is SGLang's"),
        (("--model", DEEPSEEK, "--gpu", "h200", "--engine", "sglang", "--tp", "8", "--dp", "3",
          "--dp-attention"), "divide the TP size 8"),
        (("--preset", "llama-3.1-8b", "--gpu", "h100", "--engine", "sglang", "--tp", "2", "--dp",
          "2", "--dp-attention"), "MoE models"),
    ],
)  # fmt: skip
def test_simulate_refuses_dp_attention_it_cannot_pose(
    cli: Cli, args: tuple[str, ...], needle: str
) -> None:
    r = cli("simulate", *args, "--concurrency", "4", "--prompt-len", "100", "--output-len", "10")
    assert r.code == 2 and "--dp-attention" in r.err and needle in r.err


def test_a_run_of_lockstep_ranks_says_what_it_leaves_out(cli: Cli) -> None:
    """Attention-DP groups step together: the run says how the other groups' prefills are
    priced in this group's steps; a plain TP run of the same model has no such note."""
    tp8 = _simulate(cli, DEEPSEEK, "h200", "--engine", "sglang", "--tp", "8")
    dpa = _simulate(cli, DEEPSEEK, "h200", "--engine", "sglang", "--tp", "8", "--dp", "8",
                    "--dp-attention")  # fmt: skip
    assert not any("step together" in n for n in tp8["notes"])
    (note,) = [n for n in dpa["notes"] if "step together" in n]
    assert note.startswith("the 8 attention-DP groups") and "at its steady rate" in note


def test_disaggregated_pools_take_sglang_dp_attention(cli: Cli) -> None:
    base = ("--engine", "sglang", "--disagg", "1P1D", "--tp", "8", "--decode-ep", "8")
    plain = _simulate(cli, DEEPSEEK, "h200", *base)
    dpa = _simulate(cli, DEEPSEEK, "h200", *base, "--decode-dp", "8")
    assert dpa["gpus"] == plain["gpus"] == 16
    decode = dpa["deployment"]["disagg"]["decode"]
    assert decode["dp"] == 8 and "--attn-dp-size 8" in decode["command"]
    assert dpa["deployment"]["disagg"]["prefill"]["dp"] == 1
    # eight decode schedulers, each with its own pool, hold more of the 64 clients' KV at once
    assert (
        8 * decode["kv_cache_tokens"] > plain["deployment"]["disagg"]["decode"]["kv_cache_tokens"]
    )


def test_a_disaggregated_decode_pool_of_fewer_clients_than_groups_leaves_groups_idle(
    cli: Cli,
) -> None:
    """The decode pool's attention-DP groups meet in the MoE layers as an aggregated
    instance's do: 1 or 4 clients over 8 leave groups idle, so the decode step grows with the
    clients."""
    pd = ("--disagg", "1P1D", "--decode-dp", "8", "--decode-ep", "8")
    runs = {n: _closed_loop(cli, DEEPSEEK, n, *pd) for n in (1, 4, 8)}
    tpot = [runs[n]["median_tpot_ms"] for n in (1, 4, 8)]
    assert tpot[0] < tpot[1] < tpot[2]
    (idle,) = [n for n in runs[4]["notes"] if "attention-DP groups" in n]
    assert idle.startswith("decode pool: 4 clients over 8 attention-DP groups")
    assert "the others, 0.43 as loaded each" in idle
    # EP without an all-to-all backend gathers the groups' rows, an idle one's as zeros
    assert "zero rows route as one token" in idle
    assert not any("attention-DP groups" in n for n in runs[8]["notes"])


def test_an_open_loops_decode_groups_meet_what_the_arrival_rate_leaves_in_the_others(
    cli: Cli,
) -> None:
    """Under Poisson arrivals a disaggregated decode pool's attention-DP groups fill apart, as
    an aggregated instance's do: at 0.5 requests a second of 1,000 / 100 tokens about one
    request is in flight over the 8 groups, so a decode step is near one client's (the idle
    groups' zero rows route as one token), well below eight clients' (every group one), which
    pricing the others as loaded as the simulated group at the moment gave. Sent nearly at
    once, the 60 requests load every group past eight clients' one each."""

    def at_rate(rate: str) -> dict[str, Any]:
        r = cli(
            "simulate", "--model", DEEPSEEK, "--gpu", "h200", "--engine", "sglang", "--tp", "8",
            "--disagg", "1P1D", "--decode-dp", "8", "--decode-ep", "8", "--rate", rate,
            "--prompt-len", "1000", "--output-len", "100", "--requests", "60", "--seed", "1",
            "--json",
        )  # fmt: skip
        assert r.code == 0, r.err
        data: dict[str, Any] = r.json()
        return data

    sparse = at_rate("0.5")
    pd = ("--disagg", "1P1D", "--decode-dp", "8", "--decode-ep", "8")
    one, eight = (_closed_loop(cli, DEEPSEEK, n, *pd) for n in (1, 8))
    assert sparse["median_tpot_ms"] == pytest.approx(one["median_tpot_ms"], rel=0.1)
    assert sparse["median_tpot_ms"] < 0.9 * eight["median_tpot_ms"]
    (note,) = [n for n in sparse["notes"] if n.startswith("decode pool: an instance's 8")]
    assert "as loaded on average" in note and "zero rows route as one token" in note
    assert at_rate("1000")["median_tpot_ms"] > eight["median_tpot_ms"]


def test_disaggregated_vllm_pools_take_data_parallel_ranks(cli: Cli) -> None:
    # vLLM: each DP rank of a decode instance has TP GPUs of its own, the experts span them all
    base = ("--disagg", "1P1D", "--tp", "8", "--prefill-tp", "8", "--decode-tp", "1")
    dp = _simulate(cli, DEEPSEEK, "h200", *base, "--decode-dp", "8", "--decode-ep", "8")
    assert dp["gpus"] == 8 + 8
    decode = dp["deployment"]["disagg"]["decode"]
    assert decode["dp"] == 8 and "--data-parallel-size 8" in decode["command"]
    assert "--enable-expert-parallel" in decode["command"]
    # a pool's EP spans its MoE ranks: 8 here, not the decode TP of 1
    r = cli(
        "simulate", "--model", DEEPSEEK, "--gpu", "h200", *base, "--decode-dp", "8",
        "--decode-ep", "4", "--concurrency", "4", "--prompt-len", "100", "--output-len", "10",
    )  # fmt: skip
    assert r.code == 2 and "--decode-ep" in r.err and "(1 or 8)" in r.err


def _flags(line: str) -> list[str]:
    """The flags of a printed launch line, without the entry point and the model."""
    words = line.split()
    if words[:2] == ["vllm", "serve"]:
        return words[3:]
    return words[words.index("--model-path") + 2 :]


@pytest.mark.parametrize(
    ("engine", "version", "layout"),
    [
        ("vllm", "0.33.0", ("--tp", "2", "--dp", "4", "--enable-expert-parallel")),
        ("sglang", "0.5.23", ("--tp", "8", "--dp", "8", "--dp-attention", "--ep-size", "8")),
        ("sglang", "0.5.2", ("--tp", "8", "--dp", "4", "--dp-attention")),
    ],
)
def test_data_parallel_lines_paste_back_and_pass_drift(
    cli: Cli, engine: str, version: str, layout: tuple[str, ...], tmp_path: Path
) -> None:
    lock = tmp_path / "plan.yaml"
    where = ("--model", DEEPSEEK, "--gpu", "h200", "--engine", engine, "--json")
    where += ("--engine-version", version)
    first = cli("capacity", *where, *layout, "--save", str(lock))
    assert first.code == 0, first.err
    line = first.json()["flags"][engine]
    again = cli("capacity", *where, *_flags(line))
    assert again.code == 0, again.err
    assert again.json()["flags"][engine] == line
    drift = cli("drift", str(lock), "--against-args", line, "--json")
    assert drift.code == 0, drift.out


def test_vllm_v0_releases_have_no_data_parallel_ranks_in_one_server(cli: Cli) -> None:
    r = cli("capacity", "--preset", "llama-3.1-8b", "--gpu", "h100", "--dp", "2",
            "--engine-version", "0.6.3")  # fmt: skip
    assert r.code == 2 and "--dp" in r.err and "V0" in r.err
    ok = cli("capacity", "--preset", "llama-3.1-8b", "--gpu", "h100", "--dp", "2", "--json")
    assert ok.code == 0 and "--data-parallel-size 2" in ok.json()["flags"]["vllm"]


@pytest.mark.parametrize("model", ["Qwen--Qwen3-30B-A3B", "deepseek-ai--DeepSeek-V2-Lite"])
@pytest.mark.parametrize("tp", [1, 2])
def test_more_data_parallel_ranks_never_shrink_a_ranks_kv_cache(model: str, tp: int) -> None:
    """Each added DP rank takes a share of the experts off every rank: less weight per GPU,
    never a smaller KV cache (the fused-MoE workspace narrows with the MoE ranks too)."""
    path = str(MODELS / model)
    got = []
    for dp in (1, 2, 4, 8):
        extra = {"data_parallel_size": dp} if dp > 1 else {}
        p = _plan("vllm", tp, extra, model=path).prediction
        assert p is not None
        got.append((p.weights_bytes, p.kv_cache_tokens))
    weights, tokens = zip(*got, strict=True)
    assert list(weights) == sorted(weights, reverse=True) and len(set(weights)) == 4
    assert list(tokens) == sorted(tokens)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_littles_law_holds_for_a_data_parallel_deployment(engine: str) -> None:
    """64 clients over 8 data-parallel groups: clients in the system = throughput x mean
    end-to-end latency, as for one engine."""
    from planner.api.bench_load import Lengths, Load

    n = 64
    got = bench(
        gpu="h200",
        preset=None,
        model=DEEPSEEK,
        settings={"engine": engine, "tp": 8 if engine == "sglang" else 1},
        dp=8,
        ep=8,
        dp_attention=engine == "sglang",
        load=Load(concurrency=n, requests=20 * n),
        lengths=Lengths(prompt_len=500, output_len=100),
    )
    in_system = got["request_throughput"] * got["mean_e2el_ms"] / 1000.0
    assert in_system == pytest.approx(n, rel=0.02)


def test_capacity_and_simulate_plan_one_pool_for_dp_attention(cli: Cli) -> None:
    layout = ("--engine", "sglang", "--tp", "8", "--dp", "8", "--dp-attention")
    where = ("--model", DEEPSEEK, "--gpu", "h200", *layout)
    plan = cli("capacity", *where, "--json")
    assert plan.code == 0, plan.err
    sim = cli("simulate", *where, "--concurrency", "8", "--prompt-len", "500",
              "--output-len", "20", "--requests", "32", "--json")  # fmt: skip
    assert sim.code == 0, sim.err
    capacity_tokens = plan.json()["engine"]["kv_cache_tokens"]
    assert sim.json()["deployment"]["kv_cache_tokens"] == capacity_tokens
    assert plan.json()["settings"]["data_parallel_ranks"] == 8


def test_sglang_moe_across_nodes_plans_deepep_and_prices_its_all_to_all() -> None:
    """SGLang's MoE layers on 16 H200s span two 8-GPU boards: the plan runs DeepEP
    (--moe-a2a-backend deepep; --enable-deepep-moe before 0.5), which moves each token to its
    experts' ranks over the NIC instead of gathering every token on every rank; on one board
    the line leaves the default."""
    wide = _plan("sglang", 16, {"attn_dp_size": 16}, model=DEEPSEEK)
    assert "--moe-a2a-backend deepep" in wide.command
    old = _plan("sglang", 16, {"attn_dp_size": 16}, model=DEEPSEEK, version="0.4.9")
    assert "--enable-deepep-moe" in old.command and "--moe-a2a-backend" not in old.command
    one_board = _plan("sglang", 8, {"attn_dp_size": 8}, model=DEEPSEEK)
    assert "deepep" not in one_board.command
    # pasted back, both lines are the same deployment
    for plan in (wide, old):
        assert fields_from_line("sglang", plan.command)["moe_a2a_backend"] == "deepep"
    spec = resolve_model(None, DEEPSEEK, None)
    h200 = find_gpu("h200")
    sglang = step_time_for(spec, h200, tp=1, dp=AttentionDp(groups=16), engine="sglang")
    vllm = step_time_for(spec, h200, tp=1, dp=AttentionDp(groups=16), engine="vllm")
    assert sglang.moe_all_to_all and not vllm.moe_all_to_all
    # 64 tokens a rank: DeepEP sends 8 expert copies of each over the rank's own NIC; the
    # gather brings every rank's tokens to every rank, but its NCCL rings cross between the
    # nodes once on every rail and forward over NVLink, so at 16 ranks it is the cheaper one;
    # it grows with the ranks, and at 64 DeepEP's exchange costs about half of it
    assert 0 < vllm.collectives_ms(64) < sglang.collectives_ms(64)
    deepep, gather = (
        step_time_for(spec, h200, tp=1, dp=AttentionDp(groups=64), engine=engine).collectives_ms(64)
        for engine in ("sglang", "vllm")
    )
    assert 0 < deepep < gather * 0.55
    assert vllm.all_to_all_ms(64) == 0
    # DeepEP's share is its own term: 58 MoE layers of DeepSeek-R1 (3 dense ones still gather)
    per_layer = sglang.all_to_all_ms(64) / 58
    assert per_layer == pytest.approx(64 * 8 * 7168 * (1 + 4 / 128 + 2) / 50e9 * 1e3)
    terms = sglang.terms(64, 2000)
    assert terms.all_to_all_ms == sglang.all_to_all_ms(64) > 0


def test_slo_json_names_the_deepep_term(cli: Cli) -> None:
    r = cli(
        "slo", "--tpot", "100", "--model", DEEPSEEK, "--gpu", "h200", "--tp", "16", "--dp", "16",
        "--dp-attention", "--engine", "sglang", "--batch", "64", "--json",
    )  # fmt: skip
    assert r.code == 0, r.err
    terms = r.json()["terms_at"]["64"]
    assert terms["all_to_all_ms"] > 0 and terms["allreduce_ms"] > 0


def test_sglang_refuses_an_expert_split_with_a_remainder(cli: Cli) -> None:
    """SGLang asserts its experts divide evenly over the expert-parallel ranks (DeepEP sets
    them to the TP size): DeepSeek-R1's 256 experts over 72 ranks are refused, over 64 run."""
    base = ("simulate", "--model", DEEPSEEK, "--gpu", "h100", "--engine", "sglang",
            "--mem-fraction-static", "0.8", "--concurrency", "64", "--prompt-len", "200",
            "--output-len", "10", "--requests", "64", "--json")  # fmt: skip
    refused = cli(*base, "--tp", "72", "--dp", "72", "--dp-attention")
    assert refused.code == 2 and refused.json()["field"] == "--tp"
    assert "256 experts" in refused.json()["error"]
    ran = cli(*base, "--tp", "64", "--dp", "64", "--dp-attention")
    assert ran.code == 0, ran.out


def test_wide_expert_parallelism_inside_an_nvl72_rack_and_on_amd() -> None:
    """Past one 8-GPU board SGLang runs DeepEP on NVIDIA: inside a GB200 NVL72 rack over
    NVLink at the costs NVIDIA's tables give its kernels there (no NIC), across H200 nodes
    over the NIC. DeepEP is NVIDIA's: SGLang on MI300X nodes keeps its default gather over
    the NIC."""
    spec = resolve_model(None, DEEPSEEK, None)
    per_value = 1 + 4 / 128 + 2
    rack = step_time_for(spec, find_gpu("gb200"), tp=1, dp=AttentionDp(groups=16), engine="sglang")
    nodes = step_time_for(spec, find_gpu("h200"), tp=1, dp=AttentionDp(groups=16), engine="sglang")
    assert rack.moe_all_to_all and nodes.moe_all_to_all
    # DeepEP is expert parallelism: each of the 16 ranks holds 16 whole experts
    assert nodes.experts_per_gpu == 16
    # inside the rack a decode step's 64 tokens a rank: the low-latency kernels' fixed time
    # and their bytes at their share of NVLink 5's 900 GB/s a direction, in each MoE layer
    own = DEEPEP_NVLINK.low_latency
    rack_bytes_ms = 64 * 8 * 7168 * per_value / (900e9 * own.link_share) * 1e3
    assert rack.all_to_all_ms(64) == pytest.approx(58 * (own.fixed_ms + rack_bytes_ms))
    assert nodes.all_to_all_ms(64) == pytest.approx(58 * 64 * 8 * 7168 * per_value / 50e9 * 1e3)
    amd = step_time_for(spec, find_gpu("mi300x"), tp=1, dp=AttentionDp(groups=16), engine="sglang")
    assert not amd.moe_all_to_all and amd.all_to_all_ms(64) == 0
    one_board = step_time_for(
        spec, find_gpu("gb200"), tp=1, dp=AttentionDp(groups=8), engine="sglang"
    )
    assert not one_board.moe_all_to_all


def test_redundant_experts_let_sglang_spread_experts_over_72_ranks(cli: Cli) -> None:
    """SGLang's wide-EP deployments add redundant experts so (E + R) divides the EP ranks:
    256 + 32 over 72. Each rank holds R / EP more experts, whose weights come off its KV pool;
    the line carries the flag and pastes back as the same deployment."""
    spec = resolve_model(None, DEEPSEEK, None)

    def plan(tp: int, redundant: int) -> EnginePrediction:
        extra: dict[str, object] = {"attn_dp_size": tp}
        if redundant:
            extra["ep_num_redundant_experts"] = redundant
        settings = {"engine": "sglang", "tp": tp, "memory_fraction": 0.8, "extra": extra}
        made, _ = serve_report(
            gpu="h100", preset=None, model=DEEPSEEK, revision=None, gpu_memory_gib=None,
            settings=settings,
        )  # fmt: skip
        assert made.prediction is not None
        if redundant:
            assert f"--ep-num-redundant-experts {redundant}" in made.command
            assert fields_from_line("sglang", made.command)["ep_num_redundant_experts"] == redundant
        return made.prediction

    assert plan(72, 32).kv_cache_tokens > 0
    # 64 redundant experts over 64 ranks: one more expert a rank, at the checkpoint's bytes
    fp8_expert = spec.expert_params / 256 * spec.weights_bytes / spec.params_total
    extra = plan(64, 64).weights_bytes - plan(64, 0).weights_bytes
    assert extra == ceil_div(round(64 * fp8_expert), 64)
    base = ("simulate", "--model", DEEPSEEK, "--gpu", "h100", "--engine", "sglang", "--tp", "72",
            "--dp", "72", "--dp-attention", "--mem-fraction-static", "0.8", "--concurrency",
            "144", "--prompt-len", "200", "--output-len", "10", "--requests", "144",
            "--json")  # fmt: skip
    assert cli(*base, "--ep-num-redundant-experts", "32").code == 0
    refused = cli(*base)  # 256 experts do not divide 72 ranks
    assert refused.code == 2 and refused.json()["field"] == "--tp"
    bad = cli(*base, "--ep-num-redundant-experts", "30")
    assert bad.code == 2 and bad.json()["field"] == "--ep-num-redundant-experts"


def test_two_batch_overlap_hides_the_all_to_all_under_the_other_halfs_work(cli: Cli) -> None:
    """SGLang's --enable-two-batch-overlap runs a batch as two halves: each launches every
    kernel, and one half's DeepEP dispatch and combine run under the other's linear layers
    and attention. It needs an all-to-all backend (SGLang refuses it with none)."""
    spec = resolve_model(None, DEEPSEEK, None)
    plain = step_time_for(spec, find_gpu("h200"), tp=1, dp=AttentionDp(groups=16), engine="sglang")
    tbo = plain.model_copy(update={"overlap_all_to_all": True})
    a, b = plain.terms(64, 2000), tbo.terms(64, 2000)
    work = a.linear_ms + a.attention_ms
    assert b.kernels_ms == pytest.approx(2 * a.kernels_ms)
    assert b.all_to_all_ms == pytest.approx(max(0.0, a.all_to_all_ms - work))
    assert b.step_ms < a.step_ms  # at 64 tokens a rank the hidden exchange outweighs the launches
    # one token cannot be split: no overlap, no second launch
    assert tbo.terms(1, 2000).step_ms == pytest.approx(plain.terms(1, 2000).step_ms)
    base = ("simulate", "--model", DEEPSEEK, "--gpu", "h200", "--engine", "sglang",
            "--concurrency", "16", "--prompt-len", "200", "--output-len", "10", "--requests",
            "32", "--enable-two-batch-overlap", "--json")  # fmt: skip
    refused = cli(*base, "--tp", "8")  # one board: no all-to-all to overlap
    assert refused.code == 2 and refused.json()["field"] == "--enable-two-batch-overlap"
    wide = cli(*base, "--tp", "16", "--dp", "16", "--dp-attention")
    assert wide.code == 0, wide.out
    line = wide.json()["deployment"]["command"]
    assert "--moe-a2a-backend deepep --enable-two-batch-overlap" in line
    assert fields_from_line("sglang", line)["enable_two_batch_overlap"] is True


def test_the_all_to_all_the_line_names_is_the_one_priced(cli: Cli) -> None:
    """--moe-a2a-backend is SGLang's: deepep inside one board prices DeepEP over NVLink, none
    past it keeps the gather over the NIC; the step follows the line either way."""
    base = ("simulate", "--model", DEEPSEEK, "--gpu", "h200", "--engine", "sglang",
            "--concurrency", "64", "--prompt-len", "200", "--output-len", "20", "--requests",
            "64", "--bench-client", "none", "--json")  # fmt: skip

    def run(*args: str) -> dict[str, Any]:
        r = cli(*base, *args)
        assert r.code == 0, r.out
        body: dict[str, Any] = r.json()
        return body

    board = ("--tp", "8", "--dp", "8", "--dp-attention")
    gathered, deepep = run(*board), run(*board, "--moe-a2a-backend", "deepep")
    assert "deepep" not in gathered["deployment"]["command"]
    assert "--moe-a2a-backend deepep" in deepep["deployment"]["command"]
    assert any("DeepEP" in n and "over NVLink" in n for n in deepep["notes"])
    wide = ("--tp", "16", "--dp", "16", "--dp-attention", "--mem-fraction-static", "0.8")
    none = run(*wide, "--moe-a2a-backend", "none")
    assert "--moe-a2a-backend" not in none["deployment"]["command"]  # SGLang's default
    assert any("gathered on every rank over the NIC" in n for n in none["notes"])
    assert none["step_ms"]["64"] > run(*wide)["step_ms"]["64"]


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
@pytest.mark.parametrize("groups", [1, 2, 4])
@pytest.mark.parametrize("ep", [None, 8])
def test_a_lines_fields_give_back_the_layout_they_state(
    engine: str, groups: int, ep: int | None
) -> None:
    """fields_layout reads a line's engine fields back as the layout layout_fields wrote
    (capacity --tpot, --spec-alpha and diagnose --plan price the instance those fields state)."""
    from planner.core.parallel import fields_layout, layout_fields

    dp, split, ep_size, spans = fields_layout(engine, layout_fields(engine, groups, ep))
    assert dp == groups
    assert split == (engine == "sglang" and groups > 1)
    assert ep_size == (ep if engine == "sglang" else None)
    assert spans == (engine == "vllm" and ep is not None)
    # SGLang replicas behind its DP controller are ranks, not attention groups
    assert fields_layout("sglang", {"dp_size": 3}) == (3, False, None, False)


@pytest.mark.parametrize(
    ("engine", "version", "dp", "groups", "padded"),
    [
        ("vllm", "0.16.0", 2, 2, True),  # pads every rank to the most tokens, prefill too
        ("vllm", "0.17.0", 2, 2, False),  # pads only steps every rank runs in a CUDA graph
        ("sglang", "0.5.13", 2, 2, False),  # gathers the sum of the groups' tokens in a prefill
        ("vllm", "0.17.0", 1, 1, False),  # one rank: nothing to step with
    ],
)  # fmt: skip
def test_moe_ranks_step_together_padded_or_not_by_engine_release(
    engine: str, version: str, dp: int, groups: int, padded: bool
) -> None:
    inst, got = deployment_instance(
        Deployment(
            gpu="h100",
            preset=None,
            model=QWEN3_MOE,
            settings={"engine": engine, "version": version, "tp": 2},
            dp=dp,
            dp_attention=engine == "sglang" and dp > 1,
        ),
        longest=4096,
    )
    assert got == groups and inst.cfg.lockstep_groups == groups
    assert inst.cfg.lockstep_padded is padded
    # a dense model's data-parallel ranks are replicas: they do not wait on each other
    dense, _ = deployment_instance(
        Deployment(
            gpu="h100",
            preset="llama-3.1-8b",
            model=None,
            settings={"engine": "vllm", "version": version, "tp": 1},
            dp=2,
        ),
        longest=4096,
    )
    assert dense.cfg.lockstep_groups == 1


def test_an_unpadded_prefill_meets_only_the_other_ranks_decode_tokens() -> None:
    """The same run of one of 8 attention-DP ranks of DeepSeek-R1, its prefill steps padded on
    every rank (vLLM before 0.17) or each rank running its own tokens (SGLang): two requests
    two seconds apart. Padded, the second prefill runs 8 x its tokens through the experts;
    unpadded, its own plus the others' prompts for the share of the time they prefill (one
    prefill step in the 2 s since the run began). The first, before any request has finished,
    is the symmetric step either way: a run's first requests reach every rank at once."""
    from planner.sim.config import SimConfig
    from planner.sim.cost import CurveCost
    from planner.sim.engine import execute
    from planner.sim.workload import Trace

    spec = resolve_model(None, DEEPSEEK, None)
    curve = step_time_for(spec, find_gpu("h200"), tp=1, dp=AttentionDp(groups=8), engine="sglang")
    trace = Trace(
        np.array([0.0, 2.0]), np.array([2048, 2048]), np.array([5, 5]),
        np.zeros(2, dtype=np.int64),
    )  # fmt: skip
    base = {"policy": "chunked", "step_token_budget": 2048, "chunk_tokens": 2048, "mixed": False}
    ttft = {
        padded: execute(
            trace, CurveCost(curve), SimConfig(**base, lockstep_groups=8, lockstep_padded=padded)
        ).first_ms
        - np.array([0.0, 2000.0])
        for padded in (True, False)
    }
    assert ttft[False][0] == ttft[True][0]
    assert ttft[False][1] < 0.75 * ttft[True][1]


def test_an_sglang_group_prefills_its_share_of_the_chunk_however_many_it_runs() -> None:
    # SGLang's prefill step runs alone, its chunk the whole budget (PrefillAdder's
    # rem_chunk_tokens): each of 8 attention-DP groups takes 8,192 / 8 tokens a step, though it
    # runs 2,048 requests (--max-running-requests 16384 for the 8); vLLM's budget is never below
    # its running cap.
    inst, groups = deployment_instance(
        Deployment(
            gpu="h200",
            preset=None,
            model=DEEPSEEK,
            settings={"engine": "sglang", "tp": 8, "max_num_seqs": 16384},
            dp=8,
            dp_attention=True,
        ),
        longest=9000,
    )
    assert groups == 8 and inst.cfg.max_batch == 2048
    assert inst.cfg.step_token_budget == inst.cfg.chunk_tokens == 8192 // 8
    assert not inst.cfg.mixed
    vllm, _ = deployment_instance(
        Deployment(gpu="h100", preset="llama-3.1-8b", model=None, settings={"engine": "vllm"}),
        longest=4096,
    )
    assert vllm.cfg.mixed and vllm.cfg.step_token_budget >= vllm.cfg.max_batch


def _vllm_deepep(backend: str | None, dp: int, version: str = "0.34.0", **extra: object) -> Any:
    fields: dict[str, object] = {"enable_expert_parallel": True, "data_parallel_size": dp}
    fields |= {"all2all_backend": backend} if backend else {}
    return _prediction("vllm", 1, fields | extra, model=DEEPSEEK, version=version)


def test_vllms_deepep_buffers_join_the_memory_outside_torch() -> None:
    """vLLM 0.11.1-0.34 device_communicators/all2all.py: DeepEP's NVLink buffer is 1,024 MiB
    in either mode; the high-throughput kernels add as much RDMA memory where the ranks span
    hosts, the low-latency ones DeepEP's layout for their token cap."""
    gib = 1024**3
    base8, base16 = _vllm_deepep(None, 8), _vllm_deepep(None, 16)
    assert _vllm_deepep("deepep_high_throughput", 8).non_torch_bytes - base8.non_torch_bytes == gib
    ht16 = _vllm_deepep("deepep_high_throughput", 16)
    assert ht16.non_torch_bytes - base16.non_torch_bytes == 2 * gib  # 16 ranks: two hosts
    # low latency: 256 tokens a rank (0.34's default budget under it), DeepSeek's hidden 7168
    # and 256 experts. Dispatch message 16 + max(2 x 7168, 7168 + 4 x 56) = 14,352 B; combine
    # 4 x 56 + 2 x 7168 = 14,560 B; send and receive max(256 x 14,352, 256 x 256 x 14,560),
    # twice each, with two 1,024-byte signalling buffers; rounded up past a 128-byte boundary
    layout = 2 * (2 * 256 * 256 * 14_560 + 1024)
    rdma = (layout + 128) // 128 * 128
    ll = _vllm_deepep("deepep_low_latency", 16)
    assert ll.non_torch_bytes - base16.non_torch_bytes == gib + rdma
    assert (ll.settings["max_num_batched_tokens"], ll.settings["max_num_seqs"]) == (256, 256)
    assert any("DeepEP buffers" in n for n in ll.notes)
    # before 0.20 the cap was VLLM_MOE_DP_CHUNK_SIZE (256) and the budget kept its default
    old = _vllm_deepep("deepep_low_latency", 16, version="0.14.0")
    assert old.non_torch_bytes - _vllm_deepep(None, 16, version="0.14.0").non_torch_bytes == (
        gib + rdma
    )
    assert old.settings["max_num_batched_tokens"] > 256
    # without expert parallelism over DP ranks the kernels never run: nothing is allocated
    idle = _prediction(
        "vllm", 8, {"all2all_backend": "deepep_low_latency"}, model=DEEPSEEK, version="0.34.0"
    )
    assert idle.non_torch_bytes == _prediction("vllm", 8, {}, model=DEEPSEEK).non_torch_bytes
    assert any("nothing here is exchanged" in n for n in idle.notes)


def test_vllms_all2all_backend_is_refused_where_it_is_not_priced(cli: Cli) -> None:
    base = ("capacity", "--model", DEEPSEEK, "--gpu", "h200", "--tp", "1", "--dp", "8",
            "--enable-expert-parallel")  # fmt: skip
    r = cli(*base, "--all2all-backend", "naive")
    assert r.code == 2 and "--all2all-backend: 'naive' is not modelled" in r.err
    r = cli(*base, "--all2all-backend", "deepep_low_latency", "--engine-version", "0.11.0")
    assert r.code == 2 and "vLLM takes it from 0.11.1" in r.err
    r = cli("capacity", "--model", DEEPSEEK, "--gpu", "h200", "--tp", "8", "--engine",
            "sglang", "--all2all-backend", "deepep_low_latency")  # fmt: skip
    assert r.code == 2 and "--all2all-backend" in r.err


def test_vllms_deepep_line_round_trips_and_prices_deepep(cli: Cli) -> None:
    spec = resolve_model(None, DEEPSEEK, None)
    fields = {
        "tensor_parallel_size": 1,
        "data_parallel_size": 16,
        "enable_expert_parallel": True,
        "all2all_backend": "deepep_high_throughput",
    }
    line = command_line(spec, "vllm", fields)
    assert "--all2all-backend deepep_high_throughput" in line
    assert fields_from_line("vllm", line) == fields
    default = command_line(spec, "vllm", fields | {"all2all_backend": "allgather_reducescatter"})
    assert "--all2all-backend" not in default  # every release's default: the line leaves it out
    base = ("simulate", "--model", DEEPSEEK, "--gpu", "h200", "--engine", "vllm", "--tp", "1",
            "--dp", "64", "--enable-expert-parallel", "--concurrency", "64", "--prompt-len",
            "200", "--output-len", "20", "--requests", "64", "--bench-client", "none",
            "--json")  # fmt: skip
    gathered = cli(*base)
    deepep = cli(*base, "--all2all-backend", "deepep_high_throughput")
    assert gathered.code == 0 and deepep.code == 0, (gathered.out, deepep.out)
    assert any("gathered on every rank" in n for n in gathered.json()["notes"])
    notes = deepep.json()["notes"]
    assert any("DeepEP's dispatch and combine" in n and "--all2all-backend" in n for n in notes)
    # 64 ranks over eight hosts: each token to its experts' ranks beats every token to every rank
    assert deepep.json()["step_ms"]["64"] < gathered.json()["step_ms"]["64"]


def test_vllms_dual_batch_overlap_hides_deepeps_exchange_past_its_thresholds(cli: Cli) -> None:
    """--enable-dbo (vLLM 0.11+): a step of 32 decode tokens or more (512 with prompt tokens)
    runs as two micro-batches, one's DeepEP exchange under the other's work; it needs a DeepEP
    backend (vLLM asserts one on CUDA)."""
    spec, gpu = resolve_model(None, DEEPSEEK, None), find_gpu("h200")

    def curve(dbo: bool) -> Any:
        return step_time_for(
            spec,
            gpu,
            tp=1,
            engine="vllm",
            dp=AttentionDp(groups=64),
            exchange=MoeExchange(
                all_to_all=True, two_batch_overlap=dbo, overlap_min_tokens=(32, 512)
            ),
        )

    plain, dbo = curve(False), curve(True)
    assert dbo.step_ms(16, 2000) == plain.step_ms(16, 2000)  # under 32 decode tokens: whole
    assert dbo.step_ms(64, 2000) < plain.step_ms(64, 2000)
    # a step with 256 prompt tokens beside 64 decoding is under 512: not split
    pairs = plain.chunk_pairs(0, 256)
    kv = 64 * plain.kv_bytes(2000)
    assert dbo.mixed_ms(64, kv, 256, pairs) == plain.mixed_ms(64, kv, 256, pairs)
    big = plain.chunk_pairs(0, 1024)
    assert dbo.mixed_ms(64, kv, 1024, big) < plain.mixed_ms(64, kv, 1024, big)
    base = ("capacity", "--model", DEEPSEEK, "--gpu", "h200", "--tp", "1", "--dp", "8",
            "--enable-expert-parallel", "--enable-dbo")  # fmt: skip
    r = cli(*base)
    assert r.code == 2 and "--enable-dbo: vLLM overlaps micro-batches only over DeepEP" in r.err
    r = cli(*base, "--all2all-backend", "deepep_low_latency", "--json")
    assert r.code == 0, r.err
    line = r.json()["flags"]["vllm"]
    assert "--enable-dbo" in line
    assert fields_from_line("vllm", line)["enable_dbo"] is True


def test_sglang_runs_amds_mori_all_to_all_as_its_release_and_card_allow(
    cli: Cli, tmp_path: Path
) -> None:
    """--moe-a2a-backend mori (SGLang 0.5.9+, ROCm only): the experts spread over the TP size,
    the exchange priced in MoRI's normal kernels in decode steps too, a rank's prompt tokens
    capped at 4,096 (after DP attention divides the chunk), and the line pastes back."""
    from planner.core.engines.sglang import MORI_MAX_DISPATCH_TOKENS_PER_RANK

    where = ("--model", DEEPSEEK, "--gpu", "mi300x", "--engine", "sglang", "--tp", "8")
    mori = ("--moe-a2a-backend", "mori")
    # MI300X's default chunk (16,384) is over the cap at one group: refused by the flag to change
    over = cli("capacity", *where, *mori, "--json")
    assert over.code == 2 and over.json()["field"] == "--chunked-prefill-size"
    assert f"{MORI_MAX_DISPATCH_TOKENS_PER_RANK} or less" in over.json()["error"]
    # eight attention-DP groups divide it to 2,048 a rank: it starts
    lock = tmp_path / "plan.yaml"
    layout = ("--dp", "8", "--dp-attention")
    ok = cli("capacity", *where, *mori, *layout, "--json", "--save", str(lock))
    assert ok.code == 0, ok.err
    line = ok.json()["flags"]["sglang"]
    assert "--moe-a2a-backend mori" in line
    assert fields_from_line("sglang", line)["moe_a2a_backend"] == "mori"
    assert cli("drift", str(lock), "--against-args", line, "--json").code == 0
    # refused on NVIDIA, and before 0.5.9
    nvidia = cli("capacity", *where[:3], "h200", *where[4:], *mori, *layout)
    assert nvidia.code == 2 and "--moe-a2a-backend: mori" in nvidia.err
    old = cli("capacity", *where, *mori, *layout, "--engine-version", "0.5.8")
    assert old.code == 2 and "from 0.5.9" in old.err

    # 0.5.9 checks the cap on a PD decode instance too; 0.5.10 on, only where prompts prefill
    def decode_instance(version: str) -> ServePlan:
        extra = {"moe_a2a_backend": "mori", "disaggregation_mode": "decode"}
        settings = {"engine": "sglang", "tp": 8, "version": version, "extra": extra}
        plan, _ = serve_report(
            gpu="mi300x", preset=None, model=DEEPSEEK, revision=None, gpu_memory_gib=None,
            settings=settings,
        )  # fmt: skip
        return plan

    with pytest.raises(InputError, match="--chunked-prefill-size"):
        decode_instance("0.5.9")
    assert decode_instance("0.5.10").prediction is not None


def test_moris_exchange_is_priced_in_its_normal_kernels_across_nodes() -> None:
    """Across nodes MoRI's normal kernels send a token once to each node holding one of its
    experts, where DeepEP's low-latency decode sends a copy per routed expert: fewer bytes over
    the NIC for the same decode step; in prefill steps (normal kernels either way) and inside
    one board the two move alike, MoRI's kernels adding their fixed cost in every MoE layer."""
    from planner.core.step.comm import MORI_KERNEL_MS

    spec = resolve_model(None, DEEPSEEK)
    gpu = find_gpu("mi300x")
    fixed = spec.moe_layers * 2 * MORI_KERNEL_MS
    for layout in ({"tp": 2, "dp": AttentionDp(groups=8)}, {"tp": 1, "dp": AttentionDp(groups=8)}):
        deepep = step_time_for(
            spec, gpu, engine="sglang", exchange=MoeExchange(all_to_all=True), **layout
        )
        mori = step_time_for(
            spec,
            gpu,
            engine="sglang",
            exchange=MoeExchange(all_to_all=True, kernels="mori"),
            **layout,
        )
        prefill = mori.all_to_all_ms(4096, decode=False) - deepep.all_to_all_ms(4096, decode=False)
        assert prefill == pytest.approx(fixed)
        if layout["tp"] == 2:  # 16 ranks: two nodes
            assert 0 < mori.all_to_all_ms(256) < deepep.all_to_all_ms(256)
        else:
            assert mori.all_to_all_ms(256) - deepep.all_to_all_ms(256) == pytest.approx(fixed)


def test_sglang_keeps_dense_mlps_and_the_lm_head_whole_where_its_flags_say() -> None:
    """Under data-parallel attention --moe-dense-tp-size 1 replicates the dense MLP layers
    (DeepSeek's first three, gate / up / down of 7,168 x 18,432) and --enable-dp-lm-head puts
    the untied bf16 lm_head (129,280 x 7,168) on each attention-TP group: at TP 16 in 16 groups,
    each costs a GPU 15/16 of its bytes more, and leaves the KV pool that much smaller."""
    spec = resolve_model(None, DEEPSEEK)
    assert spec.dense_mlp_params == 3 * 3 * 7168 * 18432 == 1_189_085_184
    assert resolve_model(None, QWEN3_MOE).dense_mlp_params == 0  # every layer routed

    def weights(**extra: object) -> tuple[int, int, str]:
        plan, _ = serve_report(
            gpu="h100", preset=None, model=DEEPSEEK, revision=None, gpu_memory_gib=None,
            settings={"engine": "sglang", "tp": 16, "memory_fraction": 0.8,
                      "extra": {"attn_dp_size": 16, **extra}},
        )  # fmt: skip
        p = plan.prediction
        assert p is not None
        return p.weights_bytes, p.available_kv_bytes, plan.command

    base, pool, _ = weights()
    per_param = spec.weights_bytes / spec.params_total  # the split is by parameter count
    dense, dense_pool, line = weights(moe_dense_tp_size=1)
    assert dense - base == pytest.approx(spec.dense_mlp_params * per_param * 15 / 16, abs=2)
    assert pool - dense_pool == dense - base
    assert fields_from_line("sglang", line)["moe_dense_tp_size"] == 1
    head, _, line = weights(enable_dp_lm_head=True)
    assert head - base == 129280 * 7168 * 2 * 15 // 16
    assert fields_from_line("sglang", line)["enable_dp_lm_head"] is True
    # the step reads what each GPU holds, and scores each group's own tokens
    gpu = find_gpu("h100")
    layout: dict[str, Any] = {
        "tp": 1,
        "dp": AttentionDp(groups=16),
        "engine": "sglang",
        "exchange": MoeExchange(all_to_all=True),
    }
    plain = step_time_for(spec, gpu, **layout)
    both_dp = AttentionDp(groups=16, dense_mlp_replicated=True, dp_lm_head=True)
    both = step_time_for(spec, gpu, **(layout | {"dp": both_dp}))
    assert both.dense_weights_bytes > plain.dense_weights_bytes
    assert both.logits_ms(64) < plain.logits_ms(64)
    # a model SGLang's files do not replicate (its dense MLPs stay split), and one with none
    qwen, _ = serve_report(
        gpu="h100", preset=None, model=QWEN3_MOE, revision=None, gpu_memory_gib=None,
        settings={"engine": "sglang", "tp": 8, "extra": {"attn_dp_size": 8,
                                                         "moe_dense_tp_size": 1}},
    )  # fmt: skip
    alike, _ = serve_report(
        gpu="h100", preset=None, model=QWEN3_MOE, revision=None, gpu_memory_gib=None,
        settings={"engine": "sglang", "tp": 8, "extra": {"attn_dp_size": 8}},
    )  # fmt: skip
    assert qwen.prediction is not None and alike.prediction is not None
    assert qwen.prediction.weights_bytes == alike.prediction.weights_bytes


def test_deepep_inside_one_board_is_priced_at_its_kernels_own_costs(cli: Cli) -> None:
    """SGLang's DeepEP over the 8 GPUs of one H200 board (named on the line): each MoE layer of
    a decode step pays the low-latency kernels' fixed time NVIDIA's B200 tables give them, its
    experts run DeepGEMM's grouped GEMMs, and the notes and arithmetic say where the figures
    come from."""
    r = cli("slo", "--model", DEEPSEEK, "--gpu", "h200", "--engine", "sglang", "--tp", "8",
            "--dp", "8", "--dp-attention", "--moe-a2a-backend", "deepep",
            "--mem-fraction-static", "0.85", "--tpot", "100", "--json")  # fmt: skip
    assert r.code == 0, r.out
    spec = resolve_model(None, DEEPSEEK, None)
    exchange = [float(p["terms"]["all_to_all_ms"]) for p in r.json()["curve"]]
    assert exchange and min(exchange) >= spec.moe_layers * DEEPEP_NVLINK.low_latency.fixed_ms
    # the experts multiply at DeepGEMM's share, and the arithmetic says so
    assert any("DeepGEMM" in line for line in r.json()["arithmetic"])
    h200 = step_time_for(spec, find_gpu("h200"), tp=1, dp=AttentionDp(groups=8), engine="sglang",
                         exchange=MoeExchange(all_to_all=True))  # fmt: skip
    assert any("B200 tables" in n for n in fabric_notes(h200, "sglang"))
