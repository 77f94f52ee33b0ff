"""KV offload tiers: vLLM --kv-offloading-size (native, LMCache), SGLang HiCache, host memory."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import Result

from planner.core.offload import LmcacheConfig
from planner.errors import InputError
from planner.sources.offload import host_memory_bytes, lmcache_config

Cli = Callable[..., Result]
MODELS = Path(__file__).parent / "data" / "models"
LLAMA = str(MODELS / "meta-llama--Llama-3.1-8B")
LITE = str(MODELS / "deepseek-ai--DeepSeek-V2-Lite")
NEXT = str(MODELS / "Qwen--Qwen3-Next-80B-A3B-Thinking")
GIB = 2**30
# Llama-3.1-8B: 32 layers x 8 KV heads x 128 x (K, V) x 2 B = 131,072 B per token per GPU.
LLAMA_TOKEN_BYTES = 32 * 8 * 128 * 2 * 2
# DeepSeek-V2-Lite (MLA): 27 layers x (512 latent + 64 rope) x 2 B = 31,104 B per token, which
# every TP rank holds whole.
LITE_TOKEN_BYTES = 27 * (512 + 64) * 2


def tiers(result: Result) -> dict[str, Any]:
    assert result.code in (0, 1), result.out + result.err
    got = result.json()["kv_tiers"]
    assert got is not None
    return {t["tier"]: t for t in got["tiers"]} | {"_": got}


def test_vllm_native_cpu_tier_is_the_size_over_the_bytes_per_token(cli: Cli) -> None:
    r = cli("capacity", "--model", LLAMA, "--gpu", "h100", "--kv-offloading-size", "64", "--json")
    t = tiers(r)
    engine = r.json()["engine"]
    assert t["_"]["kv_bytes_per_token_per_rank"] == LLAMA_TOKEN_BYTES
    assert t["CPU"]["tokens"] == 64 * GIB // LLAMA_TOKEN_BYTES == 524_288
    assert t["GPU"]["tokens"] == engine["kv_cache_tokens"]
    # the GPU tier is the engine's pool: its blocks of 16 tokens at 131,072 B a token
    assert (
        t["GPU"]["tokens"] * LLAMA_TOKEN_BYTES
        == engine["num_gpu_blocks"] * engine["bytes_per_block"]
    )
    assert t["_"]["host_bytes_per_node"] == 64 * GIB
    assert t["_"]["fits_host"] is None  # no host memory given, none read
    # the native connector copies blocks straight from the pool: no GPU-side buffer
    assert engine["connector_bytes"] == t["_"]["gpu_buffer_bytes"] == 0
    assert "--kv-offloading-size 64" in r.json()["flags"]["vllm"]


def test_vllm_lmcache_splits_the_size_per_rank_in_chunks_for_mla(cli: Cli) -> None:
    r = cli(
        "capacity",
        *("--model", LITE, "--gpu", "h100", "--tp", "2"),
        *("--kv-offloading-size", "64", "--kv-offloading-backend", "lmcache", "--json"),
    )
    t = tiers(r)
    assert t["_"]["kv_bytes_per_token_per_rank"] == LITE_TOKEN_BYTES
    # 32 GiB per rank in whole chunks of 256 tokens: 4,315 chunks = 1,104,640 tokens
    assert t["CPU"]["tokens"] == (32 * GIB // (LITE_TOKEN_BYTES * 256)) * 256 == 1_104_640
    assert t["_"]["gpu_buffer_bytes"] == 256 * LITE_TOKEN_BYTES  # one chunk staged per GPU
    assert t["_"]["host_bytes_per_node"] == 2 * 1_104_640 * LITE_TOKEN_BYTES
    # ... charged to the GPU ledger: the KV budget is that much smaller than without LMCache
    engine = r.json()["engine"]
    alone = cli("capacity", "--model", LITE, "--gpu", "h100", "--tp", "2", "--json")
    assert engine["connector_bytes"] == 256 * LITE_TOKEN_BYTES
    assert (
        alone.json()["engine"]["available_kv_bytes"] - engine["available_kv_bytes"]
        == 256 * LITE_TOKEN_BYTES
    )


def test_lmcache_configuration_adds_a_disk_tier(cli: Cli, tmp_path: Path) -> None:
    config = tmp_path / "lmcache.yaml"
    config.write_text(
        "chunk_size: 256\nlocal_cpu: true\nmax_local_cpu_size: 20\n"
        "local_disk: file:///mnt/nvme/lmcache\nmax_local_disk_size: 500\n"
    )
    r = cli(
        "capacity",
        *("--model", LLAMA, "--gpu", "h100", "--kv-offloading-size", "20"),
        *("--kv-offloading-backend", "lmcache", "--lmcache-config", str(config), "--json"),
    )
    t = tiers(r)
    assert t["CPU"]["tokens"] == 20 * GIB // LLAMA_TOKEN_BYTES
    assert t["disk"]["tokens"] == 500 * GIB // LLAMA_TOKEN_BYTES == 4_096_000
    assert t["_"]["host_bytes_per_node"] == 20 * GIB  # the disk tier takes no host memory


def test_lmcache_environment_variables() -> None:
    env = {"LMCACHE_CHUNK_SIZE": "512", "LMCACHE_MAX_LOCAL_DISK_SIZE": "100"}
    assert lmcache_config(None, env) == LmcacheConfig(chunk_size=512, max_local_disk_size=100)
    with pytest.raises(InputError, match="chunk_size"):
        lmcache_config(None, {"LMCACHE_CHUNK_SIZE": "many"})


def test_hicache_ratio_2_gives_a_host_tier_twice_the_gpu_pool(cli: Cli) -> None:
    base = ("capacity", "--model", LLAMA, "--gpu", "h100", "--engine", "sglang")
    t = tiers(cli(*base, "--enable-hierarchical-cache", "--json"))  # the default ratio, 2
    assert t["CPU"]["tokens"] == 2 * t["GPU"]["tokens"]
    t3 = tiers(cli(*base, "--enable-hierarchical-cache", "--hicache-ratio", "3", "--json"))
    assert t3["CPU"]["tokens"] == 3 * t["GPU"]["tokens"]
    # --hicache-size is GB (1e9 B) per rank and wins over the ratio
    sized = tiers(cli(*base, "--enable-hierarchical-cache", "--hicache-size", "200", "--json"))
    assert sized["CPU"]["tokens"] == 200 * 10**9 // LLAMA_TOKEN_BYTES
    small = cli(*base, "--enable-hierarchical-cache", "--hicache-ratio", "1", "--json")
    assert small.code == 2 and small.json()["field"] == "--hicache-ratio"


@pytest.mark.parametrize(
    ("engine_args", "flag"),
    [
        (("--kv-offloading-size", "200"), "--kv-offloading-size"),
        (("--engine", "sglang", "--enable-hierarchical-cache", "--hicache-ratio", "4"), None),
    ],
)
def test_a_tier_larger_than_the_host_is_a_finding_with_the_largest_that_fits(
    cli: Cli, engine_args: tuple[str, ...], flag: str | None
) -> None:
    base = ("capacity", "--model", LLAMA, "--gpu", "h100", *engine_args)
    r = cli(*base, "--host-memory-gib", "128", "--json")
    assert r.code == 1
    body = r.json()
    assert body["fits"] is False and body["kv_tiers"]["fits_host"] is False
    ((name, value),) = body["kv_tiers"]["largest_fitting"].items()
    assert (
        name in body["reasons"][0] and f"largest that fits: {name} {value:g}" in body["reasons"][0]
    )
    if flag is not None:
        assert name == flag and value == 128  # vLLM's size is the total over the ranks
    else:
        assert name == "--hicache-size" and value == 126  # (128 - 10 GiB reserve) in GB
    # the largest that fits does fit
    fixed = [a for a in engine_args if a not in ("--hicache-ratio", "4")]
    if flag is not None:
        fixed = ["--kv-offloading-size", f"{value:g}"]
    else:
        fixed += ["--hicache-size", f"{value:g}"]
    again = cli(
        "capacity", "--model", LLAMA, "--gpu", "h100", *fixed, "--host-memory-gib", "128", "--json"
    )
    assert again.code == 0, again.out
    assert again.json()["kv_tiers"]["fits_host"] is True


def test_printed_lines_paste_back_and_pass_drift(cli: Cli, tmp_path: Path) -> None:
    cases = [
        ("--kv-offloading-size", "48", "--kv-offloading-backend", "native"),
        ("--engine", "sglang", "--enable-hierarchical-cache", "--hicache-ratio", "2.5"),
    ]
    for extra in cases:
        base = ("capacity", "--model", LLAMA, "--gpu", "h100", *extra)
        first = cli(*base, "--json").json()
        line = next(iter(first["flags"].values()))
        words = line.split()
        start = 3 if words[0] == "vllm" else words.index("--model-path") + 2
        engine = ("--engine", "sglang") if "sglang" in words[2] else ()
        again = cli(
            "capacity", "--model", LLAMA, "--gpu", "h100", *engine, *words[start:], "--json"
        )
        assert again.code == 0, again.out
        assert again.json()["kv_tiers"] == first["kv_tiers"]
        assert next(iter(again.json()["flags"].values())) == line
        plan = tmp_path / "plan.yaml"
        assert cli(*base, "--save", str(plan)).code == 0
        drift = cli("drift", str(plan), "--against-args", line)
        assert drift.code == 0, drift.out


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("--engine-version", "0.11.0", "--kv-offloading-size", "8"), "--kv-offloading-size"),
        # 0.11.1-0.13: the size alone offloads nothing, native starts with no CPU blocks
        (("--engine-version", "0.13.0", "--kv-offloading-size", "8"), "--kv-offloading-size"),
        (
            (
                "--engine-version",
                "0.12.0",
                "--kv-offloading-size",
                "8",
                "--kv-offloading-backend",
                "native",
            ),
            "--kv-offloading-backend",
        ),
        (("--engine", "sglang", "--kv-offloading-size", "8"), "--kv-offloading-size"),
        (("--hicache-ratio", "2"), "--hicache-ratio"),
        (
            ("--kv-offloading-backend", "disk", "--kv-offloading-size", "8"),
            "--kv-offloading-backend",
        ),
        (("--lmcache-config", "x.yaml", "--kv-offloading-size", "8"), "--lmcache-config"),
        (("--host-memory-gib", "64"), "--host-memory-gib"),
        (("--kv-offloading-size", "-1"), "--kv-offloading-size"),
        (("--ledger", "textbook", "--kv-offloading-size", "8"), "--kv-offloading-size"),
    ],
)
def test_bad_offload_input_exits_2_naming_the_flag(
    cli: Cli, args: tuple[str, ...], field: str
) -> None:
    r = cli("capacity", "--model", LLAMA, "--gpu", "h100", *args, "--json")
    assert r.code == 2, r.out
    assert r.json()["field"] == field


def test_offload_flags_a_release_lacks_are_refused_before_planning(cli: Cli) -> None:
    """The release check runs before the ledger: a deployment that does not fit (Mixtral
    8x7B on one H100) asked to offload on vLLM 0.3.3 is refused by the flag, not planned into a
    'does not fit' verdict whose line carries flags that release rejects."""
    offload = ("--kv-offloading-size", "10", "--kv-offloading-backend", "lmcache", "--json")
    r = cli("capacity", "--preset", "mixtral-8x7b", "--gpu", "h100", "--engine-version", "0.3.3",
            *offload)  # fmt: skip
    assert r.code == 2 and r.json()["field"] == "--kv-offloading-size", r.out


def test_lmcache_offloads_from_the_release_that_took_the_flags(cli: Cli) -> None:
    """vLLM took --kv-offloading-size in 0.11.1, where LMCache is the backend that offloads
    (native from 0.14): a 0.11.1 plan with LMCache has the CPU tier 0.14's has (the GPU pool
    is each release's own)."""
    base = ("capacity", "--model", LLAMA, "--gpu", "h100", "--kv-offloading-size", "8")
    base += ("--kv-offloading-backend", "lmcache", "--json")
    early, later = (cli(*base, "--engine-version", v) for v in ("0.11.1", "0.14.0"))
    assert early.code == 0 and later.code == 0, early.out
    cpu = [[t for t in r.json()["kv_tiers"]["tiers"] if t["tier"] != "GPU"] for r in (early, later)]
    assert cpu[0] == cpu[1] and cpu[0][0]["bytes_per_rank"] == 8 * 2**30
    assert early.json()["flags"]["vllm"].endswith("--kv-offloading-backend lmcache")


def test_hybrid_model_offload_is_refused(cli: Cli) -> None:
    r = cli(
        "capacity",
        "--model",
        NEXT,
        "--gpu",
        "h200",
        "--tp",
        "2",
        "--kv-offloading-size",
        "64",
        "--json",
    )
    assert r.code == 2 and "not modelled" in r.json()["error"]


def test_host_memory_reads_meminfo(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       2097152 kB\nMemFree:        1 kB\n")
    assert host_memory_bytes(str(meminfo)) == 2 * GIB
    assert host_memory_bytes(str(tmp_path / "missing")) is None


def test_stack_distances_match_a_brute_force_lru() -> None:
    import numpy as np

    from planner.sim.prefix import NO_PREFIX, stack_distances

    rng = np.random.default_rng(7)
    ids = np.where(rng.random(400) < 0.7, rng.integers(0, 25, 400), NO_PREFIX)
    got = stack_distances(ids)
    for i, p in enumerate(ids.tolist()):
        earlier = [j for j in range(i) if ids[j] == p]
        if p == NO_PREFIX or not earlier:
            assert got[i] == -1
            continue
        since = {int(q) for q in ids[earlier[-1] + 1 : i] if q != NO_PREFIX and q != p}
        assert got[i] == len(since)


def test_ttft_falls_as_the_cpu_tier_grows_until_the_working_set_fits(cli: Cli) -> None:
    # 400 distinct 4,000-token prefixes (a 1.6M-token working set) opening half the requests;
    # the GPU pool's room for them is ~0.4M tokens (Llama-3.1-8B on an H100, 64 clients).
    base = (
        "simulate", "--model", LLAMA, "--gpu", "h100", "--concurrency", "64",
        "--prompt-len", "200", "--output-len", "100", "--requests", "2000",
        "--prefix-share", "0.5", "--prefix-tokens", "4000", "--prefixes", "400", "--json",
    )  # fmt: skip
    runs = {}
    for gib in (0, 96, 192, 256, 512):
        extra = ("--kv-offloading-size", str(gib)) if gib else ()
        r = cli(*base, *extra)
        assert r.code == 0, r.out
        runs[gib] = r.json()
    ttft = {g: r["mean_ttft_ms"] for g, r in runs.items()}
    cache = {g: r["prefix_cache"] for g, r in runs.items()}
    assert cache[0]["cpu_hits"] == 0
    # a bigger CPU tier serves more prefixes, and TTFT falls with it
    assert cache[96]["cpu_hits"] < cache[192]["cpu_hits"]
    assert ttft[0] > ttft[96] > ttft[192]
    # 256 GiB holds 2.1M tokens: the whole working set; beyond it nothing changes
    assert cache[256]["cpu_tier_tokens"] >= cache[256]["working_set_tokens"]
    # only first uses miss: one per distinct prefix drawn
    assert cache[256]["misses"] == cache[256]["working_set_tokens"] // 4000
    assert cache[256] | {"cpu_tier_tokens": 0} == cache[512] | {"cpu_tier_tokens": 0}
    assert ttft[256] == ttft[512]
    assert ttft[192] >= ttft[256]


@pytest.mark.parametrize("columns", ["60", "80"])
def test_tiers_table_fits_the_terminal(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, columns: str
) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    r = cli(
        "capacity", "--model", LLAMA, "--gpu", "h100", "--kv-offloading-size", "64",
        "--kv-offloading-backend", "lmcache",
    )  # fmt: skip
    assert r.code == 0
    text = r.out[r.out.index("KV tiers") :]
    table = text[: text.index("host memory per node")]
    assert "524,288" in table  # the CPU tier's tokens, whole
    assert all(len(line) <= int(columns) for line in table.splitlines())


def test_a_cpu_tier_beside_a_transfer_connector_is_refused(cli: Cli) -> None:
    """vLLM sets kv_connector to its offloading connector whenever --kv-offloading-size is
    given, replacing the one --kv-transfer-config names: such a line runs no NIXL transfer, so
    neither capacity nor a disaggregated simulation prints it; alone, each flag plans."""
    nixl = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
    base = ["capacity", "--model", LLAMA, "--gpu", "h100", "--json"]
    both = cli(*base, "--kv-transfer-config", nixl, "--kv-offloading-size", "64")
    assert both.code == 2 and both.json()["field"] == "--kv-offloading-size"
    assert "MultiConnector" in both.json()["error"]
    assert cli(*base, "--kv-transfer-config", nixl).code == 0
    assert cli(*base, "--kv-offloading-size", "64").code == 0
    pools = cli(
        "simulate", "--model", LLAMA, "--gpu", "h100", "--concurrency", "4", "--requests", "8",
        "--prompt-len", "200", "--output-len", "20", "--disagg", "1p1d",
        "--kv-offloading-size", "64", "--json",
    )  # fmt: skip
    assert pools.code == 2 and pools.json()["field"] == "--kv-offloading-size"


def test_hicache_beside_a_server_without_its_radix_cache_is_refused(cli: Cli) -> None:
    """SGLang refuses --enable-hierarchical-cache beside --disable-radix-cache ("mutually
    exclusive", server_args.py), and a PD decode server turns its radix cache off: capacity
    refuses both lines, and a disaggregated simulation gives HiCache to the prefill pool only."""
    base = ["capacity", "--model", LLAMA, "--gpu", "h100", "--engine", "sglang", "--json"]
    hicache = "--enable-hierarchical-cache"
    for extra in (["--disable-radix-cache"], ["--disaggregation-mode", "decode"]):
        r = cli(*base, hicache, *extra)
        assert r.code == 2 and r.json()["field"] == hicache
    assert cli(*base, hicache, "--disaggregation-mode", "prefill").code == 0
    run = cli(
        "simulate", "--model", LLAMA, "--gpu", "h100", "--engine", "sglang", "--concurrency",
        "4", "--requests", "8", "--prompt-len", "200", "--output-len", "20", "--disagg", "1p1d",
        hicache, "--json",
    )  # fmt: skip
    assert run.code == 0, run.out
    pools = run.json()["deployment"]["disagg"]
    assert hicache in pools["prefill"]["command"] and hicache not in pools["decode"]["command"]
