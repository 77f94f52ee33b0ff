"""How one engine server spreads over hosts: the hosts its GPUs span, how each engine starts it
there (SGLang's ranked nodes, vLLM's Ray cluster or its data-parallel ranks a host), the flags
its launch line carries for that, and the checks on those flags given back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from planner.core.engines.common import version_text
from planner.core.specs import GpuSpec
from planner.core.step.comm import host_gpus, hosts_spanned
from planner.errors import InputError

# SGLang spreads one server over hosts with --nnodes, --node-rank and the rank-0 host's address
# (--dist-init-addr from 0.3.3, --nccl-init-addr before: srt/server_args.py); every host runs
# the line with its own rank. The line names rank and address as shell variables the operator
# sets on each host.
NODE_RANK_PLACEHOLDER = "$NODE_RANK"
HEAD_ADDR = "$HEAD_ADDR"
# The rendezvous port: the one --dist-init-addr's own help gives ("e.g., `192.168.0.2:25000`",
# srt/server_args.py, 0.3.6-0.5.13); any free port serves.
SGLANG_DIST_INIT_PORT = 25000
HEAD_ADDR_PLACEHOLDER = f"{HEAD_ADDR}:{SGLANG_DIST_INIT_PORT}"
SGLANG_DIST_INIT_ADDR_SINCE = (0, 3, 3)
# vLLM spreads a server over hosts with Ray. Up to 0.4.2 every TP > 1 ran on Ray; 0.4.3 added
# --distributed-executor-backend and chose Ray where it was installed, 0.5.0-0.11.0 where the
# world outgrew the host's CUDA devices (on ROCm only from the flag: the guard reads
# is_cuda() from 0.8), and from 0.11.1 a world larger than the host's GPUs raises unless the
# flag names Ray or --nnodes runs multiprocessing over hosts (vllm/config/parallel.py
# ParallelConfig.__post_init__, read in the 0.4.0 - 0.34 wheels). The line names Ray wherever
# the flag exists; every host joins the head's Ray cluster.
VLLM_RAY_FLAG_SINCE = (0, 4, 3)
# The executors --distributed-executor-backend takes that run a server's ranks as processes of
# their own (vllm/config/parallel.py DistributedExecutorBackend; "uni" is one process, and
# "external_launcher" is torchrun's, neither a server's).
VLLM_EXECUTORS = ("ray", "mp")
# vLLM's data-parallel ranks over hosts: the head runs the API server and its own ranks
# (--data-parallel-size-local of them) and every other host runs `vllm serve ... --headless
# --data-parallel-start-rank R` for the next ranks, all meeting at --data-parallel-address
# (engine/arg_utils.py and entrypoints/cli/serve.py, from the 0.9.0 wheel; earlier releases
# start every rank on the one host).
VLLM_DP_OVER_HOSTS_SINCE = (0, 9, 0)

Mode = Literal["one", "sglang", "ray", "dp"]


@dataclass(frozen=True)
class Span:
    """One server over hosts: how many, of how many GPUs each, and how the engine starts it
    there ("one": a single host; "sglang": ranked nodes; "ray": vLLM's Ray cluster; "dp":
    vLLM's data-parallel ranks a host, `ranks_per_host` of them)."""

    engine: str
    version: tuple[int, int, int]
    hosts: int
    host_gpus: int
    mode: Mode
    ranks: int = 1  # the server's replicas (vLLM DP ranks, SGLang --dp-size)
    rank_gpus: int = 1  # GPUs of one replica (TP x PP)

    @property
    def gpus(self) -> int:
        """The server's GPUs: its replicas' TP x PP."""
        return self.rank_gpus * self.ranks

    @property
    def ranks_per_host(self) -> int:
        """vLLM's data-parallel ranks a host runs ("dp"; 0 otherwise, or where a rank alone
        outgrows a host)."""
        return self.host_gpus // self.rank_gpus if self.mode == "dp" else 0


def span(
    engine: str, version: tuple[int, int, int], tp: int, pp: int, ranks: int, gpu: GpuSpec
) -> Span:
    """How a server of `ranks` replicas of TP x PP GPUs (vLLM's DP ranks, SGLang's --dp-size
    replicas) spreads over hosts of this card."""
    rank_gpus = tp * pp
    per_host = host_gpus(gpu)
    hosts = hosts_spanned(rank_gpus * ranks, gpu)
    mode: Mode = "one"
    if hosts > 1:
        mode = "sglang" if engine == "sglang" else "ray" if ranks == 1 else "dp"
    return Span(engine, version, hosts, per_host, mode, ranks, rank_gpus)


def check(s: Span, nnodes: int | None, executor: str | None, dp_local: int | None) -> None:
    """Refuse a server over hosts the engine cannot start as planned, and flags given back
    (SGLang's --nnodes, vLLM's executor and --data-parallel-size-local) that are not the
    layout's, each naming its flag."""
    where = f"the server's GPUs span {s.hosts} host{'s' if s.hosts > 1 else ''} of {s.host_gpus}"
    if s.mode == "dp":
        rank = f"TP x PP {s.rank_gpus}"
        if s.ranks_per_host == 0:
            raise InputError(
                "--dp",
                f"{s.ranks}: each of vLLM's data-parallel ranks ({rank}) spans hosts, which only "
                "its Ray data-parallel backend runs; not planned",
            )
        if s.host_gpus % s.rank_gpus or s.ranks % s.ranks_per_host:
            raise InputError(
                "--dp",
                f"{s.ranks}: vLLM's data-parallel ranks ({rank}) do not fill {s.hosts} hosts of "
                f"{s.host_gpus} GPUs evenly",
            )
        if s.version < VLLM_DP_OVER_HOSTS_SINCE:
            raise InputError(
                "--dp",
                f"{s.ranks}: vLLM {version_text(s.version)} starts every data-parallel rank on "
                f"one host ({where}); ranks over hosts from "
                f"{version_text(VLLM_DP_OVER_HOSTS_SINCE)}",
            )
    if nnodes is not None and nnodes != s.hosts:
        raise InputError("--nnodes", f"{nnodes}: {where}")
    local = s.ranks_per_host if s.mode == "dp" else s.ranks
    if dp_local is not None and dp_local != local:
        raise InputError(
            "--data-parallel-size-local", f"{dp_local}: {where}, {local} data-parallel ranks a host"
        )
    if executor is None:
        return
    if s.version < VLLM_RAY_FLAG_SINCE:
        raise InputError(
            "--distributed-executor-backend",
            f"vLLM {version_text(s.version)} predates it "
            f"({version_text(VLLM_RAY_FLAG_SINCE)}; every TP > 1 ran on Ray)",
        )
    if executor not in VLLM_EXECUTORS:
        raise InputError(
            "--distributed-executor-backend", f"{executor!r}; accepted: {', '.join(VLLM_EXECUTORS)}"
        )
    if executor != "ray" and s.mode == "ray":
        raise InputError(
            "--distributed-executor-backend",
            f"{executor}: {where}, which the planned line runs on Ray (multiprocessing over "
            "hosts, vLLM's --nnodes, is not planned)",
        )


def executor(s: Span, given: str | None) -> str | None:
    """The executor vLLM's line names (--distributed-executor-backend): the one given, else Ray
    where one server spans hosts and the flag exists; None: the release's own choice."""
    if given is not None or s.engine != "vllm":
        return given
    return "ray" if s.mode == "ray" and s.version >= VLLM_RAY_FLAG_SINCE else None


def line_flags(s: Span) -> list[str]:
    """The flags the server's launch line carries for its hosts (the head's line for vLLM; its
    executor is a field of the line: `executor`)."""
    if s.mode == "sglang":
        named = s.version >= SGLANG_DIST_INIT_ADDR_SINCE
        address = "--dist-init-addr" if named else "--nccl-init-addr"
        return [
            "--nnodes", str(s.hosts), "--node-rank", NODE_RANK_PLACEHOLDER,
            address, HEAD_ADDR_PLACEHOLDER,
        ]  # fmt: skip
    if s.mode == "dp":
        return ["--data-parallel-size-local", str(s.ranks_per_host), "--data-parallel-address",
                HEAD_ADDR]  # fmt: skip
    return []


def warning(s: Span) -> str | None:
    """How to start the server on its hosts (None: it runs on one)."""
    if s.mode == "one":
        return None
    spans = f"the server spans {s.hosts} hosts of {s.host_gpus} GPUs"
    if s.mode == "sglang":
        return (
            f"{spans}: run the line on each with NODE_RANK=0..{s.hosts - 1} and HEAD_ADDR the "
            "rank-0 host's address (--nnodes, --node-rank, --dist-init-addr)"
        )
    if s.mode == "dp":
        return (
            f"{spans}, {s.ranks_per_host} data-parallel ranks a host: run the line on the head "
            "host (HEAD_ADDR its address), and on each other host k = 1.."
            f"{s.hosts - 1} the line with --headless --data-parallel-start-rank "
            f"k x {s.ranks_per_host}"
        )
    return f"{spans}: start a Ray cluster over them and run the line on its head node"
