"""docs/method.md §3 pinned, the derived model recomputed by hand, --validate, bad input."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import Result
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.core import slo
from planner.errors import InputError
from planner.sources.presets import load_model_preset

Cli = Callable[..., Result]
REF = slo.StepModel(a_ms=5.0, b_ms=0.086, prefill_ms_per_token=0.047, source="reference")


@pytest.mark.parametrize(("tpot", "cap"), [(12, 81), (50, 523)])
def test_reference_caps(tpot: float, cap: int) -> None:
    assert slo.batch_cap(REF, tpot) == cap


def test_batch_1_to_128_latency_and_throughput() -> None:
    t1, t128 = REF.step_ms(1), REF.step_ms(128)
    assert t128 / t1 == pytest.approx(3.1, abs=0.05)
    assert (128 / t128) / (1 / t1) == pytest.approx(40.6, abs=0.1)


def test_prefill_stalls() -> None:
    assert slo.prefill_ms(REF, 4000) == pytest.approx(193, abs=0.5)
    assert slo.prefill_ms(REF, 512) == pytest.approx(29, abs=0.1)  # a + 0.047 x 512
    assert slo.max_prefill_chunk(REF, 29.064) == 512


def test_budget_at_or_below_a_is_refused() -> None:
    with pytest.raises(
        InputError, match=r"no batch size meets TPOT 5 ms: the fixed step cost is 5\.00"
    ):
        slo.batch_cap(REF, 5.0)


def test_fit_recovers_a_line_and_reports_r2() -> None:
    batches = [1, 8, 32, 64, 128]
    model = slo.fit(batches, [5.0 + 0.086 * b for b in batches], 0.047)
    assert model.a_ms == pytest.approx(5.0) and model.b_ms == pytest.approx(0.086)
    assert model.r2 == pytest.approx(1.0)
    with pytest.raises(InputError, match="2 or more distinct batch sizes"):
        slo.fit([8, 8], [6.0, 6.1], 0.047)


def test_derived_a_and_b_for_gqa70b_on_mi300x_by_hand(cli: Cli) -> None:
    # vLLM 0.33's pool (0.92 of the card): memory binds before the latency cap
    data = cli("slo", "--tpot", "80", "--preset", "gqa-70b", "--gpu", "mi300x",
               "--engine-version", "0.33", "--batch", "1,32", "--json").json()  # fmt: skip
    spec = load_model_preset("gqa-70b")
    bandwidth = 5.3e12 * 0.62  # MI300X 5.3 TB/s x the AMD achievable share
    embedding = spec.vocab_size * spec.hidden_size * 2  # gathered, not read
    # 80 layers x (17 us of kernels + 4 GEMMs, QKV, O, gate_up and down, x CDNA's 6 us more a
    # GEMM) + vLLM's step overhead
    fixed = 80 * (0.017 + 4 * 0.006) + 0.2
    # a 2,000-token KV read, at 0.30 of the peak (CDNA's decode attention)
    kv_ms = 327_680 * 2000 / (5.3e12 * 0.30) * 1e3
    # one sequence: a pass over the weights (one token's multiply adds about 1 us to it under
    # the GEMMs' norm), the fixed costs, its KV read and the sampler's fp32 cast and argmax
    # over the vocabulary (10 bytes a logit; one GPU: nothing to gather)
    logits_ms = spec.vocab_size * 10 / bandwidth * 1e3
    t1 = data["step_ms_at"]["1"]
    weights_ms = (140e9 - embedding) / bandwidth * 1e3
    assert t1 == pytest.approx(weights_ms + fixed + kv_ms + logits_ms, abs=0.002)
    # b, read between 1 and 32 sequences: the KV read and what the multiply of 32 tokens adds
    # to the weights' stream under the norm (a twelfth of it here)
    terms = data["terms_at"]
    growth = (terms["32"]["linear_ms"] - terms["1"]["linear_ms"]) / 31
    assert 0 < growth < kv_ms / 10
    assert data["b_ms"] == pytest.approx(kv_ms + growth + logits_ms)
    assert data["a_ms"] == pytest.approx(t1 - data["b_ms"])
    assert any("weights read per step" in line for line in data["arithmetic"])
    assert any(
        "the KV at x 0.484 of that: cdna3's decode attention" in x for x in data["arithmetic"]
    )
    assert any(
        "80 layers x 41 us kernels (of which 6.0 us a GEMM kernel on cdna3)" in x
        for x in data["arithmetic"]
    )
    # the memory cap is the engine's own pool for the line slo prints, as `planner capacity
    # --tpot` plans it (one answer): at the step budget the TPOT sets, below the engine's own,
    # the smaller activation peak leaves more KV than the default line's 67 sequences
    engine = cli("capacity", "--preset", "gqa-70b", "--gpu", "mi300x", "--engine-version", "0.33",
                 "--json").json()  # fmt: skip
    budgeted = cli("capacity", "--tpot", "80", "--preset", "gqa-70b", "--gpu", "mi300x",
                   "--engine-version", "0.33", "--json").json()  # fmt: skip
    assert engine["max_seqs_paged"] == 67 < budgeted["max_seqs_paged"] == data["memory_cap"]
    assert data["binding"] == "latency" and data["flags"] == budgeted["flags"]
    # the decode steps alone allow 70, but each output token brings 1.97 prompt tokens of the
    # reference workload at 0.305 ms each: a + B (b + 1.97 x 0.305) <= 80 holds to B = 32
    ratio = data["prompt_tokens_per_output_token"]
    assert ratio == pytest.approx(1.97, abs=0.005) and data["batch_cap"] == 70
    per_seq = data["b_ms"] + ratio * data["prefill_ms_per_token"]
    assert data["operating_concurrency"] == int((80 - data["a_ms"]) / per_seq) == 32
    assert "--max-num-seqs 32" in data["flags"]["vllm"]
    # at 150 ms the KV pool binds first: the deployment's line, as `capacity --tpot` prints it
    loose = cli("slo", "--tpot", "150", "--preset", "gqa-70b", "--gpu", "mi300x",
                "--engine-version", "0.33", "--json").json()  # fmt: skip
    line = cli("capacity", "--tpot", "150", "--preset", "gqa-70b", "--gpu", "mi300x",
               "--engine-version", "0.33", "--json").json()  # fmt: skip
    held = line["max_seqs_paged"]
    assert loose["binding"] == "memory" and loose["operating_concurrency"] == held >= 67
    assert f"--max-num-seqs {held} " in loose["flags"]["vllm"]
    assert loose["flags"] == line["flags"]
    # the text says the budget the line sets, and where it was set
    text = cli("slo", "--tpot", "150", "--preset", "gqa-70b", "--gpu", "mi300x",
               "--engine-version", "0.33").out  # fmt: skip
    budget = loose["step_budget"]
    assert f"step budget {budget['tokens']:,} tokens (set at {budget['at_batch']} " in text
    assert f"--max-num-batched-tokens {budget['tokens']} " in loose["flags"]["vllm"]


def test_compute_bound_knee_switches_the_slope() -> None:
    model = slo.StepModel(
        a_ms=10.3, b_ms=0.01, memory_a_ms=10.0, compute_ms_per_seq=0.1, source="derived"
    )
    assert model.knee_batch == pytest.approx(10.0 / 0.09)
    assert model.step_ms(1000) == pytest.approx(0.3 + 0.1 * 1000)  # compute-bound
    assert slo.batch_cap(model, 50.3) == 500


def test_validate_finds_goodput_cap_below_the_curve(cli: Cli) -> None:
    data = cli("slo", "--tpot", "12", "--validate", "--rate", "20", "--json").json()
    assert data["batch_cap"] == 81
    assert 20 <= data["validated_cap"] <= 32 < 81  # docs/method.md §5: about 24-32
    assert len(data["validation"]["caps"]) >= 6


def test_json_keys_and_chunk_flags(cli: Cli) -> None:
    data = cli("slo", "--tpot", "50", "--ttft", "300", "--prompt-len", "4000", "--json").json()
    for key in (
        "a_ms",
        "b_ms",
        "source",
        "batch_cap",
        "memory_cap",
        "operating_concurrency",
        "binding",
        "max_prefill_chunk_tokens",
        "throughput_tok_s_at_cap",
        "validated_cap",
        "flags",
    ):
        assert key in data
    assert data["source"] == "reference" and data["batch_cap"] == 523
    assert data["max_prefill_chunk_tokens"] == 957  # (50 - 5) / 0.047
    assert data["ttft_single_prefill_fits"] is True  # 193 ms <= 300 ms
    assert "--chunked-prefill-size 957" in data["flags"]["sglang"]
    # at B = 523 the decode step alone is 49.98 ms; the reference workload's requests bring
    # 1.97 prompt tokens per output token, so the mean step is 5 + B (0.086 + 1.97 x 0.047)
    # <= 50 up to B = 251 (49.98 ms), and the line budgets its decodes plus the room left:
    # (50 - 5 - 0.086 x 251) / 0.047 = 498 prompt tokens
    assert data["prompt_tokens_per_output_token"] == pytest.approx(1.9698, abs=1e-4)
    assert data["batch_cap"] == 523 and data["operating_concurrency"] == 251
    assert data["prefill_room_at_full_batch_tokens"] == 498
    assert "--max-num-seqs 251 --max-num-batched-tokens 749" in data["flags"]["vllm"]
    assert "--max-running-requests 251" in data["flags"]["sglang"]
    assert any("the line runs 251" in w for w in data["warnings"])


def test_validated_cap_is_what_the_flags_run(cli: Cli) -> None:
    data = cli("slo", "--tpot", "12", "--validate", "--rate", "20", "--json").json()
    assert data["validated_cap"] < data["batch_cap"] == 81
    assert data["operating_concurrency"] == data["validated_cap"]
    assert f"--max-num-seqs {data['validated_cap']} " in data["flags"]["vllm"]


@settings(max_examples=200, deadline=None)
@given(
    a=st.floats(0.5, 50),
    b=st.floats(0.001, 2),
    prefill=st.floats(0.001, 1),
    ratio=st.floats(0.01, 30),
    budgets=st.tuples(st.floats(1, 500), st.floats(1, 500)),
)
def test_balanced_cap_never_falls_as_the_budget_loosens(
    a: float, b: float, prefill: float, ratio: float, budgets: tuple[float, float]
) -> None:
    model = slo.StepModel(a_ms=a, b_ms=b, prefill_ms_per_token=prefill, source="given")
    tight, loose = sorted(budgets)
    if model.step_ms(1) > tight:
        return  # no batch meets the tighter budget
    caps = [
        slo.balanced_cap(model, budget, slo.batch_cap(model, budget), ratio)
        for budget in (tight, loose)
    ]
    assert 1 <= caps[0] <= caps[1]
    # the cap is the largest batch whose mean step meets the budget (or the floor of one)
    assert caps[0] == 1 or slo.mean_step_ms(model, caps[0], ratio) <= tight + 1e-9
    assert slo.mean_step_ms(model, caps[0] + 1, ratio) > tight or caps[0] == slo.batch_cap(
        model, tight
    )


def test_a_looser_tpot_never_runs_fewer_sequences(cli: Cli) -> None:
    # the old rule (keep a 512-token chunk, dropped where one sequence could not) ran 117 at
    # 19 ms and 1 at 20 ms for Llama-3.1-8B on an H100
    where = ("--preset", "llama-3.1-8b", "--gpu", "h100", "--json")
    lines = [
        cli("slo", *where, "--tpot", str(t)).json()["operating_concurrency"]
        for t in (12, 19, 20, 21, 30)
    ]
    assert lines == sorted(lines) and lines[1] > 1


def test_the_workload_sets_how_much_prefill_a_batch_brings(cli: Cli) -> None:
    # sharegpt's requests bring 1.07 prompt tokens per output token, the reference's 1.97:
    # 5 + B (0.086 + 1.0688 x 0.047) <= 50 holds to B = 330
    data = cli("slo", "--tpot", "50", "--workload", "sharegpt", "--json").json()
    assert data["prompt_tokens_per_output_token"] == pytest.approx(1.0688, abs=1e-4)
    assert data["operating_concurrency"] == 330
    assert "--max-num-seqs 330 " in data["flags"]["vllm"]


def test_the_lengths_given_set_how_much_prefill_a_batch_brings(cli: Cli) -> None:
    # 8,000-token prompts for 1,000-token outputs: 5 + B (0.086 + 8 x 0.047) <= 50 to B = 97,
    # whatever the workload (which stays --validate's)
    args = ("--tpot", "50", "--prompt-len", "8000", "--output-len", "1000", "--json")
    data = cli("slo", *args).json()
    assert data["prompt_tokens_per_output_token"] == 8.0
    assert data["operating_concurrency"] == 97 == int(45 / (0.086 + 8 * 0.047))
    assert any("the lengths given" in w for w in data["warnings"])
    assert cli("slo", *args, "--workload", "sharegpt").json()["operating_concurrency"] == 97


def test_rate_without_validate_is_an_error(cli: Cli) -> None:
    r = cli("slo", "--tpot", "12", "--rate", "20")
    assert r.code == 2 and "--rate" in r.err and "--validate" in r.err


def test_ttft_warning_when_a_full_batch_leaves_little_prefill_room(cli: Cli) -> None:
    args = ("--tpot", "12", "--ttft", "100", "--prompt-len", "4000", "--validate", "--rate", "20")
    data = cli("slo", *args, "--json").json()
    room = data["prefill_room_at_full_batch_tokens"]
    assert 0 < room < 4000
    assert any("over TTFT 100 ms" in w for w in data["warnings"])


def test_fit_file(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "steps.csv"
    path.write_text("batch,step_ms\n1,5.1\n16,6.4\n64,10.5\n128,16.0\n")
    data = cli("slo", "--tpot", "12", "--fit", str(path), "--json").json()
    assert data["source"].startswith("fitted: 4 points") and data["r2"] > 0.99
    assert 75 <= data["batch_cap"] <= 85


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["--tpot", "5"], "no batch size meets TPOT 5 ms: the fixed step cost is 5.00 ms"),
        (["--tpot", "0"], "--tpot: must be in (0, 3,600,000] ms (got 0)"),
        (["--tpot", "1e308"], "--tpot: must be in (0, 3,600,000] ms"),
        (["--tpot", "nan"], "--tpot: must be a finite number"),
        (["--tpot", "-3"], "--tpot"),
        (["--tpot", "50", "--ttft", "100"], "--prompt-len"),
        (["--tpot", "50", "--output-len", "100"], "--prompt-len: required with --output-len"),
        (["--tpot", "50", "--prompt-len", "10", "--output-len", "0"], "--output-len: must be >= 1"),
        (["--tpot", "50", "--a-ms", "5"], "give both a and b"),
        (["--tpot", "50", "--validate"], "--rate"),
        (["--tpot", "50", "--preset", "gqa-70b"], "--gpu"),
        (["--tpot", "50", "--bandwidth-efficiency", "1.5"], "--bandwidth-efficiency"),
    ],
)
def test_bad_input_exits_2(cli: Cli, args: list[str], text: str) -> None:
    r = cli("slo", *args)
    assert r.code == 2 and text in r.err and r.err.count("\n") == 1


@pytest.mark.parametrize(
    ("content", "text"),
    [
        ("batch,step_ms\n8,6.0\n", "measure 2 or more batch sizes"),
        ("b,t\n1,5\n2,6\n", "needs a header with columns batch,step_ms"),
        ("batch,step_ms\n1,5\nx,6\n", "line 3"),
    ],
)
def test_bad_fit_files_exit_2(cli: Cli, tmp_path: Path, content: str, text: str) -> None:
    path = tmp_path / "steps.csv"
    path.write_text(content)
    r = cli("slo", "--tpot", "12", "--fit", str(path))
    assert r.code == 2 and text in r.err and r.err.count("\n") == 1


def test_a_fit_record_past_floats_range_exits_2(cli: Cli, tmp_path: Path) -> None:
    # JSON spells integers of any size; one past float's range is a bad figure, not a traceback
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"max_concurrency": int("9" * 400), "mean_tpot_ms": 9.8}))
    r = cli("slo", "--tpot", "12", "--fit", str(path))
    assert r.code == 2 and "max_concurrency must be a finite number > 0" in r.err
    # a saved model (--save-fit) with such a term: one line naming it
    saved = tmp_path / "fit.json"
    saved.write_text(json.dumps({"planner_step_model": 1, "a_ms": int("9" * 400), "b_ms": 0.1}))
    r = cli("slo", "--tpot", "12", "--fit", str(saved))
    assert r.code == 2 and "not a saved step model (a_ms:" in r.err and r.err.count("\n") == 1


BENCH = {  # the fields `vllm bench serve --save-result` writes that --fit reads
    "backend": "vllm",
    "model_id": "meta-llama/Llama-3.1-8B-Instruct",
    "num_prompts": 320,
    "max_concurrency": 32,
    "mean_tpot_ms": 9.87,
    "median_tpot_ms": 9.8,
}


def test_fit_on_a_vllm_bench_json_reproduces_its_tpot(cli: Cli, tmp_path: Path) -> None:
    import json

    path = tmp_path / "vllm-bench.json"
    path.write_text(json.dumps(BENCH, indent=2))
    data = cli(
        "slo",
        "--tpot",
        "20",
        "--fit",
        str(path),
        "--preset",
        "llama-3.1-8b",
        "--gpu",
        "h100",
        "--batch",
        "32",
        "--json",
    ).json()
    assert data["step_ms_at"]["32"] == pytest.approx(9.87, rel=0.05)
    assert abs(data["fit_residuals"][0]["residual_pct"]) < 5
    saved = tmp_path / "model.json"
    first = cli(
        "slo",
        "--tpot",
        "20",
        "--fit",
        str(path),
        "--preset",
        "llama-3.1-8b",
        "--gpu",
        "h100",
        "--save-fit",
        str(saved),
        "--json",
    ).json()
    again = cli("slo", "--tpot", "20", "--fit", str(saved), "--json").json()
    assert again["a_ms"] == pytest.approx(first["a_ms"]) and again["b_ms"] == first["b_ms"]


def test_fit_on_several_bench_files_and_sglang_lines(cli: Cli, tmp_path: Path) -> None:
    import json

    files = []
    for conc, tpot in ((1, 6.9), (16, 7.5), (64, 9.5)):
        path = tmp_path / f"c{conc}.json"
        path.write_text(json.dumps(BENCH | {"max_concurrency": conc, "mean_tpot_ms": tpot}))
        files.append(str(path))
    data = cli("slo", "--tpot", "12", "--fit", ",".join(files), "--json").json()
    assert data["source"].startswith("fitted: 3 points") and len(data["fit_residuals"]) == 3
    lines = tmp_path / "sglang.jsonl"
    lines.write_text(
        "\n".join(
            json.dumps({"batch_size": b, "median_decode_latency": ms / 1000})
            for b, ms in ((1, 6.0), (32, 8.0))
        )
    )
    fitted = cli("slo", "--tpot", "12", "--fit", str(lines), "--json").json()
    assert fitted["b_ms"] == pytest.approx(2.0 / 31)


def test_efficiencies_that_underflow_are_one_line_errors(cli: Cli) -> None:
    base = ["slo", "--tpot", "50", "--preset", "llama-3.1-8b", "--gpu", "h100"]
    r = cli(*base, "--flops-efficiency", "1e-320")
    assert r.code == 2 and r.err.startswith("Error: --flops-efficiency:")
    r = cli(*base, "--bandwidth-efficiency", "1e-320")
    assert r.code == 2 and r.err.startswith("Error: --bandwidth-efficiency:")
    # a tiny but finite share: one sequence's step is named, not a 0.00 ms fixed cost
    r = cli(*base, "--flops-efficiency", "1e-300")
    assert r.code == 2 and "one sequence's step" in r.err


def test_fp8_weights_halve_the_read_and_never_slow_a_step(cli: Cli) -> None:
    where = (
        "slo",
        "--tpot",
        "50",
        "--preset",
        "llama-3.1-70b",
        "--gpu",
        "h100",
        "--tp",
        "4",
        "--batch",
        "1,64,256",
        "--json",
    )
    bf16 = cli(*where).json()
    fp8 = cli(*where, "--weight-dtype", "fp8").json()
    for b in ("1", "64", "256"):
        assert fp8["step_ms_at"][b] < bf16["step_ms_at"][b]
        # the weights read per GPU: the fp8 checkpoint's bytes are about half
        ratio = fp8["terms_at"][b]["weights_read_bytes"] / bf16["terms_at"][b]["weights_read_bytes"]
        assert 0.49 < ratio < 0.55
    # the memory cap follows: fp8 weights leave more of the card to the KV cache
    assert fp8["memory_cap"] > bf16["memory_cap"]


def test_engine_sets_the_step_overhead(cli: Cli) -> None:
    where = (
        "slo",
        "--tpot",
        "50",
        "--preset",
        "llama-3.1-8b",
        "--gpu",
        "h100",
        "--batch",
        "1",
        "--json",
    )
    vllm = cli(*where).json()["step_ms_at"]["1"]
    v0 = cli(*where, "--engine-version", "0.6.3").json()["step_ms_at"]["1"]
    sglang = cli(*where, "--engine", "sglang").json()["step_ms_at"]["1"]
    # docs/method.md §3: vLLM V1 0.2 ms, V0 0.5 ms, SGLang 0.35 ms per step; V0 runs its
    # scheduler, its input preparation and its sampler (11.5 + 18.4 + 5.9 us per sequence,
    # benchmarks/data/host-overhead.jsonl) in series
    assert v0 - vllm == pytest.approx(0.3 + 0.0358) and sglang - vllm == pytest.approx(0.15)


def test_a_serial_scheduler_costs_per_running_sequence(cli: Cli) -> None:
    """vLLM V1 before 0.14 schedules in series with the GPU, 6.8 us per running sequence
    (benchmarks/data/host-overhead.jsonl); 0.14 overlaps it (async scheduling)."""
    where = ("slo", "--tpot", "50", "--preset", "llama-3.1-8b", "--gpu", "h100", "--json")
    batches = ("--batch", "1,256")
    sync = cli(*where, *batches, "--engine-version", "0.13.0").json()["step_ms_at"]
    overlapped = cli(*where, *batches, "--engine-version", "0.14.0").json()["step_ms_at"]
    assert sync["256"] - overlapped["256"] == pytest.approx(256 * 0.0068)
    assert sync["1"] - overlapped["1"] == pytest.approx(0.0068)


def test_slo_says_where_amd_gemms_run_slower_between_decode_and_prefill(cli: Cli) -> None:
    # SGLang's linears on an MI355X are AITER's, whose tables put the mid-M factors in the
    # step; vLLM's (hipBLASLt) take none, and neither does an NVIDIA card
    def arithmetic(engine: str, gpu: str) -> list[str]:
        args = ["slo", "--tpot", "80", "--preset", "llama-3.1-8b", "--gpu", gpu, "--json"]
        return list(cli(*args, "--engine", engine).json()["arithmetic"])

    line = "linear: the dense bf16 GEMMs over B tokens take longer than their stream and multiply"
    shown = [x for x in arithmetic("sglang", "mi355x") if x.startswith(line)]
    assert shown and "x 1.10 at 32, x 1.52 at 256, x 1.35 at 1,024, x 1.09 at 4,096" in shown[0]
    for engine, gpu in (("vllm", "mi355x"), ("sglang", "h200")):
        assert not any(x.startswith("linear:") for x in arithmetic(engine, gpu)), (engine, gpu)


def test_slo_says_where_moe_kernels_reach_less_of_the_rate(cli: Cli) -> None:
    # DeepSeek-V3's block-scaled fp8 experts on an MI355X: the fused MoE share for the 256
    # columns of an expert each GPU holds at TP 8 over the dense one (0.191 x 256 / (256 + 109)
    # / 0.349, ROCm's kernel tables), for either engine; on an H200 NVIDIA's; none for a dense
    # model
    def experts(preset: str, engine: str, gpu: str) -> list[str]:
        args = ["slo", "--tpot", "80", "--preset", preset, "--gpu", gpu, "--tp", "8", "--json"]
        got = cli(*args, "--engine", engine).json()["arithmetic"]
        return [x for x in got if x.startswith("experts:")]

    for engine in ("sglang", "vllm"):
        shown = experts("deepseek-v3", engine, "mi355x")
        assert len(shown) == 1 and "x 0.38 of the dense GEMMs' share" in shown[0], engine
        assert "ROCm's kernel tables, for the 256 columns" in shown[0], engine
    (hopper,) = experts("deepseek-v3", "sglang", "h200")
    # SGLang on Hopper: its own Triton kernel's share (0.397 x 256 / (256 + 323) of the rate)
    assert "x 0.27 of the dense GEMMs' share" in hopper and "the 256 columns" in hopper
    assert "NVIDIA's kernel tables of SGLang's own kernels" in hopper
    (vllm,) = experts("deepseek-v3", "vllm", "h200")
    assert "x 0.21 of the dense GEMMs' share" in vllm and "SGLang" not in vllm
    assert not experts("llama-3.1-70b", "sglang", "mi355x")


@pytest.mark.parametrize("command", [("slo", "--tpot", "50"), ("spec", "--alpha", "0.7")])
def test_slo_and_spec_take_the_engines_layout_names(cli: Cli, command: tuple[str, ...]) -> None:
    # SGLang's --tp-size / --context-length and vLLM's --tensor-parallel-size / --max-model-len
    # name what --tp / --context do, as in capacity and simulate
    where = (*command, "--preset", "llama-3.1-70b", "--gpu", "h100", "--json")
    ours = cli(*where, "--tp", "4", "--context", "8192").json()
    for names in (("--tp-size", "--context-length"), ("--tensor-parallel-size", "--max-model-len")):
        assert cli(*where, names[0], "4", names[1], "8192").json() == ours, names
    # and SGLang's --dp-size is --dp, as capacity and simulate read it
    assert cli(*where, "--dp-size", "2").json() == cli(*where, "--dp", "2").json()


@pytest.mark.parametrize(
    ("method", "dtype"),
    [("modelopt_fp4", "nvfp4"), ("awq", "int4"), ("gptq_marlin", "int4"), ("modelopt", "fp8")],
)
def test_the_engines_quantization_methods_name_the_format_they_run(
    cli: Cli, method: str, dtype: str
) -> None:
    # a launch line's --quantization pastes into slo and simulate as the format it runs
    where = ("--preset", "llama-3.1-70b", "--gpu", "b200", "--tp", "2", "--json")
    slo = ("slo", "--tpot", "50", *where)
    assert cli(*slo, "--quantization", method).json() == cli(*slo, "--weight-dtype", dtype).json()
    load = ("--max-concurrency", "4", "--num-prompts", "12", "--prompt-len", "256")
    sim = ("simulate", *where, *load, "--output-len", "32")
    got = cli(*sim, "--quantization", method).json()
    assert got == cli(*sim, "--weight-dtype", dtype).json()
    assert got["deployment"]["weight_dtype"] == dtype


def test_slo_takes_the_engines_exchange_flags_as_simulate_does(cli: Cli) -> None:
    """`slo` poses the MoE exchange as capacity and simulate do (issue 23: the same options):
    AMD's MoRI under SGLang changes the step, so the cap, and the line carries the flag; an
    engine's flag under the other engine, or without a model to shape, is one error naming it."""
    from helpers import MODELS

    r1 = str(MODELS / "deepseek-ai--DeepSeek-R1")
    where = ("slo", "--model", r1, "--gpu", "mi300x", "--tp", "8", "--dp", "8")
    where += ("--dp-attention", "--engine", "sglang", "--tpot", "50", "--json")
    gathered = cli(*where)
    mori = cli(*where, "--moe-a2a-backend", "mori")
    assert gathered.code == 0 and mori.code == 0, mori.err
    assert "--moe-a2a-backend mori" in mori.json()["flags"]["sglang"]
    assert "--moe-a2a-backend" not in gathered.json()["flags"]["sglang"]
    assert mori.json()["batch_cap"] != gathered.json()["batch_cap"]
    # the arithmetic names the exchange it prices, and under DeepEP the experts' kernel walk
    text = " ".join(cli(*where[:-1], "--moe-a2a-backend", "mori").out.split())
    assert "MoRI all-to-all" in text and "DeepEP all-to-all" not in text
    deepep = cli("slo", "--model", r1, "--gpu", "h200", "--tp", "8", "--dp", "8",
                 "--dp-attention", "--engine", "sglang", "--tpot", "50",
                 "--moe-a2a-backend", "deepep")  # fmt: skip
    said = " ".join(deepep.out.split())
    assert "DeepGEMM's walk of the 32 experts a GPU holds" in said
    assert "DeepEP all-to-all" in said
    vllm = cli("slo", "--model", r1, "--gpu", "h200", "--tp", "8", "--tpot", "50",
               "--moe-a2a-backend", "deepep")  # fmt: skip
    assert vllm.code == 2 and "--moe-a2a-backend: an SGLang flag" in vllm.err
    bare = cli("slo", "--tpot", "50", "--enable-dp-lm-head")
    assert bare.code == 2 and "--enable-dp-lm-head: shapes a derived model" in bare.err
