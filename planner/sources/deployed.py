"""What actually runs: engine flags from command lines and config files, and /metrics.

Command lines (`vllm serve ...`, `python -m sglang.launch_server ...`), a vLLM `--config`
YAML, Kubernetes manifests (Deployment / StatefulSet / Pod / Job, several documents, Helm
output) and docker-compose files all reduce to {engine, flags}. Metrics are fetched from many
endpoints concurrently, each with a timeout.
"""

from __future__ import annotations

import http.client
import math
import re
import shlex
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from planner.core.flags import Deployed, engine_of, parse_argv
from planner.errors import InputError

# Images whose entrypoint starts the vLLM server (Docker Hub vllm/vllm-openai, and its ROCm build).
VLLM_IMAGES = ("vllm/vllm-openai", "rocm/vllm")
# How many /metrics fetches run at once.
MAX_CONCURRENT_FETCHES = 8
# A /metrics page larger than this is not one: a busy vLLM server's page is ~100 KiB.
MAX_METRICS_BYTES = 32 * 1024 * 1024
READ_CHUNK_BYTES = 64 * 1024
# The longest --timeout accepted: a fetch that needs more than an hour is not a health check.
MAX_TIMEOUT_S = 3600.0
# Seconds one /metrics fetch may take (headers and body) by default: the page answers in
# milliseconds; seconds mean the server is stuck.
DEFAULT_TIMEOUT_S = 5.0


def _as_argv(command: Any, where: str) -> list[str]:
    """A container `command`/`args` or compose `command` as argv: a string or a list of scalars."""
    if command is None:
        return []
    if isinstance(command, str):
        return split_command(command, where)
    if isinstance(command, list) and all(
        isinstance(c, (str, int, float)) and not isinstance(c, bool) for c in command
    ):
        return [str(c) for c in command]
    raise InputError("--against-args", f"{where}: expected a string or a list of strings")


def split_command(text: str, where: str) -> list[str]:
    """shlex.split with its errors (unclosed quote, trailing backslash) named."""
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise InputError("--against-args", f"{where}: {str(exc).lower()}") from exc


def _mapping(value: Any, where: str) -> dict[str, Any]:
    """A YAML node that must be a mapping (or absent)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError("--against-args", f"{where}: expected a mapping")
    return value


def _containers(doc: dict[str, Any], where: str) -> list[dict[str, Any]]:
    spec = _mapping(doc.get("spec"), f"{where}: spec")
    if doc.get("kind") == "LeaderWorkerSet":  # a group's leader and worker pod templates
        group = _mapping(spec.get("leaderWorkerTemplate"), f"{where}: spec.leaderWorkerTemplate")
        templates = [
            _mapping(group[role], f"{where}: {role}")
            for role in ("leaderTemplate", "workerTemplate")
            if group.get(role) is not None
        ]
        return [
            c
            for t in templates
            for c in _pod_containers(_mapping(t.get("spec"), f"{where}: template spec"), where)
        ]
    if doc.get("kind") == "CronJob":
        job = _mapping(spec.get("jobTemplate"), f"{where}: spec.jobTemplate")
        spec = _mapping(job.get("spec"), f"{where}: spec.jobTemplate.spec")
    if doc.get("kind") != "Pod":
        template = _mapping(spec.get("template"), f"{where}: spec.template")
        spec = _mapping(template.get("spec"), f"{where}: spec.template.spec")
    return _pod_containers(spec, where)


def _pod_containers(spec: dict[str, Any], where: str) -> list[dict[str, Any]]:
    """A pod spec's containers."""
    containers = spec.get("containers") or []
    if not isinstance(containers, list) or not all(isinstance(c, dict) for c in containers):
        raise InputError("--against-args", f"{where}: containers must be a list of mappings")
    return containers


def _with_image_entrypoint(container: dict[str, Any], where: str) -> list[str]:
    """A container's argv: `args:` alone run the image's entrypoint (vllm/vllm-openai's is
    `vllm serve`), which a `command:` replaces."""
    command = _as_argv(container.get("command"), f"{where} command")
    argv = command + _as_argv(container.get("args"), f"{where} args")
    image = str(container.get("image"))
    if argv and not command and engine_of(argv) is None and any(i in image for i in VLLM_IMAGES):
        return ["vllm", "serve", *argv]
    return argv


def parse_args_text(text: str, origin: str) -> list[Deployed]:
    """Every engine invocation in a command line, vLLM config YAML, k8s manifest or compose file."""
    from planner.sources.files import YamlSyntaxError, load_yaml_documents

    try:
        docs = [d for _node, d in load_yaml_documents(text, "--against-args", origin)]
    except YamlSyntaxError:
        docs = []  # not YAML: a plain command line
    docs = [d for d in docs if d is not None]
    found: list[Deployed] = []
    mappings = [d for d in docs if isinstance(d, dict)]
    if mappings and any("kind" in d or "apiVersion" in d for d in mappings):
        for d in mappings:
            meta = d.get("metadata")
            name = meta.get("name") if isinstance(meta, dict) else None
            where = f"{origin}: {d.get('kind')}/{name}"
            for c in _containers(d, where):
                argv = _with_image_entrypoint(c, where)
                got = parse_argv(argv, f"{where} container {c.get('name')}")
                if got:
                    found.append(got)
    elif mappings and "services" in mappings[0]:
        services = _mapping(mappings[0]["services"], f"{origin}: services")
        for svc, body in services.items():
            body = _mapping(body, f"{origin}: service {svc}")
            where = f"{origin}: service {svc}"
            argv = _as_argv(body.get("entrypoint"), where) + _as_argv(body.get("command"), where)
            if engine_of(argv) is None and any(i in str(body.get("image")) for i in VLLM_IMAGES):
                argv = ["vllm", *argv]  # the vllm/vllm-openai image's entrypoint is the server
            got = parse_argv(argv, where)
            if got:
                found.append(got)
    elif mappings and len(mappings) == 1 and not any(" " in str(k) for k in mappings[0]):
        flags = {}
        for key, value in mappings[0].items():
            name = "--" + str(key).replace("_", "-")
            if isinstance(value, bool):
                flags[name if value else "--no-" + name[2:]] = "true"
            elif isinstance(value, (str, int, float)) or value is None:
                flags[name] = str(value)
            else:
                raise InputError("--against-args", f"{origin}: {key} must be a scalar")
        found.append(Deployed(where=f"{origin}: vLLM --config", engine="vllm", flags=flags))
    else:
        got = parse_argv(split_command(text.replace("\\\n", " "), origin), origin)
        if got:
            found.append(got)
    if not found:
        raise InputError("--against-args", f"{origin}: no vLLM or SGLang command found")
    return found


@dataclass
class Scrape:
    """One /metrics fetch: its text, or why there is none."""

    url: str
    text: str | None
    error: str | None


def check_metrics_url(url: str, flag: str = "--against-metrics") -> None:
    """Only http(s) URLs are /metrics endpoints; anything else is a typo or a local path.
    `flag`: the option the URL came from (drift's --against-metrics, diagnose's --metrics)."""
    try:
        scheme = urllib.parse.urlsplit(url).scheme.lower()
    except ValueError as exc:  # e.g. an unclosed IPv6 bracket
        raise InputError(flag, f"{url!r}: not a URL ({exc})") from exc
    if scheme not in ("http", "https"):
        raise InputError(flag, f"{url!r}: expected an http:// or https:// URL")


def check_timeout(timeout_s: float) -> None:
    """A fetch deadline the socket layer can honour."""
    if not 0 < timeout_s <= MAX_TIMEOUT_S:
        raise InputError("--timeout", f"must be in (0, {MAX_TIMEOUT_S:g}] s (got {timeout_s})")


def _read_bounded(url: str, timeout_s: float) -> Scrape:
    """GET one URL; the whole exchange (headers and body) within `timeout_s`, the body capped."""
    deadline = time.monotonic() + timeout_s
    chunks: list[bytes] = []
    size = 0
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            while True:
                if time.monotonic() > deadline:
                    return Scrape(
                        url, None, f"unreachable: no complete body within {timeout_s:g} s"
                    )
                chunk = response.read1(READ_CHUNK_BYTES)
                if not chunk:
                    if getattr(response, "length", None):  # Content-Length not reached
                        return Scrape(url, None, "unreachable: the body ended early")
                    break
                size += len(chunk)
                if size > MAX_METRICS_BYTES:
                    return Scrape(
                        url, None, f"unreachable: body larger than {MAX_METRICS_BYTES:,} bytes"
                    )
                chunks.append(chunk)
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
        reason = getattr(exc, "reason", None) or exc.__class__.__name__
        return Scrape(url, None, f"unreachable: {reason}")
    return Scrape(url, b"".join(chunks).decode("utf-8", errors="replace"), None)


def fetch_metrics(
    urls: list[str], timeout_s: float, flag: str = "--against-metrics"
) -> list[Scrape]:
    """GET every /metrics URL concurrently (bounded in count, time and bytes); `flag` names
    the option the URLs came from in an error."""
    check_timeout(timeout_s)
    for url in urls:
        check_metrics_url(url, flag)
    with ThreadPoolExecutor(max_workers=max(1, min(MAX_CONCURRENT_FETCHES, len(urls)))) as pool:
        return list(pool.map(lambda u: _read_bounded(u, timeout_s), urls))


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_prometheus(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Samples by metric name: [(labels, value)] (exposition format, comments skipped)."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        labels = {k: v.replace('\\"', '"') for k, v in _LABEL.findall(m.group(3) or "")}
        try:
            value = float(m.group(4))
        except ValueError:
            value = math.nan  # present but unreadable: comparisons report it, never "clean"
        out.setdefault(m.group(1), []).append((labels, value))
    return out
