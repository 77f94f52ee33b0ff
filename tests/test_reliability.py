"""The exit-code contract on hostile input: one `Error:` line and exit 2, never a traceback.

Property tests mutate real inputs (configs, traces, plans, logs) with the values that broke the
planner before (NaN, infinities, giant integers, wrong types, deep nesting); targeted tests pin
each rough edge found by hand.
"""

from __future__ import annotations

import http.server
import json
import math
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
import typer
from helpers import DATA, MODELS, QuietServer, Result, model_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.cli.app import app
from planner.core.hf_config import model_spec_from_config
from planner.errors import InputError
from planner.sim.workload import load_trace
from planner.sources.startup_log import parse_startup_log

Cli = Callable[..., Result]
SHARED_LIKE_LOGS = Path(__file__).parent / "data" / "calibration"

# The values that crashed the planner before this layer existed (fuzz harness, issue 14).
HOSTILE = [
    float("nan"),
    float("inf"),
    -float("inf"),
    10**400 // 10**300,  # a 100-digit integer
    2**63,
    -1,
    0,
    1.5,
    "x",
    "",
    None,
    True,
    [],
    [0, 0],
    {},
    {"a": 1},
    [{}],
]
LLAMA = "meta-llama--Llama-3.1-8B-Instruct"


def one_error_line(r: Result) -> bool:
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    return len(lines) == 1 and lines[0].startswith("Error: ")


# --- command-line numbers -------------------------------------------------------------------


def numeric_options() -> list[tuple[str, str, str]]:
    """(command, flag, 'float' | 'int') for every numeric option of every command."""
    command = typer.main.get_command(app)
    out = []
    for name, sub in command.commands.items():  # type: ignore[attr-defined]
        for param in sub.params:
            kind = getattr(param.type_descriptor, "annotation", None)
            text = str(kind)
            flag = next((o for o in param.opts if o.startswith("--")), None)
            if flag is None:
                continue
            if "float" in text:
                out.append((name, flag, "float"))
            elif "int" in text and "bool" not in text:
                out.append((name, flag, "int"))
    return out


BASE = {
    "capacity": ["--preset", "llama-3.1-8b", "--gpu", "h100"],
    "simulate": ["--requests", "20"],
    "slo": ["--tpot", "50"],
    "spec": ["--alpha", "0.7"],
    "drift": ["plan.yaml"],  # numbers are checked before the plan is read
    "diagnose": ["--snapshots", "a.prom,b.prom", "--interval", "1"],
    "fleet": ["--preset", "llama-3.1-8b", "--rate", "20", "--tpot", "50", "--ttft", "1000"],
    "gpus": [],
    "presets": [],
    "calibrate": ["--bench", "r.json", "--gpu", "h100"],  # numbers checked before files
}


def test_every_numeric_option_is_listed() -> None:
    found = numeric_options()
    assert len(found) > 40  # the walk sees the options (a renamed attribute would make it 0)
    assert ("capacity", "--gpu-memory-gib", "float") in found


@pytest.mark.parametrize(("command", "flag", "kind"), numeric_options())
def test_non_finite_and_giant_numbers_are_refused(
    cli: Cli, command: str, flag: str, kind: str
) -> None:
    value = "nan" if kind == "float" else "99999999999999999999"
    r = cli(command, *BASE[command], flag, value)
    assert r.code == 2 and one_error_line(r), (r.code, r.err)
    assert flag in r.err


def test_json_output_is_strict(cli: Cli) -> None:
    r = cli("simulate", "--requests", "20", "--overhead-ms", "1e308", "--json")
    assert r.code == 2 and one_error_line(r)
    r = cli("spec", "--alpha", "0.7", "--json")
    json.loads(r.out, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))


def test_version_help_and_bare_command(cli: Cli) -> None:
    from planner import __version__

    assert cli("--version").out == f"planner {__version__}\n"
    assert "Commands:" in cli("-h").out
    bare = cli()
    assert bare.code == 0 and "Commands:" in bare.out and bare.err == ""


def test_broken_pipe_ends_quietly() -> None:
    """`planner gpus | head -1`: no traceback, and not exit 1 (the code of a finding)."""
    proc = subprocess.run(
        f"{sys.executable} -m planner gpus | head -1",
        shell=True,
        capture_output=True,
        text=True,
        check=False,
        env=os.environ | {"COLUMNS": "80"},
    )
    assert "Traceback" not in proc.stderr and proc.stdout.count("\n") == 1


def test_spec_k_ranges_are_bounded(cli: Cli) -> None:
    started = time.monotonic()
    r = cli("spec", "--alpha", "0.7", "--k", "1-1000000000")
    assert r.code == 2 and "outside [1, 64]" in r.err
    assert time.monotonic() - started < 5


# --- config.json ------------------------------------------------------------------------------

SIZED = [
    "num_hidden_layers",
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "intermediate_size",
    "vocab_size",
    "max_position_embeddings",
    "head_dim",
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(sorted(p.parent.name for p in MODELS.glob("*/config.json"))),
    key=st.sampled_from(
        [
            *SIZED,
            "quantization_config",
            "text_config",
            "layer_types",
            "architectures",
            "sliding_window",
            "num_experts_per_tok",
            "vision_config",
            "block_configs",
            "model_type",
            "kv_lora_rank",
        ]
    ),
    value=st.sampled_from(HOSTILE),
)
def test_mutated_real_configs_load_or_name_a_field(name: str, key: str, value: Any) -> None:
    cfg = model_config(name)
    target = (
        cfg["text_config"]
        if isinstance(cfg.get("text_config"), dict) and key in SIZED and key not in cfg
        else cfg
    )
    target[key] = value
    try:
        spec = model_spec_from_config(cfg, name="x", source="local")
    except InputError as exc:
        assert str(exc) and "\n" not in str(exc)
    else:
        assert spec.num_layers > 0 and spec.weights_bytes > 0


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"num_hidden_layers": 10**9}, "num_hidden_layers: must be a positive integer up to 4,096"),
        ({"num_hidden_layers": float("nan")}, "num_hidden_layers: must be a positive integer"),
        ({"num_key_value_heads": 0}, "num_key_value_heads: 0 must be positive"),
        ({"num_key_value_heads": 5}, "divide the 32 attention heads"),
        ({"text_config": 5}, "text_config: must be an object"),
        ({"architectures": 5}, "architectures: must be a list"),
        ({"layer_types": [{}] * 32}, "layer_types[0]"),
        ({"model_type": ["llama"]}, "model_type: must be a string"),
        (
            {"quantization_config": {"quant_method": "awq", "bits": -4}},
            "quantization_config.bits",
        ),
        (
            {"quantization_config": {"quant_method": "fp8", "weight_block_size": [0, 0]}},
            "weight_block_size",
        ),
        (
            {"quantization_config": {"quant_method": "compressed-tensors", "config_groups": []}},
            "config_groups: must be an object",
        ),
    ],
)
def test_malformed_config_fields_are_named(patch: dict[str, Any], field: str) -> None:
    cfg = model_config(LLAMA) | patch
    with pytest.raises(InputError) as err:
        model_spec_from_config(cfg, name="x", source="local")
    assert field in str(err.value)


def test_config_files_bounded(cli: Cli, tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    digits = tmp_path / "digits.json"
    digits.write_text('{"num_hidden_layers": ' + "1" * 5001 + "}")
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe{}")
    for path in (deep, digits, binary, Path("/dev/null")):
        r = cli("capacity", "--model", str(path), "--gpu", "h100")
        assert r.code == 2 and one_error_line(r), (path, r.err)


# --- traces -------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    field=st.sampled_from(["arrival_s", "prompt_tokens", "output_tokens", "extra"]),
    value=st.sampled_from(HOSTILE),
    drop=st.booleans(),
)
def test_mutated_traces_load_or_name_the_line(field: str, value: Any, drop: bool) -> None:
    rows: list[dict[str, Any]] = [
        {"arrival_s": i * 0.1, "prompt_tokens": 10 + i, "output_tokens": 5} for i in range(5)
    ]
    if drop and field in rows[2]:
        del rows[2][field]
    else:
        rows[2][field] = value
    text = "\n".join(json.dumps(r) for r in rows)
    try:
        trace = load_trace(text, "t")
    except InputError as exc:
        assert "t line 3" in str(exc)
    else:
        assert trace.size == 5 and (trace.output_tokens >= 1).all()
        assert all(math.isfinite(x) for x in trace.arrival_s)


def test_large_trace_is_fast_and_oversized_is_refused(tmp_path: Path) -> None:
    rows = "".join(
        f'{{"arrival_s": {i / 12:.4f}, "prompt_tokens": {8 + i % 900}, "output_tokens": 40}}\n'
        for i in range(100_000)
    )
    started = time.monotonic()
    assert load_trace(rows, "t").size == 100_000
    assert time.monotonic() - started < 10  # generous: the point is "not minutes"
    from planner.sim.workload import MAX_TRACE_REQUESTS

    too_many = '{"arrival_s": 0, "prompt_tokens": 1, "output_tokens": 1}\n' * (
        MAX_TRACE_REQUESTS + 1
    )
    with pytest.raises(InputError, match="more than 500,000 requests"):
        load_trace(too_many, "t")


def test_simulate_echo_describes_what_ran(cli: Cli) -> None:
    r = cli("simulate", "--requests", "30", "--rate", "10", "--json")
    assert "10 req/s" in r.json()["workload"]["description"]
    r = cli("simulate", "--requests", "30", "--shared-prefix-tokens", "-1")
    assert r.code == 2 and "--shared-prefix-tokens" in r.err
    r = cli("simulate", "--requests", "30", "--seed", "-1")
    assert r.code == 2 and "--seed" in r.err


def test_shared_prefix_applies_to_traces(cli: Cli, tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text(
        "".join(
            f'{{"arrival_s": {i * 0.05}, "prompt_tokens": 50, "output_tokens": 20}}\n'
            for i in range(60)
        )
    )
    plain = cli("simulate", "--trace", str(trace), "--json").json()
    shared = cli(
        "simulate",
        "--trace",
        str(trace),
        "--shared-prefix-fraction",
        "1",
        "--shared-prefix-tokens",
        "2000",
        "--json",
    ).json()
    assert shared["workload"]["shared_prefix_tokens"] == 2000
    assert shared["policies"][0]["ttft_ms"]["mean"] != plain["policies"][0]["ttft_ms"]["mean"]


# --- start-up logs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("INFO Available KV cache memory: 1,234.5 GiB", None),  # thousands separator: read
        ("INFO Available KV cache memory: 9" + "9" * 400 + " GiB", "out of range"),
        ("INFO non-default args: {'block_size': 'x'}", "block_size='x' is not a valid int"),
        ("INFO # GPU blocks: " + "9" * 5000, "is not a count"),
        # vLLM 0.34 takes nvfp4 (scales beside the packed values): not sized as bytes
        ("INFO non-default args: {'kv_cache_dtype': 'nvfp4'}", "'nvfp4' is not a KV cache"),
        ("INFO non-default args: {'kv_cache_dtype': 'abc'}", "'abc' is not a KV cache"),
        ("INFO server_args=ServerArgs(kv_cache_dtype='fp4_e2m1')", "'fp4_e2m1' is not a KV"),
    ],
)
def test_log_figures_are_checked_with_their_line(line: str, message: str | None) -> None:
    text = "INFO vLLM API server version 0.19.0\n" + line + "\nINFO GPU KV cache size: 10 tokens\n"
    if message is None:
        assert parse_startup_log(text, "l").available_kv_bytes == round(1234.5 * 2**30)
        return
    with pytest.raises(InputError, match=rf"l line 2: .*{message}"):
        parse_startup_log(text, "l")


def test_a_logged_16_bit_kv_cache_dtype_plans_as_auto(cli: Cli, tmp_path: Path) -> None:
    """vLLM 0.34 and SGLang take --kv-cache-dtype bfloat16: a log that names it plans the same
    two-byte cache as auto for a bf16 model (it used to end in a KeyError)."""
    pools = []
    for dtype in ("auto", "bfloat16"):
        log = tmp_path / f"{dtype}.log"
        log.write_text(
            "INFO vLLM API server version 0.19.0\n"
            f"INFO non-default args: {{'model': 'x', 'max_model_len': 8192, "
            f"'kv_cache_dtype': '{dtype}'}}\n"
            "INFO GPU KV cache size: 400,000 tokens\n"
        )
        args = ("--from-log", str(log), "--preset", "llama-3.1-8b", "--gpu", "h100", "--json")
        r = cli("capacity", *args)
        assert r.code == 0, r.output
        pools.append(r.json()["predicted"]["kv_cache_tokens"])
    assert pools[0] == pools[1] > 0


def test_a_logged_setting_the_model_refuses_names_the_log(cli: Cli, tmp_path: Path) -> None:
    """A TP size the model cannot take came from the log, not from a --tp the user typed: the
    one-line error names --from-log and the setting."""
    log = tmp_path / "tp5.log"
    log.write_text(
        "INFO vLLM API server version 0.19.0\n"
        "INFO non-default args: {'model': 'x', 'max_model_len': 8192, 'tensor_parallel_size': 5}\n"
        "INFO GPU KV cache size: 400,000 tokens\n"
    )
    args = ("--from-log", str(log), "--preset", "llama-3.1-8b", "--gpu", "h100", "--json")
    r = cli("capacity", *args)
    assert r.code == 2
    got = r.json()
    assert got["field"] == "--from-log"
    assert "a logged setting is refused: --tp: 5 does not divide" in got["error"]


def test_big_log_is_scanned_fast() -> None:
    body = "x\n" * 5_000_000  # 10 MB of lines no pattern matches
    text = "vLLM API server version 0.19.0\n" + body + "GPU KV cache size: 1,024 tokens\n"
    started = time.monotonic()
    log = parse_startup_log(text, "l")
    assert log.kv_cache_tokens == 1024 and log.lines_read == 5_000_002
    assert time.monotonic() - started < 5


def test_replay_names_terms_the_log_lacks(cli: Cli, tmp_path: Path) -> None:
    log = tmp_path / "l.log"
    log.write_text(
        "INFO vLLM API server version 0.19.0\n"
        "INFO non-default args: {'model': 'x', 'max_model_len': 8192}\n"
        "INFO GPU KV cache size: 400,000 tokens\n"
    )
    r = cli(
        "capacity", "--from-log", str(log), "--preset", "llama-3.1-8b", "--gpu", "h100", "--json"
    )
    notes = " ".join(r.json()["notes"])
    assert "the log prints no" in notes and "weights" in notes


# --- plans, manifests, /metrics -------------------------------------------------------------


@pytest.fixture
def plan(cli: Cli, tmp_path: Path) -> Path:
    path = tmp_path / "plan.yaml"
    args = ("--preset", "gqa-70b", "--gpu", "mi300x", "--ledger", "textbook", "--save", str(path))
    assert cli("capacity", *args).code == 0
    return path


BOMB = """a: &a ["x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
"""


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.replace("figures:", "figures:\n  x: .nan"), "figures.x"),
        (lambda t: t.replace("  settings:", "  settings:\n    gpu: h100"), "inputs.settings.gpu"),
        (lambda t: t.replace("vllm: vllm serve", "vllm: vllm serve 'open"), "flags.vllm"),
        (
            lambda t: t.replace("figures:", BOMB.replace("\n", "\n  ").join(["figures:\n  ", ""])),
            "expands",
        ),
        (lambda t: t + "\nextra: " + "[" * 5000 + "]" * 5000, "nested too deeply"),
    ],
)
def test_hostile_plans_exit_2(cli: Cli, plan: Path, edit: Any, message: str) -> None:
    plan.write_text(edit(plan.read_text()))
    started = time.monotonic()
    r = cli("drift", str(plan))
    assert r.code == 2 and one_error_line(r) and message in r.err, r.err
    assert time.monotonic() - started < 5


def test_non_utf8_and_unwritable_files(cli: Cli, plan: Path, tmp_path: Path) -> None:
    plan.write_bytes(b"\xe6" + plan.read_bytes())
    r = cli("drift", str(plan))
    assert r.code == 2 and "not UTF-8" in r.err
    for target in ("", str(tmp_path), str(tmp_path / "missing" / "p.yaml")):
        r = cli("capacity", "--preset", "gqa-70b", "--gpu", "mi300x", "--save", target)
        assert r.code == 2 and "--save" in r.err and r.out == ""


def test_relative_model_path_resolves_beside_the_plan(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "config.json").write_text(json.dumps(model_config(LLAMA)))
    (tmp_path / "ci").mkdir()
    monkeypatch.chdir(tmp_path)
    r = cli("capacity", "--model", "models", "--gpu", "h100", "--save", "ci/plan.yaml")
    assert r.code == 0
    assert "model: ../models" in (tmp_path / "ci" / "plan.yaml").read_text()
    monkeypatch.chdir(tmp_path / "ci")
    assert cli("drift", "plan.yaml").code == 0


def test_recompute_status_says_drift(cli: Cli, plan: Path) -> None:
    text = plan.read_text().replace("max_seqs_paged: 69", "max_seqs_paged: 90")
    plan.write_text(text)
    r = cli("drift", str(plan))
    assert r.code == 1 and "recompute: 1 difference" in r.out and "recompute: ok" not in r.out


K8S_ARGS_ONLY = """apiVersion: apps/v1
kind: Deployment
metadata: {name: llm}
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.19.0
          args: ["$MODEL", "--max-model-len", "8192", "--max-num-seqs", "69",
                 "--gpu-memory-utilization", "0.98"]
"""


def test_image_entrypoint_and_engine_defaults(cli: Cli, plan: Path, tmp_path: Path) -> None:
    manifest = tmp_path / "k8s.yaml"
    manifest.write_text(K8S_ARGS_ONLY)
    r = cli("drift", str(plan), "--against-args-file", str(manifest), "--json")
    # --tensor-parallel-size 1, --block-size 16 and --kv-cache-dtype auto are vLLM's defaults
    assert r.code == 0, r.out
    assert r.json()["sources"][0]["status"] == "ok (vllm)"


@pytest.mark.parametrize(
    "text",
    [
        "services: hello",
        "kind: Deployment\nspec:\n  template:\n    spec:\n      containers: [1]",
        "kind: Pod\nmetadata: llm\nspec:\n  containers:\n    - command: 5",
        "vllm serve m --max-model-len '8192",
        "vllm serve m \\",
        BOMB,
    ],
)
def test_hostile_manifests_exit_2(cli: Cli, plan: Path, text: str) -> None:
    r = cli("drift", str(plan), "--against-args", text)
    assert r.code == 2 and one_error_line(r), r.err


@contextmanager
def endpoint(handler: Callable[[http.server.BaseHTTPRequestHandler], None]) -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            with suppress(BrokenPipeError, ConnectionResetError):
                handler(self)

    server = QuietServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()


def _endless(h: http.server.BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.end_headers()
    chunk = b"# filler\n" * 8192
    for _ in range(8192):  # up to 576 MiB, far past the planner's bound
        h.wfile.write(chunk)


def _drip(h: http.server.BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.end_headers()
    for _ in range(40):
        h.wfile.write(b"#")
        h.wfile.flush()
        time.sleep(0.1)


@pytest.mark.parametrize("handler", [_endless, _drip])
def test_metrics_reads_are_bounded(cli: Cli, plan: Path, handler: Any) -> None:
    with endpoint(handler) as url:
        started = time.monotonic()
        r = cli("drift", str(plan), "--against-metrics", url, "--timeout", "1", "--json")
    assert r.code == 3 and "unreachable" in r.json()["sources"][0]["status"]
    assert time.monotonic() - started < 3


@pytest.mark.parametrize("url", ["file:///dev/zero", "gopher://127.0.0.1/", "http://[::1"])
def test_metrics_urls_must_be_http(cli: Cli, plan: Path, url: str) -> None:
    r = cli("drift", str(plan), "--against-metrics", url)
    assert r.code == 2 and one_error_line(r)


@pytest.mark.parametrize("timeout", ["0", "1e300"])
def test_metrics_timeout_bounded(cli: Cli, plan: Path, timeout: str) -> None:
    r = cli("drift", str(plan), "--against-metrics", "http://127.0.0.1:9/", "--timeout", timeout)
    assert r.code == 2 and "--timeout" in r.err


@pytest.mark.parametrize("value", ["NaN", "+Inf", "abc", "-5"])
def test_unreadable_gauges_are_drift_not_clean(cli: Cli, plan: Path, value: str) -> None:
    body = f"sglang:max_total_num_tokens {value}\nsglang:page_size 16\n"

    def serve_body(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.end_headers()
        h.wfile.write(body.encode())

    with endpoint(serve_body) as url:
        r = cli("drift", str(plan), "--against-metrics", url, "--json")
    assert r.code == 1
    json.loads(r.out, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))


# --- output -------------------------------------------------------------------------------------


def test_narrow_tables_show_numbers_and_ids_whole() -> None:
    env = os.environ | {"COLUMNS": "80"}
    for args in (["simulate", "--compare", "static,continuous,chunked"], ["gpus"]):
        out = subprocess.run(
            [sys.executable, "-m", "planner", *args],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        ).stdout
        assert "…" not in out, out
    gpus = subprocess.run(
        [sys.executable, "-m", "planner", "gpus"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    assert "rtx-pro-6000-blackwell" in gpus and "a100-pcie-40gb" in gpus


def test_a_title_wider_than_its_table_is_one_line(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """spec's speedup table is four narrow columns under a longer title: the title prints on
    one line of its own, not wrapped to the columns' width."""
    monkeypatch.setenv("COLUMNS", "100")
    out = cli("spec", "--alpha", "0.7").out.splitlines()
    assert out[0] == "Speedup S = E / C  (c = 0.05, v = 0.0)", out[:2]
    assert out[1].startswith("┏") and len(out[1]) < len(out[0])


def test_cost_model_line_is_rounded(cli: Cli) -> None:
    r = cli("simulate", "--requests", "20", "--a-ms", "0.1", "--b-ms", "0.0123456789")
    line = next(ln for ln in r.out.splitlines() if "overhead" in ln)
    assert "99999" not in line and "00000" not in line and "56789" not in line


def test_benchmark_summary_is_rounded(cli: Cli) -> None:
    r = cli(
        "simulate",
        "--requests",
        "20",
        "--preset",
        "llama-3.1-8b",
        "--gpu",
        "h100",
        "--concurrency",
        "3",
        "--prompt-len",
        "333",
        "--output-len",
        "77",
    )
    assert r.code == 0, r.err
    for line in r.out.splitlines():
        assert "99999" not in line and "00000" not in line, line


def test_engine_version_beyond_newest_is_noted(cli: Cli) -> None:
    r = cli(
        "capacity",
        "--preset",
        "llama-3.1-8b",
        "--gpu",
        "h100",
        "--engine",
        "vllm",
        "--engine-version",
        "1.0.0",
        "--json",
    )
    assert any("newer than the newest release modelled" in n for n in r.json()["engine"]["notes"])


@pytest.mark.parametrize(
    ("engine", "version", "newest"), [("vllm", "1.0.0", "0.34.0"), ("sglang", "0.6.0", "0.5.23")]
)
def test_simulate_names_the_release_it_stands_in(
    cli: Cli, engine: str, version: str, newest: str
) -> None:
    # a release past the newest modelled runs that release's rules for its steps as well as its
    # memory: simulate says so, as capacity does; the newest itself says nothing
    args = ["simulate", "--preset", "llama-3.1-8b", "--gpu", "h100", "--engine", engine]
    args += ["--concurrency", "4", "--prompt-len", "200", "--output-len", "20"]
    args += ["--num-prompts", "8", "--json"]
    notes = cli(*args, "--engine-version", version).json()["notes"]
    assert f"newer than the newest release modelled ({newest})" in notes[0], notes
    notes = cli(*args, "--engine-version", newest).json()["notes"]
    assert not any("release modelled" in n for n in notes), notes


def test_every_command_names_the_release_it_stands_in(cli: Cli) -> None:
    # slo, spec and fleet plan the same engine instance as simulate: each says which release's
    # rules stand in for a release past the newest modelled
    on = ["--preset", "llama-3.1-8b", "--gpu", "h100", "--engine-version", "1.0.0", "--json"]
    said = "vLLM 1.0.0 is newer than the newest release modelled (0.34.0)"
    assert said in cli("slo", "--tpot", "20", *on).json()["warnings"][0]
    assert said in cli("spec", "--alpha", "0.7", *on).json()["notes"][0]
    fleet = cli("fleet", "--rate", "5", "--tpot", "50", "--ttft", "1000", *on).json()
    assert said in fleet["winner"]["notes"][0]
    assert not cli("spec", "--alpha", "0.7", *on[:-3], "--json").json()["notes"]


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_every_command_names_the_kv_cache_the_engine_runs(cli: Cli, engine: str) -> None:
    # a checkpoint that declares an FP8 KV cache runs one for `auto`: simulate's deployment
    # says the dtype run beside the flag, and its notes, fleet's, slo's and spec's say why, as
    # capacity's do
    model = str(MODELS / "Qwen--Qwen3-32B-FP8-Static-PerTensor")
    on = ["--model", model, "--gpu", "h100", "--engine", engine]
    run = cli("simulate", *on, "--concurrency", "2", "--prompt-len", "200", "--output-len", "20",
              "--num-prompts", "4", "--json").json()  # fmt: skip
    assert (run["deployment"]["kv_cache_dtype"], run["deployment"]["kv_dtype"]) == ("auto", "fp8")
    said = "config declares an FP8 KV cache"
    assert said in run["notes"][0]
    assert any(said in n for n in cli("capacity", *on, "--json").json()["engine"]["notes"])
    fleet = cli("fleet", *on, "--rate", "1", "--tpot", "80", "--ttft", "3000", "--json").json()
    assert said in fleet["winner"]["notes"][0]
    assert said in cli("slo", *on, "--tpot", "40", "--json").json()["warnings"][0]
    assert said in cli("spec", *on, "--alpha", "0.7", "--json").json()["notes"][0]
    # a bf16 cache asked for: the flag's own dtype, nothing to say
    plain = cli("simulate", *on, "--kv-dtype", "bf16", "--concurrency", "2", "--prompt-len",
                "200", "--output-len", "20", "--num-prompts", "4", "--json").json()  # fmt: skip
    assert plain["deployment"]["kv_dtype"] == "bf16"
    assert not any(said in n for n in plain["notes"])


def test_simulate_names_the_attention_dp_sglang_turns_on_itself(cli: Cli) -> None:
    # SGLang 0.5.4 runs DeepSeek-V3.2's sparse attention data-parallel whatever the flags say:
    # the run is planned so, and says why before the lockstep note that follows from it
    run = cli("simulate", "--model", str(MODELS / "deepseek-ai--DeepSeek-V3.2"), "--gpu", "h200",
              "--tp", "8", "--engine", "sglang", "--engine-version", "0.5.4", "--concurrency",
              "8", "--prompt-len", "500", "--output-len", "20", "--num-prompts", "8",
              "--json").json()  # fmt: skip
    assert run["deployment"]["dp_attention"] is True
    assert "turns on data-parallel attention with --dp-size 8" in run["notes"][0]


@pytest.mark.parametrize(("engine", "version"), [("vllm", "0.1.7"), ("sglang", "0.2.9")])
def test_engine_version_before_oldest_is_noted(cli: Cli, engine: str, version: str) -> None:
    args = ["capacity", "--preset", "llama-3.1-8b", "--gpu", "h100", "--engine", engine]
    r = cli(*args, "--engine-version", version, "--json")
    notes = r.json()["engine"]["notes"]
    assert any("older than the oldest release modelled" in n for n in notes), notes
    # the oldest modelled releases themselves carry no such note
    oldest = {"vllm": "0.2.0", "sglang": "0.3.0"}[engine]
    r = cli(*args, "--engine-version", oldest, "--json")
    assert not any("oldest release modelled" in n for n in r.json()["engine"]["notes"])


def test_mla_latent_is_replicated_on_every_rank(cli: Cli) -> None:
    r = cli(
        "capacity",
        "--model",
        str(MODELS / "deepseek-ai--DeepSeek-V3"),
        "--gpu",
        "h200",
        "--tp",
        "8",
        "--json",
    )
    data = r.json()
    assert data["kv_replication_factor"] == 8
    assert any("MLA" in w for w in data["warnings"])


@pytest.mark.parametrize(("page", "code"), [("16", 0), ("NaN", 1), ("32", 1)])
def test_sglang_gauges_against_a_vllm_engine_plan(
    cli: Cli, tmp_path: Path, page: str, code: int
) -> None:
    plan = tmp_path / "plan.yaml"
    # vLLM 0.33's 16-token blocks (0.34 defaults to 64)
    saved = cli("capacity", "--preset", "gqa-70b", "--gpu", "mi300x", "--engine-version", "0.33",
                "--save", str(plan))  # fmt: skip
    assert saved.code == 0
    tokens = int(plan.read_text().split("engine.kv_cache_tokens: ")[1].split()[0])
    body = (
        f"sglang:max_total_num_tokens {tokens}\nsglang:page_size {page}\nsglang:context_len 8192\n"
    )

    def serve_body(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.end_headers()
        h.wfile.write(body.encode())

    with endpoint(serve_body) as url:
        r = cli("drift", str(plan), "--against-metrics", url)
    assert r.code == code, r.out


@pytest.mark.parametrize(
    ("args", "code", "field"),
    [
        (["capacity", "--preset", "gqa-70b", "--gpu", "nope"], 2, "--gpu"),
        (["capacity", "--preset", "gqa-70b", "--gpu", "h100", "--tp", "x"], 2, "--tp"),
        (
            ["simulate", "--preset", "llama-3.1-8b", "--gpu", "h100", "--concurrency", "2"],
            2,
            "--prompt-len",
        ),
        (
            [
                "calibrate",
                "--bench",
                "/nonexistent.json",
                "--gpu",
                "h100",
                "--preset",
                "llama-3.1-8b",
            ],
            2,
            "--bench",
        ),
        (
            [
                "simulate",
                "--preset",
                "llama-3.1-405b",
                "--gpu",
                "l4",
                "--concurrency",
                "2",
                "--prompt-len",
                "100",
                "--output-len",
                "10",
            ],
            1,
            None,
        ),
    ],
)
def test_every_failing_exit_under_json_prints_one_object(
    cli: Cli, args: list[str], code: int, field: str | None
) -> None:
    r = cli(*args, "--json")
    assert r.code == code, r.err
    payload = r.json()
    assert payload["exit_code"] == code and payload["field"] == field
    assert payload["error"] in r.err


@pytest.mark.parametrize("value", ["inf", "1e300"])
def test_sglang_state_ratio_out_of_range_is_refused(cli: Cli, value: str) -> None:
    # fuzz seed 606: an infinite --mamba-full-memory-ratio overflowed the state-pool split
    model = str(Path(__file__).parent / "data" / "models" / "Qwen--Qwen3-Next-80B-A3B-Thinking")
    r = cli(
        "capacity", "--model", model, "--gpu", "h200", "--tp", "2", "--engine", "sglang",
        "--mamba-full-memory-ratio", value, "--json",
    )  # fmt: skip
    assert r.code == 2 and r.json()["field"] == "--mamba-full-memory-ratio"


# Lines that are prose, printed with soft wrap (the terminal folds them, a copy is one line).
PROSE = ("models (", "gpus (", "workloads (", "break-even alpha", "sensitivity to v")


@pytest.mark.parametrize("columns", [60, 80])
def test_every_command_fits_columns_and_never_wraps_a_launch_line(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, columns: int
) -> None:
    """Every command at COLUMNS 60 and 80: no table line is wider (a table that cannot fit
    folds its rows into blocks), and every launch line the plan holds, and fleet's `planner
    simulate` check, is printed whole on one line (a paste runs one command)."""
    metrics = DATA / "metrics" / "vllm-0.29-qwen2.5-1.5b-light.prom"
    log = DATA / "calibration" / "logs" / "vllm064-rtx3090-llama31-8b-20k.log"
    llama = ("--preset", "llama-3.1-8b", "--gpu", "h100")
    monkeypatch.chdir(tmp_path)  # a short plan path: a path is printed whole
    plan = Path("plan.yaml")
    Path("a.log").write_text(log.read_text())
    assert cli("capacity", *llama, "--save", str(plan)).code == 0
    drifted = "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-num-seqs 512 --max-model-len 4096"
    runs: list[tuple[str, ...]] = [
        ("capacity", *llama),
        ("capacity", "--preset", "gqa-70b", "--gpu", "mi300x", "--engine", "sglang"),
        ("capacity", *llama, "--spec-alpha", "0.7"),
        ("presets",),
        ("gpus",),
        ("spec", "--alpha", "0.7", *llama),
        ("slo", "--tpot", "50", *llama),
        ("simulate", "--compare", "static,continuous,chunked", "--requests", "50"),
        (
            "simulate",
            *llama,
            "--concurrency",
            "8",
            "--prompt-len",
            "500",
            "--output-len",
            "50",
            "--requests",
            "40",
        ),
        ("drift", str(plan), "--against-args", drifted),
        ("diagnose", "--snapshots", f"{metrics},{metrics}", "--interval", "30", "--tpot", "1"),
        (
            "fleet",
            "--preset",
            "llama-3.1-8b",
            "--gpu",
            "h100",
            "--rate",
            "5",
            "--tpot",
            "50",
            "--ttft",
            "1000",
            "--workers",
            "1",
        ),
        (
            "calibrate",
            "a.log",
            "--gpu",
            "rtx-3090",
            "--model",
            str(MODELS / "meta-llama--Llama-3.1-8B"),
            "--engine-version",
            "0.6.4",
        ),
    ]
    monkeypatch.setenv("COLUMNS", str(columns))
    for args in runs:
        r = cli(*args)
        assert r.code in (0, 1), (args, r.err)
        launch = [
            ln
            for ln in r.out.splitlines()
            if "vllm serve" in ln
            or "launch_server" in ln
            or ln.startswith(("vLLM:", "SGLang:", "planner simulate "))
        ]
        for line in r.out.splitlines():
            if line in launch or line.startswith(PROSE):
                continue
            assert len(line) <= columns, (args, line)
        as_json = cli(*args, "--json")
        if args[0] in ("capacity", "slo") and as_json.code == 0:
            lines = {v for k, v in as_json.json()["flags"].items() if k in ("vllm", "sglang") and v}
            for full in lines:
                assert any(full in ln for ln in launch), (args, full)
        if args[0] == "fleet" and as_json.code == 0:  # the check a user pastes, whole
            assert as_json.json()["winner"]["simulate_command"] in launch, args


def test_limits_are_printed_as_a_user_writes_them(cli: Cli) -> None:
    # the slowest accepted rate is one request a day: 1/86,400 req/s, not 0.0000115740740...
    for args in (
        ("simulate", "--rate", "1e-7", "--requests", "10"),
        ("fleet", "--preset", "llama-3.1-8b", "--rate", "1e-7", "--tpot", "50", "--ttft", "1000"),
    ):
        r = cli(*args)
        assert r.code == 2 and "--rate" in r.err and "1.157e-05" in r.err, r.err
        assert not re.search(r"\d\.\d{6,}", r.err), r.err


def test_an_error_names_the_spelling_the_user_typed(cli: Cli) -> None:
    """An option with several names (`--tp` / `--tensor-parallel-size`, simulate's
    `--weight-dtype` / `--quantization`): its error names the one on the command line, in the
    line and in --json's field; typed as the error's own name, it is left as it is."""
    sim = ("simulate", "--preset", "llama-3.1-8b", "--gpu", "h100", "--concurrency", "1",
           "--prompt-len", "10", "--output-len", "5", "--json")  # fmt: skip
    long = cli(*sim, "--tensor-parallel-size", "3")
    assert long.code == 2 and long.json()["field"] == "--tensor-parallel-size"
    assert long.err.startswith("Error: --tensor-parallel-size: 3 does not divide"), long.err
    assert long.json()["error"].startswith("--tensor-parallel-size: 3 does not divide")
    short = cli(*sim, "--tp", "3")
    assert short.code == 2 and short.json()["field"] == "--tp"
    method = cli(*sim, "--quantization", "ptpc_fp8")
    assert method.code == 2 and method.json()["field"] == "--quantization"
    assert method.err.startswith("Error: --quantization: unknown dtype 'ptpc_fp8'"), method.err


def test_a_value_of_the_wrong_kind_names_the_flag_as_typed_and_what_it_takes(cli: Cli) -> None:
    """A word where a number belongs is one line naming the spelling typed and what the option
    takes (Typer's own line listed every alias and said "valid integer"), and an option whose
    value was left out, so that it swallowed the next flag, says so rather than calling that
    flag a bad number; --json carries the same line and the typed flag."""
    sim = ("simulate", "--preset", "llama-3.1-8b", "--gpu", "h100", "--json")
    rate = cli(*sim, "--request-rate=fast")
    assert rate.code == 2, rate.err
    assert rate.json() == {
        "error": "--request-rate: expects a number, got 'fast'",
        "exit_code": 2,
        "field": "--request-rate",
    }
    whole = cli(*sim, "--num-prompts", "1.5")
    assert (
        whole.code == 2 and whole.err == "Error: --num-prompts: expects a whole number, got '1.5'\n"
    )
    swallowed = cli(*sim, "--tp-size", "--concurrency", "4")
    assert swallowed.code == 2 and swallowed.json()["field"] == "--tp-size"
    assert (
        swallowed.json()["error"]
        == "--tp-size needs a value (the next word is the flag --concurrency)"
    )
    # other usage errors keep Typer's own line
    bare = cli("simulate", "--engine")
    assert bare.code == 2 and "'--engine' requires an argument" in bare.err


def test_an_option_given_twice_is_refused_and_a_list_option_repeats(cli: Cli) -> None:
    """Click keeps the last of two values for a one-value option and drops the first without a
    word: that is an input error naming the flag (aliases count as the same option); fleet's
    --gpu takes one GPU or a list, and repeated adds to it."""
    base = ("capacity", "--preset", "llama-3.1-8b", "--gpu", "h100")
    twice = cli(*base, "--tp", "1", "--tensor-parallel-size", "2", "--json")
    assert twice.code == 2 and twice.json()["field"] == "--tensor-parallel-size"
    assert "given twice (--tp and --tensor-parallel-size)" in twice.json()["error"]
    assert cli(*base, "--context=4096", "--context", "8192").code == 2
    fleet = ("fleet", "--preset", "llama-3.1-8b", "--rate", "2", "--tpot", "100", "--ttft", "2000",
             "--json")  # fmt: skip
    both = cli(*fleet, "--gpu", "h100", "--gpu", "l40s,h100").json()
    assert {c["gpu"] for c in both["candidates"]} == {"h100-sxm5-80gb", "l40s"}


def test_every_expected_error_crosses_a_process_pool_whole() -> None:
    """fleet plans candidates in worker processes: an engine's refusal pickled there comes back
    with its type, message and attributes (InputError's two-argument __init__ once failed to
    unpickle, and the whole search died with BrokenProcessPool)."""
    import pickle

    from planner.api.bench_instance import CannotServe, WouldNotStart
    from planner.core.engines.common import NoKvCache
    from planner.errors import InputError, SourceUnavailable

    for err in (
        InputError("--gpu", "mi300x: refused"),
        NoKvCache("--mem-fraction-static", "no room"),
        WouldNotStart(["a", "b"]),
        CannotServe(["too long"]),
        SourceUnavailable("the Hub is down"),
    ):
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err)
        assert (str(back), back.__dict__, back.exit_code) == (str(err), err.__dict__, err.exit_code)
