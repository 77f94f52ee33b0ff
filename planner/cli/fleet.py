"""`planner fleet`: from a traffic and a latency promise to GPUs, replicas, flags and cost."""

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer

from planner.cli.numbers import (
    EnableHierarchicalCache,
    HicacheRatio,
    HicacheSize,
    HubTimeout,
    KvOffloadingBackend,
    KvOffloadingSize,
    Prefixes,
    PrefixShareOption,
    PrefixTokens,
    ReservedGib,
    apply_hub_timeout,
)
from planner.cli.numbers import prefix_share as parse_prefix
from planner.cli.render import WIDEST_TABLE, console, emit_json, fit_columns, print_table

if TYPE_CHECKING:  # the profile type only: the CLI loads calibration on demand
    from planner.core.engines.calibration import Calibration

# Candidate columns a narrow terminal leaves out first, in order (--json keeps them all).
DROP_FIRST = (
    "$/M total",
    "max seqs",
    "replicas",
    "TTFT",  # the promise's percentile of TTFT (its column is named by it)
    "$/h",
    "req/s per replica",
    "GPUs",
    "weights",
)
# The Pareto lines: a marker, the layout's label, the figures (27 characters with their
# spaces) and a bar of up to 30 characters (none when the terminal leaves fewer than 4).
PARETO_FIGURES_WIDTH = 27
MIN_BAR = 4
MAX_BAR = 30


def fleet(
    rate: Annotated[float, typer.Option(help="Peak arrival rate, requests/s.")],
    tpot: Annotated[float, typer.Option(help="TPOT promise, ms.")],
    ttft: Annotated[float, typer.Option(help="TTFT promise, ms.")],
    preset: Annotated[str | None, typer.Option(help="Model preset.")] = None,
    model: Annotated[str | None, typer.Option(help="Model folder or Hub id.")] = None,
    percentile: Annotated[float, typer.Option(help="Percentile the promise holds at.")] = 95.0,
    goodput: Annotated[
        float, typer.Option(help="Share of requests meeting both budgets, percent.")
    ] = 99.0,
    gpus: Annotated[
        list[str] | None,
        typer.Option(
            "--gpus",
            "--gpu",
            help="Candidate GPUs, one or a comma-separated list; repeatable "
            "[default: h100,h200,mi300x,a100-sxm4-80gb,l40s].",
        ),
    ] = None,
    engine: Annotated[str, typer.Option(help="vllm or sglang.")] = "vllm",
    engine_version: Annotated[
        str | None, typer.Option(help="Engine release planned [default: the newest modelled].")
    ] = None,
    tp: Annotated[
        str | None, typer.Option(help="Pin the TP sizes tried: 4 or 2,4 [default: 1 to 8].")
    ] = None,
    precision: Annotated[
        str | None,
        typer.Option(help="Pin the weight precisions tried: bf16, fp8 [default: both where run]."),
    ] = None,
    objective: Annotated[
        str | None,
        typer.Option(help="Rank by cost, gpus or latency [default: cost when priced, else gpus]."),
    ] = None,
    disagg: Annotated[
        str,
        typer.Option(help="Add prefill/decode-disaggregated xPyD units: auto (MoE), on, off."),
    ] = "auto",
    price: Annotated[
        list[str] | None, typer.Option(help="$ per GPU-hour: h100=2.49,mi300x=2.10 (repeatable).")
    ] = None,
    price_basis: Annotated[
        str,
        typer.Option(help="Shipped prices: gpu-cloud or hyperscaler median, or none."),
    ] = "gpu-cloud",
    prices: Annotated[str | None, typer.Option(help="YAML file of GPU: $ per GPU-hour.")] = None,
    reserved_gib: ReservedGib = None,
    calibration: Annotated[
        str | None,
        typer.Option(
            help="A profile from `planner calibrate`: applied to candidates on its GPU and engine."
        ),
    ] = None,
    headroom: Annotated[
        float, typer.Option(help="Share of its sustainable rate a replica runs at the peak.")
    ] = 0.8,
    workload: Annotated[
        str, typer.Option(help="Length distributions from a workload preset.")
    ] = "reference",
    prompt_len: Annotated[
        int | None, typer.Option(help="Prompt tokens: fixed (or the median, --len-spread).")
    ] = None,
    output_len: Annotated[
        int | None, typer.Option(help="Output tokens: fixed (or the median, --len-spread).")
    ] = None,
    len_spread: Annotated[
        float | None,
        typer.Option(help="Lognormal sigma around --prompt-len/--output-len as medians."),
    ] = None,
    len_range: Annotated[
        float | None, typer.Option(help="Lengths uniform in [F x L, L] (--random-range-ratio).")
    ] = None,
    context: Annotated[
        int | None,
        typer.Option(
            "--context",
            "--max-model-len",
            help="Server max model length [default: the longest request asked for, or the "
            "model's maximum for a distribution].",
        ),
    ] = None,
    arrival: Annotated[
        str | None, typer.Option(help="poisson or gamma [default: gamma when --cv is given].")
    ] = None,
    cv: Annotated[
        float | None, typer.Option(help="Gamma arrivals: CV of the gaps (bursts > 1).")
    ] = None,
    save: Annotated[
        str | None, typer.Option(help="Write the winner's plan lock file (for planner drift).")
    ] = None,
    k8s: Annotated[
        str | None,
        typer.Option(
            help="Write the winner's Kubernetes manifests (YAML): a Deployment, or for an SGLang "
            "xPyD unit a StatefulSet per pool and the router."
        ),
    ] = None,
    plot: Annotated[
        str | None, typer.Option(help="Save the Pareto chart (tok/s per GPU vs per user).")
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(help="Candidates searched at once in a process pool [default: the cores]."),
    ] = None,
    prefix_share: PrefixShareOption = None,
    prefix_tokens: PrefixTokens = None,
    prefixes: Prefixes = 1,
    kv_offloading_size: KvOffloadingSize = None,
    kv_offloading_backend: KvOffloadingBackend = None,
    enable_hierarchical_cache: EnableHierarchicalCache = False,
    hicache_ratio: HicacheRatio = None,
    hicache_size: HicacheSize = None,
    hub_timeout: HubTimeout = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Which GPUs, TP, replicas and flags serve this traffic within the promise, at what cost."""
    apply_hub_timeout(hub_timeout)
    from planner.api.fleet import DEFAULT_GPUS, fleet_report, parse_prices
    from planner.errors import InputError
    from planner.sources.files import check_writable

    if arrival is None:
        arrival = "gamma" if cv is not None and cv != 1.0 else "poisson"
    if arrival not in ("poisson", "gamma"):
        raise InputError("--arrival", f"{arrival!r}; accepted: poisson, gamma")
    if arrival == "poisson" and cv is not None and cv != 1.0:
        raise InputError("--cv", f"{cv:g} describes gamma arrivals; drop --arrival poisson")
    cv = 1.0 if cv is None else cv
    if not 0 < goodput <= 100:
        raise InputError("--goodput", f"a percentage in (0, 100] (got {goodput})")
    for target, flag in ((save, "--save"), (k8s, "--k8s"), (plot, "--plot")):
        if target is not None:
            check_writable(target, flag)
    values = _workload_values(workload, arrival, cv, prompt_len, output_len, len_spread, len_range)
    tps = None if tp is None else _int_list(tp, "--tp")
    precisions = None
    if precision is not None:
        precisions = [p.strip().lower() for p in precision.split(",") if p.strip()]
        unknown = [p for p in precisions if p not in ("bf16", "fp16", "fp8")]
        if unknown or not precisions:
            raise InputError("--precision", f"{precision!r}; accepted: bf16, fp8 (comma-separated)")
    given = ",".join(gpus) if gpus else ",".join(DEFAULT_GPUS)
    names = list(dict.fromkeys(g.strip() for g in given.split(",") if g.strip()))
    if not names:
        raise InputError("--gpus", "name at least one GPU")
    show_progress = not json_out and sys.stderr.isatty()

    def progress(gpu: str, tp: int, precision: str) -> None:
        if show_progress:
            sys.stderr.write(f"\rsearched {gpu} TP {tp} {precision}".ljust(60))
            sys.stderr.flush()

    from planner.cli.capacity import offload_settings
    from planner.cli.numbers import reserved_bytes
    from planner.sources.calibration import load_calibration

    profile = None if calibration is None else load_calibration(calibration)
    reserved_gpu_bytes = reserved_bytes(reserved_gib)
    priced, origin = parse_prices(price, prices, None if price_basis == "none" else price_basis)
    report = fleet_report(
        preset=preset,
        model=model,
        rate=rate,
        promise={
            "tpot_ms": tpot,
            "ttft_ms": ttft,
            "percentile": percentile,
            "goodput": goodput / 100,
        },
        gpus=names,
        engine=engine,
        prices=priced,
        prices_origin=origin,
        headroom=headroom,
        workload=values,
        progress=progress,
        workers=_workers(workers),
        calibration=profile,
        reserved_bytes=reserved_gpu_bytes,
        context=context,
        objective=objective,
        tps=tps,
        precisions=precisions,
        engine_version=engine_version,
        disagg=disagg,
        prefix=parse_prefix(prefix_share, prefix_tokens, prefixes),
        offload=offload_settings(
            gpu=None,
            kv_offloading_size=kv_offloading_size,
            kv_offloading_backend=kv_offloading_backend,
            lmcache_config=None,
            hicache=enable_hierarchical_cache,
            hicache_ratio=hicache_ratio,
            hicache_size=hicache_size,
            host_memory_gib=None,
        ),
    )
    if show_progress:
        sys.stderr.write("\r" + " " * 60 + "\r")
    winner = report["winner"]
    if winner is not None:
        source = LockSource(preset, model, calibration, profile, reserved_gpu_bytes)
        _write_winner(report, save, k8s, source)
    if plot is not None:
        _save_chart(report, plot, tpot)
    if json_out:
        emit_json(report)
    else:
        render(report)
    if winner is None:
        raise typer.Exit(1)


def _workload_values(
    workload: str,
    arrival: str,
    cv: float,
    prompt_len: int | None,
    output_len: int | None,
    len_spread: float | None,
    len_range: float | None,
) -> dict[str, Any]:
    """The workload's fields with the arrival process and any fixed lengths the flags give
    (--len-spread: lognormal around them, --len-range: uniform below them), each bad value
    one error naming its flag."""
    from planner.api.simulate import load_workload
    from planner.errors import InputError

    base = load_workload(workload)
    values: dict[str, Any] = base.model_dump() | {"arrival": arrival, "cv": cv}
    if len_spread is not None and len_range is not None:
        raise InputError("--len-range", "give --len-spread or --len-range, not both")
    for key, length, flag in (
        ("prompt_tokens", prompt_len, "--prompt-len"),
        ("output_tokens", output_len, "--output-len"),
    ):
        if length is None:
            continue
        if not 1 <= length <= 2**24:
            raise InputError(flag, f"must be in [1, {2**24:,}] tokens (got {length})")
        if len_spread is not None:  # a distribution around the length, never clipped below it
            values[key] = {
                "distribution": "lognormal",
                "median": length,
                "sigma": len_spread,
                "min": 1,
                "max": max(values[key]["max"], 4 * length),
            }
        elif len_range is not None:
            if not 0 <= len_range <= 1:
                raise InputError("--len-range", f"must be in [0, 1] (got {len_range})")
            low = max(1, int(length * len_range))
            values[key] = {"distribution": "uniform", "median": length, "min": low, "max": length}
        else:
            values[key] = {"distribution": "fixed", "median": length, "min": length, "max": length}
    return values


@dataclass(frozen=True)
class LockSource:
    """What a winner's plan lock is recomputed from beside the winner itself: the model as
    the user named it, the calibration profile (its path and what it read) and the memory
    reserved per GPU."""

    preset: str | None
    model: str | None
    calibration: str | None
    profile: "Calibration | None"
    reserved_bytes: int | None


def _write_winner(
    report: dict[str, Any], save: str | None, k8s: str | None, source: LockSource
) -> None:
    """--save's plan lock and --k8s's manifests for the report's winner; where one cannot be
    written for this winner yet, one error naming the flag and what to type instead."""
    from planner.errors import InputError

    winner = report["winner"]
    if winner.get("pools") is not None:
        if save is not None:
            raise InputError(
                "--save",
                f"the winner is a disaggregated {winner['disagg']} unit, whose plan lock (one per "
                "pool) is not written yet: --k8s writes its manifests; --disagg off gives an "
                "aggregated winner",
            )
        if k8s is not None and winner["engine"] != "sglang":
            raise InputError(
                "--k8s",
                f"the winner is a vLLM {winner['disagg']} unit: its pools need a prefill/decode "
                "router (llm-d, Dynamo) whose manifests planner does not write; each pool's line "
                "is printed, or --engine sglang plans SGLang's router",
            )
    if winner.get("pp", 1) > 1 and k8s is not None:
        raise InputError(
            "--k8s",
            f"the winner spans {winner['pp']} nodes per replica (TP {winner['tp']} x PP "
            f"{winner['pp']}), which needs a multi-node workload (a LeaderWorkerSet or a Ray "
            "cluster) that is not written yet; --tp and --precision can pin a one-node layout",
        )
    if save is not None:
        _save(save, report, source)
    if k8s is not None:
        from planner.sources.files import write_file

        name = source.model or source.preset or "model"
        manifest = (
            k8s_disaggregated(winner, name)
            if winner.get("pools") is not None
            else k8s_deployment(winner, name)
        )
        write_file(k8s, "--k8s", manifest)


def _save_chart(report: dict[str, Any], path: str, tpot: float) -> None:
    """--plot: each ranked layout's curve, tokens/s per GPU against tokens/s per user."""
    from planner.api.fleet import layout_name
    from planner.cli.plot import Chart, Series
    from planner.cli.plot import save as save_chart

    fitting = [c for c in report["candidates"] if c["ranked"]]
    save_chart(
        Chart(
            title=f"{report['model']}: tokens/s per GPU against tokens/s per user",
            x_label="tokens/s per user (1000 / median TPOT)",
            y_label="output tokens/s per GPU",
            series=[
                Series(
                    layout_name(c),
                    [q["tokens_per_s_per_user"] or 0.0 for q in c["curve"]],
                    [q["output_tokens_per_s_per_gpu"] for q in c["curve"]],
                )
                for c in fitting
            ],
            marks=[(1000.0 / tpot, f"TPOT {tpot:g} ms")],
        ),
        path,
    )


# Engine fields of a winner's layout that its plan lock carries (the line's own values).
LAYOUT_FIELDS = ("enable_expert_parallel", "data_parallel_size", "attn_dp_size", "ep_size")


def _save(path: str, report: dict[str, Any], source: LockSource) -> None:
    """The winner's plan lock, recomputed by `planner drift` like a capacity plan."""
    from planner.api import serve_lock, serve_report
    from planner.plan import dump
    from planner.sources.files import saved_model_ref, write_file

    w = report["winner"]
    flags = w["flags"]
    settings: dict[str, Any] = {
        "engine": w["engine"],
        "tp": w["tp"],
        "pp": w.get("pp", 1),
        "context_tokens": flags.get("max_model_len", flags.get("context_length")),
        # the line's own value (SGLang's is the deployment's, shared among attention groups)
        "max_num_seqs": flags.get("max_num_seqs", flags.get("max_running_requests")),
    }
    if w["precision"] == "fp8":
        settings["quantization"] = "fp8"
    # the layout's engine fields as the line sets them (EP, DP ranks, attention groups)
    extra = {k: flags[k] for k in LAYOUT_FIELDS if flags.get(k) not in (None, False, 1)}
    if source.reserved_bytes:
        extra["reserved_bytes"] = source.reserved_bytes
    if extra:
        settings["extra"] = extra
    used = source.profile if w.get("calibrated") else None
    preset, model, calibration = source.preset, source.model, source.calibration
    _plan, payload = serve_report(
        gpu=w["gpu"],
        preset=preset,
        model=model,
        revision=None,
        gpu_memory_gib=None,
        settings=dict(settings),
        calibration=used,
    )
    lock = serve_lock(
        payload,
        preset=preset,
        model=None if model is None else saved_model_ref(model, path),
        revision=None,
        gpu=w["gpu"],
        gpu_memory_gib=None,
        settings=settings,
        tpot_ms=None,
        calibration=None
        if used is None or calibration is None
        else saved_model_ref(calibration, path),
    )
    write_file(path, "--save", dump(lock))


# Where each engine's OpenAI server listens by default (vLLM serve: 8000; SGLang
# launch_server: 30000, on 127.0.0.1 unless --host says otherwise) and its health endpoint.
ENGINE_PORTS = {"vllm": 8000, "sglang": 30000}
HEALTH_PATH = "/health"
# The Secret a manifest reads the Hub token from (key `token`), optional for public models.
HF_TOKEN_SECRET = "hf-token"
# Shared memory for NCCL / RCCL between TP ranks: the engines' docs run their images with
# --ipc=host or a large /dev/shm; 16 GiB as an in-memory emptyDir per replica.
SHM_SIZE = "16Gi"


def _engine_container(winner: dict[str, Any], command: str) -> tuple[dict[str, Any], int]:
    """One engine server's container for a launch line: the engine's image for the planned
    release, listening on 0.0.0.0 with its port, a readiness probe on its health endpoint, the
    Hub token from a Secret and the GPUs requested by vendor; and its port."""
    import shlex

    from planner.sources.presets import find_gpu

    engine, version = winner["engine"], str(winner.get("engine_version") or "")
    argv = shlex.split(command)
    port = ENGINE_PORTS[engine]
    vendor = find_gpu(winner["gpu"]).vendor
    resource = "amd.com/gpu" if vendor == "amd" else "nvidia.com/gpu"
    serve_args = ["--host", "0.0.0.0", "--port", str(port)]
    if engine == "vllm" and vendor != "amd":
        # vLLM publishes one OpenAI-server image per release, tagged v<version>
        image = f"vllm/vllm-openai:v{version}" if version else "vllm/vllm-openai:latest"
        container: dict[str, Any] = {"name": "vllm", "image": image, "args": argv[2:] + serve_args}
    elif engine == "vllm":
        # ROCm builds are tagged by ROCm and vLLM release together: pick the tag for the
        # planned release (annotation below)
        container = {"name": "vllm", "image": "rocm/vllm:latest", "args": argv[2:] + serve_args}
    else:
        container = {
            "name": "sglang",
            "image": "lmsysorg/sglang:latest",
            "command": argv + serve_args,
        }
    container["ports"] = [{"name": "http", "containerPort": port}]
    container["readinessProbe"] = {
        "httpGet": {"path": HEALTH_PATH, "port": port},
        "initialDelaySeconds": 60,
        "periodSeconds": 10,
        "failureThreshold": 60,  # weights load and graphs capture for minutes on large models
    }
    container["env"] = [
        {
            "name": "HF_TOKEN",
            "valueFrom": {
                "secretKeyRef": {"name": HF_TOKEN_SECRET, "key": "token", "optional": True}
            },
        }
    ]
    # vLLM's data-parallel ranks run in the one server (SGLang's attention groups sit inside TP)
    ranks = winner.get("dp", 1) if engine == "vllm" else 1
    container["resources"] = {"limits": {resource: winner["tp"] * ranks}}
    return container, port


def _pod(winner: dict[str, Any], container: dict[str, Any]) -> dict[str, Any]:
    """The pod around an engine container: /dev/shm for TP > 1 (NCCL / RCCL between ranks)."""
    pod: dict[str, Any] = {"containers": [container]}
    if winner["tp"] > 1 or winner.get("dp", 1) > 1:
        container["volumeMounts"] = [{"name": "shm", "mountPath": "/dev/shm"}]
        pod["volumes"] = [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": SHM_SIZE}}]
    return pod


def k8s_deployment(winner: dict[str, Any], name: str) -> str:
    """A Deployment that serves the winner's line, `replicas` pods of one engine instance."""
    import yaml

    container, _port = _engine_container(winner, winner["command"])
    engine, version = winner["engine"], str(winner.get("engine_version") or "")
    doc = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "llm",
            "annotations": {"planner/engine": f"{engine} {version}".strip()},
        },
        "spec": {
            "replicas": winner["replicas"],
            "selector": {"matchLabels": {"app": "llm"}},
            "template": {
                "metadata": {"labels": {"app": "llm", "model": name.replace("/", "-")[:60]}},
                "spec": _pod(winner, container),
            },
        },
    }
    return yaml.safe_dump(doc, sort_keys=False)


# SGLang's prefill servers answer the KV bootstrap handshake on this port
# (python/sglang/srt/server_args.py: --disaggregation-bootstrap-port, default 8998) and the
# router listens on its own (sglang_router launch_router --port; 30000 is the engines').
SGLANG_BOOTSTRAP_PORT = 8998
ROUTER_PORT = 8000
# What the manifests cannot know: the Mooncake backend moves KV over RDMA between the pools.
MOONCAKE_NOTE = (
    "Mooncake transfers KV over RDMA: add --disaggregation-ib-device with this cluster's NICs "
    "and request the RDMA device plugin's resources"
)


def k8s_disaggregated(winner: dict[str, Any], name: str) -> str:
    """An SGLang xPyD winner as manifests: a StatefulSet per pool (replicas x instances per
    unit) behind a headless Service, so each instance has the stable name the router and the
    KV bootstrap need (prefill-0.prefill, ...); the router as a Deployment listing every
    instance, and a Service in front of it."""
    import shlex

    import yaml

    pools = winner["pools"]
    label = name.replace("/", "-")[:60]
    engine, version = winner["engine"], str(winner.get("engine_version") or "")
    counts = {
        "prefill": winner["replicas"] * pools["prefill_instances"],
        "decode": winner["replicas"] * pools["decode_instances"],
    }
    docs: list[dict[str, Any]] = []
    urls: dict[str, list[str]] = {}
    image = ""
    for role, count in counts.items():
        container, port = _engine_container(winner, pools[f"{role}_command"])
        image = container["image"]  # the router ships in the engine's own image
        ports = [{"name": "http", "port": port}]
        if role == "prefill":
            ports.append({"name": "bootstrap", "port": SGLANG_BOOTSTRAP_PORT})
            container["ports"].append({"name": "bootstrap", "containerPort": SGLANG_BOOTSTRAP_PORT})
        urls[role] = [f"http://{role}-{i}.{role}:{port}" for i in range(count)]
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": role},
                "spec": {"clusterIP": "None", "selector": {"app": role}, "ports": ports},
            }
        )
        docs.append(
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": {
                    "name": role,
                    "annotations": {
                        "planner/engine": f"{engine} {version}".strip(),
                        "planner/disagg": f"{winner['disagg']} x {winner['replicas']}",
                        "planner/note": MOONCAKE_NOTE,
                    },
                },
                "spec": {
                    "serviceName": role,
                    "replicas": count,
                    "podManagementPolicy": "Parallel",
                    "selector": {"matchLabels": {"app": role}},
                    "template": {
                        "metadata": {"labels": {"app": role, "model": label}},
                        "spec": _pod(winner, container),
                    },
                },
            }
        )
    router = shlex.split("python -m sglang_router.launch_router --pd-disaggregation")
    for url in urls["prefill"]:
        router += ["--prefill", url, str(SGLANG_BOOTSTRAP_PORT)]
    for url in urls["decode"]:
        router += ["--decode", url]
    router += ["--host", "0.0.0.0", "--port", str(ROUTER_PORT)]
    docs.append(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "router"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "router"}},
                "template": {
                    "metadata": {"labels": {"app": "router", "model": label}},
                    "spec": {
                        "containers": [
                            {
                                "name": "router",
                                "image": image,
                                "command": router,
                                "ports": [{"name": "http", "containerPort": ROUTER_PORT}],
                            }
                        ]
                    },
                },
            },
        }
    )
    docs.append(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "llm"},
            "spec": {
                "selector": {"app": "router"},
                "ports": [{"name": "http", "port": ROUTER_PORT}],
            },
        }
    )
    return yaml.safe_dump_all(docs, sort_keys=False)


def render(report: dict[str, Any]) -> None:
    """The ranked table, the winner's line, and what was rejected."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    from planner.api.fleet import layout_name

    out = console()
    p = report["promise"]
    described = report["workload"]["description"]
    out.print(
        f"{report['model']} at {report['rate_per_s']:g} req/s ({described}); "
        f"promise TTFT {p['ttft_ms']:g} ms and TPOT {p['tpot_ms']:g} ms at p{p['percentile']:g}, "
        f"{p['goodput']:.0%} of requests; headroom {report['headroom']:g}",
        markup=False,
    )
    fitting = [c for c in report["candidates"] if c["ranked"]]

    def money(v: float | None) -> str:
        return "-" if v is None else f"{v:,.2f}"

    # the promise's percentile at the planned load, at its upper confidence bound (the figure
    # the promise is judged on; `simulate` prints the point estimate)
    ttft_col, tpot_col = (f"p{p['percentile']:g} {what} ms (bound)" for what in ("TTFT", "TPOT"))

    cells: dict[str, Callable[[dict[str, Any]], str]] = {
        "gpu": lambda c: str(c["gpu"]),
        "TP": lambda c: (
            f"{c['tp']}{' EP' if c['ep'] > 1 else ''}"
            + (f" PP{c['pp']}" if c.get("pp", 1) > 1 else "")
            + (f" {c['disagg']}" if c.get("disagg") else "")
        ),
        "weights": lambda c: str(c["precision"]),
        "replicas": lambda c: str(c["replicas"]),
        "GPUs": lambda c: str(c["gpus"]),
        "max seqs": lambda c: f"{c['max_num_seqs']:,}",
        "req/s per replica": lambda c: f"{c['sustainable_rate_per_replica']:.2f}",
        ttft_col: lambda c: f"{c['ttft_ms_at_load']:,.0f}",
        tpot_col: lambda c: f"{c['tpot_ms_at_load']:.1f}",
        "tok/s per GPU": lambda c: f"{c['tokens_per_s_per_gpu']:,.0f}",
        "$/h": lambda c: money(c["dollars_per_hour"]),
        "$/M out": lambda c: money(c["dollars_per_m_output_tokens"]),
        "$/M total": lambda c: money(c["dollars_per_m_total_tokens"]),
    }

    def build(cols: list[str]) -> Table:
        table = Table(
            title=f"Candidates (ranked by {report['ranked_by']})",
            title_justify="left",
            box=box.SIMPLE_HEAD,
        )
        for col in cols:
            table.add_column(col, justify="left" if col in ("gpu", "weights") else "right")
        for c in fitting:
            table.add_row(*(cells[col](c) for col in cols))
        return fit_columns(table)

    # Columns a narrow terminal drops first (never a number cut: a whole column goes, and
    # --json keeps every figure).
    cols = list(cells)
    dropped: list[str] = []
    table = build(cols)
    for col in (ttft_col if c == "TTFT" else c for c in DROP_FIRST):
        if Console(width=WIDEST_TABLE).measure(table).minimum <= out.width:
            break
        cols.remove(col)
        dropped.append(col)
        table = build(cols)
    print_table(out, table)
    if dropped:
        out.print(f"left out to fit {out.width} columns: {', '.join(dropped)}", markup=False)
    if report["prices"] != "given":
        out.print(f"prices {report['prices']}", markup=False)
    for c in [c for c in report["candidates"] if not c["ranked"]]:
        what = "left out" if c["fits"] else "rejected"
        out.print(f"{what} {layout_name(c)}: {c['reason']}", markup=False)
    front = report["pareto"]
    if front:
        slo = 1000.0 / p["tpot_ms"]
        out.print(
            "Pareto front over every layout's concurrency sweep (closed loop, the benchmark "
            f"predictor; output tok/s per GPU and per user; * within TPOT {p['tpot_ms']:g} ms, "
            f"i.e. >= {slo:.0f} tok/s/user):",
            markup=False,
        )
        top = max(q["output_tokens_per_s_per_gpu"] for q in front) or 1.0

        labels = [f"{layout_name(q)} x{q['max_concurrency']}" for q in front]
        width = max(len(t) for t in labels)
        # the bar takes what the console leaves beside the text
        bar_width = min(MAX_BAR, out.width - PARETO_FIGURES_WIDTH - width - 2)
        bar_width = bar_width if bar_width >= MIN_BAR else 0
        for q, text in zip(front, labels, strict=True):
            bar = "#" * max(1, round(q["output_tokens_per_s_per_gpu"] / top * bar_width))
            bar = f"{bar:<{bar_width}} " if bar_width else ""
            out.print(
                f"{'*' if q['meets_tpot'] else ' '}{text:>{width}} {bar}"
                f"{q['output_tokens_per_s_per_gpu']:>7,.0f} /GPU "
                f"{q['tokens_per_s_per_user']:>5,.0f} /user",
                markup=False,
            )
    w = report["winner"]
    if w is None:
        out.print("[bold red]No candidate meets the promise.[/]")
        return
    pools = w.get("pools")
    if pools is not None:
        out.print(
            f"[bold]Deploy:[/] {w['replicas']} x {pools['layout']} of {w['gpu']} at TP {w['tp']} "
            f"({_gpus(w['gpus'])}): per unit {pools['prefill_instances']} prefill and "
            f"{pools['decode_instances']} decode instances behind a router:",
        )
        for role in ("prefill", "decode", "router"):
            out.print(f"{role}: {pools[role + '_command']}", soft_wrap=True, markup=False)
    else:
        deploy = f"{w['replicas']} x {layout_name(w)} ({_gpus(w['gpus'])})"
        out.print(f"[bold]Deploy:[/] {deploy}, each:")
        out.print(w["command"], soft_wrap=True, markup=False)
    out.print(
        "estimates: step times from the step-time model; rates, curves and the front from "
        "the simulator",
        markup=False,
    )
    for note in w.get("notes") or []:
        out.print(f"note: {note}", markup=False)


def _gpus(n: int) -> str:
    """`1 GPU`, `8 GPUs`."""
    return f"{n} GPU" if n == 1 else f"{n} GPUs"


def _int_list(text: str, flag: str) -> list[int]:
    """`4` or `2,4` as integers >= 1."""
    from planner.errors import InputError

    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError as exc:
        raise InputError(flag, f"{text!r}; expected whole numbers, e.g. 2,4") from exc
    if not values or min(values) < 1 or max(values) > 1024:
        raise InputError(flag, f"{text!r}; expected whole numbers in [1, 1024], e.g. 2,4")
    return values


def _workers(given: int | None) -> int:
    """--workers, or the cores this process may use."""
    import os

    from planner.errors import InputError

    if given is None:
        return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
    if not 1 <= given <= 256:
        raise InputError("--workers", f"must be in [1, 256] (got {given})")
    return given
