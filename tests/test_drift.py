"""`planner drift` with real files and real loopback servers (Hub-like and /metrics)."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from helpers import DATA, MODELS, QuietServer, Result
from hub_server import FakeHub, Repo, serve

from planner.plan import SCHEMA_VERSION, json_schema, load

Cli = Callable[..., Result]
DEPLOY = DATA / "deploy"
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def plan_file(cli: Cli, tmp_path: Path) -> Path:
    path = tmp_path / "plan.yaml"
    # The teaching ledger's plan: its flags are what the deployment fixtures in data/deploy spell.
    r = cli(
        "capacity",
        "--preset",
        "gqa-70b",
        "--gpu",
        "mi300x",
        "--ledger",
        "textbook",
        "--save",
        str(path),
    )
    assert r.code == 0, r.err
    return path


def test_saved_plan_is_clean(cli: Cli, plan_file: Path) -> None:
    lock = load(plan_file.read_text(), str(plan_file))
    assert lock.schema_version == SCHEMA_VERSION and lock.figures["max_seqs_paged"] == 69
    r = cli("drift", str(plan_file))
    assert r.code == 0 and "clean" in r.out


def test_json_report_is_byte_identical(cli: Cli, plan_file: Path) -> None:
    args = ("drift", str(plan_file), "--against-args-file", str(DEPLOY / "compose.yaml"), "--json")
    first, second = cli(*args), cli(*args)
    assert first.code == second.code == 1
    assert first.out == second.out


@pytest.mark.parametrize(
    ("fixture", "flag", "actual"),
    [
        ("k8s-deployment.yaml", "--max-num-seqs", "96"),
        ("compose.yaml", "--gpu-memory-utilization", "0.9"),
        ("vllm-config.yaml", "--block-size", "32"),
    ],
)
def test_deployed_configs_with_one_changed_flag(
    cli: Cli, plan_file: Path, fixture: str, flag: str, actual: str
) -> None:
    r = cli("drift", str(plan_file), "--against-args-file", str(DEPLOY / fixture), "--json")
    assert r.code == 1
    diffs = r.json()["differences"]
    assert [(d["key"], d["actual"]) for d in diffs] == [(flag, actual)]


def test_statefulset_with_shell_command_is_clean(cli: Cli, plan_file: Path) -> None:
    path = DEPLOY / "k8s-statefulset-clean.yaml"
    r = cli("drift", str(plan_file), "--against-args-file", str(path))
    assert r.code == 0, r.out


def test_a_shell_script_is_read_at_the_command_that_runs_the_engine(
    cli: Cli, plan_file: Path
) -> None:
    """`sh -c "pip install vllm ... && exec vllm serve ..."`: the flags are the server's, the
    last command naming an engine, not the installer's or Ray's before it."""
    line = (
        "vllm serve $MODEL --tensor-parallel-size=1 --max-model-len=8192 --max-num-seqs=69 "
        "--gpu-memory-utilization=0.98 --kv-cache-dtype=auto --block-size=16"
    )
    for before in ("pip install --upgrade vllm lmcache", "ray start --head --port=6379"):
        script = f"sh -c '{before} && exec {line}'"
        r = cli("drift", str(plan_file), "--against-args", script, "--json")
        assert r.code == 0, r.out
    changed = f"sh -c 'ray start --head ; {line.replace('=69', '=70')} | tee log'"
    r = cli("drift", str(plan_file), "--against-args", changed, "--json")
    assert [(d["key"], d["actual"]) for d in r.json()["differences"]] == [("--max-num-seqs", "70")]


def test_command_line_and_github_format(cli: Cli, plan_file: Path) -> None:
    cmd = (
        "python -m sglang.launch_server --model-path m --tp-size 1 --context-length 8192 "
        "--max-running-requests 69 --mem-fraction-static 0.9 --kv-cache-dtype auto "
        "--page-size 16"
    )
    r = cli("drift", str(plan_file), "--against-args", cmd, "--format", "github")
    assert r.code == 1
    assert r.out.startswith("::error file=") and "--mem-fraction-static planned 0.96" in r.out


def test_options_that_would_change_nothing_are_refused(cli: Cli, plan_file: Path) -> None:
    """--timeout times /metrics fetches (none asked), and --json is --format json: each given
    where it changes nothing is one error naming it."""
    r = cli("drift", str(plan_file), "--timeout", "2")
    assert r.code == 2 and "--timeout" in r.err and "--against-metrics" in r.err
    r = cli("drift", str(plan_file), "--json", "--format", "github")
    assert r.code == 2 and r.json()["field"] == "--format"


def metrics_text(util: str, blocks: int) -> str:
    return (
        "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
        "# TYPE vllm:cache_config_info gauge\n"
        f'vllm:cache_config_info{{block_size="16",cache_dtype="auto",engine="0",'
        f'gpu_memory_utilization="{util}",num_gpu_blocks="{blocks}"}} 1.0\n'
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{engine="0",model_name="m"} 3.0\n'
    )


@contextmanager
def metrics_server(pages: dict[str, str], delay_s: float = 0.0) -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            if self.path.startswith("/slow"):
                time.sleep(delay_s)
            body = pages.get(self.path.split("?")[0], "").encode()
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = QuietServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


# The gqa-70b / mi300x plan: 42.21 GiB pool / 320 KiB = 138,302 tokens = 8,643 blocks of 16.
CLEAN = metrics_text("0.98", 8700)
DRIFTED = metrics_text("0.9", 6000)


def test_metrics_endpoints(cli: Cli, plan_file: Path) -> None:
    with metrics_server({"/a/metrics": CLEAN, "/b/metrics": DRIFTED}) as base:
        clean = cli("drift", str(plan_file), "--against-metrics", f"{base}/a/metrics", "--json")
        assert clean.code == 0, clean.out
        r = cli(
            "drift",
            str(plan_file),
            "--against-metrics",
            f"{base}/a/metrics",
            "--against-metrics",
            f"{base}/b/metrics",
            "--json",
        )
    assert r.code == 1
    keys = {(d["where"].split("/")[-2], d["key"]) for d in r.json()["differences"]}
    assert keys == {("b", "gpu_memory_utilization"), ("b", "kv_cache_tokens")}
    assert len(r.json()["sources"]) == 2


def test_a_server_caching_prefixes_otherwise_than_planned_is_drift(
    cli: Cli, tmp_path: Path
) -> None:
    """A plan whose line turns prefix caching on or off is checked against the
    enable_prefix_caching label vLLM's cache_config_info reports (a real 0.29 scrape with it
    off); a line that leaves it to the release's default is not."""
    scrape = (DATA / "metrics" / "vllm-0.29-prefix-off-idle.prom").read_text()
    base = ["capacity", "--preset", "llama-3.1-8b", "--gpu", "h100"]
    found = {}
    with metrics_server({"/metrics": scrape}) as url:
        for name, flags in (
            ("on", ["--enable-prefix-caching"]),
            ("off", ["--no-enable-prefix-caching"]),
            ("default", []),
        ):
            plan = tmp_path / f"{name}.yaml"
            assert cli(*base, *flags, "--save", str(plan)).code == 0
            got = cli("drift", str(plan), "--against-metrics", f"{url}/metrics", "--json")
            found[name] = [
                (d["planned"], d["actual"])
                for d in got.json()["differences"]
                if d["key"] == "enable_prefix_caching"
            ]
    assert found == {"on": [("True", "False")], "off": [], "default": []}


def test_unreachable_endpoints_exit_3_while_others_are_checked(
    cli: Cli, plan_file: Path, tmp_path: Path
) -> None:
    with metrics_server({"/a/metrics": CLEAN, "/slow/metrics": CLEAN}, delay_s=2.0) as base:
        endpoints = tmp_path / "endpoints.txt"
        endpoints.write_text(
            f"{base}/a/metrics\n# comment\n{base}/slow/metrics\nhttp://127.0.0.1:9/metrics\n"
        )
        r = cli(
            "drift", str(plan_file), "--endpoints", str(endpoints), "--timeout", "0.5", "--json"
        )
    assert r.code == 3
    status = {
        s["where"].split("/")[-2]
        if "/a/" in s["where"] or "/slow/" in s["where"]
        else "refused": s["status"]
        for s in r.json()["sources"]
    }
    assert status["a"].startswith("ok")
    assert status["slow"].startswith("unreachable") and status["refused"].startswith("unreachable")


@pytest.mark.parametrize(
    ("edit", "text"),
    [
        (lambda t: t[: len(t) // 2] + "\n  figures: [", "not valid YAML"),
        (
            lambda t: t.replace("max_seqs_paged: 69", "max_seqs_paged: 69\n  bogus: {"),
            "not valid YAML",
        ),
        (lambda t: t.replace("  gpu: mi300x\n", ""), "inputs.gpu"),
        (lambda t: t.replace("schema_version: 1", "schema_version: 9"), "newer than"),
        (lambda t: t.replace("schema_version: 1", "schema_version: one"), "schema_version"),
    ],
)
def test_broken_plans_exit_2_with_line_and_field(
    cli: Cli, plan_file: Path, edit: Callable[[str], str], text: str
) -> None:
    plan_file.write_text(edit(plan_file.read_text()))
    r = cli("drift", str(plan_file))
    assert r.code == 2 and text in r.err and r.err.count("\n") == 1


def test_field_errors_carry_the_line(cli: Cli, plan_file: Path) -> None:
    lines = plan_file.read_text().splitlines()
    number = next(i for i, ln in enumerate(lines, 1) if ln.startswith("schema_version"))
    plan_file.write_text(plan_file.read_text().replace("schema_version: 1", "schema_version: x"))
    assert f"line {number}" in cli("drift", str(plan_file)).err


def test_upstream_config_change_is_drift(tmp_path: Path) -> None:
    llama = (MODELS / "meta-llama--Llama-3.1-8B-Instruct" / "config.json").read_bytes()
    changed = json.loads(llama)
    changed["num_key_value_heads"] = 4
    hub = FakeHub(
        repos={
            "org/model": Repo(revisions={"a" * 40: {"config.json": llama}}, refs={"main": "a" * 40})
        }
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    with serve(hub) as running:
        env |= {"HF_ENDPOINT": running.url, "HF_HOME": str(tmp_path / "hf")}
        plan = tmp_path / "plan.yaml"
        run = [sys.executable, "-m", "planner"]
        saved = subprocess.run(
            [*run, "capacity", "--model", "org/model", "--gpu", "h100", "--save", str(plan)],
            env=env,
            capture_output=True,
            text=True,
        )
        assert saved.returncode == 0, saved.stderr
        clean = subprocess.run([*run, "drift", str(plan)], env=env, capture_output=True, text=True)
        assert clean.returncode == 0, clean.stdout + clean.stderr
        # Upstream moves main to a new commit with a different config.json.
        hub.repos["org/model"].revisions["b" * 40] = {"config.json": json.dumps(changed).encode()}
        hub.repos["org/model"].refs["main"] = "b" * 40
        moved = subprocess.run(
            [*run, "drift", str(plan), "--json"], env=env, capture_output=True, text=True
        )
        pinned = subprocess.run(
            [*run, "drift", str(plan), "--hub-ref", "pinned"],
            env=env,
            capture_output=True,
            text=True,
        )
    assert moved.returncode == 1, moved.stderr
    keys = {d["key"] for d in json.loads(moved.stdout)["differences"]}
    assert {"model.config_sha256", "model.revision", "kv_bytes_per_token"} <= keys
    assert pinned.returncode == 0, pinned.stdout  # the pinned commit still has the old config
    # --revision, its older name, still works; a bad value names the spelling typed
    older = subprocess.run(
        [*run, "drift", str(plan), "--revision", "later", "--json"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert older.returncode == 2 and json.loads(older.stdout)["field"] == "--revision"
    assert older.stderr.startswith("Error: --revision: 'later'; accepted: current, pinned")


def test_json_schema_doc_is_current() -> None:
    doc = json.loads((ROOT / "docs" / "plan.schema.json").read_text())
    assert doc == json_schema()


NEXT = str(Path(__file__).parent / "data" / "models" / "Qwen--Qwen3-Next-80B-A3B-Thinking")


def test_hybrid_block_size_is_the_engines_own(cli: Cli, tmp_path: Path) -> None:
    # Qwen3-Next at TP 2: a Gated DeltaNet layer's state per rank is 16 value heads x 128 x 128
    # x 2 B (SSM) + 3 x (2 x 2,048 + 4,096) / 2 x 2 B (conv) = 548,864 B; a full-attention
    # token is 2 x 1 KV head x 256 x 2 B = 1,024 B; vLLM raises the block to 16 x
    # ceil(548,864 / (16 x 1,024)) = 544 tokens (its log: "Setting attention block size to 544").
    # From 0.34 the block defaults to 64 tokens and the raise keeps multiples of it: 576. So
    # does 0.33 with prefix caching on (its default for hybrid models from 0.26): its "align"
    # Mamba mode keeps the block on the 64-token grid FlashInfer's GDN prefill exports its
    # checkpoints on, and a request holds 3 state blocks a linear-attention group (2 in 0.32).
    base = ("capacity", "--model", NEXT, "--gpu", "h200", "--tp", "2", "--engine-version", "0.33")
    base += ("--no-enable-prefix-caching",)
    plain = cli(*base, "--json")
    assert plain.code == 0, plain.out
    assert plain.json()["engine"]["settings"]["block_size"] == 544
    assert plain.json()["engine"]["settings"]["mamba_state_blocks"] == 1
    for version, block, states in (("0.32", 544, 2), ("0.33", 576, 3), ("0.34", 576, 3)):
        settings = cli(*base[:-2], version, "--json").json()["engine"]["settings"]
        assert (settings["block_size"], settings["mamba_state_blocks"]) == (block, states)
    given = cli(*base, "--block-size", "544", "--json")  # read back from the log: accepted
    assert given.code == 0, given.out
    assert given.json()["engine"]["kv_cache_tokens"] == plain.json()["engine"]["kv_cache_tokens"]
    assert "--block-size 16 " in given.json()["flags"]["vllm"]  # vLLM's parser refuses 544
    wrong = cli(*base, "--block-size", "272", "--json")
    assert wrong.code == 2
    assert wrong.json()["field"] == "--block-size" and "544 here" in wrong.json()["error"]
    # a server reporting the block it runs with is not drift
    plan = tmp_path / "next.yaml"
    assert cli(*base, "--save", str(plan)).code == 0
    tokens = plain.json()["engine"]["kv_cache_tokens"]
    blocks = plain.json()["engine"]["num_gpu_blocks"]
    util = plain.json()["engine"]["settings"]["gpu_memory_utilization"]
    scrape = (
        "# TYPE vllm:cache_config_info gauge\n"
        f'vllm:cache_config_info{{block_size="544",cache_dtype="auto",engine="0",'
        f'gpu_memory_utilization="{util}",num_gpu_blocks="{blocks}"}} 1.0\n'
    )
    with metrics_server({"/metrics": scrape}) as url:
        r = cli("drift", str(plan), "--against-metrics", f"{url}/metrics", "--json")
    assert r.code == 0, (tokens, r.out)
    # a scrape without the block label counts its blocks at the plan's block, not vLLM's 16
    unlabelled = scrape.replace('block_size="544",', "")
    with metrics_server({"/metrics": unlabelled}) as url:
        r = cli("drift", str(plan), "--against-metrics", f"{url}/metrics", "--json")
    assert r.code == 0, (tokens, r.out)
    fewer = unlabelled.replace(f'num_gpu_blocks="{blocks}"', f'num_gpu_blocks="{blocks // 2}"')
    with metrics_server({"/metrics": fewer}) as url:
        r = cli("drift", str(plan), "--against-metrics", f"{url}/metrics", "--json")
    assert r.code == 1 and "kv_cache_tokens" in r.out


def test_drift_reads_the_engines_own_spellings(cli: Cli, tmp_path: Path) -> None:
    # vLLM's short flags and human-readable integers, read as vLLM reads them: 32K is 32,768
    # (clean), 32k is 32,000 (a real difference); each source's status says what it found
    lock = tmp_path / "plan.yaml"
    where = ("--preset", "llama-3.1-8b", "--gpu", "h100", "--context", "32768")
    line = cli("capacity", *where, "--quantization", "fp8", "--json", "--save", str(lock)).json()
    line = line["flags"]["vllm"]
    spelled = (
        line.replace("--tensor-parallel-size 1", "-tp=1")
        .replace("--quantization fp8", "-q fp8")
        .replace("--max-model-len 32768", "--max-model-len=32K")
    )
    assert spelled != line
    clean = cli("drift", str(lock), "--against-args", spelled, "--json")
    assert clean.code == 0, clean.out
    decimal = cli("drift", str(lock), "--against-args", spelled.replace("=32K", "=32k"), "--json")
    assert decimal.code == 1
    report = decimal.json()
    assert [(d["key"], d["actual"]) for d in report["differences"]] == [
        ("--max-model-len", "32000")
    ]
    assert any(s["status"].startswith("1 difference") for s in report["sources"])


def test_metrics_name_a_different_model_is_drift(cli: Cli, tmp_path: Path) -> None:
    # the served model against the plan's, by its last path component: a local folder of the
    # same checkpoint matches its Hub id, another model does not
    lock = tmp_path / "plan.yaml"
    assert (
        cli("capacity", "--preset", "llama-3.1-8b", "--gpu", "h100", "--save", str(lock)).code == 0
    )

    def page(model: str) -> str:
        return (
            "# TYPE vllm:num_requests_running gauge\n"
            f'vllm:num_requests_running{{engine="0",model_name="{model}"}} 3.0\n'
        )

    pages = {"/same/metrics": page("/models/Llama-3.1-8B-Instruct"), "/other/metrics": page(
        "Qwen/Qwen2.5-7B-Instruct"
    )}  # fmt: skip
    with metrics_server(pages) as base:
        same = cli("drift", str(lock), "--against-metrics", f"{base}/same/metrics", "--json")
        other = cli("drift", str(lock), "--against-metrics", f"{base}/other/metrics", "--json")
    assert not [d for d in same.json()["differences"] if d["key"] == "model"]
    assert other.code == 1
    (row,) = [d for d in other.json()["differences"] if d["key"] == "model"]
    assert row["actual"] == "Qwen/Qwen2.5-7B-Instruct"
    assert row["planned"] == "meta-llama/Llama-3.1-8B-Instruct"


def test_an_unset_utilization_reads_as_the_extensible_caches_default(
    cli: Cli, tmp_path: Path
) -> None:
    """vLLM 0.34 reports gpu_memory_utilization="None" when the flag is unset, and runs 1.0
    with its extensible KV cache, 0.92 without. A plan that pins 0.92 (0.33's line) is clean
    against an unset server with the extensible cache off and drifted with it on; 0.34's line
    pins 0.92 too, and a server launched with it reports 0.92."""
    plan = tmp_path / "plan.yaml"
    base = ("capacity", "--preset", "llama-3.1-8b", "--gpu", "h100")
    assert cli(*base, "--save", str(plan)).code == 0
    older = tmp_path / "older.yaml"
    assert cli(*base, "--engine-version", "0.33", "--save", str(older)).code == 0

    def page(lock: Path, extensible: str) -> str:
        tokens = int(lock.read_text().split("engine.kv_cache_tokens: ")[1].split()[0])
        return (
            f'vllm:cache_config_info{{block_size="16",cache_dtype="auto",engine="0",'
            f'enable_extensible_kv_cache="{extensible}",gpu_memory_utilization="None",'
            f'kv_cache_size_tokens="{tokens}"}} 1.0\n'
        )

    pages = {
        "/on/metrics": page(older, "True"),
        "/off/metrics": page(older, "False"),
        "/new/metrics": page(plan, "True")
        .replace('block_size="16"', 'block_size="64"')
        .replace('gpu_memory_utilization="None"', 'gpu_memory_utilization="0.92"'),
    }
    with metrics_server(pages) as url:
        on = cli("drift", str(older), "--against-metrics", f"{url}/on/metrics", "--json")
        off = cli("drift", str(older), "--against-metrics", f"{url}/off/metrics", "--json")
        new = cli("drift", str(plan), "--against-metrics", f"{url}/new/metrics", "--json")
    assert off.code == 0, off.out
    assert {d["key"] for d in on.json()["differences"]} == {"gpu_memory_utilization"}
    assert new.code == 0, new.out


def drift_with_cache_dtype(
    cli: Cli, lock: Path, engine: dict[str, Any], cache_dtype: str
) -> Result:
    """`drift LOCK` against a local vLLM /metrics server whose cache_config_info reports a
    plan's engine settings and blocks with `cache_dtype`."""
    scrape = (
        "# TYPE vllm:cache_config_info gauge\n"
        f'vllm:cache_config_info{{block_size="{engine["settings"]["block_size"]}",'
        f'cache_dtype="{cache_dtype}",engine="0",gpu_memory_utilization='
        f'"{engine["settings"]["gpu_memory_utilization"]}",'
        f'num_gpu_blocks="{engine["num_gpu_blocks"]}"}} 1.0\n'
    )
    with metrics_server({"/metrics": scrape}) as url:
        return cli("drift", str(lock), "--against-metrics", f"{url}/metrics", "--json")


def test_vllm_reports_v32_kv_dtype_by_the_name_it_rewrote(cli: Cli, tmp_path: Path) -> None:
    # vLLM 0.11 turns DeepSeek-V3.2's `auto` into fp8_ds_mla before cache_config_info reports it
    lock = tmp_path / "v32.yaml"
    v32 = str(MODELS / "deepseek-ai--DeepSeek-V3.2")
    args = ("capacity", "--model", v32, "--gpu", "h200", "--tp", "8", "--engine-version", "0.11")
    plan = cli(*args, "--json", "--save", str(lock)).json()
    engine = plan["engine"]
    assert "--kv-cache-dtype auto" in plan["flags"]["vllm"]

    clean = drift_with_cache_dtype(cli, lock, engine, "fp8_ds_mla")
    assert clean.code == 0, clean.out
    drifted = drift_with_cache_dtype(cli, lock, engine, "fp8_e5m2")
    assert drifted.code == 1 and "cache_dtype" in drifted.out


def test_vllm_reports_a_declared_fp8_kv_cache_as_the_auto_it_resolved(
    cli: Cli, tmp_path: Path
) -> None:
    # vLLM 0.14+ resolves `auto` to the FP8 cache a ModelOpt checkpoint declares, and reports
    # fp8_e4m3 in cache_config_info: the plan ran it so (its lock says fp8), so that is no drift
    lock = tmp_path / "nvfp4.yaml"
    nvfp4 = str(MODELS / "nvidia--DeepSeek-V3.1-NVFP4")
    args = ("capacity", "--model", nvfp4, "--gpu", "b200", "--tp", "8", "--engine-version", "0.14")
    plan = cli(*args, "--json", "--save", str(lock)).json()
    engine = plan["engine"]
    assert "--kv-cache-dtype auto" in plan["flags"]["vllm"] and engine["kv_dtype"] == "fp8"

    clean = drift_with_cache_dtype(cli, lock, engine, "fp8_e4m3")
    assert clean.code == 0, clean.out
    drifted = drift_with_cache_dtype(cli, lock, engine, "bfloat16")
    assert drifted.code == 1 and "cache_dtype" in drifted.out
    # a release that ran the compute dtype for `auto` plans bf16: its fp8 report is drift
    old = tmp_path / "old.yaml"
    cli("capacity", "--model", nvfp4, "--gpu", "b200", "--tp", "8", "--engine-version", "0.13",
        "--save", str(old))  # fmt: skip
    stale = drift_with_cache_dtype(cli, old, engine, "fp8_e4m3")
    assert stale.code == 1 and '"key": "cache_dtype"' in stale.out


def test_sglang_deepep_plan_reads_both_spellings_and_flags_its_absence(
    cli: Cli, tmp_path: Path
) -> None:
    """A plan whose MoE layers span two boards runs DeepEP: a deployment spelling it the old
    way (--enable-deepep-moe) is the same deployment, one without it drifts."""
    lock = tmp_path / "wide.yaml"
    r1 = str(MODELS / "deepseek-ai--DeepSeek-R1")
    args = ("capacity", "--model", r1, "--gpu", "h200", "--tp", "16", "--dp", "16")
    plan = cli(*args, "--dp-attention", "--engine", "sglang", "--json", "--save", str(lock)).json()
    line = plan["flags"]["sglang"]
    assert "--moe-a2a-backend deepep" in line
    old = line.replace("--moe-a2a-backend deepep", "--enable-deepep-moe")
    assert cli("drift", str(lock), "--against-args", old).code == 0
    bare = line.replace(" --moe-a2a-backend deepep", "")
    drifted = cli("drift", str(lock), "--against-args", bare, "--format", "json")
    assert drifted.code == 1 and "--moe-a2a-backend" in drifted.out


def test_sglang_graph_batch_list_reads_as_its_largest_size(cli: Cli, tmp_path: Path) -> None:
    """--cuda-graph-bs (a list) sets SGLang's largest decode graph, over --cuda-graph-max-bs:
    a deployment listing sizes up to the plan's is the plan; one listing a larger size drifts."""
    lock = tmp_path / "graphs.yaml"
    args = ("capacity", "--preset", "llama-3.1-8b", "--gpu", "h100", "--engine", "sglang")
    plan = cli(*args, "--cuda-graph-max-bs", "256", "--json", "--save", str(lock)).json()
    line = plan["flags"]["sglang"]
    assert "--cuda-graph-max-bs 256" in line
    listed = line.replace("--cuda-graph-max-bs 256", "--cuda-graph-bs 1 2 4 8 16 32 64 128 256")
    assert cli("drift", str(lock), "--against-args", listed).code == 0
    larger = line + " --cuda-graph-bs 1 2 4 512"
    drifted = cli("drift", str(lock), "--against-args", larger, "--format", "json")
    assert drifted.code == 1 and "--cuda-graph-max-bs" in drifted.out
