"""The launch flags of one instance of a prefill/decode-disaggregated deployment, checked as
the engines' parsers check them (the flags change no memory term the planner models).

SGLang: `--disaggregation-mode null|prefill|decode` and `--disaggregation-transfer-backend`
(python/sglang/srt/server_args.py). vLLM: `--kv-transfer-config` with a JSON object naming the
connector and the instance's role (vllm/config/kv_transfer.py, KVTransferConfig).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from planner.core.engines.common import version_text
from planner.errors import InputError

# SGLang's --disaggregation-mode choices; "null" is the aggregated default.
SGLANG_DISAGG_MODES = ("null", "prefill", "decode")
# SGLang's --disaggregation-transfer-backend choices (mooncake the default; nixl; ascend for
# Ascend NPUs; mori for AMD Instinct; fake for tests).
SGLANG_TRANSFER_BACKENDS = ("mooncake", "nixl", "ascend", "mori", "fake")
# The SGLang release each arrived in (srt/server_args.py, read in the 0.4.3 - 0.5.13 wheels):
# --disaggregation-mode in 0.4.5, over Mooncake alone; --disaggregation-transfer-backend in 0.4.6
# with mooncake and nixl, ascend in 0.4.10, fake in 0.5.2, mori in 0.5.9.
SGLANG_DISAGG_SINCE = (0, 4, 5)
SGLANG_TRANSFER_BACKEND_FLAG_SINCE = (0, 4, 6)
SGLANG_TRANSFER_BACKEND_SINCE = {
    "mooncake": SGLANG_DISAGG_SINCE,
    "nixl": SGLANG_TRANSFER_BACKEND_FLAG_SINCE,
    "ascend": (0, 4, 10),
    "fake": (0, 5, 2),
    "mori": (0, 5, 9),
}
# vLLM KVTransferConfig.kv_role values.
VLLM_KV_ROLES = ("kv_producer", "kv_consumer", "kv_both")
# The connector fleet names for vLLM pools: NIXL, each instance both sending and receiving
# (vLLM's disaggregated-prefill examples run NixlConnector with kv_role kv_both).
VLLM_PD_CONNECTOR = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
VLLM_PD_TRANSFER_CONFIG = json.dumps(VLLM_PD_CONNECTOR, separators=(",", ":"))


class DisaggRole(BaseModel):
    """This instance's part in a disaggregated deployment, as its launch line states it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["prefill", "decode"] | None = None
    transfer_backend: str | None = None
    kv_transfer_config: str | None = None

    def line_fields(self, engine: str) -> dict[str, object]:
        """The line's settings fields for these flags."""
        if engine == "vllm":
            return {"kv_transfer_config": self.kv_transfer_config}
        return {
            "disaggregation_mode": self.mode,
            "disaggregation_transfer_backend": self.transfer_backend,
        }


def check_release(role: DisaggRole, engine: str, version: tuple[int, int, int]) -> None:
    """Refuse an SGLang PD role on a release without disaggregation or without its transfer
    backend (named by --engine-version: the newest release, the default, has them all)."""
    if engine != "sglang" or role.mode is None:
        return
    shown = version_text(version)
    if version < SGLANG_DISAGG_SINCE:
        raise InputError(
            "--engine-version",
            f"SGLang {shown} has no prefill/decode disaggregation (--disaggregation-mode, from "
            f"{version_text(SGLANG_DISAGG_SINCE)})",
        )
    backend = role.transfer_backend or "mooncake"
    since = SGLANG_TRANSFER_BACKEND_SINCE[backend]
    if version < since:
        raise InputError(
            "--engine-version",
            f"SGLang {shown} has no {backend} transfer backend (from {version_text(since)})",
        )


def kv_transfer_config(text: str) -> str:
    """vLLM's --kv-transfer-config: a JSON object with a connector and a role, compacted."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError("--kv-transfer-config", f"not JSON: {exc.msg}") from exc
    if not isinstance(value, dict) or not isinstance(value.get("kv_connector"), str):
        raise InputError(
            "--kv-transfer-config", 'a JSON object naming its "kv_connector" (e.g. NixlConnector)'
        )
    role = value.get("kv_role")
    if role is not None and role not in VLLM_KV_ROLES:
        raise InputError("--kv-transfer-config", f"kv_role {role!r}; accepted: {VLLM_KV_ROLES}")
    return json.dumps(value, separators=(",", ":"))


def role_values(
    values: dict[str, Any],
    engine: str,
    role: Literal["prefill", "decode"],
    backend: str | None = None,
) -> dict[str, Any]:
    """A deployment's serve values as its pool of `role` runs them: that role's flags
    (pool_role) and the KV offload tier only where the pool keeps it (pool_keeps_offload)."""
    out = values | {"disagg": pool_role(engine, role, backend)}
    if not pool_keeps_offload(engine, role):
        out.pop("offload", None)
    return out


def pool_keeps_offload(engine: str, role: Literal["prefill", "decode"]) -> bool:
    """Whether a pool's instance keeps the line's KV offload tier: all but an SGLang decode
    server, which turns its radix cache off and refuses HiCache beside it
    (planner.core.serve.offload_tiers)."""
    return not (engine == "sglang" and role == "decode")


def pool_role(
    engine: str, role: Literal["prefill", "decode"], backend: str | None = None
) -> DisaggRole:
    """The flags a pool's instance of a disaggregated deployment runs with: SGLang
    --disaggregation-mode with its transfer `backend` (Mooncake unless named), vLLM
    --kv-transfer-config with the NIXL connector (each instance both sending and receiving)."""
    if engine == "sglang":
        return DisaggRole(mode=role, transfer_backend=backend or "mooncake")
    return DisaggRole(kv_transfer_config=VLLM_PD_TRANSFER_CONFIG)


def disagg_role(
    engine: str,
    mode: str | None = None,
    transfer_backend: str | None = None,
    transfer_config: str | None = None,
) -> DisaggRole | None:
    """The role the flags give an instance (None: aggregated), checked for its engine."""
    if engine == "vllm":
        for flag, value in (
            ("--disaggregation-mode", mode),
            ("--disaggregation-transfer-backend", transfer_backend),
        ):
            if value is not None:
                raise InputError(flag, "an SGLang flag (vLLM uses --kv-transfer-config)")
        if transfer_config is None:
            return None
        return DisaggRole(kv_transfer_config=kv_transfer_config(transfer_config))
    if transfer_config is not None:
        raise InputError("--kv-transfer-config", "a vLLM flag (SGLang: --disaggregation-mode)")
    if mode is not None and mode not in SGLANG_DISAGG_MODES:
        raise InputError(
            "--disaggregation-mode", f"{mode!r}; accepted: {', '.join(SGLANG_DISAGG_MODES)}"
        )
    if transfer_backend is not None and transfer_backend not in SGLANG_TRANSFER_BACKENDS:
        raise InputError(
            "--disaggregation-transfer-backend",
            f"{transfer_backend!r}; accepted: {', '.join(SGLANG_TRANSFER_BACKENDS)}",
        )
    if mode in (None, "null"):
        if transfer_backend is not None:
            raise InputError("--disaggregation-transfer-backend", "needs --disaggregation-mode")
        return None
    assert mode in ("prefill", "decode")
    return DisaggRole(mode=mode, transfer_backend=transfer_backend)
