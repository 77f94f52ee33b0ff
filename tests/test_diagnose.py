"""`planner diagnose` against loopback servers replaying real scrapes (tests/data/metrics/,
copies of real vLLM and SGLang /metrics pages; scenario values changed by `bump` only)."""

from __future__ import annotations

import http.server
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest
from helpers import DATA, QuietServer, Result
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from planner.core.diagnose import (
    ITL,
    KV_NEAR_CEILING,
    KV_USAGE,
    RUNNING,
    TTFT,
    WAITING,
    counter_delta,
    histogram_quantile,
)
from planner.sources.deployed import parse_prometheus

Cli = Callable[..., Result]
METRICS = DATA / "metrics"
LIGHT = (METRICS / "vllm-0.29-qwen2.5-1.5b-light.prom").read_text()
SPEC = (METRICS / "vllm-0.25-deepseek-v4-flash-mtp-spec.prom").read_text()
SGLANG = (METRICS / "sglang-2024-12-llama3.1-8b-underload.prom").read_text()
V0 = (METRICS / "vllm-v0-0.9-cpu-qwen3-0.6b.prom").read_text()


def bump(text: str, name: str, change: Callable[[float], float], where: str = "") -> str:
    """`text` with every sample of `name` (whose labels contain `where`) set to change(value)."""

    def edit(m: re.Match[str]) -> str:
        if where not in (m.group(2) or ""):
            return m.group(0)
        return f"{m.group(1)}{m.group(2) or ''} {change(float(m.group(3)))!r}"

    pattern = re.compile(rf"^({re.escape(name)})(\{{[^}}]*\}})? (\S+)$", re.M)
    return pattern.sub(edit, text)


@contextmanager
def server(pages: list[str], delay_s: float = 0.0) -> Iterator[str]:
    """Serve each page in turn on GET /metrics (the last one repeats)."""
    served = {"n": 0}

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            time.sleep(delay_s)
            body = pages[min(served["n"], len(pages) - 1)].encode()
            served["n"] += 1
            with suppress(BrokenPipeError, ConnectionResetError):
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

    httpd = QuietServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/metrics"
    finally:
        httpd.shutdown()
        httpd.server_close()


def run(cli: Cli, pages: list[str], *args: str) -> Result:
    with server(pages) as url:
        return cli("diagnose", "--metrics", url, "--window", "0.2", *args)


def test_healthy_server_exits_0(cli: Cli) -> None:
    later = bump(LIGHT, "vllm:generation_tokens_total", lambda v: v + 500)
    r = run(cli, [LIGHT, later], "--tpot", "50", "--json")
    data = r.json()
    assert r.code == 0 and data["healthy"] is True and data["advice"] is None
    assert data["engine"] == "vllm-v1"
    assert data["config"]["enable_prefix_caching"] == "True" and "num_gpu_blocks" in data["config"]


def test_prefix_caching_off_is_not_a_collapse(cli: Cli) -> None:
    idle = (METRICS / "vllm-0.29-prefix-off-idle.prom").read_text()
    data = run(cli, [idle, idle], "--json").json()
    prefix = {f["check"]: f for f in data["findings"]}["prefix-cache hit rate"]
    assert prefix["verdict"] == "n/a" and prefix["value"] == "prefix caching is off"


def test_kv_pinned_with_preemptions_calls_for_a_memory_action(cli: Cli) -> None:
    later = bump(LIGHT, "vllm:kv_cache_usage_perc", lambda v: 0.99)
    later = bump(later, "vllm:num_preemptions_total", lambda v: v + 30)
    r = run(cli, [LIGHT, later], "--preset", "qwen2.5-7b", "--gpu", "l4", "--json")
    data = r.json()
    assert r.code == 1 and data["advice"]["check"] in ("KV cache usage", "preemptions")
    assert re.search(r"max_model_len|max_num_seqs|gpu-memory-utilization", data["advice"]["action"])
    checks = {f["check"]: f for f in data["findings"]}
    assert checks["preemptions"]["verdict"] == "fail" and checks["KV cache usage"]["value"] == "99%"


def test_tpot_over_budget_with_kv_slack_lowers_max_num_seqs_by_the_step_model(cli: Cli) -> None:
    later = bump(LIGHT, "vllm:inter_token_latency_seconds_bucket", lambda v: v + 2000, 'le="+Inf"')
    for le in ("0.1", "0.15", "0.2", "0.3", "0.4"):
        later = bump(
            later, "vllm:inter_token_latency_seconds_bucket", lambda v: v + 2000, f'le="{le}"'
        )
    later = bump(later, "vllm:num_requests_running", lambda v: 200)
    later = bump(later, "vllm:kv_cache_usage_perc", lambda v: 0.6)
    r = run(
        cli, [LIGHT, later], "--tpot", "50", "--preset", "llama-3.1-8b", "--gpu", "h100", "--json"
    )
    data = r.json()
    advice = data["advice"]
    assert r.code == 1 and advice["check"] == "TPOT p95"
    match = re.search(r"--max-num-seqs ([\d,]+) -> ([\d,]+) with KV at 60%", advice["action"])
    assert match, advice["action"]
    assert int(match.group(2).replace(",", "")) < int(match.group(1).replace(",", ""))
    assert "step model" in advice["expected_effect"]


def test_prefix_hit_rate_collapsing_is_a_finding(cli: Cli) -> None:
    later = bump(LIGHT, "vllm:prefix_cache_queries_total", lambda v: v + 20_000)
    r = run(cli, [LIGHT, later], "--json")
    checks = {f["check"]: f for f in r.json()["findings"]}
    assert r.code == 1 and checks["prefix-cache hit rate"]["verdict"] == "fail"


def test_sglang_with_a_growing_queue(cli: Cli) -> None:
    later = bump(SGLANG, "sglang:num_queue_reqs", lambda v: v + 400)
    r = run(cli, [SGLANG, later], "--json")
    data = r.json()
    assert r.code == 1 and data["engine"] == "sglang"
    assert data["advice"]["check"] == "waiting queue" and "3,226" in data["advice"]["value"]
    # KV at 28% with thousands queued: the running cap admits too few; SGLang's own flag
    action = data["advice"]["action"]
    assert "--max-running-requests" in action and "max_num_seqs" not in action
    assert not action.startswith("add replicas")


def test_vllm_v0_names_are_recognised(cli: Cli) -> None:
    later = bump(V0, "vllm:gpu_cache_usage_perc", lambda v: 0.97)
    data = run(cli, [V0, later], "--json").json()
    assert data["engine"] == "vllm-v0"
    assert {f["check"]: f for f in data["findings"]}["KV cache usage"]["value"] == "97%"


def test_poor_speculative_acceptance_says_disable_or_lower_k(cli: Cli) -> None:
    later = bump(SPEC, "vllm:spec_decode_num_drafts_total", lambda v: v + 1000)
    later = bump(later, "vllm:spec_decode_num_draft_tokens_total", lambda v: v + 6000)
    later = bump(later, "vllm:spec_decode_num_accepted_tokens_total", lambda v: v + 250)
    data = run(cli, [SPEC, later], "--json").json()
    spec = {f["check"]: f for f in data["findings"]}["speculative acceptance"]
    assert spec["verdict"] == "fail" and "1.25" in spec["value"]
    assert re.search(r"disable speculation|lower k", spec["action"])


def test_counter_reset_gives_no_negative_rate(cli: Cli) -> None:
    later = bump(LIGHT, "vllm:generation_tokens_total", lambda v: 10.0)  # restarted: 584 -> 10
    data = run(cli, [LIGHT, later], "--json").json()
    assert "vllm:generation_tokens_total" in data["counter_resets"]
    tput = {f["check"]: f for f in data["findings"]}["generation throughput"]
    assert not tput["value"].startswith("-")


def test_histogram_quantile_interpolates_within_a_bucket() -> None:
    before = parse_prometheus(LIGHT)
    later = bump(LIGHT, "vllm:inter_token_latency_seconds_bucket", lambda v: v + 100)
    after = parse_prometheus(later)
    value, n = histogram_quantile(before, after, ("vllm:inter_token_latency_seconds",), 0.5)
    assert n == 100 and value == pytest.approx(0.005)  # all 100 in [0, 0.01]: the middle
    assert counter_delta(before, after, ("vllm:num_preemptions_total",), []) == 0


def test_unreachable_or_slow_endpoint_exits_3_within_the_timeout(cli: Cli) -> None:
    started = time.monotonic()
    r = cli("diagnose", "--metrics", "http://127.0.0.1:9/metrics", "--timeout", "1")
    assert r.code == 3
    with server([LIGHT], delay_s=3) as url:
        r = cli("diagnose", "--metrics", url, "--timeout", "1", "--window", "0.1")
    assert r.code == 3 and time.monotonic() - started < 6


def test_a_100_mb_body_is_refused(cli: Cli) -> None:
    huge = LIGHT + "#" * (100 * 1024 * 1024)
    with server([huge]) as url:
        r = cli("diagnose", "--metrics", url, "--timeout", "5", "--window", "0.1")
    assert r.code == 3 and "larger than" in r.err


def test_an_idle_window_is_not_read_as_a_feature_turned_off(cli: Cli, tmp_path: Path) -> None:
    """Two scrapes of a speculating, prefix-caching server with nothing served between them
    say the window had no drafts and no lookups, not that speculation or the prefix cache is
    off; a server that does not speculate (no draft counters) is still 'speculation off'."""

    def checks(text: str) -> dict[str, str]:
        path = tmp_path / "scrape.prom"
        path.write_text(text)
        where = ("--snapshots", f"{path},{path}", "--interval", "30", "--json")
        data = cli("diagnose", *where).json()
        return {f["check"]: f["value"] for f in data["findings"]}

    idle = checks(SPEC)
    assert idle["speculative acceptance"] == "no drafts in the window"
    assert idle["prefix-cache hit rate"] == "no lookups in the window"
    assert checks(LIGHT)["speculative acceptance"] == "speculation off"


def test_saved_snapshots_and_github_format(cli: Cli, tmp_path: Path) -> None:
    a, b = tmp_path / "a.prom", tmp_path / "b.prom"
    a.write_text(SGLANG)
    b.write_text(bump(SGLANG, "sglang:num_queue_reqs", lambda v: v + 1))
    r = cli("diagnose", "--snapshots", f"{a},{b}", "--interval", "30", "--format", "github")
    assert r.code == 1 and r.out.startswith("::error title=planner diagnose::waiting queue")
    bad = cli("diagnose", "--snapshots", str(a), "--interval", "30")
    assert bad.code == 2 and "two files" in bad.err


def test_acceptance_is_per_position_and_advice_never_worsens(cli: Cli) -> None:
    """1,000 verifications of k = 6 drafts accepting 950 tokens: accepted length 1.95, which
    (1 - a^7) / (1 - a) reaches at a per-position acceptance of ~0.49 (not 950 / 6,000 = 16%);
    any smaller k advised must beat the speedup measured now."""
    from planner.core.diagnose import per_position_acceptance

    alpha = per_position_acceptance(1.95, 6)
    assert (1 - alpha**7) / (1 - alpha) == pytest.approx(1.95, rel=1e-6)
    assert 0.45 < alpha < 0.52
    later = bump(SPEC, "vllm:spec_decode_num_drafts_total", lambda v: v + 1000)
    later = bump(later, "vllm:spec_decode_num_draft_tokens_total", lambda v: v + 6000)
    later = bump(later, "vllm:spec_decode_num_accepted_tokens_total", lambda v: v + 950)
    spec = {f["check"]: f for f in run(cli, [SPEC, later], "--json").json()["findings"]}[
        "speculative acceptance"
    ]
    assert spec["action"] == "lower k 6 -> 3 (acceptance 49% per position)"
    now, then = re.findall(r"(\d+\.\d+)x", spec["expected_effect"])
    assert float(then) > float(now)


def test_an_idle_server_is_never_called_at_capacity() -> None:
    from planner.core.diagnose import Effects, _queue_action

    action, _ = _queue_action(Effects(), 0.0, 0.0, 0.0, "vllm", queued=False)
    assert "not a capacity problem" in action and "replicas" not in action
    busy, _ = _queue_action(Effects(), 0.99, 200.0, 50.0, "vllm", queued=True)
    assert busy.startswith("add replicas")  # KV full and a queue: capacity is the answer


def test_scrapes_of_different_servers_exit_2(cli: Cli) -> None:
    engines = run(cli, [LIGHT, SGLANG])
    assert engines.code == 2 and "not one server" in engines.err and "sglang" in engines.err
    other_model = LIGHT.replace('model_name="', 'model_name="other-')
    models = run(cli, [LIGHT, other_model])
    assert models.code == 2 and "not one server" in models.err
    assert models.err.count("\n") == 1


SCRAPES = sorted(p.name for p in METRICS.glob("*.prom"))
# Scrapes whose model ships as a preset: diagnosed against a plan too (the step model's and
# the engine model's effects), on the GPU class each was scraped from or a like one.
PLANS = {
    "sglang-2024-12-llama3.1-8b-underload.prom": ("llama-3.1-8b", "h100"),
    "sglang-2024-11-gemma2-9b.prom": ("gemma-2-9b", "a100-sxm4-80gb"),
}


def observe(text: str, name: str, value_s: float, n: int) -> str:
    """`text` with `n` more observations of `value_s` in histogram `name` (its cumulative
    buckets at or above the value, its count and its sum)."""

    def bucket(m: re.Match[str]) -> str:
        le = re.search(r'le="([^"]+)"', m.group(2))
        assert le is not None
        grow = le.group(1) == "+Inf" or float(le.group(1)) >= value_s
        return f"{m.group(1)}{m.group(2)} {float(m.group(3)) + (n if grow else 0)!r}"

    text = re.sub(rf"^({re.escape(name)}_bucket)(\{{[^}}]*\}}) (\S+)$", bucket, text, flags=re.M)
    text = bump(text, f"{name}_count", lambda v: v + n)
    return bump(text, f"{name}_sum", lambda v: v + n * value_s)


def effect_numbers(text: str) -> list[float]:
    return [float(x.replace(",", "")) for x in re.findall(r"\d[\d,]*\.?\d*", text)]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    scrape=st.sampled_from(SCRAPES),
    running=st.floats(0, 4),
    waiting=st.integers(0, 3000),
    usage=st.floats(0, 1),
    itl_s=st.floats(0.001, 0.5),
    ttft_s=st.floats(0.01, 20),
    tokens=st.integers(0, 5000),
    tpot_ms=st.floats(1, 200),
    with_plan=st.booleans(),
    drafts=st.integers(0, 2000),
    accepted=st.floats(0, 1),
)
# found by hypothesis: a smaller k computed 2.31x against 2.31x now (a gain under 0.005x)
@example(
    scrape="vllm-0.25-deepseek-v4-flash-mtp-spec.prom", running=0.0, waiting=0, usage=0.0,
    itl_s=0.5, ttft_s=1.0, tokens=0, tpot_ms=1.0, with_plan=False, drafts=1, accepted=0.375,
)  # fmt: skip
def test_advice_is_never_worse_than_now(
    cli: Cli, tmp_path: Path, scrape: str, running: float, waiting: int, usage: float,
    itl_s: float, ttft_s: float, tokens: int, tpot_ms: float, with_plan: bool, drafts: int,
    accepted: float,
) -> None:  # fmt: skip
    """Over the real scrapes and mutations of them (load, queue, KV, latencies), every action
    diagnose advises computes an effect no worse than the state it measured: a lower running
    cap predicts a lower TPOT, a memory change holds more sequences, a smaller k a higher
    speedup; and an idle queue with KV to spare is never 'add replicas'."""
    before = (METRICS / scrape).read_text()
    after = before
    for name in RUNNING:
        after = bump(after, name, lambda v: v * running)
    for name in WAITING:
        after = bump(after, name, lambda v: float(waiting))
    for name in KV_USAGE:  # a fraction in [0, 1] in both engines, "perc" notwithstanding
        after = bump(after, name, lambda v: usage)
    for name in ITL:
        after = observe(after, name, itl_s, tokens)
    for name in TTFT:
        after = observe(after, name, ttft_s, max(1, tokens // 100))
    k = 6  # speculation counters, where the server speculates: drafts of k, a share accepted
    after = bump(after, "vllm:spec_decode_num_drafts_total", lambda v: v + drafts)
    after = bump(after, "vllm:spec_decode_num_draft_tokens_total", lambda v: v + k * drafts)
    after = bump(
        after,
        "vllm:spec_decode_num_accepted_tokens_total",
        lambda v: v + int(accepted * k * drafts),
    )
    plan: tuple[str, ...] = ()
    if with_plan and scrape in PLANS:
        preset, gpu = PLANS[scrape]
        plan = ("--preset", preset, "--gpu", gpu)
    a, b = tmp_path / "before.prom", tmp_path / "after.prom"
    a.write_text(before)
    b.write_text(after)
    r = cli(
        "diagnose", "--snapshots", f"{a},{b}", "--interval", "30",
        "--tpot", f"{tpot_ms:.3f}", "--ttft", "1000", "--json", *plan,
    )  # fmt: skip
    assert r.code in (0, 1), r.err
    for f in r.json()["findings"]:
        action, effect = f.get("action") or "", f.get("expected_effect") or ""
        tpot_cap = re.match(r"--max-(num-seqs|running-requests) [\d,]+ ->", action)
        if f["check"].startswith("TPOT") and tpot_cap and effect:
            caps = re.search(r"([\d,]+) -> ([\d,]+)", action)
            assert caps is not None, action
            now, low = (float(g.replace(",", "")) for g in caps.groups())
            assert low < now, action
            # "... anchored on the measured M ms at N running: P ms at L (an estimate)"
            measured, _, predicted, _ = effect_numbers(effect)[:4]
            assert predicted <= measured, effect
        if effect.startswith("full-length sequences"):
            held_now, held_then = effect_numbers(effect.split("(")[0])[-2:]
            assert held_then >= held_now, effect
        if effect.startswith("estimated"):
            speed_now, speed_then = effect_numbers(effect)[:2]
            assert speed_then > speed_now, effect
        if f["check"] == "waiting queue" and waiting == 0 and usage < KV_NEAR_CEILING:
            assert "add replicas" not in action, action


def test_tpot_advice_never_anchors_on_the_plan_when_nothing_ran(cli: Cli, tmp_path: Path) -> None:
    # tokens over budget but no sequence running at either scrape: the step model has no batch
    # to anchor on, and the plan's cap is not what the server ran: no number is invented
    idle = SGLANG
    for name in RUNNING:
        idle = bump(idle, name, lambda v: 0.0)
    after = idle
    for name in ITL:
        after = observe(after, name, 0.07, 500)
    a, b = tmp_path / "a.prom", tmp_path / "b.prom"
    a.write_text(idle)
    b.write_text(after)
    where = ("--snapshots", f"{a},{b}", "--interval", "30", "--tpot", "50", "--json")
    plan = ("--preset", "llama-3.1-8b", "--gpu", "h100")
    tpot = next(
        f for f in cli("diagnose", *where, *plan).json()["findings"] if f["check"] == "TPOT p95"
    )
    assert "no sequence was running" in tpot["action"] and "->" not in tpot["action"]
    assert tpot["expected_effect"] is None
    # one scrape busy: the busier one anchors the estimate
    busy = bump(after, "sglang:num_running_reqs", lambda v: 64.0)
    b.write_text(busy)
    tpot = next(
        f for f in cli("diagnose", *where, *plan).json()["findings"] if f["check"] == "TPOT p95"
    )
    assert tpot["action"].startswith("--max-running-requests 64 -> ")


def test_a_bad_url_names_the_flag_it_came_from(cli: Cli) -> None:
    # diagnose's URL is --metrics (drift's is --against-metrics)
    r = cli("diagnose", "--metrics", "notaurl", "--json")
    assert r.code == 2 and r.json()["field"] == "--metrics"


def test_options_of_the_other_source_are_refused(cli: Cli, tmp_path: Path) -> None:
    """--window and --timeout time live scrapes, --interval saved ones, and --json is --format
    json: each given where it changes nothing is one error naming it."""
    a, b = tmp_path / "a.prom", tmp_path / "b.prom"
    a.write_text(SGLANG)
    b.write_text(SGLANG)
    saved = ("diagnose", "--snapshots", f"{a},{b}", "--interval", "30")
    for flag, value in (("--window", "30"), ("--timeout", "2")):
        r = cli(*saved, flag, value)
        assert r.code == 2 and flag in r.err and "--snapshots" in r.err, r.err
    r = cli("diagnose", "--metrics", "http://127.0.0.1:9/metrics", "--interval", "30")
    assert r.code == 2 and "--interval" in r.err
    r = cli(*saved, "--json", "--format", "github")
    assert r.code == 2 and r.json()["field"] == "--format"
    assert cli(*saved, "--json", "--format", "json").out == cli(*saved, "--json").out


@pytest.mark.parametrize(
    "line",
    [
        # SGLang, fp8 weights, data-parallel attention on a MoE model
        ("--preset", "deepseek-v2-lite", "--gpu", "h100", "--engine", "sglang", "--tp", "2",
         "--dp", "2", "--dp-attention", "--weight-dtype", "fp8"),
        # a vLLM V0 release at PP 2
        ("--preset", "llama-3.1-8b", "--gpu", "l40s", "--pp", "2", "--engine-version", "0.6.3"),
    ],
)  # fmt: skip
def test_a_saved_plan_is_priced_as_it_was_planned(
    cli: Cli, tmp_path: Path, line: tuple[str, ...]
) -> None:
    """diagnose --plan prices the line the plan saved (engine, release, precision, layout):
    the step `slo` prices for the same flags, not the checkpoint on vLLM at TP alone."""
    from planner.api.diagnose import effects_for

    plan = tmp_path / "plan.yaml"
    saved = cli("capacity", *line, "--save", str(plan))
    assert saved.code == 0, saved.err
    fx = effects_for(plan_path=str(plan), preset=None, model=None, gpu=None, settings={})
    assert fx.step_ms is not None
    slo = cli("slo", "--tpot", "50", *line, "--batch", "1,64", "--json").json()
    for batch in (1, 64):
        assert fx.step_ms(batch) == pytest.approx(slo["step_ms_at"][str(batch)], rel=1e-9)


def test_a_scrape_is_priced_on_the_engine_and_cache_it_reports(cli: Cli) -> None:
    """Without a plan, the model and GPU given are planned as the scrape shows the server: an
    SGLang server's running cap is SGLang's plan's (not vLLM's), and vLLM's memory share and
    fp8 KV cache are taken from its cache_config_info."""
    from planner.api.diagnose import _samples
    from planner.core.diagnose import served_settings

    where = ("--preset", "llama-3.1-8b", "--gpu", "h100", "--json")
    sglang_cap = cli("capacity", *where, "--engine", "sglang").json()["operating_concurrency"]
    vllm_cap = cli("capacity", *where).json()["operating_concurrency"]
    assert sglang_cap < 0.95 * vllm_cap  # a full SGLang cap would not look full under vLLM's
    later = bump(SGLANG, "sglang:num_running_reqs", lambda v: sglang_cap)
    later = bump(later, "sglang:num_queue_reqs", lambda v: v + 400)
    advice = run(cli, [SGLANG, later], *where).json()["advice"]
    assert f"--max-running-requests {sglang_cap:,} is full" in advice["action"]

    assert served_settings(_samples(LIGHT)) == {"engine": "vllm", "memory_fraction": 0.9}
    fp8 = LIGHT.replace('cache_dtype="auto"', 'cache_dtype="fp8"')
    assert served_settings(_samples(fp8))["kv_cache_dtype"] == "fp8"
    unset = LIGHT.replace('gpu_memory_utilization="0.9"', 'gpu_memory_utilization="None"')
    assert "memory_fraction" not in served_settings(_samples(unset))
    gemma = (METRICS / "sglang-2024-11-gemma2-9b.prom").read_text()
    assert served_settings(_samples(gemma)) == {"engine": "sglang", "context_tokens": 8192}


def test_a_plan_for_another_engine_is_refused(cli: Cli, tmp_path: Path) -> None:
    """A vLLM plan does not price an SGLang server (its pool, running cap and flags are
    another engine's); the SGLang plan of the same model and GPU does."""
    plans = {}
    for engine in ("vllm", "sglang"):
        plans[engine] = tmp_path / f"{engine}.yaml"
        saved = cli("capacity", "--preset", "llama-3.1-8b", "--gpu", "h100", "--engine", engine,
                    "--save", str(plans[engine]))  # fmt: skip
        assert saved.code == 0, saved.err
    wrong = run(cli, [SGLANG, SGLANG], "--plan", str(plans["vllm"]), "--json")
    assert wrong.code == 2 and wrong.json()["field"] == "--plan"
    assert "vllm" in wrong.json()["error"] and "sglang" in wrong.json()["error"]
    assert run(cli, [SGLANG, SGLANG], "--plan", str(plans["sglang"]), "--json").code != 2
