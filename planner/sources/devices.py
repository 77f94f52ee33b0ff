"""Detect local GPUs through NVML (`pynvml`, package nvidia-ml-py) and AMD-SMI (`amdsmi`).

Both libraries are imported lazily. No library, no driver and no GPU are normal outcomes:
each leaves a one-line note saying what is missing, and detection returns what it found.
Memory comes from the driver (bytes), never from the datasheet.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass, field

from planner.core.specs import GpuSpec
from planner.sources.presets import gpu_catalog

# GDDR/HBM peak bandwidth = bus_width/8 x max memory clock x 2 for the clock NVML reports.
NVML_MEM_CLOCK_DATA_RATE = 2
MIB = 1024 * 1024


@dataclass
class DetectedGpu:
    """One device as the driver reports it, matched to the catalog where its name is known."""

    index: str
    vendor: str
    name: str
    memory_total_bytes: int
    memory_free_bytes: int | None
    catalog_id: str | None
    mig: bool = False
    derived_bandwidth_bytes_per_s: int | None = None

    def as_dict(self) -> dict[str, object]:
        """The `planner gpus --json` form."""
        return {
            "index": self.index,
            "vendor": self.vendor,
            "name": self.name,
            "memory_total_bytes": self.memory_total_bytes,
            "memory_free_bytes": self.memory_free_bytes,
            "catalog_id": self.catalog_id,
            "mig": self.mig,
            "derived_bandwidth_bytes_per_s": self.derived_bandwidth_bytes_per_s,
        }


@dataclass
class Detection:
    """What detection found, and notes on what it could not ask."""

    gpus: list[DetectedGpu] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def match_catalog(name: str) -> GpuSpec | None:
    """The catalog entry whose device-name strings contain this exact name (MIG suffix dropped)."""
    base = name.split(" MIG ")[0].strip()
    for gpu in gpu_catalog():
        if base in gpu.device_names:
            return gpu
    return None


def _nvidia(found: Detection) -> None:
    try:
        import pynvml
    except ImportError:
        found.notes.append(
            "NVIDIA: nvidia-ml-py is not installed (pip install 'serving-planner[nvidia]')"
        )
        return
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        found.notes.append(f"NVIDIA: NVML unavailable ({exc}): no NVIDIA driver or GPU here")
        return
    try:
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            migs = _mig_handles(pynvml, handle)
            if migs:
                for j, mig in enumerate(migs):
                    found.gpus.append(_nvidia_device(pynvml, mig, f"{i}:{j}", mig=True))
            else:
                found.gpus.append(_nvidia_device(pynvml, handle, str(i), mig=False))
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


def _mig_handles(pynvml: object, handle: object) -> list[object]:
    nv = pynvml
    try:
        current, _pending = nv.nvmlDeviceGetMigMode(handle)  # type: ignore[attr-defined]
    except (nv.NVMLError, AttributeError):  # type: ignore[attr-defined]
        return []
    if current != getattr(nv, "NVML_DEVICE_MIG_ENABLE", 1):
        return []
    handles = []
    for j in range(nv.nvmlDeviceGetMaxMigDeviceCount(handle)):  # type: ignore[attr-defined]
        try:
            handles.append(nv.nvmlDeviceGetMigDeviceHandleByIndex(handle, j))  # type: ignore[attr-defined]
        except nv.NVMLError:  # type: ignore[attr-defined]
            continue  # unpopulated slot
    return handles


def _nvidia_device(nv: object, handle: object, index: str, mig: bool) -> DetectedGpu:
    name = str(nv.nvmlDeviceGetName(handle))  # type: ignore[attr-defined]
    mem = nv.nvmlDeviceGetMemoryInfo(handle)  # type: ignore[attr-defined]
    bandwidth = None
    try:
        width = int(nv.nvmlDeviceGetMemoryBusWidth(handle))  # type: ignore[attr-defined]
        clock = int(nv.nvmlDeviceGetMaxClockInfo(handle, nv.NVML_CLOCK_MEM))  # type: ignore[attr-defined]
        bandwidth = width // 8 * clock * 10**6 * NVML_MEM_CLOCK_DATA_RATE
    except (nv.NVMLError, AttributeError):  # type: ignore[attr-defined]
        bandwidth = None  # MIG slices and some boards do not report these
    card = match_catalog(name)
    return DetectedGpu(
        index=index,
        vendor="nvidia",
        name=name,
        memory_total_bytes=int(mem.total),
        memory_free_bytes=int(mem.free),
        catalog_id=card.id if card else None,
        mig=mig,
        derived_bandwidth_bytes_per_s=bandwidth,
    )


def _amd(found: Detection) -> None:
    sink = io.StringIO()
    try:
        # Without ROCm, `import amdsmi` prints two lines to stdout and raises KeyError
        # ('libamd_smi.so') at import time (amdsmi 6.x): keep stdout clean, report it missing.
        with contextlib.redirect_stdout(sink):
            import amdsmi
    except ImportError:
        found.notes.append("AMD: amdsmi is not installed (pip install 'serving-planner[amd]')")
        return
    except (KeyError, OSError):
        found.notes.append("AMD: amdsmi is installed but libamd_smi.so (ROCm amd-smi-lib) is not")
        return
    try:
        amdsmi.amdsmi_init()
    except amdsmi.AmdSmiException as exc:
        found.notes.append(f"AMD: amdsmi_init failed ({exc}): no amdgpu driver or GPU here")
        return
    try:
        for i, handle in enumerate(amdsmi.amdsmi_get_processor_handles()):
            info = amdsmi.amdsmi_get_gpu_asic_info(handle)
            name = str(info.get("market_name", "N/A"))
            total = int(amdsmi.amdsmi_get_gpu_memory_total(handle, amdsmi.AmdSmiMemoryType.VRAM))
            free = None
            with contextlib.suppress(amdsmi.AmdSmiException, AttributeError):
                used = amdsmi.amdsmi_get_gpu_memory_usage(handle, amdsmi.AmdSmiMemoryType.VRAM)
                free = total - int(used)
            card = match_catalog(name)
            found.gpus.append(
                DetectedGpu(
                    index=str(i),
                    vendor="amd",
                    name=name,
                    memory_total_bytes=total,
                    memory_free_bytes=free,
                    catalog_id=card.id if card else None,
                )
            )
    finally:
        with contextlib.suppress(amdsmi.AmdSmiException):
            amdsmi.amdsmi_shut_down()


def detect() -> Detection:
    """Every GPU NVML and AMD-SMI can see, with notes on what could not be asked."""
    found = Detection()
    _nvidia(found)
    _amd(found)
    if not found.gpus:
        found.notes.append("no GPU detected: name one with --gpu <id> (see `planner gpus`)")
    return found


def planning_gpu(found: Detection) -> tuple[GpuSpec, int, list[str]]:
    """The GpuSpec and per-device bytes to plan with on this host, plus what came from where.

    Refuses a host whose visible devices are not all one model (TP across mixed cards).
    """
    from planner.errors import InputError, SourceUnavailable

    if not found.gpus:
        raise SourceUnavailable("--gpu auto: " + "; ".join(found.notes))
    names = sorted({g.name for g in found.gpus})
    if len(names) > 1:
        raise InputError(
            "--gpu auto",
            f"this host mixes {', '.join(names)}; TP needs one model: set CUDA_VISIBLE_DEVICES "
            "or name one with --gpu",
        )
    first = min(found.gpus, key=lambda g: g.memory_total_bytes)
    card = match_catalog(first.name)
    provenance = [f"memory: {first.memory_total_bytes:,} B from the driver ({first.vendor})"]
    if card is not None:
        provenance.append(f"bandwidth and FLOPs: catalog entry {card.id}")
        return card, first.memory_total_bytes, provenance
    bandwidth = first.derived_bandwidth_bytes_per_s
    provenance.append(
        "bandwidth: derived from bus width x memory clock" if bandwidth else "bandwidth: unknown"
    )
    provenance.append("FLOPs: unknown (card not in the catalog)")
    spec = GpuSpec(
        id="detected",
        vendor=first.vendor,
        name=first.name,
        device_names=(first.name,),
        memory_bytes_marketed=first.memory_total_bytes,
        memory_bytes_nvml=first.memory_total_bytes,
        hbm_bandwidth_bytes_per_s=bandwidth,
        source="detected on this host",
    )
    return spec, first.memory_total_bytes, provenance


def cuda_runtime_total_bytes() -> int | None:
    """cudaMemGetInfo's total (what engines budget from) when torch with CUDA is installed."""
    import importlib.util

    try:
        if importlib.util.find_spec("torch") is None:
            return None
    except (ImportError, ValueError):
        return None
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        return int(torch.cuda.mem_get_info()[1])
    except Exception:  # a broken CUDA runtime is "not available", like no runtime at all
        return None
