"""`planner calibrate`, --calibration, --compare-version, drift --upgrade-to, --reserved-gib."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from helpers import DATA, MODELS, Result

from planner.api import engine_plan
from planner.core.engines.calibration import Calibration, TermCalibration, combine, measure
from planner.units import GIB_BYTES

Cli = Callable[..., Result]
LOGS = DATA / "calibration" / "logs"
LLAMA8 = str(MODELS / "meta-llama--Llama-3.1-8B-Instruct" / "config.json")
QWEN7 = str(MODELS / "Qwen--Qwen2.5-7B-Instruct" / "config.json")  # Qwen2-7B's shapes
RTX = ["--gpu", "rtx-3090", "--model", LLAMA8, "--engine-version", "0.6.4"]
A100 = ["--gpu", "a100-80gb", "--model", QWEN7]


def _log(name: str) -> str:
    return str(LOGS / name)


def test_rules_reproduce_the_logged_term_at_the_logs_settings() -> None:
    for name, logged, modelled in (
        ("total_memory_bytes", 25_000, 24_000),
        ("weights_bytes", 1_050, 1_000),
        ("activation_peak_bytes", 2_000, 1_600),
        ("non_torch_bytes", 300, 500),
        ("cudagraph_bytes", 700, 0),  # modelled 0: carried as an offset, not a ratio
    ):
        t = measure(name, logged, modelled, "test")
        assert t.apply(modelled) == logged, name
    assert measure("cudagraph_bytes", 700, 0, "t").how == "offset"
    assert measure("activation_peak_bytes", 2_000, 1_000, "t").apply(3_000) == 6_000  # ratio
    assert measure("non_torch_bytes", 300, 500, "t").apply(900) == 700  # offset
    assert measure("non_torch_bytes", 0, 500, "t").apply(100) == 0  # never below zero


def test_combine_takes_the_median_per_term() -> None:
    logs = [[measure("weights_bytes", w, 100, "t")] for w in (101, 103, 110)]
    (t,) = combine(logs)
    assert t.logs == 3 and t.value == pytest.approx(1.03)


def test_calibrate_one_log_predicts_another_max_model_len(cli: Cli, tmp_path: Path) -> None:
    """vLLM 0.6.4 on an RTX 3090: calibrated on the 20,000-token log, the 29,000 one within 1%."""
    profile = tmp_path / "rtx.yaml"
    r = cli("calibrate", _log("vllm064-rtx3090-llama31-8b-20k.log"), *RTX, "--save", str(profile))
    assert r.code == 0, r.err
    r = cli("capacity", *RTX, "--context", "29000", "--calibration", str(profile), "--json")
    engine = r.json()["engine"]
    assert engine["term_sources"]["activation_peak_bytes"] == "your-logs"
    assert engine["term_sources"]["total_memory_bytes"] == "your-logs"
    # the 29,000-token log: 23,648 tokens (1,478 blocks) and a 2.89 GiB budget
    assert engine["kv_cache_tokens"] == pytest.approx(23_648, rel=0.01)
    assert engine["available_kv_bytes"] == pytest.approx(2.89 * GIB_BYTES, rel=0.01)
    # the logged 20k activation peak (17.06 - 14.99 GiB) scales with the profile's 29,000 tokens
    assert engine["activation_peak_bytes"] == pytest.approx(2.99 * GIB_BYTES, rel=0.01)


def test_calibrate_two_logs_report_each_from_the_other(cli: Cli) -> None:
    r = cli(
        "calibrate",
        _log("vllm064-rtx3090-llama31-8b-20k.log"),
        _log("vllm064-rtx3090-llama31-8b-29k.log"),
        *RTX,
        "--json",
    )
    assert r.code == 0, r.err
    out = r.json()
    assert {t["term"] for t in out["profile"]["terms"]} == {
        "total_memory_bytes",
        "weights_bytes",
        "activation_peak_bytes",
        "non_torch_bytes",
    }
    assert all(t["logs"] == 2 for t in out["profile"]["terms"])
    assert len(out["cross_checks"]) == 2
    for check in out["cross_checks"]:
        assert abs(check["kv_cache_tokens"]["error"]) < 0.01
    for log in out["logs"]:
        assert abs(log["calibrated"]["kv_cache_tokens"]["error"]) <= abs(
            log["uncalibrated"]["kv_cache_tokens"]["error"]
        )
    text = cli("calibrate", _log("vllm064-rtx3090-llama31-8b-29k.log"), *RTX)
    assert "your-logs" in text.out and "profile: vllm 0.6.4 on rtx-3090" in text.out


def test_calibrate_two_utilisations(cli: Cli, tmp_path: Path) -> None:
    """vLLM 0.10.1.1, Qwen2-7B, A100 80GB at utilisation 0.5 and 0.25 (24.83 and 5.01 GiB)."""
    both = cli(
        "calibrate",
        _log("vllm01011-a100-qwen2-7b-util050.log"),
        _log("vllm01011-a100-qwen2-7b-util025.log"),
        *A100,
        "--json",
    ).json()
    total = next(t for t in both["profile"]["terms"] if t["term"] == "total_memory_bytes")
    assert total["basis"].startswith("slope")
    assert total["value"] / GIB_BYTES == pytest.approx(79.28, abs=0.05)  # +-0.04 from rounding
    profile = tmp_path / "a100.yaml"
    assert cli("calibrate", _log("vllm01011-a100-qwen2-7b-util050.log"), *A100, "--save",
               str(profile)).code == 0  # fmt: skip
    second = cli(
        "capacity",
        *A100,
        "--engine-version",
        "0.10.1.1",
        "--context",
        "16384",
        "--gpu-memory-utilization",
        "0.25",
        "--max-num-seqs",
        "256",  # what the logged run used (the plan would size its own)
        "--calibration",
        str(profile),
        "--json",
    ).json()
    assert second["engine"]["available_kv_bytes"] == pytest.approx(5.01 * GIB_BYTES, rel=0.01)
    assert (
        second["calibration"]["sha256"]
        == Calibration.model_validate(yaml.safe_load(profile.read_text())).fingerprint()
    )


def test_calibration_is_refused_on_another_card_and_named_elsewhere(
    cli: Cli, tmp_path: Path
) -> None:
    profile = tmp_path / "rtx.yaml"
    cli("calibrate", _log("vllm064-rtx3090-llama31-8b-20k.log"), *RTX, "--save", str(profile))
    r = cli("capacity", "--model", LLAMA8, "--gpu", "h100", "--calibration", str(profile))
    assert r.code == 2 and "--calibration" in r.err and "rtx-3090" in r.err
    moved = cli("capacity", *RTX, "--tp", "2", "--calibration", str(profile), "--json").json()
    assert any("differ from this plan in" in n and "TP 1 (here 2)" in n
               for n in moved["engine"]["notes"])  # fmt: skip
    # a different engine's profile
    r = cli("capacity", "--model", LLAMA8, "--gpu", "rtx-3090", "--engine", "sglang",
            "--calibration", str(profile))  # fmt: skip
    assert r.code == 2 and "vllm" in r.err


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("[1, 2]", "one calibration mapping"),
        ("schema_version: 9\n", "upgrade planner"),
        ("kind: planner-calibration\nengine: vllm\n", "engine_version"),
    ],
)
def test_bad_profiles_are_one_line_errors(cli: Cli, tmp_path: Path, text: str, why: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    r = cli("capacity", *RTX, "--calibration", str(bad))
    assert r.code == 2 and why in r.err and "Traceback" not in r.err


def test_non_finite_profile_values_are_refused(cli: Cli, tmp_path: Path) -> None:
    profile = tmp_path / "p.yaml"
    cli("calibrate", _log("vllm064-rtx3090-llama31-8b-20k.log"), *RTX, "--save", str(profile))
    data = yaml.safe_load(profile.read_text())
    data["terms"][2]["value"] = float("nan")
    profile.write_text(yaml.safe_dump(data))
    r = cli("capacity", *RTX, "--calibration", str(profile))
    line = next(i for i, x in enumerate(profile.read_text().splitlines(), 1) if "nan" in x)
    assert r.code == 2 and "not usable" in r.err and f"line {line}:" in r.err


def test_calibrate_refuses_logs_of_two_deployments_and_non_logs(cli: Cli, tmp_path: Path) -> None:
    r = cli(
        "calibrate",
        _log("vllm01011-a100-qwen2-7b-util050.log"),
        _log("vllm064-rtx3090-llama31-8b-20k.log"),  # no version printed: the newest assumed
        *A100,
    )
    assert r.code == 2 and "one profile is one deployment" in r.err and "0.10.1" in r.err
    junk = tmp_path / "junk.log"
    junk.write_text("hello\n")
    r = cli("calibrate", str(junk), "--gpu", "h100")
    assert r.code == 2 and "not a vLLM or SGLang start-up log" in r.err


def test_compare_version_default_utilisation_and_graph_estimate(cli: Cli) -> None:
    """vLLM 0.19 -> 0.20: the default utilisation 0.90 -> 0.92, the CUDA-graph estimate starts."""
    r = cli(
        "capacity",
        "--model",
        LLAMA8,
        "--gpu",
        "h100",
        "--engine-version",
        "0.19.0",
        "--compare-version",
        "0.20.0",
        "--json",
    )
    c = r.json()["comparison"]
    terms = {t["term"]: t for t in c["terms"]}
    total = terms["total_memory_bytes"]["before"]
    assert terms["requested_memory_bytes"]["change"] == math.ceil(total * 0.92) - math.ceil(
        total * 0.90
    )
    graph = terms["cudagraph_bytes"]
    assert graph["before"] == 0 and graph["after"] > 0
    # the budget moves by exactly the utilisation step less the new graph reservation
    assert terms["available_kv_bytes"]["change"] == (
        terms["requested_memory_bytes"]["change"] - graph["after"]
    )
    assert terms["kv_cache_tokens"]["change"] > 0  # +0.02 x 79 GiB outweighs 0.69 GiB of graphs
    assert {"setting": "gpu_memory_utilization", "before": 0.9, "after": 0.92} in c["settings"]
    assert any(x.startswith("0.20.0:") and "CUDA-graph" in x for x in c["engine_changes"])
    # a pinned utilisation keeps only the graph estimate: the upgrade loses capacity
    pinned = cli(
        "capacity", "--model", LLAMA8, "--gpu", "h100", "--engine-version", "0.19.0",
        "--gpu-memory-utilization", "0.9", "--compare-version", "0.20.0", "--json",
    ).json()["comparison"]  # fmt: skip
    moved = {t["term"]: t for t in pinned["terms"]}
    assert moved["kv_cache_tokens"]["change"] < 0
    assert moved["available_kv_bytes"]["change"] == -moved["cudagraph_bytes"]["after"]


def test_compare_with_the_other_engine(cli: Cli) -> None:
    r = cli("capacity", "--model", LLAMA8, "--gpu", "h100", "--compare-version", "sglang:0.5.8",
            "--json")  # fmt: skip
    c = r.json()["comparison"]
    assert c["before"]["engine"] == "vllm" and c["after"]["engine"] == "sglang"
    assert c["after"]["command"].startswith("python -m sglang.launch_server")
    names = {s["setting"] for s in c["settings"]}
    assert "memory fraction" in names and c["engine_changes"] == []
    text = cli("capacity", "--model", LLAMA8, "--gpu", "h100", "--compare-version", "0.28.0")
    assert "vllm 0.34.0 -> vllm 0.28.0" in text.out and "(undone by the downgrade)" in text.out
    bad = cli("capacity", "--model", LLAMA8, "--gpu", "h100", "--compare-version", "trt:1.0")
    assert bad.code == 2 and "--compare-version" in bad.err
    # one engine's own flags stay behind on a switch; a flag both take carries over
    for engine, own, other in (
        (
            "vllm",
            ["--no-enable-prefix-caching", "--no-async-scheduling", "--enforce-eager"],
            "sglang",
        ),
        ("sglang", ["--disable-radix-cache", "--cuda-graph-max-bs", "64"], "vllm"),
    ):
        switched = cli(
            "capacity", "--model", LLAMA8, "--gpu", "h100", "--engine", engine, *own,
            "--stream-interval", "4", "--compare-version", other, "--json",
        )  # fmt: skip
        assert switched.code == 0, switched.out
        after = switched.json()["comparison"]["after"]["command"]
        assert "--stream-interval 4" in after
        assert not any(flag in after for flag in own if flag.startswith("--"))


def test_drift_upgrade_that_loses_capacity(cli: Cli, tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    base = ["--model", LLAMA8, "--gpu", "h100", "--engine-version", "0.19.0"]
    pinned = [*base, "--gpu-memory-utilization", "0.9", "--save", str(plan)]
    assert cli("capacity", *pinned).code == 0
    lost = cli("drift", str(plan), "--upgrade-to", "0.20.0", "--tolerance", "0.5%", "--json")
    assert lost.code == 1
    keys = {d["key"] for d in lost.json()["differences"]}
    assert "engine.kv_cache_tokens" in keys
    assert all(d["where"] == "upgrade to 0.20.0" for d in lost.json()["differences"])
    # within a 2% tolerance the 1.2% loss is not drift; the default utilisation is a gain
    assert cli("drift", str(plan), "--upgrade-to", "0.20.0").code == 0
    free = tmp_path / "free.yaml"
    assert cli("capacity", *base, "--save", str(free)).code == 0
    assert cli("drift", str(free), "--upgrade-to", "0.20.0", "--tolerance", "0%").code == 0


def test_drift_recomputes_with_the_plans_profile(cli: Cli, tmp_path: Path) -> None:
    profile, plan = tmp_path / "p.yaml", tmp_path / "plan.yaml"
    cli("calibrate", _log("vllm064-rtx3090-llama31-8b-20k.log"), *RTX, "--save", str(profile))
    assert cli("capacity", *RTX, "--calibration", str(profile), "--save", str(plan)).code == 0
    lock = yaml.safe_load(plan.read_text())
    assert lock["inputs"]["calibration"].endswith("p.yaml")
    assert cli("drift", str(plan)).code == 0
    data = yaml.safe_load(profile.read_text())
    data["terms"][0]["value"] -= 2 * GIB_BYTES  # the card now shows 2 GiB less
    profile.write_text(yaml.safe_dump(data))
    moved = cli("drift", str(plan), "--json").json()
    keys = {d["key"] for d in moved["differences"]}
    assert "calibration.sha256" in keys and "engine.kv_cache_tokens" in keys


def test_reserved_memory_by_engine_and_release() -> None:
    base = {"engine": "vllm", "gpu": "h100", "model": LLAMA8, "max_model_len": 8192}
    gib = GIB_BYTES
    new = engine_plan(**base, version="0.19.0")
    shared = engine_plan(**base, version="0.19.0", reserved_bytes=4 * gib)
    # 0.19 budgets from its own baseline: the same KV cache, and a note
    assert shared.available_kv_bytes == new.available_kv_bytes
    assert any("not charged" in n for n in shared.notes)
    # ... but refuses to start when the others leave less than total x 0.9 free
    from planner.core.engines.common import NoKvCache

    with pytest.raises(NoKvCache, match="refuses to start"):
        engine_plan(**base, version="0.19.0", reserved_bytes=10 * gib)
    # V1 0.8.x and V0 0.6.4 charged the whole device's memory in use; V0 before and after not
    for version, mode, charges in (
        ("0.8.1", None, True),
        ("0.6.4", "v0", True),
        ("0.6.3", "v0", False),
        ("0.7.2", "v0", False),
    ):
        extra = {"engine_mode": mode} if mode else {}
        old = engine_plan(**base, version=version, **extra)
        shared = engine_plan(**base, version=version, reserved_bytes=4 * gib, **extra)
        lost = old.available_kv_bytes - shared.available_kv_bytes
        assert lost == (4 * gib if charges else 0), version
    # SGLang sizes its pool from the free memory before loading
    sg = {"engine": "sglang", "gpu": "h100", "model": LLAMA8, "context_length": 8192}
    a = engine_plan(**sg, mem_fraction_static=0.85)
    b = engine_plan(**sg, mem_fraction_static=0.85, reserved_bytes=4 * gib)
    assert a.available_kv_bytes - b.available_kv_bytes == pytest.approx(0.85 * 4 * gib, abs=2)


def test_reserved_gib_on_the_command_line(cli: Cli) -> None:
    base = ("capacity", "--model", LLAMA8, "--gpu", "h100")
    r = cli(*base, "--engine-version", "0.33", "--reserved-gib", "10", "--json")
    assert r.code == 1
    out = r.json()
    assert not out["fits"] and "refuses to start" in out["reasons"][0]
    # 79.19 - 10 GiB free of 79.19: at most 0.87 starts
    assert "--gpu-memory-utilization 0.87 or lower" in out["reasons"][0]
    ok = cli(*base, "--engine-version", "0.33", "--reserved-gib", "2")
    assert ok.code == 0 and "not charged" in ok.out
    assert "--reserved" not in ok.out.split("vllm serve")[-1]  # not an engine flag
    bad = cli(*base, "--reserved-gib", "-1")
    assert bad.code == 2 and "--reserved-gib" in bad.err
    # 0.34's extensible KV cache is sized from the memory free after warm-up: it starts, and
    # the other processes' 10 GiB come off the KV cache byte for byte
    # the same activation peak and graphs in both, at the release's own utilization
    pinned = (*base, "--max-num-seqs", "128", "--gpu-memory-utilization", "1")
    alone = cli(*pinned, "--json").json()["engine"]["available_kv_bytes"]
    shared = cli(*pinned, "--reserved-gib", "10", "--json")
    assert shared.code == 0
    assert alone - shared.json()["engine"]["available_kv_bytes"] == 10 * 2**30


def test_profile_terms_are_typed() -> None:
    with pytest.raises(ValueError):
        TermCalibration.model_validate(
            {"term": "kv_bytes", "how": "ratio", "value": 1.0, "basis": "x", "logs": 1}
        )


def test_calibrate_an_sglang_log(cli: Cli, tmp_path: Path) -> None:
    """SGLang prints its free memory before loading and the weights: both become terms."""
    import json

    case = next(
        json.loads(x)
        for x in (DATA / "calibration" / "cases.jsonl").read_text().splitlines()
        if json.loads(x)["engine"] == "sglang"
    )
    log = tmp_path / "sglang.log"
    log.write_text(case["evidence"].replace(" | ", "\n"))
    r = cli("calibrate", str(log), "--gpu", "h100", "--model", LLAMA8, "--json")
    assert r.code == 0, r.err
    out = r.json()
    terms = {t["term"]: t for t in out["profile"]["terms"]}
    assert terms["pre_load_free_bytes"]["value"] == pytest.approx(78.81 * GIB_BYTES, rel=1e-3)
    assert terms["weights_bytes"]["how"] == "ratio"
    calibrated = out["logs"][0]["calibrated"]["kv_cache_tokens"]
    uncalibrated = out["logs"][0]["uncalibrated"]["kv_cache_tokens"]
    assert abs(calibrated["error"]) < abs(uncalibrated["error"])
    assert abs(calibrated["error"]) < 0.001  # 444,520 vs 444,500 logged


def test_mutated_logs_never_trace_back(cli: Cli, tmp_path: Path) -> None:
    """Real logs with figures replaced (0, huge, negative, junk) or cut short: one-line errors."""
    import random
    import re

    rng = random.Random(7)
    sources = [
        (LOGS / "vllm064-rtx3090-llama31-8b-20k.log", RTX),
        (LOGS / "vllm01011-a100-qwen2-7b-util050.log", A100),
    ]
    replacements = ["0", "0.00", "1e400", "-3", "99999999999999999999", "nan", "x", ""]
    for i in range(24):
        path, args = sources[i % 2]
        text = path.read_text()
        numbers = list(re.finditer(r"\d+(?:\.\d+)?", text))
        for m in rng.sample(numbers, k=min(3, len(numbers))):
            text = text.replace(m.group(0), rng.choice(replacements), 1)
        if i % 3 == 0:
            text = text[: rng.randrange(len(text))]
        log = tmp_path / f"m{i}.log"
        log.write_text(text)
        r = cli("calibrate", str(log), *args)
        assert r.code in (0, 1, 2), (i, r.err)
        assert "Traceback" not in r.err and (r.code == 0 or r.err.startswith("Error: ")), (i, r.err)


def _budget_log(tmp_path: Path, util: float, kv_gib: float) -> str:
    """A minimal vLLM 0.19 log stating only what the remainder rule reads (for rule coverage)."""
    log = tmp_path / f"u{util}-{kv_gib}.log"
    log.write_text(
        f"INFO non-default args: {{'gpu_memory_utilization': {util}, 'max_model_len': 4096}}\n"
        "INFO vLLM API server version 0.19.0\n"
        "INFO Model loading took 14.99 GiB and 3 seconds\n"
        f"INFO Available KV cache memory: {kv_gib:.2f} GiB\n"
    )
    return str(log)


def test_the_remainder_goes_to_activation_when_non_torch_cannot_take_it(
    cli: Cli, tmp_path: Path
) -> None:
    llama = ["--gpu", "h100", "--model", LLAMA8, "--json"]
    # at utilisation 0.2 the model leaves no KV cache (15.84 GiB asked, 16.08 taken); a log
    # with 0.50 GiB says the activation peak is smaller than modelled
    out = cli("calibrate", _budget_log(tmp_path, 0.2, 0.5), *llama).json()
    terms = {t["term"]: t for t in out["profile"]["terms"]}
    assert terms["activation_peak_bytes"]["how"] == "ratio" and "non_torch_bytes" not in terms
    assert out["logs"][0]["uncalibrated"]["kv_cache_tokens"] is None
    assert out["logs"][0]["calibrated"]["available_kv_bytes"]["error"] == pytest.approx(0, abs=1e-3)
    # more left than modelled: a non-torch offset, activation untouched
    more = cli("calibrate", _budget_log(tmp_path, 0.9, 54.0), *llama).json()
    assert {t["term"] for t in more["profile"]["terms"]} == {"weights_bytes", "non_torch_bytes"}
    # a budget that leaves the activation less than nothing is not one run's figures
    r = cli("calibrate", _budget_log(tmp_path, 0.9, 70.0), *llama)
    assert r.code == 2 and "GiB for the activation peak" in r.err and "leaves -" in r.err


CONNECTOR_ARGS = (
    "'kv_transfer_config': KVTransferConfig(kv_connector='LMCacheConnectorV1', "
    "engine_id='5c6a', kv_buffer_device='cuda', kv_role='kv_both')"
)
LMCACHE = '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'


def _connector_log(tmp_path: Path, less_gib: float) -> str:
    """The A100 util 0.5 log as the same deployment with an LMCache connector would print it:
    the connector in its non-default args, and a KV budget `less_gib` smaller (the token,
    block and concurrency lines dropped: they follow from the budget)."""
    lines = []
    for line in Path(_log("vllm01011-a100-qwen2-7b-util050.log")).read_text().splitlines():
        if "non-default args" in line:
            line = line.replace(
                "'gpu_memory_utilization': 0.5}",
                f"'gpu_memory_utilization': 0.5, {CONNECTOR_ARGS}}}",
            )
        if "Available KV cache memory" in line:
            line = line.replace("24.83 GiB", f"{24.83 - less_gib:.2f} GiB")
        if "KV cache size" in line or "Maximum concurrency" in line or "num_gpu_blocks" in line:
            continue
        lines.append(line)
    path = tmp_path / "lmcache.log"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_a_connectors_log_calibrates_its_gpu_buffers(cli: Cli, tmp_path: Path) -> None:
    """A log of a deployment with a KV connector measures the connector's GPU-side buffers
    (what its budget leaves beyond the model's activation and non-torch memory, net of the
    non-torch correction the deployment's plain log measured), carried to plans with the
    connector and to no other."""
    from planner.sources.startup_log import parse_startup_log

    with_connector = _connector_log(tmp_path, 2.0)
    parsed = parse_startup_log(
        Path(with_connector).read_text(), "lmcache.log", require_tokens=False
    )
    assert parsed.settings["kv_connector"] == "LMCacheConnectorV1"
    offloading = parse_startup_log(
        "non-default args: {'model': 'm', 'kv_offloading_size': 16.0, "
        "'kv_offloading_backend': 'lmcache'}\nAvailable KV cache memory: 1.00 GiB\n",
        "x.log",
        require_tokens=False,
    )
    assert offloading.settings["kv_connector"] == "LMCacheConnectorV1"
    profile = tmp_path / "lmcache.yaml"
    plain = _log("vllm01011-a100-qwen2-7b-util050.log")
    r = cli("calibrate", plain, with_connector, *A100, "--save", str(profile), "--json")
    assert r.code == 0, r.err
    terms = {t["term"]: t for t in r.json()["profile"]["terms"]}
    # the modelled buffer is LMCache's staging chunk: 256 tokens x 28 layers x 4 KV heads x
    # (128 + 128) x 2 B = 14 MiB; the log leaves 2.00 GiB more (to its 0.01 GiB rounding)
    chunk = 256 * 28 * 4 * 256 * 2
    assert terms["connector_bytes"]["how"] == "offset"
    assert terms["connector_bytes"]["value"] + chunk == pytest.approx(2 * GIB_BYTES, rel=0.01)
    # the plain log's correction of the remainder (here the activation peak, which it leaves
    # smaller than modelled) comes from it alone, and the connector's term is net of it
    assert terms["activation_peak_bytes"]["logs"] == 1
    base = (*A100, "--engine-version", "0.10.1.1", "--context", "16384",
            "--gpu-memory-utilization", "0.5", "--max-num-seqs", "256",
            "--calibration", str(profile), "--json")  # fmt: skip
    served = cli("capacity", *base, "--kv-transfer-config", LMCACHE).json()["engine"]
    assert served["connector_bytes"] == pytest.approx(2 * GIB_BYTES, rel=0.01)
    assert served["available_kv_bytes"] == pytest.approx(22.83 * GIB_BYTES, rel=0.01)
    alone = cli("capacity", *base).json()["engine"]
    assert alone["connector_bytes"] == 0
    assert alone["available_kv_bytes"] == pytest.approx(24.83 * GIB_BYTES, rel=0.01)


@pytest.mark.parametrize(
    "args", [("--tp", "2"), ("--dp", "2"), ("--engine", "sglang"), ("--kv-dtype", "fp8")]
)
def test_benchmarked_server_options_without_bench_are_refused(
    cli: Cli, args: tuple[str, str]
) -> None:
    """They describe the server --bench results ran on; a start-up log carries its own
    settings, so alone with logs they would change nothing."""
    r = cli("calibrate", _log("vllm01011-a100-qwen2-7b-util050.log"), *A100, *args)
    assert r.code == 2 and args[0] in r.err and "--bench" in r.err
