"""Fakes of pynvml and amdsmi at the library boundary: the functions the packages export,
with the real name strings and byte totals of the GPU catalog's sources."""

from __future__ import annotations

import types
from dataclasses import dataclass, field

# Real strings and totals (the catalog's sources: nvidia-smi / amd-smi output).
H100 = ("NVIDIA H100 80GB HBM3", 85_520_809_984)  # 81559 MiB
H200 = ("NVIDIA H200", 150_754_820_096)  # 143771 MiB
A100_40 = ("NVIDIA A100-SXM4-40GB", 42_949_672_960)  # 40960 MiB
MI300X = ("AMD Instinct MI300X", 206_158_430_208)  # rocm-smi VRAM Total Memory (B)


class NVMLError(Exception):
    def __init__(self, value: int, text: str) -> None:
        self.value = value
        super().__init__(text)


class NVMLError_LibraryNotFound(NVMLError):
    def __init__(self) -> None:
        super().__init__(12, "NVML Shared Library Not Found")


class NVMLError_NotSupported(NVMLError):
    def __init__(self) -> None:
        super().__init__(3, "Not Supported")


@dataclass
class Dev:
    name: str
    total: int
    free: int
    bus_width: int | None = 5120
    mem_clock_mhz: int | None = 2619
    migs: list[Dev] = field(default_factory=list)


def fake_pynvml(devices: list[Dev], init_error: Exception | None = None) -> types.ModuleType:
    m = types.ModuleType("pynvml")
    m.NVMLError = NVMLError  # type: ignore[attr-defined]
    m.NVML_CLOCK_MEM = 2  # type: ignore[attr-defined]
    m.NVML_DEVICE_MIG_ENABLE = 1  # type: ignore[attr-defined]

    def init() -> None:
        if init_error is not None:
            raise init_error

    def mem(h: Dev) -> types.SimpleNamespace:
        return types.SimpleNamespace(total=h.total, free=h.free, used=h.total - h.free)

    def width(h: Dev) -> int:
        if h.bus_width is None:
            raise NVMLError_NotSupported()
        return h.bus_width

    def clock(h: Dev, kind: int) -> int:
        assert kind == 2
        if h.mem_clock_mhz is None:
            raise NVMLError_NotSupported()
        return h.mem_clock_mhz

    def mig_mode(h: Dev) -> tuple[int, int]:
        return (1, 1) if h.migs else (0, 0)

    def mig_handle(h: Dev, i: int) -> Dev:
        if i >= len(h.migs):
            raise NVMLError(2, "Invalid Argument")
        return h.migs[i]

    m.nvmlInit = init  # type: ignore[attr-defined]
    m.nvmlShutdown = lambda: None  # type: ignore[attr-defined]
    m.nvmlDeviceGetCount = lambda: len(devices)  # type: ignore[attr-defined]
    m.nvmlDeviceGetHandleByIndex = lambda i: devices[i]  # type: ignore[attr-defined]
    m.nvmlDeviceGetName = lambda h: h.name  # type: ignore[attr-defined]
    m.nvmlDeviceGetMemoryInfo = mem  # type: ignore[attr-defined]
    m.nvmlDeviceGetMemoryBusWidth = width  # type: ignore[attr-defined]
    m.nvmlDeviceGetMaxClockInfo = clock  # type: ignore[attr-defined]
    m.nvmlDeviceGetMigMode = mig_mode  # type: ignore[attr-defined]
    m.nvmlDeviceGetMaxMigDeviceCount = lambda h: 7  # type: ignore[attr-defined]
    m.nvmlDeviceGetMigDeviceHandleByIndex = mig_handle  # type: ignore[attr-defined]
    return m


class AmdSmiException(Exception):
    pass


class AmdSmiLibraryException(AmdSmiException):
    pass


def fake_amdsmi(devices: list[tuple[str, int, int]], init_error: bool = False) -> types.ModuleType:
    m = types.ModuleType("amdsmi")
    m.AmdSmiException = AmdSmiException  # type: ignore[attr-defined]
    m.AmdSmiLibraryException = AmdSmiLibraryException  # type: ignore[attr-defined]
    m.AmdSmiMemoryType = types.SimpleNamespace(VRAM=0, VIS_VRAM=1, GTT=2)  # type: ignore[attr-defined]

    def init() -> None:
        if init_error:
            raise AmdSmiLibraryException("AMDSMI_STATUS_INIT_ERROR")

    m.amdsmi_init = init  # type: ignore[attr-defined]
    m.amdsmi_shut_down = lambda: None  # type: ignore[attr-defined]
    m.amdsmi_get_processor_handles = lambda: list(range(len(devices)))  # type: ignore[attr-defined]
    m.amdsmi_get_gpu_asic_info = lambda h: {"market_name": devices[h][0], "vendor_id": "0x1002"}  # type: ignore[attr-defined]
    m.amdsmi_get_gpu_memory_total = lambda h, kind: devices[h][1]  # type: ignore[attr-defined]
    m.amdsmi_get_gpu_memory_usage = lambda h, kind: devices[h][1] - devices[h][2]  # type: ignore[attr-defined]
    return m
