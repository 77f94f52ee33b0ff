"""Test helpers shared by several modules (tests/ is on sys.path under pytest)."""

from __future__ import annotations

import http.server
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"
MODELS = DATA / "models"


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def model_config(name: str) -> dict[str, Any]:
    """A real config.json from tests/data/models (copied verbatim from ../shared/models)."""
    return json.loads((MODELS / name / "config.json").read_text())


def safetensors_file(tensors: dict[str, tuple[str, list[int]]]) -> bytes:
    """A minimal valid safetensors file: header plus zero-filled data."""
    import struct

    from planner.core.safetensors import DTYPE_BYTES

    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        size = DTYPE_BYTES[dtype]
        for dim in shape:
            size *= dim
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    body = json.dumps(header).encode()
    return struct.pack("<Q", len(body)) + body + bytes(offset)


class QuietServer(http.server.ThreadingHTTPServer):
    """A local test server that drops a client's early hang-up silently: a timed-out client
    (the slow-endpoint tests) makes the handler's late write fail, and the default
    handle_error would print that traceback on stderr while a later test captures it."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


def bench(**flat: Any) -> dict[str, Any]:
    """benchmark() on flat arguments: the Deployment's fields beside the load's."""
    from planner.api.bench import benchmark
    from planner.api.bench_instance import Deployment

    where, rest = Deployment.split(flat)
    return benchmark(where, **rest)
