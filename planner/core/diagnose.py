"""Diagnose a running server from two /metrics scrapes: the checklist and the next knob.

Pure: takes parsed samples (name -> [(labels, value)]) of two scrapes taken `interval_s` apart.
Rates come from counter differences (a counter that went down was reset: the later value is
what was counted since), percentiles from histogram bucket differences, levels from the later
scrape's gauges. vLLM V1 and V0 and SGLang (0.4+ and the 2024 names) are recognised
(docs/diagnose.md). The advice is the earliest step of the tuning order (docs/method.md §7)
whose check fails, with its effect computed by the planner's models when a model and GPU are
known.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from planner.core.search import largest_passing

# A scrape's samples by metric name: [(labels, value)] (planner.sources.deployed.parse_prometheus),
# as diagnose and drift read them.
Samples = dict[str, list[tuple[dict[str, str], float]]]

# Metric names by what they measure, newest first (vLLM V1, V0, SGLang, SGLang 2024).
RUNNING = ("vllm:num_requests_running", "sglang:num_running_reqs", "sglang:num_requests_running")
WAITING = ("vllm:num_requests_waiting", "sglang:num_queue_reqs", "sglang:queue_req")
KV_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage")
PREEMPTIONS = ("vllm:num_preemptions_total", "sglang:num_retracted_requests_total")
PREFIX_HITS = ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total")
PREFIX_QUERIES = ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total")
PREFIX_GAUGE = ("sglang:cache_hit_rate",)
ITL = (
    "vllm:inter_token_latency_seconds",
    "vllm:time_per_output_token_seconds",
    "sglang:inter_token_latency_seconds",
    "sglang:time_per_output_token_seconds",
)
TTFT = ("vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds")
GENERATED = ("vllm:generation_tokens_total", "sglang:generation_tokens_total")
PROMPT_LEN = ("vllm:request_prompt_tokens",)
OUTPUT_LEN = ("vllm:request_generation_tokens",)
SPEC_DRAFTS = ("vllm:spec_decode_num_drafts_total",)
SPEC_DRAFT_TOKENS = ("vllm:spec_decode_num_draft_tokens_total",)
SPEC_ACCEPTED = ("vllm:spec_decode_num_accepted_tokens_total",)
SPEC_ACCEPT_LENGTH = ("sglang:spec_accept_length",)

# Configuration a server exports: vLLM's cache_config_info labels, SGLang's constant gauges.
VLLM_CONFIG_LABELS = (
    "block_size",
    "cache_dtype",
    "gpu_memory_utilization",
    "num_gpu_blocks",
    "kv_cache_size_tokens",
    "enable_prefix_caching",
)
SGLANG_CONFIG_GAUGES = ("sglang:max_total_num_tokens", "sglang:page_size", "sglang:context_len")

# Thresholds, each with where it comes from (docs/diagnose.md).
# KV usage at which a new long request can find no free block and vLLM preempts (its scheduler
# preempts the newest running request when allocation fails; SGLang retracts): "near the ceiling".
KV_NEAR_CEILING = 0.95
# A hit rate that falls below half of the server's lifetime rate, from a lifetime rate worth
# protecting, has collapsed (an assumption: prompt layout or traffic changed).
PREFIX_COLLAPSE_SHARE = 0.5
# The lifetime hit rate below which a drop is not called a collapse (same assumption).
PREFIX_WORTH_PROTECTING = 0.2
# Draft cost relative to the target when no draft model is known (as `planner spec`).
DEFAULT_DRAFT_COST = 0.05
# A smaller speculative k is advised only when its estimated speedup beats the current one by
# this share: the acceptance behind both is measured over one scrape window, and a smaller gain
# would not show at the 0.01x the finding prints (an assumption, as the thresholds above).
MIN_SPEC_GAIN = 0.02
# A queue is sustained when it holds at least this many requests in both scrapes.
SUSTAINED_QUEUE = 1
# max_model_len suggestions are rounded up to this many tokens.
CONTEXT_ROUNDING = 1024

Verdict = Literal["ok", "fail", "n/a"]


class Finding(BaseModel):
    """One line of the checklist."""

    model_config = ConfigDict(extra="forbid")

    check: str
    value: str
    threshold: str
    source: str
    verdict: Verdict
    step: int  # position in the tuning order (1 = memory ledger ... 5 = speculation)
    action: str | None = None
    expected_effect: str | None = None


class Diagnosis(BaseModel):
    """The checklist, the verdict and the advice."""

    model_config = ConfigDict(extra="forbid")

    engine: str
    interval_s: float
    healthy: bool
    findings: list[Finding]
    advice: Finding | None
    counter_resets: list[str]
    running: float | None
    waiting: float | None
    config: dict[str, str] = Field(
        default_factory=dict, description="the running configuration the server exports"
    )


def _pick(samples: Samples, names: tuple[str, ...]) -> str | None:
    return next((n for n in names if n in samples), None)


def gauge(samples: Samples, names: tuple[str, ...]) -> float | None:
    """The sum of a gauge over its series (engines, ranks); None when absent or unreadable."""
    name = _pick(samples, names)
    if name is None:
        return None
    values = [v for _labels, v in samples[name]]
    if not values or not all(math.isfinite(v) for v in values):
        return None
    return sum(values)


def _key(labels: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


def counter_delta(
    before: Samples, after: Samples, names: tuple[str, ...], resets: list[str]
) -> float | None:
    """What a counter counted between the scrapes, summed over its series (never negative)."""
    name = _pick(after, names)
    if name is None:
        return None
    old = {_key(labels): v for labels, v in before.get(name, [])}
    total = 0.0
    for labels, value in after[name]:
        if not math.isfinite(value) or value < 0:
            return None
        prior = old.get(_key(labels), 0.0)
        if value < prior:  # reset between the scrapes: all of `value` is new
            resets.append(name)
            total += value
        else:
            total += value - prior
    return total


def _buckets(samples: Samples, base: str) -> dict[tuple[tuple[str, str], ...], dict[float, float]]:
    out: dict[tuple[tuple[str, str], ...], dict[float, float]] = {}
    for labels, value in samples.get(base + "_bucket", []):
        le_text = labels.get("le")
        if le_text is None:
            continue
        try:
            le = float(le_text)
        except ValueError:
            continue
        rest = _key({k: v for k, v in labels.items() if k != "le"})
        out.setdefault(rest, {})[le] = value
    return out


def histogram_quantile(
    before: Samples, after: Samples, names: tuple[str, ...], q: float
) -> tuple[float | None, int]:
    """(the q-quantile of what was observed between the scrapes, observations); linear within
    a bucket, as Prometheus' histogram_quantile. None when nothing was observed."""
    name = next((n for n in names if n + "_bucket" in after), None)
    if name is None:
        return None, 0
    old, new = _buckets(before, name), _buckets(after, name)
    merged: dict[float, float] = {}
    for series, buckets in new.items():
        prior = old.get(series, {})
        reset = any(buckets.get(le, 0.0) < prior.get(le, 0.0) for le in buckets)
        for le, value in buckets.items():
            merged[le] = merged.get(le, 0.0) + (value if reset else value - prior.get(le, 0.0))
    bounds = sorted(merged)
    if not bounds or not math.isfinite(merged[bounds[-1]]) or merged[bounds[-1]] <= 0:
        return None, 0
    total = merged[bounds[-1]]
    rank = q * total
    lower, below = 0.0, 0.0
    for le in bounds:
        count = merged[le]
        if count >= rank:
            if math.isinf(le):
                return lower, int(total)  # in the open top bucket: its lower bound
            if count == below:
                return le, int(total)
            return lower + (le - lower) * (rank - below) / (count - below), int(total)
        lower, below = le, count
    return lower, int(total)


def detect_engine(samples: Samples) -> str:
    """vllm-v1, vllm-v0, sglang, sglang-2024 or unknown."""
    names = set(samples)
    if any(n.startswith("vllm:") for n in names):
        v1 = "vllm:kv_cache_usage_perc" in names or any(
            "engine" in labels for series in samples.values() for labels, _ in series[:1]
        )
        return "vllm-v1" if v1 else "vllm-v0"
    if any(n.startswith("sglang:") for n in names):
        old = "sglang:queue_req" in names or "sglang:num_requests_running" in names
        return "sglang-2024" if old else "sglang"
    return "unknown"


class Budgets(BaseModel):
    """What the server promises."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tpot_ms: float | None = None
    ttft_ms: float | None = None
    percentile: float = 95.0
    draft_cost: float = DEFAULT_DRAFT_COST

    @property
    def quantile(self) -> float:
        """The percentile the budgets hold at, as a fraction."""
        return self.percentile / 100.0

    @property
    def label(self) -> str:
        """The percentile as the checks name it ("p95")."""
        return f"p{self.percentile:g}"


@dataclass(frozen=True)
class Effects:
    """The planner's models for this deployment, when a model and GPU are known."""

    step_ms: Callable[[int], float] | None = None  # decode step at the deployment's context
    batch_cap: Callable[[float], int] | None = None  # largest batch within a TPOT budget
    kv_sequences_at: Callable[[int], int] | None = None  # sequences the KV holds at a length
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    engine: str | None = None  # the engine the models are that engine's (None: a textbook plan)


@dataclass(frozen=True)
class _Window:
    """The two scrapes of a window and the gauges the checks read from the second: the running
    sequences and the KV cache usage (vLLM's a mean over its data-parallel engines)."""

    before: Samples
    after: Samples
    usage: float | None
    running: float | None

    @classmethod
    def read(cls, before: Samples, after: Samples) -> _Window:
        """The window between two scrapes, its gauges read once."""
        usage = gauge(after, KV_USAGE)
        if usage is not None and _pick(after, KV_USAGE) == "vllm:kv_cache_usage_perc":
            usage /= max(1, len(after["vllm:kv_cache_usage_perc"]))  # a mean over DP engines
        return cls(before, after, usage, gauge(after, RUNNING))


def _memory_findings(w: _Window, fx: Effects, preempt_rate: float | None) -> list[Finding]:
    """Step 1, the memory ledger: the KV cache at its ceiling and preemptions, with the memory
    action where either fails."""
    before, after, usage = w.before, w.after, w.usage
    findings: list[Finding] = []
    kv_fail = usage is not None and usage >= KV_NEAR_CEILING
    pre_fail = preempt_rate is not None and preempt_rate > 0
    action = effect = None
    if kv_fail or pre_fail:
        action, effect = _memory_action(before, after, fx, usage, detect_engine(after))
    findings.append(
        Finding(
            check="KV cache usage",
            value="absent" if usage is None else f"{usage:.0%}",
            threshold=f"< {KV_NEAR_CEILING:.0%}",
            source="above it a new long request finds no free block: vLLM preempts, SGLang "
            "retracts",
            verdict=_verdict(usage is not None, kv_fail),
            step=1,
            action=action if kv_fail else None,
            expected_effect=effect if kv_fail else None,
        )
    )
    findings.append(
        Finding(
            check="preemptions",
            value="absent" if preempt_rate is None else f"{preempt_rate:.2f}/s",
            threshold="0/s",
            source="each preemption recomputes or swaps a running sequence",
            verdict=_verdict(preempt_rate is not None, pre_fail),
            step=1,
            action=action if pre_fail else None,
            expected_effect=effect if pre_fail else None,
        )
    )
    return findings


def _tpot_finding(w: _Window, fx: Effects, budgets: Budgets) -> Finding:
    """Step 2, TPOT against the budget: the window's ITL quantile, and the max_num_seqs the
    step model sets where it is over."""
    before, after, usage, running = w.before, w.after, w.usage, w.running
    itl, itl_n = histogram_quantile(before, after, ITL, budgets.quantile)
    tpot_fail = itl is not None and budgets.tpot_ms is not None and itl * 1e3 > budgets.tpot_ms
    action = effect = None
    if tpot_fail and budgets.tpot_ms is not None:
        assert itl is not None
        # the load the tokens were decoded at: the busier of the two scrapes (a server that
        # emptied by the second still decoded the window's tokens at the first one's batch)
        load = max((r for r in (gauge(before, RUNNING), running) if r is not None), default=None)
        action, effect = _tpot_action(
            fx, budgets.tpot_ms, itl * 1e3, load, usage, detect_engine(after)
        )
    return Finding(
        check=f"TPOT {budgets.label}",
        value="no tokens in the window" if itl is None else f"{itl * 1e3:.1f} ms ({itl_n:,})",
        threshold=_budget_text(budgets.tpot_ms, "--tpot"),
        source="your TPOT budget",
        verdict=_verdict(itl is not None and budgets.tpot_ms is not None, tpot_fail),
        step=2,
        action=action,
        expected_effect=effect,
    )


def _queue_findings(w: _Window, fx: Effects, budgets: Budgets) -> list[Finding]:
    """Step 3, TTFT and the queue: admission and capacity (a queue in both scrapes, or TTFT
    over its budget), with the action on the queue where either fails."""
    before, after, usage, running = w.before, w.after, w.usage, w.running
    waiting_before, waiting = gauge(before, WAITING), gauge(after, WAITING)
    findings: list[Finding] = []
    ttft, ttft_n = histogram_quantile(before, after, TTFT, budgets.quantile)
    ttft_fail = ttft is not None and budgets.ttft_ms is not None and ttft * 1e3 > budgets.ttft_ms
    queued = (
        waiting is not None
        and waiting_before is not None
        and min(waiting, waiting_before) >= SUSTAINED_QUEUE
    )
    queue_action = queue_effect = None
    if queued or ttft_fail:
        queue_action, queue_effect = _queue_action(
            fx, usage, running, waiting, detect_engine(after), queued
        )
    findings.append(
        Finding(
            check=f"TTFT {budgets.label}",
            value="no requests in the window"
            if ttft is None
            else f"{ttft * 1e3:,.0f} ms ({ttft_n:,})",
            threshold=_budget_text(budgets.ttft_ms, "--ttft"),
            source="your TTFT budget",
            verdict=_verdict(ttft is not None and budgets.ttft_ms is not None, ttft_fail),
            step=3,
            action=queue_action if ttft_fail else None,
            expected_effect=queue_effect if ttft_fail else None,
        )
    )
    findings.append(
        Finding(
            check="waiting queue",
            value="absent"
            if waiting is None
            else f"{waiting_before or 0:,.0f} -> {waiting:,.0f} requests",
            threshold="empty in at least one scrape",
            source="a queue in both scrapes means arrivals outrun what the server admits",
            verdict=_verdict(waiting is not None, queued),
            step=3,
            action=queue_action if queued else None,
            expected_effect=queue_effect if queued else None,
        )
    )
    return findings


def diagnose(
    before: Samples,
    after: Samples,
    interval_s: float,
    budgets: Budgets,
    effects: Effects | None = None,
) -> Diagnosis:
    """The checklist over two scrapes, and the advice."""
    fx = effects or Effects()
    resets: list[str] = []
    findings: list[Finding] = []
    w = _Window.read(before, after)
    running, waiting = w.running, gauge(after, WAITING)
    preempted = counter_delta(before, after, PREEMPTIONS, resets)
    preempt_rate = None if preempted is None else preempted / interval_s

    # 1. Memory ledger: KV at its ceiling, preemptions.
    findings += _memory_findings(w, fx, preempt_rate)
    # 2. TPOT against the budget: max_num_seqs from the step model.
    findings.append(_tpot_finding(w, fx, budgets))
    # 3. TTFT and the queue: admission and capacity.
    findings += _queue_findings(w, fx, budgets)

    # 4. Prefix caching: a collapse between the scrapes.
    findings.append(_prefix_finding(before, after, resets))

    # 5. Speculative decoding: acceptance at this load.
    findings.append(_spec_finding(before, after, budgets.draft_cost, running, resets))

    generated = counter_delta(before, after, GENERATED, resets)
    findings.append(
        Finding(
            check="generation throughput",
            value="absent" if generated is None else f"{generated / interval_s:,.0f} tok/s",
            threshold="(reported)",
            source="generated tokens counter",
            verdict="n/a",
            step=6,
        )
    )
    config = running_config(after)
    if config.get("enable_prefix_caching") == "False":
        prefix = next(f for f in findings if f.check == "prefix-cache hit rate")
        prefix.value, prefix.verdict, prefix.action = "prefix caching is off", "n/a", None
    failing = sorted((f for f in findings if f.verdict == "fail"), key=lambda f: f.step)
    return Diagnosis(
        engine=detect_engine(after),
        interval_s=interval_s,
        healthy=not failing,
        findings=findings,
        advice=failing[0] if failing else None,
        counter_resets=sorted(set(resets)),
        running=running,
        waiting=waiting,
        config=config,
    )


def served_models(samples: Samples) -> set[str]:
    """The model names a scrape's series carry (vLLM and SGLang label them `model_name`;
    SGLang's 2024 series `name`)."""
    return {
        str(labels.get("model_name") or labels["name"])
        for metric, series in samples.items()
        for labels, _ in series
        if "model_name" in labels or ("name" in labels and metric.startswith("sglang:"))
    }


def mismatch(before: Samples, after: Samples) -> str | None:
    """Why two scrapes are not the same server, if they are not: another engine, another
    model, or another cache configuration (block count, memory fraction)."""
    engines = detect_engine(before), detect_engine(after)
    if engines[0] != engines[1]:
        return f"the first is {engines[0]}, the second {engines[1]}"
    models = served_models(before), served_models(after)
    if models[0] and models[1] and models[0] != models[1]:
        first, second = (", ".join(sorted(m)) for m in models)
        return f"the first serves {first}, the second {second}"
    configs = running_config(before), running_config(after)
    for key in sorted(set(configs[0]) & set(configs[1])):
        if configs[0][key] != configs[1][key]:
            return f"{key} is {configs[0][key]} in the first, {configs[1][key]} in the second"
    return None


def running_config(samples: Samples) -> dict[str, str]:
    """What the server says it runs with (labels and gauges as printed)."""
    info = samples.get("vllm:cache_config_info")
    if info:
        labels = info[0][0]
        return {k: labels[k] for k in VLLM_CONFIG_LABELS if k in labels}
    out = {}
    for name in SGLANG_CONFIG_GAUGES:
        value = gauge(samples, (name,))
        if value is not None:
            out[name.split(":", 1)[1]] = f"{value:g}"
    return out


# The KV caches a vLLM scrape reports as the flag gave them (cache_config_info's cache_dtype):
# the fp8 ones a plan takes as they are; another format (DeepSeek's rewritten MLA layouts) is
# left to the plan's default.
SERVED_FP8_KV = ("fp8", "fp8_e4m3", "fp8_e5m2")


def served_settings(samples: Samples) -> dict[str, object]:
    """What a scrape says of the deployment that a plan without a lock file takes: the engine
    (an SGLang server's pool is not vLLM's), vLLM's fp8 KV cache and memory share
    (cache_config_info) and SGLang's context length (its context_len gauge). What a plan could
    not take as reported is left out: the block vLLM reports (a hybrid model's is raised past
    the flag), a share it leaves unset, another KV format."""
    engine = detect_engine(samples)
    if engine.startswith("sglang"):
        out: dict[str, object] = {"engine": "sglang"}
        context = gauge(samples, ("sglang:context_len",))
        if context is not None and context >= 1 and context == int(context):
            out["context_tokens"] = int(context)
        return out
    if not engine.startswith("vllm"):
        return {}
    out = {"engine": "vllm"}
    config = running_config(samples)
    if config.get("cache_dtype") in SERVED_FP8_KV:
        out["kv_cache_dtype"] = config["cache_dtype"]
    try:
        share = float(config.get("gpu_memory_utilization", "nan"))
    except ValueError:
        share = math.nan
    if 0 < share <= 1:
        out["memory_fraction"] = share
    return out


def _budget_text(budget_ms: float | None, flag: str) -> str:
    """A latency check's threshold column: the budget, or the flag that would set it."""
    return f"no budget ({flag})" if budget_ms is None else f"<= {budget_ms:g} ms"


def _verdict(known: bool, fail: bool) -> Verdict:
    """n/a when the window (or the user) gave nothing to judge, else fail / ok."""
    if not known:
        return "n/a"
    return "fail" if fail else "ok"


def _length_p99(before: Samples, after: Samples) -> int | None:
    """P99 of prompt + output tokens seen (the two P99s added: an upper bound)."""
    prompt, _ = histogram_quantile(before, after, PROMPT_LEN, 0.99)
    output, _ = histogram_quantile(before, after, OUTPUT_LEN, 0.99)
    if prompt is None or output is None:
        return None
    return math.ceil(prompt + output)


# What each kind of advice changes, as the serve line's settings fields of each engine.
ADVICE_FIELDS = {
    "vllm": {"context": "max_model_len", "cap": "max_num_seqs", "memory": "gpu_memory_utilization"},
    "sglang": {
        "context": "context_length",
        "cap": "max_running_requests",
        "memory": "mem_fraction_static",
    },
}


def engine_flags(engine: str) -> dict[str, str]:
    """The engine's own flags for what advice changes (the serve line's spellings; SGLang's
    for either SGLang metric family)."""
    from planner.core.serve import SGLANG_FLAGS, VLLM_FLAGS

    sglang = engine.startswith("sglang")
    spelled = dict(SGLANG_FLAGS if sglang else VLLM_FLAGS)
    return {k: spelled[field] for k, field in ADVICE_FIELDS["sglang" if sglang else "vllm"].items()}


def _memory_action(
    before: Samples, after: Samples, fx: Effects, usage: float | None, engine: str = "vllm"
) -> tuple[str, str | None]:
    """The context length from the lengths seen; else the running cap to what the KV holds."""
    flags = engine_flags(engine)
    seen = _length_p99(before, after)
    if seen is not None and fx.max_model_len and seen < fx.max_model_len:
        target = math.ceil(seen / CONTEXT_ROUNDING) * CONTEXT_ROUNDING
        action = (
            f"{flags['context']} {fx.max_model_len:,} -> {target:,} (P99 of prompt + output "
            f"seen is {seen:,} tokens)"
        )
        if fx.kv_sequences_at is not None:
            now, then = fx.kv_sequences_at(fx.max_model_len), fx.kv_sequences_at(target)
            return action, (
                f"full-length sequences the KV cache holds: {now:,} -> {then:,} (engine model)"
            )
        return action, None
    if fx.kv_sequences_at is not None and fx.max_num_seqs is not None and fx.max_model_len:
        held = fx.kv_sequences_at(fx.max_model_len)
        return (
            f"{flags['cap']} {fx.max_num_seqs:,} -> at most what the KV cache holds, or raise "
            f"{flags['memory']} / fp8 KV (`planner capacity` sizes both)",
            f"the cache holds {held:,} sequences at {flags['context']} {fx.max_model_len:,}",
        )
    return (
        f"lower {flags['context']} to the real length distribution, or {flags['cap']}; or raise "
        f"{flags['memory']} / use fp8 KV",
        None if usage is None else "pass --plan or --preset/--model and --gpu to size it",
    )


def _tpot_action(
    fx: Effects,
    tpot_ms: float,
    measured_ms: float,
    running: float | None,
    usage: float | None,
    engine: str = "vllm",
) -> tuple[str, str | None]:
    """Lower the running cap (the engine's own flag) to the batch the step model, anchored on
    the measured TPOT at the current load, keeps inside the budget."""
    cap_flag = engine_flags(engine)["cap"]
    now = round(running) if running else 0
    if fx.step_ms is None or not now:
        # no batch to anchor the step model on: the plan's cap is not what the server ran
        why = (
            "pass --plan or --preset/--model and --gpu for the number"
            if fx.step_ms is None
            else "no sequence was running at either scrape to anchor the step model on"
        )
        return (f"lower {cap_flag} until TPOT fits ({why})", None)
    step = fx.step_ms
    scale = measured_ms / step(now)  # the model anchored on what this server does at `now`
    low = largest_passing(0, now, lambda b: scale * step(b) <= tpot_ms)
    slack = "" if usage is None else f" with KV at {usage:.0%}"
    if low == 0:
        return (
            f"no batch meets TPOT {tpot_ms:g} ms on this server ({measured_ms:.1f} ms at "
            f"{now:,}): a faster GPU, more TP, or fp8 weights",
            f"step model anchored on the measurement: {scale * step(1):.1f} ms at one sequence",
        )
    return (
        f"{cap_flag} {now:,} -> {low:,}{slack}",
        f"step model anchored on the measured {measured_ms:.1f} ms at {now:,} running: "
        f"{scale * step(low):.1f} ms at {low:,} (an estimate)",
    )


def _queue_action(
    fx: Effects,
    usage: float | None,
    running: float | None,
    waiting: float | None,
    engine: str = "vllm",
    queued: bool = False,
) -> tuple[str, str | None]:
    """More admission where the KV has room, else more replicas; an idle server with a slow
    first token is not short of capacity. The advice names the engine's own flag."""
    cap_flag = engine_flags(engine)["cap"]
    roomy = usage is not None and usage < KV_NEAR_CEILING
    idle = (running or 0) < 1 and (waiting or 0) < 1 and not queued
    if idle:
        return (
            "TTFT is over budget with nothing running or waiting: not a capacity problem; look "
            "at the prefill itself (prompt lengths, the chunk size) or time outside the engine "
            "(network, tokenization)",
            None,
        )
    if roomy and fx.max_num_seqs and running is not None and running >= fx.max_num_seqs * 0.95:
        return (
            f"{cap_flag} {fx.max_num_seqs:,} is full with KV at {usage:.0%}: raise it "
            "within the TPOT budget, or add replicas",
            None,
        )
    if roomy and queued:
        assert usage is not None
        return (
            f"requests queue while the KV cache is at {usage:.0%}: the running cap admits too "
            f"few; raise {cap_flag} within the TPOT budget before adding replicas",
            None,
        )
    extra = "" if waiting is None else f" ({waiting:,.0f} waiting)"
    return (f"add replicas or GPUs: the server is at capacity{extra}", None)


def _prefix_finding(before: Samples, after: Samples, resets: list[str]) -> Finding:
    hits = counter_delta(before, after, PREFIX_HITS, resets)
    queries = counter_delta(before, after, PREFIX_QUERIES, resets)
    rate = lifetime = None
    if hits is not None and queries:
        rate = hits / queries
        total_q = gauge(before, PREFIX_QUERIES)  # the rate up to the first scrape
        total_h = gauge(before, PREFIX_HITS)
        if total_q and total_h is not None:
            lifetime = total_h / total_q
    else:
        now, then = gauge(after, PREFIX_GAUGE), gauge(before, PREFIX_GAUGE)
        if now is not None:
            rate = now / 100 if now > 1 else now  # SGLang 2024 printed a percentage
        if then is not None:
            lifetime = then / 100 if then > 1 else then
    collapsed = (
        rate is not None
        and lifetime is not None
        and lifetime >= PREFIX_WORTH_PROTECTING
        and rate < PREFIX_COLLAPSE_SHARE * lifetime
    )
    if rate is not None:
        value = f"{rate:.1%}" + ("" if lifetime is None else f" (before: {lifetime:.1%})")
    else:  # the counters, where the server exports them, counted no lookup in the window
        value = "absent" if queries is None else "no lookups in the window"
    return Finding(
        check="prefix-cache hit rate",
        value=value,
        threshold=f">= {PREFIX_COLLAPSE_SHARE:.0%} of the earlier rate",
        source="a fall to under half the earlier rate means prompts stopped sharing prefixes",
        verdict=_verdict(rate is not None and lifetime is not None, collapsed),
        step=4,
        action="keep shared content first and volatile content (timestamps, ids, retrieved "
        "documents) last in prompts; check routing keeps a session on one replica"
        if collapsed
        else None,
    )


def per_position_acceptance(length: float, k: int) -> float:
    """The per-position acceptance alpha whose expected tokens per verification
    (1 - alpha^(k+1)) / (1 - alpha) (docs/method.md §4) equal the measured accepted length;
    accepted / proposed tokens is not it (a rejection ends the run of drafts)."""
    if k < 1 or length <= 1.0:
        return 0.0
    if length >= k + 1:
        return 0.999

    def expected(a: float) -> float:
        return float(k + 1) if a >= 1.0 else (1 - a ** (k + 1)) / (1 - a)

    low, high = 0.0, 0.999
    for _ in range(60):  # bisection: expected() rises with alpha from 1 to k + 1
        mid = (low + high) / 2
        if expected(mid) < length:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def _spec_finding(
    before: Samples, after: Samples, draft_cost: float, running: float | None, resets: list[str]
) -> Finding:
    from planner.core.speculative import best

    drafts = counter_delta(before, after, SPEC_DRAFTS, resets)
    proposed = counter_delta(before, after, SPEC_DRAFT_TOKENS, resets)
    accepted = counter_delta(before, after, SPEC_ACCEPTED, resets)
    length = k = alpha = None
    if drafts and proposed and accepted is not None:
        length = 1 + accepted / drafts
        k = round(proposed / drafts)
        alpha = per_position_acceptance(length, k)
    elif (g := gauge(after, SPEC_ACCEPT_LENGTH)) is not None and g > 0:
        length = g
    if length is None:
        # the draft counters, which vLLM registers only when it speculates (SpecDecodingProm,
        # vllm/v1/spec_decode/metrics.py 0.34.0), counted none in the window
        return Finding(
            check="speculative acceptance",
            value="speculation off" if drafts is None else "no drafts in the window",
            threshold="speedup > 1",
            source="E / (1 + k c), docs/method.md §4",
            verdict="n/a",
            step=5,
        )
    if k is None or alpha is None:
        return Finding(
            check="speculative acceptance",
            value=f"accepted length {length:.2f}",
            threshold="speedup > 1",
            source="E / (1 + k c), docs/method.md §4",
            verdict="n/a",
            step=5,
        )
    speedup = length / (1 + k * draft_cost)
    better = best(alpha, list(range(1, max(k, 1) + 1)), draft_cost, 0.0)
    # advise a smaller k only when its computed speedup beats what runs now, visibly
    lower = better.k < k and better.speedup > speedup * (1 + MIN_SPEC_GAIN)
    fail = speedup <= 1.0 or lower
    load = "" if running is None else f" at {running:,.0f} running"
    if speedup <= 1.0:
        action = f"disable speculation{load}: accepted length {length:.2f} with k {k}"
    elif lower:
        action = f"lower k {k} -> {better.k} (acceptance {alpha:.0%} per position)"
    else:
        action = None
    return Finding(
        check="speculative acceptance",
        value=f"accepted length {length:.2f} of k {k} ({alpha:.0%} per position)",
        threshold="speedup > 1 and k at its best",
        source=f"E / (1 + k c) with c = {draft_cost:g}, docs/method.md §4",
        verdict="fail" if fail else "ok",
        step=5,
        action=action,
        expected_effect=f"estimated {speedup:.2f}x now; {better.speedup:.2f}x at k {better.k}"
        if fail
        else None,
    )
