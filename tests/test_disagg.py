"""Prefill/decode disaggregation in the benchmark predictor (docs/disagg.md)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import Result, bench

from planner.api.bench_disagg import (
    DISAGG_TRANSFER_SETUP_MS,
    SGLANG_PD_HANDOFF_MS,
    decode_pool_config,
    transfer_plan,
)
from planner.api.bench_instance import Deployment, deployment_instance
from planner.api.bench_load import Lengths, Load
from planner.core.step import step_time_for
from planner.core.step.overhead import REQUEST_PATH_MS
from planner.sim import disagg
from planner.sim.config import SimConfig
from planner.sim.cost import CurveCost
from planner.sim.engine import execute
from planner.sim.workload import Trace
from planner.sources.models import resolve_model
from planner.sources.presets import find_gpu

Cli = Callable[..., Result]
MODELS = Path(__file__).parent / "data" / "models"
LLAMA = str(MODELS / "meta-llama--Llama-3.1-8B")
LITE = str(MODELS / "deepseek-ai--DeepSeek-V2-Lite")


def test_transfer_bytes_are_the_prompts_kv() -> None:
    h100 = find_gpu("h100")
    prompts = np.asarray([1000, 4000])
    # Llama-3.1-8B: 32 layers x 8 KV heads x 128 x (K, V) x 2 B = 131,072 B a token
    llama = resolve_model(None, LLAMA, None)
    ms, how = transfer_plan(llama, prompts, 2, 1, 1, "nvlink", 2, h100, "vllm")
    assert how["kv_bytes_per_token"] == 32 * 8 * 128 * 2 * 2
    # vLLM's proxy sends the decode instance a request of its own: one more request path
    assert how["setup_ms"] == REQUEST_PATH_MS + DISAGG_TRANSFER_SETUP_MS
    # 4,000 x 131,072 B over one direction of NVLink (450 GB/s) + the setup
    assert ms[1] == pytest.approx(4000 * 131072 / 450e9 * 1e3 + how["setup_ms"])
    # DeepSeek-V2-Lite (MLA): 27 layers x (512 + 64) x 2 B, one copy whatever the TP
    lite = resolve_model(None, LITE, None)
    ms, how = transfer_plan(lite, prompts, 2, 2, 2, "rdma", 16, h100, "sglang")
    assert how["kv_bytes_per_token"] == 27 * 576 * 2 and how["parallel_ranks"] == 1
    assert how["setup_ms"] == SGLANG_PD_HANDOFF_MS  # measured on SGLang's PD rows
    assert ms[0] == pytest.approx(1000 * 31104 / 50e9 * 1e3 + how["setup_ms"])
    # SGLang's default backend (Mooncake) moves KV over RDMA even inside a node; vLLM's NIXL
    # connector rides NVLink there
    _, sglang_how = transfer_plan(llama, prompts, 2, 1, 1, None, 2, h100, "sglang")
    _, vllm_how = transfer_plan(llama, prompts, 2, 1, 1, None, 2, h100, "vllm")
    assert (sglang_how["link"], vllm_how["link"]) == ("rdma", "nvlink")
    # two MI300X of one board exchange over the one xGMI link between them (64 GB/s a way),
    # not the 7 links' sum; each KV-head shard moves on its own pair's link
    ms, how = transfer_plan(llama, prompts, 2, 2, 2, None, 4, find_gpu("mi300x"), "vllm")
    assert how["link"] == "nvlink" and how["link_bytes_per_s"] == pytest.approx(64e9)
    assert ms[1] == pytest.approx(4000 * 131072 / (2 * 64e9) * 1e3 + how["setup_ms"])


def test_sglang_sends_a_hybrid_models_window_and_states_not_every_layers_prompt() -> None:
    """From 0.5.4 SGLang's prefill instance sends a hybrid pool's sliding layers' last window
    (from the page it starts in) and the Mamba states, beside the full layers' KV of the whole
    prompt. gpt-oss-120b (hybrid SWA pool from 0.5.8; 18 full and 18 128-token sliding layers
    of 8 KV heads x 64 x (K, V) x 2 B = 2,048 B a token each): a 32,784-token prompt sends
    32,784 x 36,864 + 128 x 36,864 B under 0.5.13, every layer's 32,784 x 73,728 B under 0.5.2,
    which pools no window. Nemotron-3-Nano: its 6 attention layers' 1,000 x 6 x 2 x 128 x 2 x 2
    B and its 23 Mamba layers' states, (64 x 64 + 2 x 8 x 128) x 3 x 2 B of conv state and
    64 x 64 x 128 x 4 B of fp32 SSM state each."""
    from planner.api import engine_plan

    h200 = find_gpu("h200")
    oss = resolve_model(None, str(MODELS / "openai--gpt-oss-120b"), None)
    prompt = np.asarray([32784])
    sent = {}
    for version in ("0.5.2", "0.5.13"):
        kw = {"version": version, "tp_size": 2, "context_length": 65536}
        prefill = engine_plan(engine="sglang", gpu="h200", spec=oss, **kw)
        _, how = transfer_plan(oss, prompt, 2, 2, 2, None, 8, h200, "sglang", "nixl", prefill)
        sent[version] = how["mean_bytes_per_request"]
    assert sent["0.5.2"] == 32784 * 73728
    assert sent["0.5.13"] == 32784 * 36864 + 128 * 36864
    nano = resolve_model(None, str(MODELS / "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"), None)
    prefill = engine_plan(engine="sglang", gpu="h200", spec=nano, version="0.5.13")
    _, how = transfer_plan(
        nano, np.asarray([1000]), 2, 1, 1, None, 2, h200, "sglang", "nixl", prefill
    )
    state = (64 * 64 + 2 * 8 * 128) * 3 * 2 + 64 * 64 * 128 * 4
    assert how["mean_bytes_per_request"] == 1000 * 6 * 2 * 128 * 2 * 2 + 23 * state


def test_vllm_nixl_sends_a_windows_last_blocks_once_the_hybrid_manager_keeps_them() -> None:
    """vLLM's NIXL connector sends a sliding group's last cdiv(W, block) + 1 blocks from 0.22,
    when the hybrid KV cache manager stays on beside it; through 0.21 the connector turns the
    manager off and every layer holds, and sends, the whole prompt. gpt-oss-120b (128-token
    windows): 32,784 x 36,864 B of its full layers + (32,784 - (513 - 3) x 64) x 36,864 B of
    its sliding ones on 0.34's 64-token blocks; 32,784 x 73,728 B under 0.21."""
    from planner.api import engine_plan

    h200 = find_gpu("h200")
    oss = resolve_model(None, str(MODELS / "openai--gpt-oss-120b"), None)
    sent = {}
    for version in ("0.21.0", "0.34.0"):
        kw = {"version": version, "tensor_parallel_size": 2, "max_model_len": 65536}
        prefill = engine_plan(
            engine="vllm", gpu="h200", spec=oss, kv_connector="NixlConnector", **kw
        )
        prompt = np.asarray([32784])
        _, how = transfer_plan(oss, prompt, 2, 2, 2, None, 8, h200, "vllm", None, prefill)
        sent[version] = how["mean_bytes_per_request"]
    assert sent["0.21.0"] == 32784 * 73728
    assert sent["0.34.0"] == 32784 * 36864 + (32784 - (513 - 3) * 64) * 36864


def sim_parts() -> tuple[CurveCost, SimConfig]:
    spec = resolve_model(None, LLAMA, None)
    curve = step_time_for(spec, find_gpu("h100"))
    cfg = SimConfig(
        policy="chunked", max_batch=256, step_token_budget=8192, chunk_tokens=8192,
        kv_blocks=28000, block_tokens=16,
    )  # fmt: skip
    return CurveCost(curve), cfg


@pytest.mark.parametrize("prompt", [128, 2000, 8000])
def test_one_by_one_disaggregation_never_beats_aggregated_per_gpu(prompt: int) -> None:
    # concurrency 1, no transfer cost, both deployments on 2 GPUs (aggregated: 2 replicas, one
    # of which the single client keeps busy)
    cost, cfg = sim_parts()
    n = 20
    trace = Trace(
        np.zeros(n), np.full(n, prompt, dtype=np.int64), np.full(n, 200, dtype=np.int64),
        np.zeros(n, dtype=np.int64),
    )  # fmt: skip
    agg = execute(trace, cost, cfg.model_copy(update={"concurrency": 1}))
    agg_per_gpu = trace.output_tokens.sum() / np.nanmax(agg.finish_ms) / 2
    layout = disagg.DisaggLayout(prefill=1, decode=1)
    state, _ = disagg.run(
        trace, layout, prefill_cost=cost, prefill_cfg=cfg,
        decode_cost=disagg.DecodeOnlyCost(cost), decode_cfg=cfg,
        transfer_ms=np.zeros(n), concurrency=1,
    )  # fmt: skip
    dis_per_gpu = trace.output_tokens.sum() / np.nanmax(state.finish_ms) / layout.gpus
    assert dis_per_gpu <= agg_per_gpu


def run(layout: str | None, link: str | None = None, rate: float = 2.5) -> dict[str, object]:
    parts = None
    if layout is not None:
        x, y = disagg.parse_layout(layout)
        parts = disagg.DisaggLayout(prefill=x, decode=y, link=link)
    return bench(
        gpu="h100",
        preset="llama-3.1-8b",
        model=None,
        settings={"engine": "vllm", "tp": 1},
        dp=1 if parts else 2,
        load=Load(rate_per_s=rate, requests=300),
        lengths=Lengths(prompt_len=8000, output_len=256),
        disagg=parts,
    )


def test_long_prompts_and_a_tight_tpot_favour_disaggregation() -> None:
    # docs/disagg.md's worked case: Llama-3.1-8B, 2 x H100, 8,000-token prompts, 256-token
    # outputs, 2.5 req/s. Aggregated, every replica's decodes share steps with 8k-token prefill
    # chunks; split, the decode GPU decodes only.
    agg, split = run(None), run("1P1D")
    assert agg["gpus"] == split["gpus"] == 2
    assert split["p99_tpot_ms"] < 12 < agg["p99_tpot_ms"]  # a 12 ms p99 TPOT budget
    assert split["p99_itl_ms"] < 0.1 * agg["p99_itl_ms"]  # no prefill stalls in decode
    assert split["median_ttft_ms"] > agg["median_ttft_ms"]  # one prefill GPU queues
    assert split["output_throughput_per_gpu"] == pytest.approx(
        agg["output_throughput_per_gpu"], rel=0.02
    )  # the offered load is served either way


@pytest.mark.parametrize(("engine", "flat"), [("sglang", 512), ("vllm", None)])
def test_an_sglang_decode_pool_admits_on_its_flat_reserve(engine: str, flat: int | None) -> None:
    # SGLang's decode instance keeps 512 tokens free per request (DecodePreallocQueue), not the
    # new-token ratio its aggregated server uses; vLLM's decode instance admits as vLLM does.
    inst, _ = deployment_instance(
        Deployment(gpu="h100", preset="llama-3.1-8b", model=None, settings={"engine": engine})
    )
    cfg = decode_pool_config(inst)
    if flat is None:
        assert cfg.reserve is None and cfg == inst.cfg
    else:
        assert cfg.reserve.flat_tokens == flat and cfg.reserve.init_ratio == 0.0
        assert inst.cfg.reserve.flat_tokens is None  # the aggregated server keeps its ratio


@pytest.mark.parametrize("rate", [0.5, 2.0])
def test_a_slower_link_never_improves_ttft(rate: float) -> None:
    fast, slow = run("1P1D", "nvlink", rate), run("1P1D", "rdma", rate)
    assert slow["median_ttft_ms"] >= fast["median_ttft_ms"]
    assert slow["mean_ttft_ms"] >= fast["mean_ttft_ms"]


def test_cli_disagg(cli: Cli) -> None:
    r = cli(
        "simulate", "--preset", "llama-3.1-8b", "--gpu", "h100", "--concurrency", "8",
        "--prompt-len", "2000", "--output-len", "100", "--requests", "64",
        "--disagg", "1p3d", "--json",
    )  # fmt: skip
    assert r.code == 0, r.out
    body = r.json()
    assert body["gpus"] == 4
    d = body["deployment"]["disagg"]
    assert d["layout"] == "1P3D" and d["prefill"]["instances"] == 1
    assert d["transfer"]["mean_bytes_per_request"] == 2000 * 131072
    # the keys an aggregated run prints, one reader for both; the client's sends priced at the
    # prefill pool's door as at an aggregated server's
    plain = cli(
        "simulate", "--preset", "llama-3.1-8b", "--gpu", "h100", "--concurrency", "8",
        "--prompt-len", "2000", "--output-len", "100", "--requests", "64", "--json",
    ).json()  # fmt: skip
    assert set(body) == set(plain)
    assert body["front_door"] == plain["front_door"]
    assert body["front_door"]["client_ms"] > 0 and body["ignored_requests"] == 0
    for args, field in (
        (("--disagg", "3x"), "--disagg"),
        (("--disagg", "0P1D"), "--disagg"),
        (("--prefill-tp", "2"), "--prefill-tp"),
        (("--disagg", "1P1D", "--prefill-tp", "0"), "--prefill-tp"),
        (("--disagg", "1P1D", "--decode-tp", "0"), "--decode-tp"),
        (("--disagg", "1P1D", "--dp", "2"), "--dp"),
        (("--disagg", "1P1D", "--disagg-link", "carrier-pigeon"), "--disagg-link"),
        (("--disagg", "1P1D", "--decode-tp", "4096"), "--decode-tp"),
        (("--disagg", "2000P1D"), "--disagg"),
        (("--gpu-memory-utilization", "1.2"), "--gpu-memory-utilization / --mem-fraction-static"),
        (
            ("--disagg", "1P1D", "--disaggregation-transfer-backend", "nixl"),
            "--disaggregation-transfer-backend",
        ),  # vLLM's pools run the NIXL connector
    ):
        bad = cli(
            "simulate", "--preset", "llama-3.1-8b", "--gpu", "h100", "--concurrency", "8",
            "--prompt-len", "200", "--output-len", "10", *args, "--json",
        )  # fmt: skip
        assert bad.code == 2, (args, bad.out)
        assert bad.json()["field"] == field


def test_a_pool_line_pastes_back_into_capacity_and_drift_checks_its_role(
    cli: Cli, tmp_path: Path
) -> None:
    lock = tmp_path / "decode.yaml"
    base = (
        "--gpu", "h200", "--preset", "deepseek-v3", "--engine", "sglang", "--tp-size", "8",
        "--context-length", "10240",
    )  # fmt: skip
    role = ("--disaggregation-mode", "decode", "--disaggregation-transfer-backend", "mooncake")
    r = cli("capacity", *base, *role, "--save", str(lock), "--json")
    assert r.code == 0, r.err
    line = json.loads(r.out)["flags"]["sglang"]
    assert "--disaggregation-mode decode --disaggregation-transfer-backend mooncake" in line
    assert cli("drift", str(lock), "--against-args", line).code == 0
    prefill = line.replace("--disaggregation-mode decode", "--disaggregation-mode prefill")
    drifted = cli("drift", str(lock), "--against-args", prefill)
    assert drifted.code == 1 and "--disaggregation-mode" in drifted.out
    # vLLM's connector JSON, compacted; checked as vLLM checks it
    vllm = ("--gpu", "h100", "--preset", "llama-3.1-8b")
    ok = cli("capacity", *vllm, "--kv-transfer-config",
             '{"kv_connector": "NixlConnector", "kv_role": "kv_both"}', "--json")  # fmt: skip
    assert ok.code == 0, ok.err
    assert (
        """--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'"""
        in (json.loads(ok.out)["flags"]["vllm"])
    )
    for args, flag in (
        (("--kv-transfer-config", "{not json"), "--kv-transfer-config"),
        (("--kv-transfer-config", '{"kv_connector": "X", "kv_role": "x"}'), "--kv-transfer-config"),
        (("--disaggregation-mode", "decode"), "--disaggregation-mode"),
    ):
        bad = cli("capacity", *vllm, *args, "--json")
        assert bad.code == 2 and json.loads(bad.out)["field"] == flag
    wrong = cli("capacity", *base, "--disaggregation-mode", "both", "--json")
    assert wrong.code == 2 and json.loads(wrong.out)["field"] == "--disaggregation-mode"


def test_a_pool_spreads_its_experts_when_asked(cli: Cli) -> None:
    base = ("simulate", "--preset", "qwen3-30b-a3b", "--gpu", "h100", "--tp", "2",
            "--disagg", "1P1D", "--prompt-len", "2000", "--output-len", "200",
            "--concurrency", "16")  # fmt: skip
    plain = cli(*base, "--json").json()
    spread = cli(*base, "--decode-ep", "2", "--json").json()
    pools = spread["deployment"]["disagg"]
    assert pools["decode"]["ep"] == 2 and pools["prefill"]["ep"] == 1
    # the decode pool's step changed (whole experts per GPU, the busiest rank waited for);
    # the prefill pool did not, so the first token's path is the same work
    assert spread["median_tpot_ms"] != pytest.approx(plain["median_tpot_ms"], rel=1e-6)
    for args, flag in (
        (("--decode-ep", "4"), "--decode-ep"),
        (("--prefill-ep", "3"), "--prefill-ep"),
    ):
        r = cli(*base, *args)
        assert r.code == 2 and flag in r.err
    # the engine's own refusal of a pool's layout names the pool's flag the user typed
    # (DeepSeek-V3's 256 experts over 12 ranks: DeepEP spans the pool's TP where no EP is given)
    wide = ("simulate", "--preset", "deepseek-v3", "--gpu", "h200", "--engine", "sglang",
            "--tp", "8", "--disagg", "1P1D", "--prompt-len", "1000", "--output-len", "10",
            "--concurrency", "8", "--decode-tp", "12", "--decode-dp", "12")  # fmt: skip
    for args, flag in ((("--decode-ep", "12"), "--decode-ep"), ((), "--decode-tp")):
        r = cli(*wide, *args, "--json")
        assert r.code == 2 and r.json()["field"] == flag
        assert "refuses a split that leaves a remainder" in r.json()["error"]
    dense = cli("simulate", "--preset", "llama-3.1-8b", "--gpu", "h100", "--tp", "2",
                "--disagg", "1P1D", "--decode-ep", "2", "--prompt-len", "100",
                "--output-len", "10")  # fmt: skip
    assert dense.code == 2 and "--decode-ep" in dense.err
    alone = cli("simulate", "--preset", "qwen3-30b-a3b", "--gpu", "h100", "--decode-ep", "2",
                "--prompt-len", "100", "--output-len", "10")  # fmt: skip
    assert alone.code == 2 and "--decode-ep: needs --disagg" in alone.err


def test_a_decode_pool_past_its_cuda_graphs_says_so() -> None:
    """The decode pool's busiest scheduler against the graphs its engine captures: 700 clients
    on one decode instance pass vLLM's 512, 32 do not."""
    notes = {}
    for clients in (32, 700):
        got = bench(
            gpu="h100",
            preset="llama-3.1-8b",
            model=None,
            settings={"engine": "vllm", "tp": 1},
            load=Load(concurrency=clients, requests=2 * clients),
            lengths=Lengths(prompt_len=200, output_len=300),
            disagg=disagg.DisaggLayout(prefill=1, decode=1),
        )
        assert got["peak_running_seqs"] == clients
        notes[clients] = got["notes"]
    assert notes[32] == [] and "past the 512" in notes[700][0]


def test_the_benchmark_client_reads_every_decode_instance() -> None:
    """One benchmark process reads the streams of every decode instance: gpt-oss-20b 1P2D on
    B200s at 1,024 clients, one decode instance's batch and the other's are two batches of
    chunks a step at 32 us each, past the GPU step; `none` prints the decode pool's pace."""

    def split(client: str | None) -> dict[str, object]:
        return bench(
            gpu="b200",
            preset="gpt-oss-20b",
            model=None,
            settings={"engine": "vllm", "tp": 1},
            load=Load(concurrency=1024, requests=2048),
            lengths=Lengths(prompt_len=100, output_len=100),
            disagg=disagg.DisaggLayout(prefill=1, decode=2),
            client=client,
        )

    read, engine = split(None), split("none")
    peak = int(read["peak_running_seqs"])  # type: ignore[call-overload]
    # the busiest decode scheduler's batch, twice over (both instances' chunks), 32 us each
    assert float(read["median_tpot_ms"]) >= 0.8 * 2 * peak * 0.032  # type: ignore[arg-type]
    assert float(engine["median_tpot_ms"]) < 0.8 * float(read["median_tpot_ms"])  # type: ignore[arg-type]
    assert any("benchmark client" in n for n in read["notes"])  # type: ignore[attr-defined]
    assert not any("benchmark client" in n for n in engine["notes"])  # type: ignore[attr-defined]


def test_a_wide_expert_parallel_decode_pool_spans_nodes_with_deepep(cli: Cli) -> None:
    """SGLang's wide-EP PD layout: a 16-GPU prefill instance and a 64-GPU decode instance of
    DeepSeek-R1, each with data-parallel attention over its TP, the memory fraction pinned as
    such deployments pin it; both pools exchange MoE tokens with DeepEP over the NIC."""
    args = (
        "simulate", "--model", str(MODELS / "deepseek-ai--DeepSeek-R1"), "--gpu", "h100",
        "--engine", "sglang", "--disagg", "1P1D", "--prefill-tp", "16", "--prefill-dp", "16",
        "--decode-tp", "64", "--decode-dp", "64", "--mem-fraction-static", "0.8",
        "--concurrency", "256", "--prompt-len", "2000", "--output-len", "50", "--requests", "512",
    )  # fmt: skip
    r = cli(*args, "--json")
    assert r.code == 0, r.out
    body = r.json()
    assert body["gpus"] == 80
    pools = body["deployment"]["disagg"]
    for role in ("prefill", "decode"):
        line = pools[role]["command"]
        assert "--moe-a2a-backend deepep" in line and "--mem-fraction-static 0.8" in line
    assert sum("DeepEP" in note for note in body["notes"]) == 2
    # the top-level layout is the decode instance's, as its KV and command are
    d = body["deployment"]
    assert (d["tp"], d["dp"], d["dp_attention"]) == (64, 64, True)
    assert d["kv_cache_tokens"] == pools["decode"]["kv_cache_tokens"]
    assert pools["prefill"]["max_num_batched_tokens"] == d["max_num_batched_tokens"]
    # the summary names each pool's own layout and KV pool
    text = cli(*args).out
    prefill, decode = pools["prefill"], pools["decode"]
    assert "sglang" in text and ": 1P1D" in text and "DP 1," not in text
    assert "prefill: 1 x TP 16, attention DP 16" in text
    assert "decode: 1 x TP 64, attention DP 64" in text
    for pool in (prefill, decode):
        assert f"KV {pool['kv_cache_tokens']:,} tokens per DP rank" in text


@pytest.mark.parametrize(
    ("engine", "prefill_flag", "decode_flag"),
    [
        ("sglang", "--disaggregation-mode prefill", "--disaggregation-mode decode"),
        ("vllm", '"kv_connector":"NixlConnector"', '"kv_connector":"NixlConnector"'),
    ],
)
def test_each_pool_line_starts_its_role(
    cli: Cli, engine: str, prefill_flag: str, decode_flag: str
) -> None:
    """simulate --disagg prints the lines that start the deployment it simulated: each pool's
    role flags (SGLang's mode and Mooncake backend, vLLM's NIXL connector), its memory
    fraction pinned, and the router in front."""
    r = cli(
        "simulate", "--preset", "llama-3.1-8b", "--gpu", "h100", "--engine", engine,
        "--disagg", "2P1D", "--concurrency", "8", "--prompt-len", "500", "--output-len", "50",
        "--requests", "16", "--json",
    )  # fmt: skip
    assert r.code == 0, r.err
    d = r.json()["deployment"]["disagg"]
    assert prefill_flag in d["prefill"]["command"] and decode_flag in d["decode"]["command"]
    fraction = "--mem-fraction-static" if engine == "sglang" else "--gpu-memory-utilization"
    assert all(fraction in d[k]["command"] for k in ("prefill", "decode"))
    if engine == "sglang":
        assert d["router"].count("--prefill http") == 2 and d["router"].count("--decode") == 1


def test_each_pool_is_planned_with_its_role(cli: Cli) -> None:
    """A pool's instance is planned with its role's flags, as SGLang sizes it: from 0.5.15 a
    prefill instance keeps no decode CUDA graphs, so a 16-group data-parallel prefill pool of
    DeepSeek-V3 starts where the same instance without the role would reserve their padding
    (3 MiB a batch size a group) until the weights leave it no KV cache; its fraction is the one
    `capacity --disaggregation-mode prefill` plans."""
    layout = ("--preset", "deepseek-v3", "--gpu", "h100", "--engine", "sglang", "--tp", "16",
              "--ep", "16", "--dp", "16", "--dp-attention")  # fmt: skip
    alone = cli("capacity", *layout, "--json").json()
    assert not alone["fits"] and "leave no KV cache" in alone["binding_reason"]
    prefill = cli("capacity", *layout, "--disaggregation-mode", "prefill", "--json")
    assert prefill.code == 0, prefill.err
    pinned = prefill.json()["flags"]["sglang"].split("--mem-fraction-static ")[1].split()[0]
    r = cli(
        "simulate", "--preset", "deepseek-v3", "--gpu", "h100", "--engine", "sglang",
        "--disagg", "1P1D", "--prefill-tp", "16", "--prefill-ep", "16", "--prefill-dp", "16",
        "--decode-tp", "16", "--decode-ep", "16", "--decode-dp", "16", "--cuda-graph-max-bs",
        "64", "--concurrency", "64", "--prompt-len", "1000", "--output-len", "50",
        "--requests", "128", "--json",
    )  # fmt: skip
    assert r.code == 0, r.err
    line = r.json()["deployment"]["disagg"]["prefill"]["command"]
    assert f"--mem-fraction-static {pinned} " in line


def test_sglang_on_nixl_rides_nvlink_and_its_line_says_so(cli: Cli) -> None:
    """--disaggregation-transfer-backend nixl: SGLang's pools move KV over NVLink inside a node
    (UCX's CUDA IPC), where its default Mooncake goes over RDMA; each line names the backend."""
    base = ("simulate", "--preset", "llama-3.1-8b", "--gpu", "h100", "--engine", "sglang",
            "--disagg", "1P1D", "--concurrency", "8", "--prompt-len", "4000", "--output-len",
            "20", "--requests", "16", "--json")  # fmt: skip
    mooncake, nixl = cli(*base), cli(*base, "--disaggregation-transfer-backend", "nixl")
    assert mooncake.code == 0 and nixl.code == 0, (mooncake.err, nixl.err)
    slow, fast = (r.json()["deployment"]["disagg"] for r in (mooncake, nixl))
    assert (slow["transfer"]["link"], fast["transfer"]["link"]) == ("rdma", "nvlink")
    assert slow["transfer"]["median_ms"] > fast["transfer"]["median_ms"]
    assert "--disaggregation-transfer-backend nixl" in fast["decode"]["command"]
    assert "--disaggregation-transfer-backend mooncake" in slow["prefill"]["command"]


def test_disaggregation_frees_data_parallel_attention_from_the_others_prefills() -> None:
    # docs/disagg.md's second worked case: DeepSeek-R1 under SGLang on 16 H200s, 256 clients
    # of 8,192-token prompts and 1,024-token outputs (range ratio 0.8). Aggregated, two TP 8
    # replicas of 8 attention-DP groups: a prefill on any group holds every group's decode
    # step. Split, 1P1D with the decode instance's 8 groups decoding only, the prefill
    # instance's experts whole (EP 8) as SGLang's PD deployments run them.
    spec = str(MODELS / "deepseek-ai--DeepSeek-R1")
    lengths = Lengths(prompt_len=8192, output_len=1024, len_range=0.8)
    # the aggregated run's longest gaps (up to ~2 s) are about 1% of them: p99 sits on that
    # edge and moves with the drawn lengths (85 ms at SGLang's seed 1, 821 at seed 0), p99.9
    # lies past it
    common = {
        "gpu": "h200", "preset": None, "model": spec, "lengths": lengths,
        "percentiles": (99, 99.9),
    }  # fmt: skip
    agg = bench(
        **common,
        settings={"engine": "sglang", "tp": 8},
        dp=8,
        dp_attention=True,
        load=Load(concurrency=128, requests=384),  # one of the two replicas' share
    )
    layout = disagg.DisaggLayout(
        prefill=1,
        decode=1,
        prefill_tp=8,
        decode_tp=8,
        prefill_ep=8,
        decode_dp=8,
        dp_within_tp=True,
    )
    split = bench(
        **common,
        settings={"engine": "sglang", "tp": 8},
        load=Load(concurrency=256, requests=768),
        disagg=layout,
    )
    assert (agg["gpus"], split["gpus"]) == (8, 16)
    assert split["median_tpot_ms"] < 50 < agg["median_tpot_ms"]  # a 50 ms TPOT budget
    # no other group's prefill in decode
    assert split["p99.9_itl_ms"] < 0.2 * agg["p99.9_itl_ms"]
    assert split["output_throughput_per_gpu"] > agg["output_throughput_per_gpu"]
    assert split["median_ttft_ms"] > agg["median_ttft_ms"]  # one prefill instance queues


def test_the_prefill_pool_serves_a_shared_prefix_from_its_cache(cli: Cli) -> None:
    """A prefix every request opens with (vllm bench serve's --random-prefix-len) is computed
    once by each prefill scheduler and then served from its cache: prompts prefill their own
    tokens, so TTFT falls below the whole prompt's, while the decode pool reads every prompt's
    whole KV. vLLM's decode instance pulls only what its own cache lacks; SGLang's receives
    every prompt whole; SGLang's --disable-radix-cache prefills the prefix every time."""
    base = ["simulate", "--preset", "llama-3.1-8b", "--gpu", "h100", "--concurrency", "8"]
    base += ["--requests", "64", "--output-len", "100", "--disagg", "2p2d", "--json"]

    def run(*flags: str) -> dict[str, Any]:
        got = cli(*base, *flags)
        assert got.code == 0, got.out
        body: dict[str, Any] = got.json()
        return body

    whole = run("--prompt-len", "4500")
    cached = run("--prompt-len", "500", "--random-prefix-len", "4000")
    own = run("--prompt-len", "500")
    assert cached["total_input_tokens"] == whole["total_input_tokens"] == 64 * 4500
    # the first request at each of the two prefill schedulers computes the prefix
    hits = cached["prefix_cache"]
    assert (hits["misses"], hits["gpu_hits"], hits["requests_with_prefix"]) == (2, 62, 64)
    assert hits["decode_hits"] == 62  # each decode scheduler's first request brings it
    text = cli(*base[:-1], "--prompt-len", "500", "--random-prefix-len", "4000").out
    assert re.search(r"Prefix from the GPU cache: +62\n", text)
    assert re.search(r"Prefix prefilled: +2\n", text)
    assert "KV transfer: 81.9 MB a request" in text  # 625 tokens a request cross on average
    assert own["median_ttft_ms"] < cached["median_ttft_ms"] < whole["median_ttft_ms"]
    # vLLM's decode instance (prefix caching on) pulls a prompt less the prefix it holds: the
    # first request at each of its two schedulers takes the prefix across, the rest their own
    # tokens (Llama-3.1-8B's KV: 131,072 B a token)
    moved = [
        r["deployment"]["disagg"]["transfer"]["mean_bytes_per_request"] for r in (cached, whole)
    ]
    assert moved == [(64 * 4500 - 62 * 4000) / 64 * 131072, 4500 * 131072]
    assert cached["median_tpot_ms"] == pytest.approx(whole["median_tpot_ms"], rel=0.1)
    assert cached["median_tpot_ms"] > own["median_tpot_ms"]
    # SGLang's decode server keeps no radix cache: every prompt's KV crosses whole
    sglang = ["--engine", "sglang", "--prompt-len"]
    radix = run(*sglang, "500", "--random-prefix-len", "4000")
    assert (radix["prefix_cache"]["gpu_hits"], radix["prefix_cache"]["decode_hits"]) == (62, 0)
    assert radix["deployment"]["disagg"]["transfer"]["mean_bytes_per_request"] == 4500 * 131072
    # SGLang's prefill server without its radix cache computes every prefix
    off = run(*sglang, "500", "--random-prefix-len", "4000", "--disable-radix-cache")
    assert off["prefix_cache"]["gpu_hits"] == 0
    assert any("--disable-radix-cache" in note for note in off["notes"])
    plain = run(*sglang, "4500", "--disable-radix-cache")
    assert off["median_ttft_ms"] == pytest.approx(plain["median_ttft_ms"])


def test_an_sglang_decode_pool_speculates_as_one_server_does(cli: Cli) -> None:
    """Under --disagg, SGLang's decode pool verifies the drafts: at one client its TPOT is the
    aggregated server's with the same speculation (the same decode steps, the same accepted
    drafts), well under the plain pool's; both pools' lines carry the speculation flags (the
    prefill server hands the decode pool what the draft starts from). vLLM's pools with
    speculation are refused, naming the flag."""
    base = ["simulate", "--preset", "llama-3.1-8b", "--gpu", "h100", "--concurrency", "1"]
    base += ["--requests", "20", "--prompt-len", "2000", "--output-len", "300", "--json"]
    spec = ["--spec-alpha", "0.7", "--spec-k", "3"]
    split = cli(*base, "--engine", "sglang", "--disagg", "1p1d", *spec).json()
    alone = cli(*base, "--engine", "sglang", *spec).json()
    plain = cli(*base, "--engine", "sglang", "--disagg", "1p1d").json()
    assert split["median_tpot_ms"] == pytest.approx(alone["median_tpot_ms"], rel=1e-9)
    assert split["median_tpot_ms"] < plain["median_tpot_ms"] / 1.5
    assert split["speculation"] == alone["speculation"] and plain["speculation"] is None
    pools = split["deployment"]["disagg"]
    for role in ("prefill", "decode"):
        assert "--speculative-num-steps 3" in pools[role]["command"]
    assert any(note.startswith("decode pool: speculative decoding") for note in split["notes"])
    refused = cli(*base, "--disagg", "1p1d", *spec)
    assert refused.code == 2 and refused.json()["field"] == "--spec-alpha"


def test_a_disaggregated_sweep_point_is_the_run_at_that_concurrency(cli: Cli) -> None:
    """--sweep concurrency=... reruns the pools at each point on that point's requests: a
    point is the plain run at its concurrency, and throughput grows with the clients."""
    base = ["simulate", "--preset", "llama-3.1-8b", "--gpu", "h100", "--requests", "64"]
    base += ["--prompt-len", "2000", "--output-len", "100", "--disagg", "1p1d", "--json"]
    swept = cli(*base, "--concurrency", "8", "--sweep", "concurrency=1,4,16").json()["sweep"]
    assert [p["max_concurrency"] for p in swept] == [1, 4, 16]
    alone = cli(*base, "--concurrency", "4").json()
    for key in ("output_throughput", "median_tpot_ms", "median_ttft_ms"):
        assert swept[1][key] == pytest.approx(alone[key], rel=1e-9)
    rates = [p["output_throughput"] for p in swept]
    assert rates == sorted(rates)


def test_a_paced_closed_loop_is_the_open_loop_below_its_clients_and_the_loop_above(
    cli: Cli,
) -> None:
    """--rate R --concurrency N (vllm bench serve --request-rate --max-concurrency): requests
    go at their arrival times, at most N in flight. Far below what N clients sustain it is the
    open loop at R; far above, the closed loop of N."""
    base = ["simulate", "--preset", "llama-3.1-8b", "--gpu", "h100", "--requests", "100"]
    base += ["--prompt-len", "1000", "--output-len", "100", "--disagg", "1p1d", "--json"]
    keys = ("output_throughput", "median_ttft_ms", "median_tpot_ms")

    def figures(*flags: str) -> list[float]:
        got = cli(*base, *flags).json()
        return [got[k] for k in keys]

    assert figures("--rate", "2", "--concurrency", "64") == figures("--rate", "2")
    paced, loop = figures("--rate", "50", "--concurrency", "4"), figures("--concurrency", "4")
    assert paced == pytest.approx(loop, rel=0.02)
    assert figures("--rate", "50")[0] > 1.2 * paced[0]


def test_a_vllm_pool_takes_its_executor_and_refuses_multi_step(cli: Cli) -> None:
    """A vLLM pool's own --distributed-executor-backend is its line's; V0's multi-step rounds,
    which the pools' connectors do not run beside, are refused naming the option."""
    base = ["simulate", "--preset", "llama-3.1-8b", "--gpu", "h100", "--concurrency", "8"]
    base += ["--prompt-len", "500", "--output-len", "50", "--requests", "16", "--disagg", "1p1d"]
    got = cli(*base, "--decode-args", "--distributed-executor-backend mp", "--json")
    assert got.code == 0, got.err
    pools = got.json()["deployment"]["disagg"]
    assert pools["decode"]["command"].endswith("--distributed-executor-backend mp")
    assert "--distributed-executor-backend" not in pools["prefill"]["command"]
    bad = cli(*base, "--prefill-args", "--num-scheduler-steps 4", "--json")
    assert bad.code == 2 and bad.json()["field"] == "--prefill-args"
    assert "multi-step" in bad.json()["error"]


def test_vllm_pools_need_a_release_with_their_connector(cli: Cli) -> None:
    """vLLM's pools run NixlConnector, which its factory registers from 0.9.0: an earlier
    release is refused by --engine-version, as is a connector named on a release before it."""
    base = ["simulate", "--preset", "llama-3.1-8b", "--gpu", "h100", "--concurrency", "8"]
    base += ["--prompt-len", "500", "--output-len", "50", "--requests", "16", "--disagg", "1p1d"]
    old = cli(*base, "--engine-version", "0.8.5", "--json")
    assert old.code == 2 and old.json()["field"] == "--engine-version"
    assert "no NixlConnector (from 0.9.0)" in old.json()["error"]
    assert cli(*base, "--engine-version", "0.9.0", "--json").code == 0
    lmcache = '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'
    capacity = ("capacity", "--preset", "llama-3.1-8b", "--gpu", "h100", "--json")
    named = cli(*capacity, "--engine-version", "0.8.4", "--kv-transfer-config", lmcache)
    assert named.code == 2 and "no LMCacheConnectorV1 (from 0.8.5)" in named.json()["error"]


def test_sglang_pools_need_a_release_with_disaggregation_and_their_backend(cli: Cli) -> None:
    """SGLang took --disaggregation-mode in 0.4.5 (over Mooncake, with no flag to name it),
    --disaggregation-transfer-backend in 0.4.6 and MoRI in 0.5.9: an earlier release is refused
    by --engine-version, and 0.4.5's line leaves the backend flag out."""
    base = ["simulate", "--preset", "llama-3.1-8b", "--gpu", "h100", "--engine", "sglang"]
    base += ["--concurrency", "8", "--prompt-len", "500", "--output-len", "50", "--requests", "16"]
    base += ["--disagg", "1p1d", "--json"]
    old = cli(*base, "--engine-version", "0.4.4")
    assert old.code == 2 and old.json()["field"] == "--engine-version"
    assert "no prefill/decode disaggregation" in old.json()["error"]
    first = cli(*base, "--engine-version", "0.4.5").json()["deployment"]["disagg"]
    assert first["decode"]["command"].endswith("--disaggregation-mode decode")
    named = cli(*base, "--engine-version", "0.4.6").json()["deployment"]["disagg"]
    assert named["decode"]["command"].endswith("--disaggregation-transfer-backend mooncake")
    mori = ("--disaggregation-transfer-backend", "mori")
    early = cli(*base, *mori, "--engine-version", "0.5.8")
    assert early.code == 2 and "no mori transfer backend (from 0.5.9)" in early.json()["error"]
    assert cli(*base, *mori, "--engine-version", "0.5.9").code == 0


def test_each_pool_takes_its_own_engine_flags(cli: Cli) -> None:
    """--prefill-args / --decode-args: a pool's own engine flags, as on its line, override the
    shared ones there (SGLang's --max-running-requests is the instance's, shared by its
    attention-DP groups): the decode pool's running cap and graphs, the prefill pool's chunk.
    A cap below the clients queues them at the decode pool: TTFT grows, TPOT falls. A flag the
    pools share, one the plan does not model, or a bad value is one error naming the option."""
    base = ["simulate", "--model", str(MODELS / "deepseek-ai--DeepSeek-R1"), "--gpu", "h200"]
    base += ["--engine", "sglang", "--tp", "8", "--concurrency", "64", "--prompt-len", "2000"]
    base += ["--output-len", "300", "--requests", "192", "--disagg", "1p1d", "--json"]
    plain = cli(*base).json()
    own = cli(
        *base, "--decode-args", "--max-running-requests 32 --cuda-graph-max-bs 32",
        "--prefill-args", "--chunked-prefill-size 4096",
    ).json()  # fmt: skip
    pools = own["deployment"]["disagg"]
    assert (
        pools["decode"]["max_num_seqs"] == 32 and pools["prefill"]["max_num_batched_tokens"] == 4096
    )
    assert "--cuda-graph-max-bs 32" in pools["decode"]["command"]
    assert "--max-running-requests 32 " in pools["decode"]["command"]
    assert "--chunked-prefill-size 4096" in pools["prefill"]["command"]
    assert "--cuda-graph-max-bs 32" not in pools["prefill"]["command"]
    assert own["median_ttft_ms"] > 2 * plain["median_ttft_ms"]
    assert own["median_tpot_ms"] < plain["median_tpot_ms"]
    # eight attention-DP groups share the instance's cap
    grouped = cli(*base, "--decode-dp", "8", "--decode-args", "--max-running-requests 64").json()
    assert grouped["deployment"]["disagg"]["decode"]["max_num_seqs"] == 8
    for args, flag in (
        (("--decode-args", "--tp-size 4"), "--decode-args"),
        (("--prefill-args", "--no-such-flag 1"), "--prefill-args"),
        (("--decode-args", "--mem-fraction-static 1.5"), "--decode-args"),
        (("--decode-args", "--max-running-requests many"), "--decode-args"),
        (("--prefill-args", "--chunked-prefill-size '4096"), "--prefill-args"),
        (("--decode-args", "--max-running-requests 32 64"), "--decode-args"),
        (("--decode-args", "-x 3"), "--decode-args"),
    ):
        bad = cli(*base, *args)
        assert bad.code == 2 and bad.json()["field"] == flag, (args, bad.out)
