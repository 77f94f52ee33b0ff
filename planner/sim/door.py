"""The front door: the serial CPU work each request costs before the scheduler sees it (the
benchmark client sending it, the API server admitting it), as one first-come queue. Its service
at an idle door is part of the request path the simulator already counts; what the door adds
is the wait behind requests sent before."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field


class FrontDoor(BaseModel):
    """Per-request CPU time of the two processes every request passes through in series: the
    benchmark client (one asyncio process: a connection and the POST) and the API server's
    event loop (HTTP, validating, the engine's request; vLLM V1 tokenizes on another thread,
    SGLang's loop in line). They
    work as a pipeline, so requests leave at the pace of the slower; a request waits behind
    those sent before it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    client_ms: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    server_ms: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    server_ms_per_prompt_token: float = Field(default=0.0, ge=0, allow_inf_nan=False)

    def service_ms(self, prompt_tokens: NDArray[np.int64]) -> list[float]:
        """Each request's time at the door, ms: the slower process's work on it."""
        server = self.server_ms + self.server_ms_per_prompt_token * prompt_tokens
        return [float(x) for x in np.maximum(server, self.client_ms)]


class Door:
    """A first-come queue over the requests' service times: `wait(i, t)` is how long request
    `i`, sent at `t`, waits for the requests ahead of it."""

    def __init__(self, service_ms: list[float]) -> None:
        self.service_ms = service_ms
        self.free_ms = -math.inf

    def wait(self, i: int, t: float) -> float:
        """Request `i` sent at `t` waits for the door to free, then takes its service time."""
        start = t if t > self.free_ms else self.free_ms
        self.free_ms = start + self.service_ms[i]
        return start - t
