"""docs/method.md §4 pinned, the invariants of E and S, and `planner spec` end to end."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from helpers import Result
from hypothesis import given
from hypothesis import strategies as st

from planner.core import speculative as sp

Cli = Callable[..., Result]
C = 0.05


@pytest.mark.parametrize(("alpha", "e"), [(0.9, 3.44), (0.7, 2.53), (0.5, 1.88), (0.3, 1.42)])
def test_expected_tokens_at_k3(alpha: float, e: float) -> None:
    assert sp.expected_tokens(alpha, 3) == pytest.approx(e, abs=0.005)


def test_alpha_07_k4_with_and_without_verify_cost() -> None:
    assert sp.speedup(0.7, 4, C, 0.0) == pytest.approx(2.31, abs=0.005)
    assert sp.speedup(0.7, 4, C, 0.5) == pytest.approx(0.87, abs=0.005)  # a slowdown


def test_best_k_at_alpha_03_and_09() -> None:
    low = sp.best(0.3, list(range(1, 17)), C, 0.0)
    assert (low.k, round(low.speedup, 2)) == (2, 1.26)
    # REFERENCE: "k >= 12, 4.66x". Capped at 12 that is k = 12, 4.66x; over the default
    # 1..16 the optimum is flat and sits at k = 13 (4.674x).
    capped = sp.best(0.9, list(range(1, 13)), C, 0.0)
    assert (capped.k, round(capped.speedup, 2)) == (12, 4.66)
    high = sp.best(0.9, list(range(1, 17)), C, 0.0)
    assert high.k >= 12 and high.speedup == pytest.approx(4.66, abs=0.02)


def test_break_even_alpha_solves_s_equals_one() -> None:
    for k in (1, 4, 8):
        a = sp.break_even_alpha(k, C, 0.1)
        assert a is not None
        assert sp.speedup(a, k, C, 0.1) >= 1.0 > sp.speedup(a - 1e-4, k, C, 0.1)
    assert sp.break_even_alpha(4, 0.5, 0.6) is None  # C = 5.4 > k + 1 = 5: never pays
    assert sp.break_even_alpha(4, 0.5, 0.5) == 1.0  # C = k + 1: only perfect drafts break even
    assert sp.break_even_alpha(3, 0.0, 0.0) == 0.0  # free drafts pay at any alpha


@given(st.integers(min_value=1, max_value=64))
def test_speedup_is_one_at_alpha_zero_with_free_drafts(k: int) -> None:
    assert sp.speedup(0.0, k, 0.0, 0.0) == 1.0


@given(
    st.floats(min_value=0, max_value=0.999),
    st.floats(min_value=0, max_value=0.999),
    st.integers(min_value=1, max_value=40),
)
def test_expected_tokens_increasing_and_bounded(a: float, b: float, k: int) -> None:
    lo, hi = sorted((a, b))
    assert sp.expected_tokens(lo, k) <= sp.expected_tokens(hi, k) + 1e-12
    assert sp.expected_tokens(hi, k) <= sp.expected_tokens(hi, k + 1)
    assert sp.expected_tokens(hi, k) <= 1 / (1 - hi) + 1e-9


@given(st.integers(min_value=1, max_value=1000))
def test_alpha_one_gives_k_plus_one(k: int) -> None:
    assert sp.expected_tokens(1.0, k) == k + 1


def test_cli_table_best_and_flags(cli: Cli) -> None:
    r = cli("spec", "--alpha", "0.7", "--k", "1-16")
    assert r.code == 0, r.err
    assert "best k at alpha 0.7: k = 6, 2.35x" in r.out
    assert '"method": "eagle3"' in r.out and "--speculative-algorithm EAGLE3" in r.out


def test_cli_json_keys(cli: Cli) -> None:
    data = cli("spec", "--alpha", "0.3,0.7", "--k", "1-8", "--method", "mtp", "--json").json()
    assert {
        "rows",
        "best",
        "break_even_alpha",
        "v_sensitivity",
        "disable_above_concurrency",
        "flags",
    } <= data.keys()
    assert len(data["rows"]) == 16
    assert data["best"][0] == {"alpha": 0.3, "k": 2, "speedup": pytest.approx(1.39 / 1.1)}
    assert data["disable_above_concurrency"] is None  # no model given
    assert '"method": "mtp"' in data["flags"]["vllm"]
    assert "--speculative-algorithm NEXTN" in data["flags"]["sglang"]
    assert {s["v"] for s in data["v_sensitivity"]} == {0.0, 0.1, 0.25, 0.5, 1.0}


def test_cli_under_load_finds_where_speculation_stops_paying(cli: Cli) -> None:
    # Short sequences make decode compute-bound early: v grows with the batch and S falls < 1.
    data = cli(
        "spec",
        "--alpha",
        "0.6",
        "--preset",
        "llama-3.1-8b",
        "--gpu",
        "l4",
        "--context",
        "512",
        "--mean-len",
        "64",
        "--json",
    ).json()
    n = data["disable_above_concurrency"][0]["concurrency"]
    assert n is not None and 1 <= n < data["scan_limit"]
    by_batch = {p["batch"]: p for p in data["load"]}
    assert by_batch[1]["speedup"] > 1.0
    assert by_batch[1]["verify_cost_best_k"] < by_batch[max(by_batch)]["verify_cost_best_k"]


def test_cli_draft_model_costs_concurrency(cli: Cli) -> None:
    data = cli(
        "spec",
        "--alpha",
        "0.7",
        "--preset",
        "llama-3.1-70b",
        "--gpu",
        "h200",
        "--tp",
        "2",
        "--draft-model",
        "tests/data/models/meta-llama--Llama-3.2-1B-Instruct",
        "--method",
        "draft",
        "--json",
    ).json()
    d = data["draft"]
    assert d["max_seqs_paged_with_draft"] < d["max_seqs_paged_without_draft"]
    assert 0 < data["load"][0]["draft_cost"] < 0.2  # a 1B draft vs a 70B target at TP 2


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["--alpha", "1.2"], "--alpha: 1.2 is outside [0, 1]"),
        (["--alpha", "-0.1"], "--alpha"),
        (["--alpha", "x"], "--alpha"),
        (["--alpha", "0.5", "--k", "0"], "--k: 0 is outside [1, 64]"),
        (["--alpha", "0.5", "--k", "5-3"], "--k: '5-3': the range runs backwards"),
        (["--alpha", "0.5", "--k", "1-1000000000"], "--k: 1000000000 is outside [1, 64]"),
        (["--alpha", "0.5", "--k", ""], "--k: '': no k given"),
        (["--alpha", "0.5", "--draft-cost", "-1"], "--draft-cost"),
        (["--alpha", "0.5", "--verify-cost", "-1"], "--verify-cost"),
        (["--alpha", "0.5", "--method", "lookahead"], "--method"),
        (["--alpha", "0.5", "--preset", "gqa-8b"], "--gpu: required"),
    ],
)
def test_bad_input_exits_2(cli: Cli, args: list[str], text: str) -> None:
    r = cli("spec", *args)
    assert r.code == 2 and text in r.err and r.err.count("\n") == 1


A100_CASE = (
    "--alpha",
    "0.6",
    "--preset",
    "llama-3.1-8b",
    "--gpu",
    "a100",
    "--draft-cost",
    "0.1",
    "--context",
    "4096",
    "--mean-len",
    "500",
    "--json",
)


def test_no_enabling_flags_where_speculation_loses(cli: Cli) -> None:
    data = cli("spec", "--alpha", "0", "--json").json()
    assert data["enable"] is False and data["flags"] is None
    assert data["chosen"]["speedup"] < 1 and "leave it off" in data["advice"]
    never = cli("spec", "--alpha", "0.3", "--draft-cost", "0.5", "--json").json()
    assert never["flags"] is None
    # At the engine's operating point (256 on an A100) the roofline says it loses: no flags.
    at_load = cli("spec", *A100_CASE).json()
    assert at_load["chosen"]["concurrency"] == at_load["operating_concurrency"]
    assert at_load["flags"] is None


def test_k_is_picked_at_the_concurrency_and_switched_off_above_break_even(cli: Cli) -> None:
    low = cli("spec", *A100_CASE, "--concurrency", "64").json()
    stop = low["disable_above_concurrency"][0]["concurrency"]
    assert low["enable"] is True and stop > 64
    # V1 has no off-switch (disable_by_batch_size is V0's; 0.17+ refuses the key): its line
    # caps the batch there, as SGLang's does; V0 (0.6.3) switches speculation off instead
    assert "disable_by_batch_size" not in low["flags"]["vllm"]
    assert low["flags"]["vllm"].endswith(f"--max-num-seqs {stop}")
    assert f"--max-running-requests {stop}" in low["flags"]["sglang"]
    v0 = cli("spec", *A100_CASE, "--concurrency", "64", "--method", "eagle",
             "--engine-version", "0.6.3").json()  # fmt: skip
    v0_stop = v0["disable_above_concurrency"][0]["concurrency"]
    assert v0["flags"]["vllm"] == (
        f"--speculative-model '$DRAFT' --num-speculative-tokens {v0['chosen']['k']} "
        f"--speculative-disable-by-batch-size {v0_stop}"
    )
    one = cli("spec", *A100_CASE, "--concurrency", "1").json()
    assert one["chosen"]["k"] > low["chosen"]["k"]  # drafts are cheap relative at one sequence


def test_mtp_needs_mtp_layers(cli: Cli) -> None:
    r = cli(
        "spec", "--alpha", "0.7", "--preset", "llama-3.1-8b", "--gpu", "h100", "--method", "mtp"
    )
    assert r.code == 2 and "needs a target with MTP layers" in r.err
    from helpers import MODELS

    v3 = str(MODELS / "deepseek-ai--DeepSeek-V3")
    r = cli(
        "spec",
        "--alpha",
        "0.7",
        "--model",
        v3,
        "--gpu",
        "h200",
        "--tp",
        "8",
        "--method",
        "mtp",
        "--json",
    )
    assert r.code == 0 and '"method": "mtp"' in r.json()["flags"]["vllm"]


def test_the_speculation_roofline_reads_kv_as_the_step_model_does() -> None:
    """spec prices a step on the step model's terms: on AMD CDNA the KV read runs at 0.30 of
    the peak bandwidth, 0.30 / 0.62 of the weight reads' share, on Hopper at 0.89, 0.89 / 0.85
    of it, on Ampere at the weights' share, there too (one model everywhere)."""
    import numpy as np

    from planner.api.capacity import capacity_plan
    from planner.api.latency import roofline_for
    from planner.core.latency import step_ms

    for gpu, share in (("mi300x", 0.30 / 0.62), ("h100", 0.89 / 0.85), ("a100", 1.0)):
        roof = roofline_for(capacity_plan(gpu=gpu, preset="gqa-70b", tp=2))
        assert roof.attention_bandwidth_scale == pytest.approx(share)
        bw = roof.bandwidth_bytes_per_s * roof.bandwidth_efficiency
        memory = (roof.weights_bytes_per_gpu + 8 * roof.kv_bytes_per_sequence / share) / bw * 1e3
        assert step_ms(roof, np.asarray([8.0]))[0] == pytest.approx(memory + roof.overhead_ms)


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--tp", "2"), ("--context", "4096"), ("--mean-len", "500"), ("--max-batch", "64")],
)
def test_load_options_without_a_model_are_refused(cli: Cli, flag: str, value: str) -> None:
    """They size the deployment speculation is coupled to: with no model and GPU they would
    change nothing, so each is one error naming it (as --concurrency already was); with one
    they are taken."""
    r = cli("spec", "--alpha", "0.7", flag, value)
    assert r.code == 2 and flag in r.err and "--gpu" in r.err
    coupled = ("spec", "--alpha", "0.7", "--preset", "llama-3.1-8b", "--gpu", "h100")
    assert cli(*coupled, flag, value).code == 0
    if flag == "--tp":  # a 0 is refused, not taken for "unset"
        assert cli(*coupled, flag, "0").code == 2


def test_verifying_drafts_on_a_moe_reads_the_experts_they_touch() -> None:
    """The target's verification step is the engine's step model at B x (1 + k) tokens: on a
    MoE model the drafted tokens route to more experts, whose weights the step reads too (a
    roofline with the weights read fixed at the batch prices them free)."""
    import numpy as np

    from planner.core.spec_load import curve_cost
    from planner.core.step import step_time_for
    from planner.core.step.gemm import read_ms
    from planner.core.step.moe import MOE_MS_PER_IDLE_EXPERT
    from planner.sources.presets import find_gpu, load_model_preset

    model = load_model_preset("deepseek-v3")
    # on an H200 SGLang's fused MoE exits idle experts' blocks for free (its kernel tables); on
    # an A100 each newly routed expert's read replaces the early exit of its idle blocks
    for gpu_id, idle_ms in (("h200", 0.0), ("a100-sxm4-80gb", MOE_MS_PER_IDLE_EXPERT)):
        curve = step_time_for(model, find_gpu(gpu_id), tp=8, engine="sglang", version=(0, 5, 13))
        step = curve_cost(curve, 2000)
        one = np.asarray([1.0])
        gap = float(step(one, 4)[0] - step(one, 1)[0])
        bandwidth = curve.bandwidth_bytes_per_s * curve.bandwidth_efficiency
        touched = read_ms(curve.expert_weights_bytes(4) - curve.expert_weights_bytes(1), bandwidth)
        assert touched > 1.0  # top-8 of 256 experts: 4 tokens touch ~4x the weights of one
        exits = curve.moe_fixed_ms(1) - curve.moe_fixed_ms(4)
        newly_routed = curve.experts_read(4) - curve.experts_read(1)
        assert exits == pytest.approx(curve.moe_layers * newly_routed * idle_ms)
        assert touched - exits <= gap <= (touched - exits) * 1.25, gpu_id


def test_the_draft_runs_over_the_prompt_tokens_too(cli: Cli) -> None:
    """Under speculation the draft passes over every prompt token a step prefills (its KV for
    them): a prompt-only step costs (1 + c) x the plain one, a mixed step that much more than
    its decode part alone, and at one client the TTFT rises by about c x the prefill while the
    TPOT falls by spec's speedup."""
    from planner.core.step import step_time_for
    from planner.sim.cost import CurveCost
    from planner.sources.models import resolve_model
    from planner.sources.presets import find_gpu

    curve = step_time_for(resolve_model("llama-3.1-8b", None), find_gpu("h100"))
    plain, spec = CurveCost(curve), CurveCost(curve, spec_k=4, spec_draft_cost=C)
    prompt = plain.step_ms(0, 0, 4096, 4096 * 2048.5)
    assert spec.step_ms(0, 0, 4096, 4096 * 2048.5) == pytest.approx((1 + C) * prompt)
    decode_only = spec.step_ms(32, 32 * 1000, 0, 0.0)
    assert spec.step_ms(32, 32 * 1000, 4096, 4096 * 2048.5) > decode_only + C * prompt
    base = ["simulate", "--preset", "llama-3.1-8b", "--gpu", "h100", "--concurrency", "1"]
    base += ["--requests", "10", "--prompt-len", "4000", "--output-len", "100", "--json"]
    off, on = cli(*base).json(), cli(*base, "--spec-alpha", "0.7", "--spec-k", "4").json()
    assert off["median_ttft_ms"] < on["median_ttft_ms"] < (1 + 2 * C) * off["median_ttft_ms"]
    assert on["median_tpot_ms"] < off["median_tpot_ms"] / 1.5


@pytest.mark.parametrize(
    ("method", "version", "why"),
    [
        ("eagle3", "0.9.0", None),
        ("eagle3", "0.8.5", "falls back to V0 for every speculative method"),
        ("eagle3", "0.7.3", "EAGLE-3 runs on vLLM's V1 engine from 0.8.5"),
        ("ngram", "0.7.3", None),
        ("draft", "0.12.0", "refuses draft models"),
        ("draft", "0.15.0", None),
        ("medusa", "0.32.0", None),
        ("medusa", "0.33.0", "dropped Medusa"),
    ],
)
def test_spec_flags_are_the_release_s(cli: Cli, method: str, version: str, why: str | None) -> None:
    """The speculation flags are written for the release the plan runs, and a method that
    release would not run as planned is refused by --method: vLLM's V1 fell back to V0 for
    every method before 0.9, EAGLE-3 is V1's from 0.8.5, V1 refused draft models 0.10 - 0.14,
    and 0.33 dropped Medusa. Before 0.8.2 the flags are --speculative-model and its siblings."""
    where = ("--alpha", "0.8", "--preset", "llama-3.1-8b", "--gpu", "h100", "--concurrency", "1")
    got = cli("spec", *where, "--method", method, "--engine-version", version, "--json")
    if why is not None:
        assert got.code == 2 and why in got.json()["error"], got.out
        assert got.json()["field"] == "--method"
        return
    assert got.code == 0, got.err
    line = got.json()["flags"]["vllm"]
    old_form = tuple(map(int, version.split("."))) < (0, 8, 2)
    assert ("--speculative-model" in line) == old_form
    assert ("--speculative-config" in line) == (not old_form)


def test_mtp_is_named_per_model_before_0_11(cli: Cli) -> None:
    """vLLM named DeepSeek's MTP `deepseek_mtp` before the generic `mtp` (0.11)."""
    where = ("--alpha", "0.8", "--preset", "deepseek-v3", "--gpu", "h200", "--tp", "8")
    for version, name in (("0.10.1", "deepseek_mtp"), ("0.11.0", "mtp")):
        got = cli("spec", *where, "--method", "mtp", "--engine-version", version, "--json")
        assert got.code == 0, got.err
        assert f'"method": "{name}"' in got.json()["flags"]["vllm"], version


def test_capacity_refuses_a_method_its_engine_has_not(cli: Cli) -> None:
    """`capacity --spec-alpha` appends flags the engine takes, or refuses by --spec-method: SGLang
    has no Medusa (its line once ended in a note), vLLM 0.8.5's V1 falls back to V0 for it."""
    where = ("capacity", "--preset", "llama-3.1-8b", "--gpu", "h100", "--spec-alpha", "0.8")
    sglang = cli(*where, "--engine", "sglang", "--spec-method", "medusa", "--json")
    assert sglang.code == 2 and sglang.json()["field"] == "--spec-method"
    old = cli(*where, "--engine-version", "0.8.5", "--json")
    assert old.code == 2 and "falls back to V0" in old.json()["error"]
    ok = cli(*where, "--json").json()
    assert ok["speculation"]["enable"] and "not supported" not in ok["flags"]["vllm"]
    assert ok["flags"]["vllm"].count("--max-num-seqs") == 1  # no cap beyond the plan's


def test_sglang_algorithms_are_the_release_s(cli: Cli) -> None:
    """SGLang took NGRAM from 0.5.3 and EAGLE3 from 0.4.5, and has no Medusa: a release without
    the algorithm is refused by --method, naming the release that has it."""
    where = ("--alpha", "0.8", "--preset", "llama-3.1-8b", "--gpu", "h100", "--engine", "sglang")
    where += ("--concurrency", "1", "--json")
    for method, version, why in (
        ("ngram", "0.5.2", "SGLang 0.5.2 has no NGRAM (from 0.5.3)"),
        ("eagle3", "0.4.4", "SGLang 0.4.4 has no EAGLE3 (from 0.4.5)"),
        ("medusa", "0.5.13", "SGLang has no medusa"),
    ):
        got = cli("spec", *where, "--method", method, "--engine-version", version)
        assert got.code == 2 and why in got.json()["error"], (method, got.out)
    ngram = cli("spec", *where, "--method", "ngram", "--engine-version", "0.5.3").json()
    assert ngram["flags"]["sglang"].startswith("--speculative-algorithm NGRAM")


def test_v0_speculation_is_the_release_s(cli: Cli) -> None:
    """V0's speculation by release: EAGLE heads from 0.5.5, the off-switch from 0.4.3, the V2
    block manager asked for through 0.6.2, and no speculation beside chunked prefill through
    0.6.3 (a 40K context turns it on there), refused by --method naming the way out."""
    where = ("--alpha", "0.6", "--preset", "llama-3.1-8b", "--gpu", "a100", "--draft-cost", "0.1")
    where += ("--context", "4096", "--mean-len", "500", "--concurrency", "64", "--json")
    early = cli("spec", *where, "--method", "eagle", "--engine-version", "0.5.4")
    assert early.code == 2 and "no eagle speculation (from 0.5.5)" in early.json()["error"]
    line = cli("spec", *where, "--method", "eagle", "--engine-version", "0.6.2").json()
    assert line["flags"]["vllm"].endswith("--use-v2-block-manager")
    assert "--speculative-disable-by-batch-size" in line["flags"]["vllm"]
    on_v2 = cli("spec", *where, "--method", "eagle", "--engine-version", "0.6.3").json()
    assert "--use-v2-block-manager" not in on_v2["flags"]["vllm"]
    long = ("--alpha", "0.6", "--preset", "llama-3.1-8b", "--gpu", "a100", "--context", "40000")
    chunked = cli("spec", *long, "--method", "ngram", "--engine-version", "0.6.3", "--json")
    assert chunked.code == 2 and "--no-enable-chunked-prefill" in chunked.json()["error"]
    assert cli("spec", *long, "--method", "ngram", "--engine-version", "0.6.4", "--json").code == 0
