"""The Hub path for real: huggingface_hub downloads from a loopback server via HF_ENDPOINT.

huggingface_hub reads HF_ENDPOINT / HF_HUB_OFFLINE at import, so each case runs the CLI as a
subprocess with its own environment and cache; no test touches the internet.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import MODELS, Result, safetensors_file
from hub_server import FakeHub, Repo, serve

LLAMA = (MODELS / "meta-llama--Llama-3.1-8B-Instruct" / "config.json").read_bytes()
QWEN = (MODELS / "Qwen--Qwen2.5-7B-Instruct" / "config.json").read_bytes()
MODELOPT_FP8 = MODELS / "nvidia--Llama-3.1-70B-Instruct-FP8"  # quantization beside its config
MAIN = "a" * 40
OLD = "b" * 40
SHARD_1 = safetensors_file({"a": ("BF16", [64, 128]), "b": ("F32", [10])})
SHARD_2 = safetensors_file({"c": ("BF16", [32, 32])})
INDEX = json.dumps(
    {
        "metadata": {"total_size": 16060522496},
        "weight_map": {
            "a": "model-00001-of-00002.safetensors",
            "b": "model-00001-of-00002.safetensors",
            "c": "model-00002-of-00002.safetensors",
        },
    }
).encode()


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    fake = FakeHub(
        repos={
            "meta-llama/Llama-3.1-8B-Instruct": Repo(
                revisions={
                    MAIN: {
                        "config.json": LLAMA,
                        "model.safetensors.index.json": INDEX,
                        "model-00001-of-00002.safetensors": SHARD_1,
                        "model-00002-of-00002.safetensors": SHARD_2,
                    },
                    OLD: {"config.json": QWEN},
                },
                refs={"main": MAIN, "v0": OLD},
            ),
            "nvidia/Llama-3.1-70B-Instruct-FP8": Repo(
                revisions={
                    MAIN: {
                        name: (MODELOPT_FP8 / name).read_bytes()
                        for name in ("config.json", "hf_quant_config.json")
                    }
                },
                refs={"main": MAIN},
            ),
            "acme/Llama-Variant": Repo(
                revisions={MAIN: {"config.json": LLAMA}}, refs={"main": MAIN}
            ),
            "meta-llama/Gated-Model": Repo(
                revisions={MAIN: {"config.json": LLAMA}}, refs={"main": MAIN}, gated=True
            ),
        }
    )
    with serve(fake) as running:
        yield running


def run(hub: FakeHub, home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return python(hub, home, "-m", "planner", *args, **env)


def python(hub: FakeHub, home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The interpreter with these arguments against the fake Hub, its cache under `home`."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    environ |= {"HF_ENDPOINT": hub.url, "HF_HOME": str(home), "NO_COLOR": "1"} | env
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=60,
    )


def capacity(hub: FakeHub, home: Path, repo: str, *extra: str, **env: str):  # type: ignore[no-untyped-def]
    return run(hub, home, "capacity", "--model", repo, "--gpu", "h100", "--json", *extra, **env)


def test_download_reads_config_and_exact_weights(hub: FakeHub, tmp_path: Path) -> None:
    r = capacity(hub, tmp_path, "meta-llama/Llama-3.1-8B-Instruct")
    assert r.returncode == 0, r.stderr
    model = json.loads(r.stdout)["model"]
    assert model["source"] == "hub" and model["revision"] == MAIN
    assert model["weights_bytes"] == 16060522496 and model["weights_exact"] is True
    # exact parameter count from the shards' safetensors headers: 64 x 128 + 10 + 32 x 32
    assert model["params_total"] == 64 * 128 + 10 + 32 * 32 and model["params_exact"] is True
    assert json.loads(r.stdout)["kv_bytes_per_token"] == 2 * 32 * 8 * 128 * 2
    assert any("/resolve/main/config.json" in req for req in hub.requests)


def test_modelopt_quantization_beside_the_config_is_read(hub: FakeHub, tmp_path: Path) -> None:
    # a ModelOpt export before 0.31 keeps its quantization in hf_quant_config.json; an FP8
    # Llama 3.1 70B is one byte a linear weight, as the same config with it inline
    from planner.core.hf_config import model_spec_from_config

    r = capacity(hub, tmp_path, "nvidia/Llama-3.1-70B-Instruct-FP8")
    assert r.returncode == 0, r.stderr
    model = json.loads(r.stdout)["model"]
    cfg = json.loads((MODELOPT_FP8 / "config.json").read_text())
    cfg["quantization_config"] = json.loads((MODELOPT_FP8 / "hf_quant_config.json").read_text())
    inline = model_spec_from_config(cfg, name="inline", source="local")
    assert model["weight_dtype"] == "fp8" == inline.weight_dtype
    assert model["weights_bytes"] == inline.weights_bytes
    assert any("/hf_quant_config.json" in req for req in hub.requests)
    # a repo without the file plans as before (its 404 is not an error)
    r = capacity(hub, tmp_path, "acme/Llama-Variant")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["model"]["weight_dtype"] == "bf16"


def test_revision_pinning_reads_that_revision(hub: FakeHub, tmp_path: Path) -> None:
    r = capacity(hub, tmp_path, "meta-llama/Llama-3.1-8B-Instruct", "--revision", "v0")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["model"]["revision"] == OLD
    assert data["kv_bytes_per_token"] == 2 * 28 * 4 * 128 * 2  # the Qwen config at v0
    assert data["model"]["weights_exact"] is False  # no index at that revision
    assert data["model"]["params_exact"] is False


def test_unknown_repo_exits_3_with_one_line(hub: FakeHub, tmp_path: Path) -> None:
    r = capacity(hub, tmp_path, "nobody/nothing")
    assert r.returncode == 3
    assert r.stderr.count("\n") == 1 and "no such repo" in r.stderr
    assert "Traceback" not in r.stderr


def test_gated_repo_exits_3_naming_hf_token(hub: FakeHub, tmp_path: Path) -> None:
    r = capacity(hub, tmp_path, "meta-llama/Gated-Model")
    assert r.returncode == 3
    assert "HF_TOKEN" in r.stderr and r.stderr.count("\n") == 1


def test_gated_repo_with_token_downloads(hub: FakeHub, tmp_path: Path) -> None:
    r = capacity(hub, tmp_path, "meta-llama/Gated-Model", HF_TOKEN="hf_test")
    assert r.returncode == 0, r.stderr


def test_unknown_revision_exits_2(hub: FakeHub, tmp_path: Path) -> None:
    r = capacity(hub, tmp_path, "meta-llama/Llama-3.1-8B-Instruct", "--revision", "nope")
    assert r.returncode == 2 and "--revision" in r.stderr


# Every command that plans a --model reads it at the --revision asked for, and reads from it
# what each prints of the pool: (command and its arguments, the figure compared).
PINNED_COMMANDS = [
    (
        ("simulate", "--concurrency", "4", "--prompt-len", "100", "--output-len", "20",
         "--requests", "8"),
        lambda d: d["deployment"]["kv_cache_tokens"],
    ),
    (("slo", "--tpot", "50"), lambda d: d["memory_cap"]),
    (("spec", "--alpha", "0.7"), lambda d: d["operating_concurrency"]),
    (
        ("fleet", "--tp", "1", "--precision", "bf16", "--rate", "2", "--tpot", "50",
         "--ttft", "1000"),
        lambda d: d["winner"]["kv_cache_tokens"],
    ),
]  # fmt: skip


COMMAND_NAMES = [args[0] for args, _ in PINNED_COMMANDS]


@pytest.mark.parametrize(("args", "figure"), PINNED_COMMANDS, ids=COMMAND_NAMES)
def test_every_command_plans_the_config_at_the_revision_pinned(
    hub: FakeHub,
    tmp_path: Path,
    cli: Callable[..., Result],
    args: tuple[str, ...],
    figure: Callable[[Any], int],
) -> None:
    """At v0 the repo's config is Qwen2.5-7B's: the command plans what it plans for that config
    read from a folder, not what it plans for the repo's Llama config at main."""
    where = ("--gpu", "h100", "--json")
    repo = "meta-llama/Llama-3.1-8B-Instruct"
    pinned = run(hub, tmp_path, *args, *where, "--model", repo, "--revision", "v0")
    assert pinned.returncode == 0, pinned.stderr
    assert any("/resolve/v0/config.json" in req for req in hub.requests)
    qwen = cli(*args, *where, "--model", str(MODELS / "Qwen--Qwen2.5-7B-Instruct"))
    llama = cli(*args, *where, "--model", str(MODELS / "meta-llama--Llama-3.1-8B-Instruct"))
    assert qwen.code == 0 and llama.code == 0, qwen.err + llama.err
    assert figure(json.loads(pinned.stdout)) == figure(qwen.json()) != figure(llama.json())


def test_a_fleet_winner_saved_keeps_the_revision_it_was_planned_at(
    hub: FakeHub, tmp_path: Path
) -> None:
    lock = tmp_path / "plan.yaml"
    r = run(
        hub, tmp_path, "fleet", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--revision",
        "v0", "--gpu", "h100", "--tp", "1", "--precision", "bf16", "--rate", "2", "--tpot",
        "50", "--ttft", "1000", "--save", str(lock),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    inputs = yaml.safe_load(lock.read_text())["inputs"]
    assert inputs["requested_revision"] == "v0" and inputs["revision"] == OLD


@pytest.mark.parametrize(
    "command",
    [
        ("capacity",),
        ("simulate", "--concurrency", "4", "--prompt-len", "100", "--output-len", "20"),
        ("slo", "--tpot", "50"),
        ("spec", "--alpha", "0.7"),
        ("fleet", "--rate", "2", "--tpot", "50", "--ttft", "1000"),
    ],
    ids=lambda c: c[0],
)
def test_a_revision_without_a_hub_model_is_refused_by_name(
    cli: Callable[..., Result], command: tuple[str, ...]
) -> None:
    """--revision pins a Hub config: with a preset or a local folder it would be ignored."""
    local = str(MODELS / "Qwen--Qwen2.5-7B-Instruct")
    for model in (("--preset", "llama-3.1-8b"), ("--model", local)):
        r = cli(*command, *model, "--gpu", "h100", "--revision", "v0")
        assert r.code == 2 and "--revision: pins a Hub --model" in r.err, (command, model, r.err)
        assert r.err.count("\n") == 1
    if command[0] in ("slo", "spec"):  # these also run with no model at all
        r = cli(*command, "--revision", "v0")
        assert r.code == 2 and "--revision: pins a Hub --model" in r.err


def test_offline_uses_the_cache_and_fails_cleanly_without_it(hub: FakeHub, tmp_path: Path) -> None:
    missing = capacity(hub, tmp_path, "acme/Llama-Variant", HF_HUB_OFFLINE="1")
    assert missing.returncode == 3 and "HF_HUB_OFFLINE" in missing.stderr
    assert capacity(hub, tmp_path, "acme/Llama-Variant").returncode == 0
    before = len(hub.requests)
    cached = capacity(hub, tmp_path, "acme/Llama-Variant", HF_HUB_OFFLINE="1")
    assert cached.returncode == 0, cached.stderr
    assert json.loads(cached.stdout)["model"]["revision"] == MAIN
    assert len(hub.requests) == before  # offline: nothing was asked of the server


def test_offline_a_repo_with_a_shipped_preset_plans_from_it(hub: FakeHub, tmp_path: Path) -> None:
    """Not cached, offline: the preset whose serve_id is the repo id stands in (the cache
    still wins once the repo was downloaded: the test above)."""
    r = capacity(hub, tmp_path, "meta-llama/Llama-3.1-8B-Instruct", HF_HUB_OFFLINE="1")
    assert r.returncode == 0, r.stderr
    model = json.loads(r.stdout)["model"]
    assert model["name"] == "llama-3.1-8b" and model["source"].startswith("preset")


def test_hub_refusing_requests_exits_3(tmp_path: Path) -> None:
    # HF_ENDPOINT pointing at a server that is not a Hub: bare 404s without Hub error codes.
    # (A refused connection ends the same way, after huggingface_hub's ~23 s of retries.)
    with serve(FakeHub()) as hub:
        hub.url += "/not/a/hub"
        r = capacity(hub, tmp_path, "acme/Llama-Variant")
    assert r.returncode == 3 and r.stderr.startswith("Error:")
    assert r.stderr.count("\n") == 1


@contextmanager
def silent_server() -> Iterator[str]:
    """A loopback server that accepts connections and never answers (a hung Hub)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            with suppress(OSError):
                held.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()


def test_a_hung_hub_gives_up_at_the_timeout_and_a_preset_stands_in(tmp_path: Path) -> None:
    """--timeout bounds the whole fetch (huggingface_hub alone retries for ~25 s in silence):
    exit 3 naming the flag, or the shipped preset of the same repo id."""
    with silent_server() as url:
        hung = FakeHub()
        hung.url = url
        t0 = time.monotonic()
        r = capacity(hung, tmp_path, "acme/Llama-Variant", "--timeout", "1")
        took = time.monotonic() - t0
        assert r.returncode == 3 and "--timeout" in r.stderr and r.stderr.count("\n") == 1
        assert took < 15  # the process start and plan, plus the 1 s deadline
        shipped = capacity(hung, tmp_path, "meta-llama/Llama-3.1-8B-Instruct", "--timeout", "1")
        assert shipped.returncode == 0, shipped.stderr
        assert json.loads(shipped.stdout)["model"]["source"].startswith("preset")
    bad = capacity(hung, tmp_path, "acme/Llama-Variant", "--timeout", "0")
    assert bad.returncode == 2 and "--timeout" in bad.stderr


def test_the_benchmarks_pose_a_model_no_config_ships_for_from_the_hub(
    hub: FakeHub, tmp_path: Path
) -> None:
    """benchmarks/rows.py model_reference: a row's checkpoint with no shipped config is read
    the way `planner --model NAME` reads it; offline with nothing cached, it is not posed."""
    empty = tmp_path / "models"
    empty.mkdir()
    benchmarks = Path(__file__).resolve().parent.parent / "benchmarks"
    code = (
        f"import sys; sys.path.insert(0, {str(benchmarks)!r}); from pathlib import Path; "
        "from rows import model_reference; "
        f"print(model_reference('acme/Llama-Variant', Path({str(empty)!r})))"
    )
    offline = python(hub, tmp_path / "cold", "-c", code, HF_HUB_OFFLINE="1")
    assert offline.stdout.strip() == "(None, None)", offline.stderr
    online = python(hub, tmp_path / "warm", "-c", code)
    assert online.stdout.strip() == "('acme/Llama-Variant', None)", online.stderr
