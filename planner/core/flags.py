"""Launch flags for vLLM and SGLang, spelled as their parsers do (vLLM 0.33, SGLang 0.5.23)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

from planner.core.engines.common import version_text
from planner.core.specs import ModelSpec
from planner.errors import InputError

# Placeholder for shape presets that name no checkpoint; shell-friendly so the line still pastes.
MODEL_PLACEHOLDER = "$MODEL"

# Our KV dtype -> the engine's --kv-cache-dtype. 16-bit KV is the engine's "auto" (model dtype).
VLLM_KV_DTYPE = {"fp16": "auto", "bf16": "auto", "fp8": "fp8", "int8": "auto", "fp32": "auto"}
SGLANG_KV_DTYPE = {
    "fp16": "auto",
    "bf16": "auto",
    "fp8": "fp8_e4m3",
    "int8": "auto",
    "fp32": "auto",
}


def kv_cache_flag(engine: str, kv_dtype: str) -> str:
    """Our KV dtype as `engine`'s --kv-cache-dtype value (VLLM_KV_DTYPE, SGLANG_KV_DTYPE; a
    dtype neither names is the engine's auto)."""
    table = SGLANG_KV_DTYPE if engine == "sglang" else VLLM_KV_DTYPE
    return table.get(kv_dtype, "auto")


class EngineFlags(BaseModel):
    """One paste-able command line per engine."""

    model_config = ConfigDict(extra="forbid")

    vllm: str
    sglang: str


def _join(parts: list[str]) -> str:
    return " ".join(p if p == MODEL_PLACEHOLDER else shlex.quote(p) for p in parts)


def engine_flags(
    *,
    model: ModelSpec,
    tp: int,
    context_tokens: int,
    max_seqs: int,
    gpu_memory_utilization: float,
    mem_fraction_static: float,
    kv_dtype: str,
    block_tokens: int,
) -> EngineFlags:
    """The launch lines that realise a plan."""
    ref = model.serve_id or MODEL_PLACEHOLDER
    vllm = [
        "vllm",
        "serve",
        ref,
        "--tensor-parallel-size",
        str(tp),
        "--max-model-len",
        str(context_tokens),
        "--max-num-seqs",
        str(max_seqs),
        "--gpu-memory-utilization",
        f"{gpu_memory_utilization:.2f}",
        "--kv-cache-dtype",
        VLLM_KV_DTYPE[kv_dtype],
        "--block-size",
        str(block_tokens),
    ]
    sglang = [
        "python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        ref,
        "--tp-size",
        str(tp),
        "--context-length",
        str(context_tokens),
        "--max-running-requests",
        str(max_seqs),
        "--mem-fraction-static",
        f"{mem_fraction_static:.2f}",
        "--kv-cache-dtype",
        SGLANG_KV_DTYPE[kv_dtype],
        "--page-size",
        str(block_tokens),
    ]
    return EngineFlags(vllm=_join(vllm), sglang=_join(sglang))


# Placeholder for the draft / EAGLE head path when the user names none.
DRAFT_PLACEHOLDER = "$DRAFT"
# --method -> (vLLM speculative-config method, SGLang --speculative-algorithm or None).
SPEC_METHODS: dict[str, tuple[str, str | None]] = {
    "ngram": ("ngram", "NGRAM"),
    "eagle": ("eagle", "EAGLE"),
    "eagle3": ("eagle3", "EAGLE3"),
    "medusa": ("medusa", None),  # vLLM <= 0.32 only (removed in 0.33); SGLang has none
    "mtp": ("mtp", "NEXTN"),
    "draft": ("draft_model", "STANDALONE"),
}
SPEC_NEEDS = {
    "ngram": "nothing: drafts by prompt lookup; pays on repetitive output (code edits, RAG)",
    "eagle": "an EAGLE head trained for this target (--draft-model)",
    "eagle3": "an EAGLE-3 head trained for this target (--draft-model)",
    "medusa": "Medusa heads for this target; vLLM 0.32 or older, not SGLang",
    "mtp": "a target with MTP layers (DeepSeek-V3 num_nextn_predict_layers, Qwen3-Next)",
    "draft": "a small model with the target's tokenizer (--draft-model)",
}


# vLLM's speculative decoding by release (engine/arg_utils.py and SpeculativeConfig, read in the
# 0.6.3 - 0.34 wheels):
# - the flags: --speculative-config (JSON) from 0.8.2, alone from 0.8.3; before it
#   --speculative-model (a draft, an EAGLE or Medusa head, or "[ngram]"), --num-speculative-tokens,
#   --ngram-prompt-lookup-max / -min and --speculative-disable-by-batch-size;
# - the engine: V0 speculates with every method; 0.8.0 - 0.8.5's V1 oracle falls back to V0 for
#   every method (ngram and EAGLE "experimental", the rest unsupported) unless VLLM_USE_V1=1;
#   0.9.x falls back for draft models, 0.10.0 - 0.14 refuse them ("Draft model speculative
#   decoding is not supported yet"), V1 runs them from 0.15.0;
# - the methods: EAGLE-3 from 0.8.5 (V1's); MTP as DeepSeek's "deepseek_mtp" (its layers read
#   from the target, 0.8.2 on), the generic "mtp" from 0.11.0; Medusa until 0.33 dropped it;
# - the off-switch above a batch (disable_by_batch_size) is read by V0's spec-decode worker
#   only: V1 keeps the field unread, and from 0.17.0 SpeculativeConfig drops it and, forbidding
#   unknown keys, refuses a config that sets it.
# vLLM V0's own releases (engine/arg_utils.py, config.py and model_executor/models, read in the
# 0.4.0 - 0.7.3 wheels): draft models from 0.4.1, "[ngram]" 0.4.2, Medusa heads 0.5.2, EAGLE
# heads 0.5.5; --speculative-disable-by-batch-size from 0.4.3; through 0.6.2 the V2 block
# manager had to be asked for ("Speculative decoding requires usage of the V2 block manager":
# --use-v2-block-manager, the default from 0.6.3), and through 0.6.3 speculation refused
# chunked prefill ("Speculative decoding and chunked prefill are currently mutually exclusive").
VLLM_V0_SPEC_SINCE = {
    "draft": (0, 4, 1),
    "ngram": (0, 4, 2),
    "medusa": (0, 5, 2),
    "eagle": (0, 5, 5),
}
VLLM_SPEC_SWITCH_SINCE = (0, 4, 3)
VLLM_V2_BLOCK_MANAGER_DEFAULT_SINCE = (0, 6, 3)
VLLM_SPEC_WITH_CHUNKED_SINCE = (0, 6, 4)
VLLM_SPEC_CONFIG_SINCE = (0, 8, 2)
VLLM_V1_SPECULATES_SINCE = (0, 9, 0)
VLLM_V1_DRAFT_REFUSED_SINCE = (0, 10, 0)
VLLM_V1_DRAFT_SINCE = (0, 15, 0)
VLLM_EAGLE3_SINCE = (0, 8, 5)
VLLM_GENERIC_MTP_SINCE = (0, 11, 0)
VLLM_MEDUSA_REMOVED_IN = (0, 33, 0)
# SGLang's --speculative-algorithm choices by release (srt/server_args.py, read in the 0.4.1 -
# 0.5.23 wheels): EAGLE from 0.4.2, NEXTN (MTP) 0.4.4, EAGLE3 0.4.5, STANDALONE (a draft model)
# 0.5.2, NGRAM 0.5.3; 0.4.1 and earlier have none.
SGLANG_SPEC_SINCE = {
    "eagle": (0, 4, 2),
    "mtp": (0, 4, 4),
    "eagle3": (0, 4, 5),
    "draft": (0, 5, 2),
    "ngram": (0, 5, 3),
}
# The architectures whose MTP layers vLLM named "deepseek_mtp" before the generic name.
DEEPSEEK_MTP_ARCHITECTURES = ("DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM")


@dataclass(frozen=True)
class SpecTarget:
    """The server the speculation flags are written for: the vLLM release and whether it runs
    V0 (the flags and what they do differ by both), SGLang's release (its algorithms), and the
    target's architecture (the name of its MTP method in vLLM before 0.11). A release not
    named is the newest modelled."""

    vllm_release: tuple[int, int, int] | None = None
    vllm_v0: bool = False
    sglang_release: tuple[int, int, int] | None = None
    architecture: str | None = None
    chunked: bool = False  # the plan runs chunked prefill (V0 through 0.6.3 refuses the pair)

    def release_of(self, engine: str) -> tuple[int, int, int]:
        """The engine's release the flags are written for."""
        from planner.core.engines import release

        named = self.vllm_release if engine == "vllm" else self.sglang_release
        return named if named is not None else release(engine, None)


def spec_unsupported(method: str, engine: str, target: SpecTarget = SpecTarget()) -> str | None:
    """Why `engine`, as `target` runs it, cannot speculate with `method` as planned (None: it
    can); the callers refuse by their own flag."""
    if engine == "sglang":
        since = SGLANG_SPEC_SINCE.get(method)
        if since is None:
            return f"SGLang has no {method} speculation"
        named = target.release_of("sglang")
        if named < since:
            algorithm = SPEC_METHODS[method][1]
            return f"SGLang {version_text(named)} has no {algorithm} (from {version_text(since)})"
        return None
    release, v0 = target.release_of("vllm"), target.vllm_v0
    shown = version_text(release)
    if not v0 and release < VLLM_V1_SPECULATES_SINCE:
        return (
            f"vLLM {shown}'s V1 engine falls back to V0 for every speculative method (until "
            f"{version_text(VLLM_V1_SPECULATES_SINCE)}): not planned"
        )
    if method == "eagle3" and (v0 or release < VLLM_EAGLE3_SINCE):
        return f"EAGLE-3 runs on vLLM's V1 engine from {version_text(VLLM_EAGLE3_SINCE)}"
    since = VLLM_V0_SPEC_SINCE.get(method)
    if v0 and since is not None and release < since:
        return f"vLLM {shown} has no {method} speculation (from {version_text(since)})"
    if v0 and target.chunked and release < VLLM_SPEC_WITH_CHUNKED_SINCE:
        until = version_text(VLLM_SPEC_WITH_CHUNKED_SINCE)
        return (
            f"vLLM {shown} refuses speculative decoding beside chunked prefill, which this plan "
            f"runs (until {until}): --no-enable-chunked-prefill"
        )
    if method == "medusa" and release >= VLLM_MEDUSA_REMOVED_IN:
        return f"vLLM dropped Medusa in {version_text(VLLM_MEDUSA_REMOVED_IN)}"
    if method == "draft" and not v0 and release < VLLM_V1_DRAFT_SINCE:
        why = "refuses" if release >= VLLM_V1_DRAFT_REFUSED_SINCE else "falls back to V0 for"
        return (
            f"vLLM {shown}'s V1 engine {why} draft models (V1 runs them from "
            f"{version_text(VLLM_V1_DRAFT_SINCE)})"
        )
    if method == "mtp" and release < VLLM_GENERIC_MTP_SINCE:
        if release < VLLM_SPEC_CONFIG_SINCE:
            return f"vLLM {shown} takes MTP as --speculative-model naming the target: not planned"
        if target.architecture not in DEEPSEEK_MTP_ARCHITECTURES:
            return (
                f"vLLM {shown} names MTP per model; the planner writes DeepSeek's (deepseek_mtp) "
                f"and the generic mtp from {version_text(VLLM_GENERIC_MTP_SINCE)}"
            )
    return None


def check_spec_method(method: str, engine: str, target: SpecTarget, flag: str) -> None:
    """Refuse, by the option typed (`flag`), a method the engine as planned does not run (its
    flags would not start it, or would start another engine than the one priced)."""
    why = spec_unsupported(method, engine, target)
    if why is not None:
        raise InputError(flag, f"{method}: {why}")


def spec_flags(
    method: str,
    k: int,
    draft: str | None,
    disable_above: int | None = None,
    target: SpecTarget = SpecTarget(),
) -> EngineFlags:
    """vLLM's and SGLang's speculative decoding flags for one method and k, as `target`'s
    release spells them (a method it cannot run: spec_unsupported, said in its place).

    `disable_above`: the concurrency above which speculation stops paying. vLLM's V0 turns it
    off for new requests past that many (disable_by_batch_size); V1 and SGLang have no such
    switch, so their lines cap the running batch there (--max-num-seqs, --max-running-requests).
    """
    return EngineFlags(
        vllm=_vllm_spec(method, k, draft, disable_above, target),
        sglang=_sglang_spec(method, k, draft, disable_above, target),
    )


def _vllm_spec(method: str, k: int, draft: str | None, off: int | None, target: SpecTarget) -> str:
    """vLLM's speculation flags (VLLM_SPEC_CONFIG_SINCE ...)."""
    import json

    why = spec_unsupported(method, "vllm", target)
    if why is not None:
        return f"(not supported: {why})"
    release = target.release_of("vllm")
    vllm_method = SPEC_METHODS[method][0]
    if method == "mtp" and release < VLLM_GENERIC_MTP_SINCE:
        vllm_method = "deepseek_mtp"
    path = (
        (draft or DRAFT_PLACEHOLDER) if method in ("eagle", "eagle3", "medusa", "draft") else None
    )
    switch = off if target.vllm_v0 and release >= VLLM_SPEC_SWITCH_SINCE else None
    cap = [] if off is None or switch is not None else ["--max-num-seqs", str(off)]
    if release < VLLM_SPEC_CONFIG_SINCE:
        parts = ["--speculative-model", "[ngram]" if method == "ngram" else str(path)]
        parts += ["--num-speculative-tokens", str(k)]
        if method == "ngram":
            parts += ["--ngram-prompt-lookup-max", "5", "--ngram-prompt-lookup-min", "5"]
        if switch is not None:
            parts += ["--speculative-disable-by-batch-size", str(switch)]
        if release < VLLM_V2_BLOCK_MANAGER_DEFAULT_SINCE:
            parts.append("--use-v2-block-manager")
        return _join([*parts, *cap])
    config: dict[str, object] = {"method": vllm_method, "num_speculative_tokens": k}
    if switch is not None:
        config["disable_by_batch_size"] = switch
    if path is not None:
        config["model"] = path
    if method == "ngram":
        config["prompt_lookup_max"] = 5  # vLLM's default window when neither bound is given
        config["prompt_lookup_min"] = 5
    return _join(["--speculative-config", json.dumps(config), *cap])


def _sglang_spec(
    method: str, k: int, draft: str | None, off: int | None, target: SpecTarget
) -> str:
    """SGLang's speculation flags (SPEC_METHODS, SGLANG_SPEC_SINCE)."""
    why = spec_unsupported(method, "sglang", target)
    if why is not None:
        return f"(not supported: {why})"
    sglang_cap = [] if off is None else ["--max-running-requests", str(off)]
    parts = ["--speculative-algorithm", str(SPEC_METHODS[method][1])]
    if method in ("eagle", "eagle3", "draft"):
        parts += ["--speculative-draft-model-path", draft or DRAFT_PLACEHOLDER]
    if method == "ngram":
        parts += ["--speculative-num-draft-tokens", str(k + 1)]
    else:
        # A chain (top-k 1) of k drafted tokens verifies k + 1 tokens, root included.
        parts += [
            "--speculative-num-steps",
            str(k),
            "--speculative-eagle-topk",
            "1",
            "--speculative-num-draft-tokens",
            str(k + 1),
        ]
    # SGLang cannot switch speculation off under load: cap the batch where it stops paying.
    return _join(parts + sglang_cap)


# Flags that take no value (vLLM BooleanOptionalAction / SGLang store_true) among those a plan sets.
# The values vLLM's optional booleans took through 0.8.4 (`--flag False`), read as the flag's value.
BOOLEAN_WORDS = ("true", "false")
BOOLEAN_FLAGS = {
    "--enforce-eager",
    "--enable-expert-parallel",
    "--enable-dp-attention",
    "--enable-deepep-moe",
    "--enable-two-batch-overlap",
    "--enable-dbo",
    "--enable-dp-lm-head",
    "--enable-prefix-caching",
    "--disable-cuda-graph",
    "--disable-radix-cache",
    "--enable-chunked-prefill",
    "--trust-remote-code",
}


# Values each engine takes when a flag is left out, for flags whose default does not depend on the
# version, model or GPU (vLLM engine/arg_utils.py EngineArgs and config/cache.py; SGLang
# srt/server_args.py ServerArgs, both as of vLLM 0.11-0.33 and SGLang 0.4-0.5). A deployment that
# omits one of these runs the same as one that spells it out, so drift does not flag it.
ENGINE_FLAG_DEFAULTS: dict[str, dict[str, str]] = {
    "vllm": {
        "--tensor-parallel-size": "1",
        "--pipeline-parallel-size": "1",
        "--data-parallel-size": "1",
        "--kv-cache-dtype": "auto",
        "--block-size": "16",
        "--all2all-backend": "allgather_reducescatter",
    },
    "sglang": {
        "--tp-size": "1",
        "--pp-size": "1",
        "--dp-size": "1",
        "--attn-dp-size": "1",
        "--ep-size": "1",
        "--kv-cache-dtype": "auto",
        "--page-size": "1",
        "--moe-a2a-backend": "none",
        "--ep-num-redundant-experts": "0",
    },
}


@dataclass
class Deployed:
    """One engine invocation found in a source."""

    where: str
    engine: str  # vllm | sglang
    flags: dict[str, str] = field(default_factory=dict)


def launch_flags(line: str) -> list[str]:
    """A printed launch line's flags, as typed, without the entry point and the model (`vllm
    serve M ...`, `python -m sglang.launch_server --model-path M ...`): what pastes into
    another command."""
    words = shlex.split(line)
    if words[:2] == ["vllm", "serve"]:
        return words[3:]
    if "--model-path" not in words:
        raise ValueError(f"not a vLLM or SGLang launch line: {line!r}")
    return words[words.index("--model-path") + 2 :]


def engine_of(argv: list[str]) -> str | None:
    """Which engine a command line runs, if any."""
    text = " ".join(argv)
    if "sglang" in text:
        return "sglang"
    if "vllm" in text:
        return "vllm"
    return None


# Other spellings the engines' parsers accept for a flag the plan sets (vllm/engine/arg_utils.py:
# -tp, -pp, -dp, -q; python/sglang/srt/server_args.py: --tensor-parallel-size for --tp-size and
# its kin, and argparse's unique prefixes such as --tp).
SHORT_FLAGS = {
    "vllm": {
        "-tp": "--tensor-parallel-size",
        "-pp": "--pipeline-parallel-size",
        "-dp": "--data-parallel-size",
        "-q": "--quantization",
    },
    "sglang": {
        "--tp": "--tp-size",
        "--tensor-parallel-size": "--tp-size",
        "--dp": "--dp-size",
        "--data-parallel-size": "--dp-size",
        "--pp": "--pp-size",
        "--pipeline-parallel-size": "--pp-size",
        "--attention-data-parallel-size": "--attn-dp-size",
        "--ep": "--ep-size",
        "--expert-parallel-size": "--ep-size",
    },
}
# Flags that take a list (argparse nargs="+"): SGLang's decode CUDA-graph batch sizes
# (--cuda-graph-bs 1 2 4 ... 256). Their words up to the next flag are kept, space-separated.
LIST_FLAGS = frozenset({"--cuda-graph-bs"})
# vLLM reads these as human-readable integers (arg_utils.py human_readable_int): a lower-case
# suffix is decimal (1k = 1,000, 1m = 10^6), an upper-case one binary (1K = 1,024, 1M = 2^20).
HUMAN_INT_FLAGS = ("--max-model-len", "--max-num-batched-tokens")
HUMAN_INT_SUFFIX = {"k": 10**3, "m": 10**6, "g": 10**9, "K": 2**10, "M": 2**20, "G": 2**30}


def human_int(text: str) -> str:
    """`32k` -> `32000`, `32K` -> `32768` (vLLM's reading); other text unchanged."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kmgKMG])", text.strip())
    if match is None:
        return text
    return str(int(float(match.group(1)) * HUMAN_INT_SUFFIX[match.group(2)]))


# Words that end one shell command and start the next.
SHELL_SEPARATORS = frozenset({"&&", "||", ";", "|"})


def _shell_commands(argv: list[str]) -> list[list[str]]:
    """The commands a tokenised shell line runs, split at its separators."""
    commands: list[list[str]] = [[]]
    for token in argv:
        if token in SHELL_SEPARATORS:
            commands.append([])
        else:
            commands[-1].append(token)
    return commands


def parse_argv(argv: list[str], where: str) -> Deployed | None:
    """Flags of an engine command line; the positional model after `serve` becomes --model."""
    # `sh -c "vllm serve ..."` carries the whole command line in one token.
    try:
        argv = [t for token in argv for t in (shlex.split(token) if " " in token else [token])]
    except ValueError as exc:  # an unclosed quote or a trailing backslash
        raise InputError("--against-args", f"{where}: {str(exc).lower()}") from exc
    # a shell script of several commands (`pip install -U vllm && exec vllm serve ...`): the
    # last that names an engine, the server started after what prepares it
    engines = [c for c in _shell_commands(argv) if engine_of(c) is not None]
    argv = engines[-1] if engines else argv
    engine = engine_of(argv)
    if engine is None:
        return None
    flags: dict[str, str] = {}
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "serve" and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            flags["--model"] = argv[i + 1]
            i += 2
            continue
        short = SHORT_FLAGS[engine].get(token.partition("=")[0])
        if short is not None:
            token = short + token[len(token.partition("=")[0]) :]
        if token.startswith("--"):
            name, eq, value = token.partition("=")
            name = "--" + name[2:].replace("_", "-")
            if eq:
                flags[name] = value
            elif name in LIST_FLAGS:
                words = []
                while i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                    words.append(argv[i + 1])
                    i += 1
                flags[name] = " ".join(words) if words else "true"
            elif (
                name in BOOLEAN_FLAGS and i + 1 < len(argv) and argv[i + 1].lower() in BOOLEAN_WORDS
            ):
                # an old vLLM boolean given its value (`--enable-chunked-prefill False`)
                flags[name] = argv[i + 1].lower()
                i += 1
            elif (
                name in BOOLEAN_FLAGS
                or name.startswith("--no-")
                or i + 1 >= len(argv)
                or (argv[i + 1].startswith("--"))
            ):
                flags[name] = "true"
            else:
                flags[name] = argv[i + 1]
                i += 1
        i += 1
    if "--model-path" in flags:
        flags["--model"] = flags.pop("--model-path")
    sizes = flags.pop("--cuda-graph-bs", "").split() if engine == "sglang" else []
    if sizes and all(word.isdigit() for word in sizes):
        # SGLang takes its largest decode graph from the list, over --cuda-graph-max-bs, before
        # it sizes its reserve (server_args.py _handle_gpu_memory_settings, read in the 0.5.3 -
        # 0.5.13 wheels; arg_groups/memory_hook.py in 0.5.23)
        flags["--cuda-graph-max-bs"] = str(max(int(word) for word in sizes))
    if engine == "sglang" and flags.pop("--enable-deepep-moe", "false") == "true":
        # SGLang's own rewrite of its deprecated spelling (server_args.py, 0.4.10.post2 on)
        flags.setdefault("--moe-a2a-backend", "deepep")
    if engine == "vllm":
        for name in HUMAN_INT_FLAGS:
            if name in flags:
                flags[name] = human_int(flags[name])
        if flags.get("--max-model-len", "").strip().lower() in ("auto", "-1"):
            flags["--max-model-len"] = "auto"  # vLLM 0.14+ reads both as auto (arg_utils.py)
    return Deployed(where=where, engine=engine, flags=flags)
