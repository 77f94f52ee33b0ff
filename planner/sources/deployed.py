"""What actually runs: engine flags from command lines and config files, and /metrics.

Command lines (`vllm serve ...`, `python -m sglang.launch_server ...`), a vLLM `--config`
YAML, Kubernetes manifests (Deployment / StatefulSet / Pod / Job, several documents, Helm
output) and docker-compose files all reduce to {engine, flags}. Metrics are fetched from many
endpoints concurrently, each with a timeout.
"""

from __future__ import annotations

import re
import shlex
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import yaml

from planner.core.flags import Deployed, engine_of, parse_argv
from planner.errors import InputError

# How many /metrics fetches run at once.
MAX_CONCURRENT_FETCHES = 8


def _as_argv(command: Any) -> list[str]:
    if command is None:
        return []
    if isinstance(command, str):
        return shlex.split(command)
    return [str(c) for c in command]


def _containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    spec = doc.get("spec") or {}
    if doc.get("kind") == "Pod":
        return list(spec.get("containers") or [])
    if doc.get("kind") == "CronJob":
        spec = ((spec.get("jobTemplate") or {}).get("spec")) or {}
    template = (spec.get("template") or {}).get("spec") or {}
    return list(template.get("containers") or [])


def parse_args_text(text: str, origin: str) -> list[Deployed]:
    """Every engine invocation in a command line, vLLM config YAML, k8s manifest or compose file."""
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError:
        docs = []
    found: list[Deployed] = []
    mappings = [d for d in docs if isinstance(d, dict)]
    if mappings and any("kind" in d or "apiVersion" in d for d in mappings):
        for d in mappings:
            for c in _containers(d):
                argv = _as_argv(c.get("command")) + _as_argv(c.get("args"))
                name = f"{origin}: {d.get('kind')}/{(d.get('metadata') or {}).get('name')}"
                got = parse_argv(argv, f"{name} container {c.get('name')}")
                if got:
                    found.append(got)
    elif mappings and "services" in mappings[0]:
        for svc, body in (mappings[0]["services"] or {}).items():
            argv = _as_argv(body.get("entrypoint")) + _as_argv(body.get("command"))
            if engine_of(argv) is None and "vllm" in str(body.get("image", "")):
                argv = ["vllm", *argv]  # the vllm/vllm-openai image's entrypoint is the server
            got = parse_argv(argv, f"{origin}: service {svc}")
            if got:
                found.append(got)
    elif mappings and len(mappings) == 1 and not any(" " in str(k) for k in mappings[0]):
        flags = {}
        for key, value in mappings[0].items():
            name = "--" + str(key).replace("_", "-")
            if isinstance(value, bool):
                flags[name if value else "--no-" + name[2:]] = "true"
            else:
                flags[name] = str(value)
        found.append(Deployed(where=f"{origin}: vLLM --config", engine="vllm", flags=flags))
    else:
        got = parse_argv(shlex.split(text.replace("\\\n", " ")), origin)
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


def fetch_metrics(urls: list[str], timeout_s: float) -> list[Scrape]:
    """GET every /metrics URL concurrently (bounded), each with a timeout."""

    def one(url: str) -> Scrape:
        """Fetch one URL; errors become an unreachable Scrape."""
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as response:
                return Scrape(url, response.read().decode("utf-8", errors="replace"), None)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            return Scrape(url, None, f"unreachable: {reason}")

    with ThreadPoolExecutor(max_workers=max(1, min(MAX_CONCURRENT_FETCHES, len(urls)))) as pool:
        return list(pool.map(one, urls))


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
            continue
        out.setdefault(m.group(1), []).append((labels, value))
    return out
