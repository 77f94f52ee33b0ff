"""Parse a vLLM or SGLang start-up log: settings, memory-profiling terms, KV figures.

Recognises the line formats of vLLM V0 (0.6-0.8), V1 (0.8-0.33) and SGLang 0.4-0.5 listed in
docs/engines.md. Memory figures are GiB (old logs print "GB" meaning GiB).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from planner.core.engines.common import kv_cache_dtype_refusal
from planner.core.engines.vllm import MAX_MODEL_LEN_AUTO
from planner.errors import InputError
from planner.units import GIB_BYTES

_NUM = r"([0-9][0-9,]*(?:\.[0-9]+)?)"
# Figures a real log can print, each far above any GPU: a memory figure above a pebibyte or a
# count beyond 2^53 is corrupt, and is refused with its line rather than carried into the plan.
MAX_LOG_GIB = 2.0**20
MAX_LOG_INT = 2**53
# A non-default-args / ServerArgs dict longer than this is not a real one: it is skipped.
MAX_ARGS_CHARS = 64 * 1024


class BadFigure(ValueError):
    """A recognised line whose figure cannot be a real one (caught with its line number)."""


def _float(text: str) -> float:
    try:
        value = float(text.replace(",", ""))
    except ValueError as exc:
        raise BadFigure(f"{text[:40]!r} is not a number") from exc
    if not 0 <= value <= MAX_LOG_INT:
        raise BadFigure(f"{text[:40]} is out of range")
    return value


def _gib(text: str) -> int:
    value = _float(text)
    if value > MAX_LOG_GIB:
        raise BadFigure(f"{text[:40]} GiB is more memory than any GPU has")
    return round(value * GIB_BYTES)


def _int(text: str) -> int:
    digits = text.replace(",", "")
    if not digits.isdigit() or len(digits) > len(str(MAX_LOG_INT)):
        raise BadFigure(f"{text[:40]!r} is not a count")
    return int(digits)


@dataclass
class StartupLog:
    """What a start-up log says, and where parsing stopped."""

    engine: str | None = None
    version: str | None = None
    engine_mode: str | None = None
    model: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    terms: dict[str, int] = field(default_factory=dict)  # MeasuredTerms fields, bytes
    kv_cache_tokens: int | None = None
    num_gpu_blocks: int | None = None
    max_concurrency: float | None = None
    available_kv_bytes: int | None = None
    lines_read: int = 0


Handler = Callable[["StartupLog", "re.Match[str]"], None]


# (pattern, handler) pairs; handlers fill a StartupLog from a match.
def _literal(text: str) -> Any:
    """ast.literal_eval with every failure (syntax, depth, giant numbers) as None."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
        return None


# Types of the logged settings the engine models take (anything else in a log is refused).
SETTING_TYPES: dict[str, type] = {
    "max_model_len": int,
    "gpu_memory_utilization": float,
    "kv_cache_dtype": str,
    "max_num_seqs": int,
    "max_num_batched_tokens": int,
    "block_size": int,
    "enforce_eager": bool,
    "tensor_parallel_size": int,
    "pipeline_parallel_size": int,
    "enable_lora": bool,
    "enable_expert_parallel": bool,
    "max_cudagraph_capture_size": int,
    "enable_chunked_prefill": bool,
    "max_lora_rank": int,
    "max_loras": int,
    "kv_connector": str,
}
# The KV connector a vLLM log's non-default args name: --kv-transfer-config's kv_connector (a
# dict, or a KVTransferConfig(...) repr), else the one --kv-offloading-backend starts (0.12+,
# vllm/config/vllm.py: native -> OffloadingConnector, lmcache -> LMCacheConnectorV1).
KV_CONNECTOR = re.compile(r"""['"]?kv_connector['"]?\s*[:=]\s*['"]([A-Za-z_][\w.]{0,99})['"]""")
OFFLOADING_CONNECTORS = {"native": "OffloadingConnector", "lmcache": "LMCacheConnectorV1"}


def _setting(key: str, value: Any) -> Any:
    """A logged setting of the type the engine model takes, or BadFigure."""
    kind = SETTING_TYPES[key]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        if abs(value) > MAX_LOG_INT:  # no fraction, and maybe past float's range
            raise BadFigure(f"{key}={str(value)[:40]!r} is not a valid float")
        value = float(value)
    ok = isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
    if ok and kind is int:
        ok = 0 < value <= MAX_LOG_INT
    if ok and kind is float:
        ok = 0 < value <= 1
    if not ok:
        raise BadFigure(f"{key}={str(value)[:40]!r} is not a valid {kind.__name__}")
    if key == "kv_cache_dtype" and (refusal := kv_cache_dtype_refusal(value)):
        raise BadFigure(refusal)
    return value


# `--max-model-len auto` reaches the non-default args as -1 (MAX_MODEL_LEN_AUTO); vLLM then
# fits the length to the KV cache and logs it (vllm/v1/core/kv_cache_utils.py 0.30,
# kv_cache_planning.py 0.34: "Auto-fit max_model_len: ..." and, after warm-up,
# "--max-model-len auto reduced ...").


def _auto_fit(log: StartupLog, m: re.Match[str]) -> None:
    """The length `--max-model-len auto` settled on: the later figure of a reduction, else
    the model's full context that fitted (a later line overrides an earlier tentative one)."""
    fitted = m.group(2) or m.group(1)
    log.settings["max_model_len"] = _setting("max_model_len", _int(fitted))


def _non_default_args(log: StartupLog, m: re.Match[str]) -> None:
    text = m.group(1)
    args = _literal(text) if len(text) <= MAX_ARGS_CHARS else None
    if not isinstance(args, dict):
        # dict reprs with objects (torch.bfloat16 ...): keep the literal-looking pairs
        pairs = re.findall(r"'(\w+)': ('[^']*'|[0-9.]+|True|False|None)", text[:MAX_ARGS_CHARS])
        args = {k: _literal(v) for k, v in pairs}
    log.engine = log.engine or "vllm"
    for key in ("model", "model_tag"):
        if isinstance(args.get(key), str):
            log.model = args[key]
    for key in SETTING_TYPES:
        if key == "max_model_len" and args.get(key) == MAX_MODEL_LEN_AUTO:
            continue  # --max-model-len auto: the fitted length is logged later (_auto_fit)
        if key != "kv_connector" and key in args and args[key] is not None:
            log.settings[key] = _setting(key, args[key])
    found = KV_CONNECTOR.search(text[:MAX_ARGS_CHARS])
    if found:
        log.settings["kv_connector"] = found.group(1)
    elif args.get("kv_offloading_size"):
        backend = str(args.get("kv_offloading_backend") or "native")
        log.settings["kv_connector"] = OFFLOADING_CONNECTORS.get(backend, backend)


def _engine_config(log: StartupLog, m: re.Match[str]) -> None:
    log.engine = "vllm"
    log.engine_mode = m.group(1).lower()
    log.version = m.group(2)
    body = m.group(3)
    if found := re.search(r"model='([^']+)'", body):
        log.model = log.model or found.group(1)
    if found := re.search(r"max_seq_len=(\d+)", body):
        log.settings.setdefault("max_model_len", _setting("max_model_len", _int(found.group(1))))
    if found := re.search(r"tensor_parallel_size=(\d+)", body):
        tp = _setting("tensor_parallel_size", _int(found.group(1)))
        log.settings.setdefault("tensor_parallel_size", tp)
    if found := re.search(r"kv_cache_dtype=(\w+)", body):
        log.settings.setdefault("kv_cache_dtype", _setting("kv_cache_dtype", found.group(1)))
    if found := re.search(r"chunked_prefill_enabled=(True|False)", body):
        log.settings.setdefault("enable_chunked_prefill", found.group(1) == "True")
    if (found := re.search(r"quantization=(\w+)", body)) and found.group(1) != "None":
        log.settings.setdefault("quantization", found.group(1))


# The single-line "Memory profiling results" format belongs to the V0 engine (~0.6.4).
V0_PROFILING_VERSION = "0.6.4"


def _profiling_v0(log: StartupLog, m: re.Match[str]) -> None:
    text = m.group(0)
    log.engine = "vllm"
    log.engine_mode = log.engine_mode or "v0"
    log.version = log.version or V0_PROFILING_VERSION
    if found := re.search(r"total_gpu_memory=" + _NUM, text):
        log.terms["total_memory_bytes"] = _gib(found.group(1))
    if found := re.search(r"non_torch_memory=" + _NUM, text):
        log.terms["non_torch_bytes"] = _gib(found.group(1))
    if found := re.search(r"kv_cache_size=" + _NUM, text):
        log.available_kv_bytes = _gib(found.group(1))
    if found := re.search(r"gpu_memory_utilization=" + _NUM, text):
        util = _setting("gpu_memory_utilization", _float(found.group(1)))
        log.settings.setdefault("gpu_memory_utilization", util)
    peak = re.search(r"peak_torch_memory=" + _NUM, text)
    if peak and "weights_bytes" in log.terms:
        log.terms["activation_peak_bytes"] = _gib(peak.group(1)) - log.terms["weights_bytes"]


def _setter(target: str, key: str, kind: str = "gib") -> Handler:
    """A handler storing group 1 as GiB bytes, an int or a float in terms / settings / the log."""
    convert: dict[str, Callable[[str], Any]] = {"gib": _gib, "int": _int, "float": _float}

    def handle(log: StartupLog, m: re.Match[str]) -> None:
        """Store the converted first group."""
        value = convert[kind](m.group(1))
        if target == "terms":
            log.terms[key] = value
        elif target == "settings":
            log.settings[key] = value
        else:
            setattr(log, key, value)

    return handle


def _v0_budget(log: StartupLog, m: re.Match[str]) -> None:
    log.terms["total_memory_bytes"] = _gib(m.group(1))
    util = _setting("gpu_memory_utilization", _float(m.group(2)))
    log.settings.setdefault("gpu_memory_utilization", util)


def _free_on_start(log: StartupLog, m: re.Match[str]) -> None:
    log.terms["total_memory_bytes"] = _gib(m.group(2))


def _desired_util(log: StartupLog, m: re.Match[str]) -> None:
    util = _setting("gpu_memory_utilization", _float(m.group(1)))
    log.settings.setdefault("gpu_memory_utilization", util)


def _concurrency(log: StartupLog, m: re.Match[str]) -> None:
    log.max_concurrency = _float(m.group(2))
    log.settings.setdefault("max_model_len", _setting("max_model_len", _int(m.group(1))))


def _sglang_before_load(log: StartupLog, m: re.Match[str]) -> None:
    log.engine = "sglang"
    log.terms["pre_load_free_bytes"] = _gib(m.group(1))


def _actual_usage(log: StartupLog, m: re.Match[str]) -> None:
    """vLLM 0.10+: 'Actual usage is W GiB for weight, A GiB for peak activation, N GiB ...'."""
    log.terms.setdefault("weights_bytes", _gib(m.group(1)))
    log.terms.setdefault("activation_peak_bytes", _gib(m.group(2)))
    log.terms.setdefault("non_torch_bytes", _gib(m.group(3)))


def _in_process_launcher(log: StartupLog, m: re.Match[str]) -> None:
    """Unsloth starts vLLM through the LLM class inside its training process."""
    log.engine = "vllm"
    log.settings["colocated"] = True
    log.settings["usage_context"] = "llm"


def _unsloth_batch(log: StartupLog, m: re.Match[str]) -> None:
    """Unsloth's 'Chunked prefill tokens = T. Num Sequences = S.' (what it passes to vLLM)."""
    _in_process_launcher(log, m)
    tokens = _setting("max_num_batched_tokens", _int(m.group(1)))
    log.settings.setdefault("max_num_batched_tokens", tokens)
    log.settings.setdefault("max_num_seqs", _setting("max_num_seqs", _int(m.group(2))))


def _consumed_usage(log: StartupLog, m: re.Match[str]) -> None:
    """vLLM 0.29+: 'Actual usage is C GiB for consumed memory (weights + non-torch), A GiB for
    peak activation' where A includes the CUDA-graph estimate; split with the earlier lines."""
    consumed, peak = _gib(m.group(1)), _gib(m.group(2))
    if "weights_bytes" in log.terms:
        log.terms.setdefault("non_torch_bytes", max(consumed - log.terms["weights_bytes"], 0))
    graphs = log.terms.get("cudagraph_bytes", 0)
    log.terms.setdefault("activation_peak_bytes", max(peak - graphs, 0))


def _vllm_version(log: StartupLog, m: re.Match[str]) -> None:
    log.engine = "vllm"
    log.version = log.version or m.group(1)


def _sglang_args(log: StartupLog, m: re.Match[str]) -> None:
    log.engine = "sglang"
    body = m.group(1)
    if found := re.search(r"model_path='([^']+)'", body):
        log.model = found.group(1)
    for key, convert in (
        ("mem_fraction_static", _float),
        ("tp_size", _int),
        ("chunked_prefill_size", _int),
        ("context_length", _int),
        ("page_size", _int),
    ):
        if (value := _server_arg(body, key, convert)) is not None:
            log.settings[key] = value
    if found := re.search(r"kv_cache_dtype='(\w+)'", body):
        log.settings["kv_cache_dtype"] = _setting("kv_cache_dtype", found.group(1))
    layout = _sglang_layout(body)
    log.settings |= layout
    groups = layout.get("attn_dp_size", 1)
    chunk = log.settings.get("chunked_prefill_size")
    if groups > 1 and isinstance(chunk, int) and chunk > 0:
        # the repr holds each attention-DP group's share (SGLang divides the flag among them,
        # or halved it before 0.4.5): the flag that launched it is the share times that
        from planner.core.engines.common import parse_version
        from planner.core.engines.sglang import chunk_divisor

        release = parse_version(log.version) if log.version else None
        log.settings["chunked_prefill_size"] = chunk * chunk_divisor(groups, release)


def _sglang_layout(body: str) -> dict[str, int]:
    """The parallel layout a ServerArgs repr records after SGLang's own adjustments:
    data-parallel attention groups (`attn_dp_size`, 0.5.23; `dp_size` with
    `enable_dp_attention=True` before, which 0.5.4-0.5.5 set by themselves for DeepSeek-V3.2),
    whole replicas (`dp_size` without it) and expert parallelism (`ep_size`)."""
    attn_dp, dp, ep = (int(_server_arg(body, key, _int) or 1) for key in SGLANG_LAYOUT_KEYS)
    out: dict[str, int] = {}
    if attn_dp > 1:
        out["attn_dp_size"] = attn_dp
    elif re.search(r"\benable_dp_attention=True\b", body) and dp > 1:
        out["attn_dp_size"] = dp
    elif dp > 1:
        out["dp_size"] = dp
    if ep > 1:
        out["ep_size"] = ep
    return out


SGLANG_LAYOUT_KEYS = ("attn_dp_size", "dp_size", "ep_size")


def _server_arg(body: str, key: str, convert: Callable[[str], float]) -> float | None:
    """One number of a ServerArgs repr (None where it is absent), refused out of range (a
    memory fraction in (0, 1], a count in (0, MAX_LOG_INT])."""
    found = re.search(rf"\b{key}=([0-9.]+)", body)
    if found is None:
        return None
    value = convert(found.group(1))
    if not 0 < value <= (1 if key == "mem_fraction_static" else MAX_LOG_INT):
        raise BadFigure(f"{key}={found.group(1)[:40]} is out of range")
    return value


def _sglang_after_load(log: StartupLog, m: re.Match[str]) -> None:
    log.engine = "sglang"
    after = _gib(m.group(1))
    if "pre_load_free_bytes" in log.terms:
        log.terms["weights_bytes"] = log.terms["pre_load_free_bytes"] - after


def _sglang_tokens(log: StartupLog, m: re.Match[str]) -> None:
    log.engine = "sglang"
    log.kv_cache_tokens = _int(m.group(1))
    if found := re.search(r"context_len=(\d+)", m.group(0)):
        log.settings.setdefault("context_length", _int(found.group(1)))


def _flashinfer_sampler(log: StartupLog, m: re.Match[str]) -> None:
    """V1's TopKTopPSampler says at start-up whether FlashInfer's kernels are in use."""
    log.settings["flashinfer"] = m.group(0).startswith("Using FlashInfer")


PATTERNS: list[tuple[re.Pattern[str], Handler]] = [
    (re.compile(r"non-default args: (\{.*\})"), _non_default_args),
    (
        re.compile(
            r"Using FlashInfer for top-p & top-k sampling|FlashInfer is not available\. "
            r"Falling back|FlashInfer is available, but it is not enabled"
        ),
        _flashinfer_sampler,
    ),
    (re.compile(r"Initializing an? (V[01]) LLM engine \(v?([0-9][^)]*)\)(.*)"), _engine_config),
    (re.compile(r"vLLM API server version v?([0-9][0-9.a-z+]*)"), _vllm_version),
    # Unsloth's banner ("NVIDIA L4. Num GPUs = 1. Max memory: 22.161 GB") and its vLLM line
    (re.compile(r"Unsloth: vLLM loading |Num GPUs = \d+\. Max memory: "), _in_process_launcher),
    (re.compile(r"Chunked prefill tokens = (\d+)\. Num Sequences = (\d+)"), _unsloth_batch),
    (re.compile(r"Memory profiling results: .*"), _profiling_v0),
    (
        re.compile(r"(?:Model loading|Loading model weights) took " + _NUM + r" ?Gi?B"),
        _setter("terms", "weights_bytes"),
    ),
    (re.compile(r"model weights take " + _NUM + "GiB"), _setter("terms", "weights_bytes")),
    (
        re.compile(r"torch peak memory increase: " + _NUM + "GiB"),
        _setter("terms", "activation_peak_bytes"),
    ),
    (
        re.compile(r"PyTorch activation peak memory takes " + _NUM + "GiB"),
        _setter("terms", "activation_peak_bytes"),
    ),
    (
        re.compile(r"non-torch forward increase memory: " + _NUM + "GiB"),
        _setter("terms", "non_torch_bytes"),
    ),
    (re.compile(r"non_torch_memory takes " + _NUM + "GiB"), _setter("terms", "non_torch_bytes")),
    (
        re.compile(r"total_gpu_memory \(" + _NUM + r"GiB\) x gpu_memory_utilization \(" + _NUM),
        _v0_budget,
    ),
    (re.compile(r"Free memory on device \(" + _NUM + "/" + _NUM + r" GiB\)"), _free_on_start),
    (re.compile(r"Desired GPU memory utilization is \(" + _NUM), _desired_util),
    (
        re.compile(
            r"Actual usage is " + _NUM + r" GiB for weight, " + _NUM + r" GiB for peak "
            r"activation, " + _NUM + r" GiB for non-torch memory"
        ),
        _actual_usage,
    ),
    (
        re.compile(
            r"Actual usage is "
            + _NUM
            + r" GiB for consumed memory \(weights \+ non-torch\), "
            + _NUM
            + r" GiB for peak activation"
        ),
        _consumed_usage,
    ),
    (
        re.compile(r"Estimated CUDA graph memory: " + _NUM + " GiB"),
        _setter("terms", "cudagraph_bytes"),
    ),
    (
        re.compile(r"Available KV cache memory: " + _NUM + " GiB"),
        _setter("log", "available_kv_bytes"),
    ),
    (
        re.compile(r"the rest of the memory reserved for KV Cache is " + _NUM + "GiB"),
        _setter("log", "available_kv_bytes"),
    ),
    (
        # vLLM 0.34's extensible KV cache, sized after warm-up: this figure, logged after the
        # profile's "Available KV cache memory", is the one the blocks come from
        re.compile(r"Memory after warmup: .*? [0-9,]+ KV cache blocks \(" + _NUM + r" GiB\)"),
        _setter("log", "available_kv_bytes"),
    ),
    (
        re.compile(
            r"(?:Auto-fit max_model_len: (?:reduced from|full model context length|using "
            r"max_model_len=)|--max-model-len auto reduced max_model_len from) ?([0-9,]+)"
            r"(?: to ([0-9,]+))?"
        ),
        _auto_fit,
    ),
    (re.compile(r"KV cache size: " + _NUM + " tokens"), _setter("log", "kv_cache_tokens", "int")),
    (
        re.compile(r"Maximum concurrency for " + _NUM + r" tokens per request: " + _NUM + "x"),
        _concurrency,
    ),
    (re.compile(r"(?:GPU|CUDA|cuda) blocks: " + _NUM), _setter("log", "num_gpu_blocks", "int")),
    (re.compile(r"num_gpu_blocks is: " + _NUM), _setter("log", "num_gpu_blocks", "int")),
    (re.compile(r"server_args=ServerArgs\((.*)\)"), _sglang_args),
    (re.compile(r"Load weight begin\. avail mem=" + _NUM + " GB"), _sglang_before_load),
    (re.compile(r"Load weight end\..*avail mem=" + _NUM + " GB"), _sglang_after_load),
    (re.compile(r"max_total_num_tokens=" + _NUM + ".*"), _sglang_tokens),
]


# Patterns that only SGLang prints; every other recognised line implies vLLM.
SGLANG_ONLY = {p.pattern for p, _ in PATTERNS[-4:]}


# A literal every recognised line contains: lines without one are skipped unread, so a 100 MB
# server log is scanned once in C, not matched against every pattern line by line.
LINE_KEYWORDS = re.compile(
    r"non-default args|LLM engine \(|vLLM API server version|Unsloth: vLLM loading|Num GPUs = "
    r"|Chunked prefill tokens|Memory profiling results|Model loading|Loading model weights"
    r"|model weights take|torch peak memory increase|activation peak memory takes"
    r"|non-torch forward increase|non_torch_memory takes|total_gpu_memory \(|Free memory on device"
    r"|Desired GPU memory utilization|Actual usage is|Estimated CUDA graph memory"
    r"|Available KV cache memory|reserved for KV Cache|KV cache size: |Maximum concurrency for"
    r"|Memory after warmup|Auto-fit max_model_len|--max-model-len auto"
    r"|blocks: |num_gpu_blocks is: |server_args=ServerArgs|Load weight begin|Load weight end"
    r"|max_total_num_tokens=|FlashInfer "
)


def _candidate_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) of every line holding a keyword, in order, each once."""
    line_no, counted_to, last_start = 1, 0, -1
    for hit in LINE_KEYWORDS.finditer(text):
        start = text.rfind("\n", 0, hit.start()) + 1
        if start == last_start:
            continue
        end = text.find("\n", hit.end())
        line_no += text.count("\n", counted_to, start)
        counted_to, last_start = start, start
        yield line_no, text[start : len(text) if end < 0 else end].rstrip("\r")


def parse_startup_log(
    text: str, origin: str, field: str = "--from-log", require_tokens: bool = True
) -> StartupLog:
    """Read every recognised line; a log with no engine or no KV figure is an error.

    `require_tokens=False` (calibration) accepts a log that states the KV budget in bytes only.
    """
    log = StartupLog()
    last_hit = 0
    for no, line in _candidate_lines(text):
        for pattern, handler in PATTERNS:
            matches = list(pattern.finditer(line))
            if matches:
                try:
                    handler(log, matches[-1])  # a line quoting two figures means the later one
                except BadFigure as exc:
                    raise InputError(field, f"{origin} line {no}: {exc}") from exc
                last_hit = no
                if log.engine is None and pattern.pattern not in SGLANG_ONLY:
                    log.engine = "vllm"
    log.lines_read = text.count("\n") + (0 if not text or text.endswith("\n") else 1)
    if log.engine is None:
        raise InputError(
            field, f"{origin} line 1: not a vLLM or SGLang start-up log (no line recognised)"
        )
    if log.kv_cache_tokens is None and log.num_gpu_blocks is not None:
        log.kv_cache_tokens = log.num_gpu_blocks * int(log.settings.get("block_size", 16))
    if log.kv_cache_tokens is None and (require_tokens or log.available_kv_bytes is None):
        raise InputError(
            field,
            f"{origin} line {last_hit}: parsing stopped there: the log ends before the KV cache "
            "size line (truncated?)",
        )
    return log
