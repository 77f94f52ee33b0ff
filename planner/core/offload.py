"""KV beyond the GPU: the tokens each offload tier holds and the host memory it takes.

Three ways the engines keep KV blocks outside HBM, each sized per rank (every TP / PP rank
keeps its own shard of each token's KV, the same bytes per token as its GPU pool):

- vLLM `--kv-offloading-size GiB` (0.11.1+; the native backend 0.14+), the total over all
  ranks: the native OffloadingConnector (`--kv-offloading-backend native`) keeps blocks of the
  GPU block size in pinned CPU memory; `--kv-offloading-backend lmcache` hands the same total
  to LMCache as its per-rank `max_local_cpu_size` (LMCache stores chunks of 256 tokens), with a
  local-disk tier when its configuration names one.
- SGLang `--enable-hierarchical-cache`: a host pool of `--hicache-ratio` (2) x the device pool's
  tokens, or `--hicache-size` GB per rank; SGLang requires it larger than the device pool and
  refuses to start when it exceeds the host's available memory less 10 GiB.

The native connector and HiCache copy blocks with the CUDA copy engines and keep no GPU-side
staging buffer beyond the pool; LMCache's GPU connector stages one chunk (256 tokens of one
rank's KV, 20 MiB for Llama-3.1-70B at TP 4): the engine model charges it to the GPU ledger
(`connector_bytes`, planner.core.engines.vllm.connector_buffer_bytes) and the tiers report it
as `gpu_buffer_bytes`; a start-up log of the deployment calibrates it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from planner.core.engines.common import refuse_before, version_text
from planner.errors import InputError
from planner.units import GIB_BYTES

# vLLM's --kv-offloading-size / --kv-offloading-backend appear in 0.11.1 (engine/arg_utils.py;
# absent from 0.11.0's). Through 0.13 the backend has no default, so the size alone offloads
# nothing (VllmConfig._post_init_kv_transfer_config returns without a backend), and `native`
# hands the OffloadingConnector num_cpu_blocks 0, on which its CPUOffloadingSpec raises at
# start-up ("num_cpu_blocks must be specified"): only `lmcache` offloads. 0.14.0 makes `native`
# the default and sizes it by cpu_bytes_to_use (config/cache.py, config/vllm.py,
# v1/kv_offload/cpu.py; read in the 0.11.1, 0.12.0, 0.13.0 and 0.14.0 wheels).
VLLM_OFFLOADING_SINCE = (0, 11, 1)
VLLM_NATIVE_OFFLOADING_SINCE = (0, 14, 0)
# SGLang's HiCache flags by first release (server_args.py, read in the 0.4.0-0.4.6 wheels):
# --enable-hierarchical-cache from 0.4.3, --hicache-ratio from 0.4.5, --hicache-size from 0.4.6
# (before 0.4.5 the host pool is the fixed default ratio).
SGLANG_HICACHE_SINCE = {
    "--enable-hierarchical-cache": (0, 4, 3),
    "--hicache-ratio": (0, 4, 5),
    "--hicache-size": (0, 4, 6),
}
# LMCache's defaults (lmcache/v1/config.py): chunk_size 256 tokens; sizes in GiB per rank.
LMCACHE_CHUNK_TOKENS = 256
# SGLang's HiCache defaults (srt/server_args.py): hicache_ratio 2.0, hicache_size 0 (use the
# ratio); --hicache-size is in GB (1e9 bytes) per rank, and the host pool keeps 10 GiB of the
# host's available memory free (srt/mem_cache/memory_pool_host.py).
SGLANG_HICACHE_RATIO = 2.0
SGLANG_HICACHE_SIZE_UNIT_BYTES = 10**9
SGLANG_HOST_RESERVE_BYTES = 10 * GIB_BYTES


class LmcacheConfig(BaseModel):
    """The LMCache settings that size its tiers (its YAML file or LMCACHE_* variables)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    chunk_size: int = Field(default=LMCACHE_CHUNK_TOKENS, gt=0, le=2**20)
    local_cpu: bool = True
    max_local_cpu_size: float | None = Field(
        default=None, ge=0, le=2**20, description="GiB per rank (None: vLLM's size / ranks)"
    )
    local_disk: str | None = None
    max_local_disk_size: float = Field(default=0.0, ge=0, le=2**30, description="GiB per rank")


class OffloadSettings(BaseModel):
    """The offload flags as given (None: not set)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kv_offloading_size_gib: float | None = Field(default=None, gt=0, le=2**20)
    kv_offloading_backend: Literal["native", "lmcache"] | None = None
    hicache: bool = False
    hicache_ratio: float | None = Field(default=None, gt=0, le=1000)
    hicache_size_gb: float | None = Field(default=None, ge=0, le=2**20)
    lmcache: LmcacheConfig | None = None
    host_memory_bytes: int | None = Field(default=None, gt=0)
    host_memory_source: str | None = None

    def line_fields(self, engine: str) -> dict[str, object]:
        """The flags that produce these tiers, as settings fields of the launch line."""
        if engine == "vllm":
            return {
                "kv_offloading_size": self.kv_offloading_size_gib,
                "kv_offloading_backend": self.kv_offloading_backend,
            }
        return {
            "enable_hierarchical_cache": self.hicache or None,
            "hicache_ratio": self.hicache_ratio,
            "hicache_size": self.hicache_size_gb,
        }


class Tier(BaseModel):
    """One place KV blocks live."""

    model_config = ConfigDict(extra="forbid")

    tier: Literal["GPU", "CPU", "disk"]
    tokens: int = Field(description="tokens of KV it holds (each rank its shard of them)")
    bytes_per_rank: int
    by: str = Field(description="what keeps it")


class KvTiers(BaseModel):
    """Every tier, the host memory the CPU tiers take, and whether the host has it."""

    model_config = ConfigDict(extra="forbid")

    tiers: list[Tier]
    ranks: int
    kv_bytes_per_token_per_rank: int
    host_bytes_per_rank: int
    host_bytes_per_node: int = Field(description="every rank's CPU tier, + SGLang's reserve")
    host_memory_bytes: int | None
    host_memory_source: str | None
    fits_host: bool | None = Field(description="None: the host's memory is not known")
    gpu_buffer_bytes: int = Field(
        description="the connector's staging buffer on each GPU (charged in the ledger)"
    )
    largest_fitting: dict[str, float] | None = Field(
        default=None, description="the largest setting the host holds, when it does not"
    )
    notes: list[str] = Field(default_factory=list)


def check_offload_flags(
    engine: str, version: tuple[int, int, int], offload: OffloadSettings
) -> bool:
    """Refuse offload flags the engine or its release does not take, naming the flag (before
    anything is planned, so no line carries them); whether anything is offloaded."""
    if engine == "vllm":
        _refuse_other_engine(offload, "sglang", "vllm")
        if offload.kv_offloading_size_gib is None:
            if offload.kv_offloading_backend is not None or offload.lmcache is not None:
                raise InputError(
                    "--kv-offloading-backend", "needs --kv-offloading-size (GiB over all ranks)"
                )
            return False
        if version < VLLM_OFFLOADING_SINCE:
            raise InputError(
                "--kv-offloading-size",
                f"new in vLLM {version_text(VLLM_OFFLOADING_SINCE)} (pass --engine-version)",
            )
        native = (offload.kv_offloading_backend or "native") == "native"
        if native and version < VLLM_NATIVE_OFFLOADING_SINCE:
            typed = offload.kv_offloading_backend
            raise InputError(
                "--kv-offloading-backend" if typed else "--kv-offloading-size",
                "vLLM offloads through these flags to LMCache alone before "
                f"{version_text(VLLM_NATIVE_OFFLOADING_SINCE)} (pass "
                "--kv-offloading-backend lmcache): the size alone offloads nothing there, and "
                "native starts with no CPU blocks",
            )
        return True
    _refuse_other_engine(offload, "vllm", "sglang")
    if not offload.hicache:
        if offload.hicache_ratio is not None or offload.hicache_size_gb is not None:
            raise InputError("--hicache-ratio", "needs --enable-hierarchical-cache")
        return False
    given = {
        "--enable-hierarchical-cache": True,
        "--hicache-ratio": offload.hicache_ratio is not None,
        "--hicache-size": offload.hicache_size_gb is not None,
    }
    refuse_before("SGLang", version, SGLANG_HICACHE_SINCE, given)
    return True


def kv_tiers(
    *,
    engine: str,
    version: tuple[int, int, int],
    offload: OffloadSettings,
    gpu_tokens: int,
    per_token_bytes: int,
    block_tokens: int,
    ranks: int,
    connector_bytes: int = 0,
) -> KvTiers | None:
    """The tiers these offload settings give a deployment whose GPU pool holds `gpu_tokens`
    at `per_token_bytes` per rank; None when nothing is offloaded. `connector_bytes`: the
    connector's GPU-side buffer the engine model charged (reported with the tiers)."""
    if not check_offload_flags(engine, version, offload):
        return None
    if engine == "vllm":
        tiers, notes = _vllm_tiers(offload, per_token_bytes, block_tokens, ranks)
        reserve = 0
    else:
        tiers, notes = _hicache_tiers(offload, gpu_tokens, per_token_bytes, block_tokens)
        reserve = SGLANG_HOST_RESERVE_BYTES
    gpu = Tier(
        tier="GPU",
        tokens=gpu_tokens,
        bytes_per_rank=gpu_tokens * per_token_bytes,
        by="the engine's KV pool",
    )
    host_rank = sum(t.bytes_per_rank for t in tiers if t.tier == "CPU")
    host_node = host_rank * ranks + reserve
    memory = offload.host_memory_bytes
    fits = None if memory is None else host_node <= memory
    largest = None
    if fits is False and memory is not None:
        largest = _largest_fitting(engine, offload, memory, ranks)
    return KvTiers(
        tiers=[gpu, *tiers],
        ranks=ranks,
        kv_bytes_per_token_per_rank=per_token_bytes,
        host_bytes_per_rank=host_rank,
        host_bytes_per_node=host_node,
        host_memory_bytes=memory,
        host_memory_source=offload.host_memory_source,
        fits_host=fits,
        gpu_buffer_bytes=connector_bytes,
        largest_fitting=largest,
        notes=notes,
    )


def _refuse_other_engine(offload: OffloadSettings, other: str, engine: str) -> None:
    """Offload flags of the other engine are refused, naming the flag."""
    given = (
        {
            "--enable-hierarchical-cache": offload.hicache or None,
            "--hicache-ratio": offload.hicache_ratio,
            "--hicache-size": offload.hicache_size_gb,
        }
        if other == "sglang"
        else {
            "--kv-offloading-size": offload.kv_offloading_size_gib,
            "--kv-offloading-backend": offload.kv_offloading_backend,
            "--lmcache-config": offload.lmcache,
        }
    )
    for flag, value in given.items():
        if value is not None:
            raise InputError(flag, f"not a {engine} flag (pass --engine {other})")


def _tier(
    kind: Literal["CPU", "disk"], capacity_bytes: int, per_token: int, unit: int, by: str
) -> Tier:
    """A tier of `capacity_bytes` per rank, filled in whole units of `unit` tokens."""
    tokens = capacity_bytes // (per_token * unit) * unit
    return Tier(tier=kind, tokens=tokens, bytes_per_rank=tokens * per_token, by=by)


def _vllm_tiers(
    offload: OffloadSettings, per_token: int, block: int, ranks: int
) -> tuple[list[Tier], list[str]]:
    """vLLM's native connector or LMCache behind --kv-offloading-size."""
    assert offload.kv_offloading_size_gib is not None
    per_rank = int(offload.kv_offloading_size_gib * GIB_BYTES) // ranks
    if (offload.kv_offloading_backend or "native") == "native":
        by = f"vLLM OffloadingConnector, blocks of {block} tokens"
        return [_tier("CPU", per_rank, per_token, block, by)], []
    cfg = offload.lmcache or LmcacheConfig()
    chunk = cfg.chunk_size
    cpu_bytes = per_rank
    notes = [f"LMCache's CPU tier per rank is --kv-offloading-size / {ranks} (the ranks)"]
    if cfg.max_local_cpu_size is not None:
        cpu_bytes = int(cfg.max_local_cpu_size * GIB_BYTES)
        notes = ["LMCache's max_local_cpu_size (its configuration) sizes the CPU tier"]
    tiers = []
    if cfg.local_cpu:
        by = f"LMCache local CPU, chunks of {chunk} tokens"
        tiers.append(_tier("CPU", cpu_bytes, per_token, chunk, by))
    if cfg.local_disk and cfg.max_local_disk_size > 0:
        disk_bytes = int(cfg.max_local_disk_size * GIB_BYTES)
        by = f"LMCache local disk at {cfg.local_disk}"
        tiers.append(_tier("disk", disk_bytes, per_token, chunk, by))
    return tiers, notes


def _hicache_tiers(
    offload: OffloadSettings, gpu_tokens: int, per_token: int, page: int
) -> tuple[list[Tier], list[str]]:
    """SGLang's HiCache host pool."""
    if offload.hicache_size_gb:
        tokens = int(offload.hicache_size_gb * SGLANG_HICACHE_SIZE_UNIT_BYTES) // per_token
        flag = "--hicache-size"
    else:
        ratio = offload.hicache_ratio or SGLANG_HICACHE_RATIO
        tokens = int(gpu_tokens * ratio)
        flag = "--hicache-ratio"
    tokens -= tokens % page
    if tokens <= gpu_tokens:
        raise InputError(
            flag,
            f"the host pool ({tokens:,} tokens) must be larger than the device pool "
            f"({gpu_tokens:,}): SGLang refuses to start otherwise",
        )
    host = Tier(
        tier="CPU",
        tokens=tokens,
        bytes_per_rank=tokens * per_token,
        by="SGLang HiCache host pool",
    )
    return (
        [host],
        [f"SGLang keeps {SGLANG_HOST_RESERVE_BYTES // GIB_BYTES} GiB of host memory free"],
    )


def _largest_fitting(
    engine: str, offload: OffloadSettings, memory: int, ranks: int
) -> dict[str, float]:
    """The largest offload setting the host's memory holds."""
    if engine == "vllm":
        if offload.lmcache is not None and offload.lmcache.max_local_cpu_size is not None:
            return {"max_local_cpu_size": float(memory // ranks // GIB_BYTES)}
        return {"--kv-offloading-size": float(memory // GIB_BYTES)}
    room = max(0, memory - SGLANG_HOST_RESERVE_BYTES) // ranks
    return {"--hicache-size": float(room // SGLANG_HICACHE_SIZE_UNIT_BYTES)}
