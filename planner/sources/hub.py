"""Read config.json (and the safetensors index) from the Hugging Face Hub.

huggingface_hub is imported lazily so `planner --help` never pays for it. It honours HF_TOKEN,
HF_ENDPOINT, HF_HUB_OFFLINE and the shared cache by itself; we only translate its errors.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from planner.errors import InputError, SourceUnavailable
from planner.sources.local import QUANT_CONFIG_NAME, SAFETENSORS_INDEX_NAME

# How long a Hub fetch may take in all (config.json, the safetensors index and headers), s:
# huggingface_hub's own wait for a first answer per request is 10 s (constants.py,
# DEFAULT_ETAG_TIMEOUT), after which it retries for ~25 s in silence; `--timeout` changes it.
HUB_TIMEOUT_S = 10.0
MAX_HUB_TIMEOUT_S = 600.0
_timeout_s = HUB_TIMEOUT_S
T = TypeVar("T")


def set_timeout(seconds: float) -> None:
    """The deadline of every Hub fetch in this process (`--timeout`)."""
    global _timeout_s
    if not 0 < seconds <= MAX_HUB_TIMEOUT_S:
        raise InputError("--timeout", f"must be in (0, {MAX_HUB_TIMEOUT_S:g}] s (got {seconds})")
    _timeout_s = seconds


def _within_deadline(work: Callable[[], T], what: str) -> T:
    """Run `work` (network calls) and give up after the deadline; on a terminal, say first what
    is being waited for. The worker is a daemon thread: a hung request cannot hold the exit."""
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
    show = sys.stderr.isatty() and not offline
    if show:
        sys.stderr.write(f"reading {what} from {_endpoint()} (up to {_timeout_s:g} s: --timeout)")
        sys.stderr.flush()
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(_timeout_s)
    if show:
        sys.stderr.write("\r\033[K")
        sys.stderr.flush()
    if worker.is_alive():
        raise SourceUnavailable(
            f"{_endpoint()} did not answer for {what} within {_timeout_s:g} s (--timeout); "
            "HF_HUB_OFFLINE=1 plans from the local cache"
        )
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


@dataclass(frozen=True)
class HubConfig:
    """What the Hub gave us for one repo at one revision."""

    raw: bytes
    commit: str | None
    total_size_bytes: int | None
    parameter_counts: dict[str, int] | None = None
    quant_raw: bytes | None = None  # hf_quant_config.json, where config.json has no quantization


def _endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co")


def _commit_of(path: str) -> str | None:
    # Cached files live under .../snapshots/<commit>/<filename>.
    parts = Path(path).parts
    if "snapshots" in parts:
        return parts[parts.index("snapshots") + 1]
    return None


def _translate(exc: BaseException, repo_id: str, rev: str) -> Exception:
    """Map huggingface_hub's exception (or the HTTP error behind it) to one of ours."""
    from huggingface_hub.errors import (
        GatedRepoError,
        LocalEntryNotFoundError,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    cause = exc.__cause__ if isinstance(exc, LocalEntryNotFoundError) and exc.__cause__ else exc
    if isinstance(cause, GatedRepoError):
        return SourceUnavailable(
            f"{repo_id} is gated: accept its licence on the Hub and set HF_TOKEN"
        )
    if isinstance(cause, RepositoryNotFoundError):
        hint = "" if os.environ.get("HF_TOKEN") else " (if it is private or gated, set HF_TOKEN)"
        return SourceUnavailable(f"{repo_id}: no such repo on {_endpoint()}{hint}")
    if isinstance(cause, RevisionNotFoundError):
        return InputError("--revision", f"{rev!r} not found in {repo_id}")
    if isinstance(cause, RemoteEntryNotFoundError):
        return SourceUnavailable(f"{repo_id}@{rev} has no config.json")
    if isinstance(exc, LocalEntryNotFoundError):
        return SourceUnavailable(
            f"{repo_id}@{rev} is not in the local cache and {_endpoint()} cannot be reached "
            "(or HF_HUB_OFFLINE=1); download it once online or pass a local path"
        )
    return SourceUnavailable(f"cannot read {repo_id} from {_endpoint()}: {exc}")


def fetch_config(repo_id: str, revision: str | None) -> HubConfig:
    """Download config.json at `revision` (default main) and, when present, the index total,
    within the Hub deadline (`--timeout`)."""
    return _within_deadline(lambda: _fetch_config(repo_id, revision), f"{repo_id}/config.json")


def _fetch_config(repo_id: str, revision: str | None) -> HubConfig:
    import logging

    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HFValidationError

    # Retry chatter would break the one-line error contract; failures are reported by us.
    logging.getLogger("huggingface_hub").setLevel(logging.ERROR)
    rev = revision or "main"
    try:
        path = hf_hub_download(repo_id, "config.json", revision=rev, etag_timeout=_timeout_s)
    except HFValidationError as exc:
        raise InputError(
            "--model", f"{repo_id!r} is neither a local path nor a Hub repo id"
        ) from exc
    except OSError as exc:  # every huggingface_hub download error is an OSError subclass
        raise _translate(exc, repo_id, rev) from exc
    raw = Path(path).read_bytes()
    commit = _commit_of(path)
    counts, total = _safetensors_metadata(repo_id, commit or rev)
    if counts is None:  # offline or gated shards: the cached index still gives exact bytes
        total = _index_total(repo_id, commit or rev)
    if total is None and counts:
        from planner.core.safetensors import total_bytes

        total = total_bytes(counts)
    quant = (
        None
        if b'"quantization_config"' in raw
        else _optional_file(repo_id, QUANT_CONFIG_NAME, commit or rev)
    )
    return HubConfig(
        raw=raw, commit=commit, total_size_bytes=total, parameter_counts=counts, quant_raw=quant
    )


def _optional_file(repo_id: str, name: str, revision: str) -> bytes | None:
    """A small file of the repo, or None where it has none (or it cannot be read now)."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    try:
        path = hf_hub_download(repo_id, name, revision=revision, etag_timeout=_timeout_s)
    except (HfHubHTTPError, LocalEntryNotFoundError, OSError):
        return None
    return Path(path).read_bytes()


def _safetensors_metadata(repo_id: str, revision: str) -> tuple[dict[str, int] | None, int | None]:
    """Exact elements per dtype from the safetensors headers (range requests per shard), and the
    index's metadata.total_size when the checkpoint is sharded."""
    from huggingface_hub import get_safetensors_metadata
    from huggingface_hub.errors import NotASafetensorsRepoError, SafetensorsParsingError

    try:
        meta = get_safetensors_metadata(repo_id, revision=revision)
    except (NotASafetensorsRepoError, SafetensorsParsingError, OSError, ValueError):
        return None, None  # offline, gated shards or no safetensors: the estimate stands
    counts = {str(k): int(v) for k, v in meta.parameter_count.items()}
    total = (meta.metadata or {}).get("total_size")
    return counts or None, int(total) if isinstance(total, (int, float)) and total > 0 else None


def _index_total(repo_id: str, revision: str) -> int | None:
    """metadata.total_size of the safetensors index: the exact bytes of every tensor."""
    raw = _optional_file(repo_id, SAFETENSORS_INDEX_NAME, revision)
    if raw is None:
        return None  # single-file or non-safetensors checkpoints: fall back to the estimate
    try:
        total = json.loads(raw.decode("utf-8"))["metadata"]["total_size"]
    except (ValueError, KeyError, TypeError):
        return None
    return int(total) if isinstance(total, (int, float)) and total > 0 else None
