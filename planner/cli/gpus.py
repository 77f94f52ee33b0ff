"""`planner gpus`: the GPU catalog and, with --detect, what this machine has."""

from typing import Annotated, Any

import typer

from planner.cli.numbers import JsonOut
from planner.cli.render import console, emit_json, fit_columns, print_table

CATALOG_KEYS = (
    "id",
    "vendor",
    "name",
    "device_names",
    "aliases",
    "memory_bytes_marketed",
    "memory_bytes_nvml",
    "memory_bytes_cuda",
    "hbm_bandwidth_bytes_per_s",
    "bf16_dense_flops",
    "fp8_dense_flops",
    "fp4_dense_flops",
    "int8_dense_ops",
    "interconnect",
    "source",
)


def gpus(
    detect: Annotated[
        bool, typer.Option(help="Also list the GPUs NVML / AMD-SMI see here.")
    ] = False,
    json_out: JsonOut = False,
) -> None:
    """List the GPU catalog (memory, bandwidth, dense FLOPs) and detected devices."""
    from planner.sources.presets import gpu_catalog

    catalog = [{k: getattr(g, k) for k in CATALOG_KEYS} for g in gpu_catalog()]
    for entry in catalog:
        entry["device_names"] = list(entry["device_names"])
        entry["aliases"] = list(entry["aliases"])
    detected: list[dict[str, Any]] = []
    notes: list[str] = []
    if detect:
        from planner.sources.devices import detect as run_detection

        found = run_detection()
        detected = [g.as_dict() for g in found.gpus]
        notes = found.notes
    if json_out:
        emit_json({"catalog": catalog, "detected": detected, "notes": notes})
        return
    render(catalog, detected, notes, detect)


def _num(value: object, scale: float, unit: str = "") -> str:
    text = "-" if value is None else f"{float(value) / scale:,.0f}"  # type: ignore[arg-type]
    return f"{text} {unit}" if unit and value is not None else text


def render(
    catalog: list[dict[str, Any]], detected: list[dict[str, Any]], notes: list[str], asked: bool
) -> None:
    """The catalog table and, when asked, the detected devices and notes."""
    from rich import box
    from rich.table import Table

    out = console()
    table = Table(
        title="GPU catalog (dense throughput)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    columns = ("id", "name", "GB", "NVML GiB", "GB/s", "BF16 TFLOPS", "FP8 TFLOPS")
    for col in columns:
        table.add_column(col, justify="left" if col in ("id", "name") else "right")
    for g in catalog:
        table.add_row(
            g["id"],
            g["name"],
            _num(g["memory_bytes_marketed"], 1e9),
            _num(g["memory_bytes_nvml"], 2**30),
            _num(g["hbm_bandwidth_bytes_per_s"], 1e9),
            _num(g["bf16_dense_flops"], 1e12),
            _num(g["fp8_dense_flops"], 1e12),
        )
    fit_columns(table, wrap=("name",))
    print_table(out, table)
    aliases = [f"{a} = {g['id']}" for g in catalog for a in g.get("aliases") or ()]
    if aliases:
        text = "aliases (any --gpu / --gpus / --price name): " + ", ".join(aliases)
        out.print(text, markup=False)
    if not asked:
        return
    if detected:
        found = Table(title="Detected on this machine (driver figures)", title_justify="left")
        for col in ("index", "name", "total", "free", "catalog"):
            found.add_column(col)
        for g in detected:
            found.add_row(
                g["index"],
                g["name"],
                _num(g["memory_total_bytes"], 2**30, "GiB"),
                _num(g["memory_free_bytes"], 2**30, "GiB"),
                g["catalog_id"] or "not in catalog",
            )
        print_table(out, fit_columns(found, wrap=("name",)))
    for note in notes:
        out.print(f"note: {note}", markup=False)
