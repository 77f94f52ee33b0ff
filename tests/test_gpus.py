"""GPU detection with NVML / AMD-SMI faked at the library boundary, and `planner gpus`."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from fake_gpu_libs import (
    A100_40,
    H100,
    H200,
    MI300X,
    Dev,
    NVMLError_LibraryNotFound,
    fake_amdsmi,
    fake_pynvml,
)
from helpers import Result

Cli = Callable[..., Result]
GIB = 2**30


@pytest.fixture
def no_amd(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "amdsmi", None)  # import amdsmi -> ImportError


def use_nvml(monkeypatch: pytest.MonkeyPatch, devices: list[Dev]) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(devices))


def test_one_h100_plans_from_the_driver_total(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, no_amd: None
) -> None:
    use_nvml(monkeypatch, [Dev(H100[0], H100[1], 80 * GIB)])
    data = cli(
        "capacity", "--preset", "gqa-8b", "--gpu", "auto", "--json", "--ledger", "textbook"
    ).json()
    assert data["gpu"]["id"] == "h100-sxm5-80gb"
    assert data["hbm_bytes"] == 85_520_809_984 and data["hbm_basis"] == "device"
    assert any("from the driver" in p for p in data["gpu"]["provenance"])
    assert any("catalog entry h100-sxm5-80gb" in p for p in data["gpu"]["provenance"])


def test_eight_cards_are_listed(cli: Cli, monkeypatch: pytest.MonkeyPatch, no_amd: None) -> None:
    use_nvml(monkeypatch, [Dev(H200[0], H200[1], H200[1] - GIB) for _ in range(8)])
    data = cli("gpus", "--detect", "--json").json()
    assert len(data["detected"]) == 8
    assert {g["catalog_id"] for g in data["detected"]} == {"h200-sxm-141gb"}
    assert data["detected"][0]["memory_total_bytes"] == 150_754_820_096
    # 6144-bit HBM3e at 2619 MHz x 2 (NOTES.md: the formula overshoots the marketed 4.8 TB/s)
    assert cli("capacity", "--preset", "gqa-70b", "--gpu", "auto", "--tp", "8").code == 0


def test_mixed_cards_refuse_tp(cli: Cli, monkeypatch: pytest.MonkeyPatch, no_amd: None) -> None:
    use_nvml(monkeypatch, [Dev(*H100, free=H100[1]), Dev(*A100_40, free=A100_40[1])])
    data = cli("gpus", "--detect", "--json").json()
    assert [g["catalog_id"] for g in data["detected"]] == ["h100-sxm5-80gb", "a100-sxm4-40gb"]
    r = cli("capacity", "--preset", "gqa-8b", "--gpu", "auto")
    assert r.code == 2 and "mixes" in r.err and "CUDA_VISIBLE_DEVICES" in r.err


def test_unknown_card_uses_driver_memory_and_derived_bandwidth(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, no_amd: None
) -> None:
    use_nvml(monkeypatch, [Dev("NVIDIA Future X1", 100 * GIB, 99 * GIB, 4096, 3000)])
    data = cli(
        "capacity", "--preset", "gqa-8b", "--gpu", "auto", "--json", "--ledger", "textbook"
    ).json()
    assert data["hbm_bytes"] == 100 * GIB and data["gpu"]["id"] == "detected"
    prov = " ".join(data["gpu"]["provenance"])
    assert "derived from bus width" in prov and "FLOPs: unknown" in prov
    detected = cli("gpus", "--detect", "--json").json()["detected"][0]
    assert detected["catalog_id"] is None
    assert detected["derived_bandwidth_bytes_per_s"] == 4096 // 8 * 3000 * 10**6 * 2


def test_mig_slice_reports_its_own_memory(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, no_amd: None
) -> None:
    slices = [
        Dev("NVIDIA H100 80GB HBM3 MIG 1g.10gb", 10_200_547_328, 10_000_000_000, None, None)
        for _ in range(2)
    ]
    use_nvml(monkeypatch, [Dev(*H100, free=H100[1], migs=slices)])
    detected = cli("gpus", "--detect", "--json").json()["detected"]
    assert [g["index"] for g in detected] == ["0:0", "0:1"]
    assert all(g["mig"] and g["memory_total_bytes"] == 10_200_547_328 for g in detected)
    assert detected[0]["catalog_id"] == "h100-sxm5-80gb"
    assert detected[0]["derived_bandwidth_bytes_per_s"] is None  # NotSupported on MIG


def test_library_missing_is_a_note_and_auto_exits_3(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, no_amd: None
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    data = cli("gpus", "--detect", "--json").json()
    assert data["detected"] == []
    assert any("nvidia-ml-py is not installed" in n for n in data["notes"])
    r = cli("capacity", "--preset", "gqa-8b", "--gpu", "auto")
    assert r.code == 3 and r.err.count("\n") == 1 and "--gpu <id>" in r.err


def test_driver_missing_with_the_real_pynvml(cli: Cli, no_amd: None) -> None:
    pytest.importorskip("pynvml")  # nvidia-ml-py is in the test extra; no driver on CI
    data = cli("gpus", "--detect", "--json").json()
    if data["detected"]:
        pytest.skip("this machine has an NVIDIA driver")
    assert any("NVML unavailable" in n for n in data["notes"])


def test_driver_missing_exception_from_fake(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, no_amd: None
) -> None:
    monkeypatch.setitem(
        sys.modules, "pynvml", fake_pynvml([], init_error=NVMLError_LibraryNotFound())
    )
    notes = cli("gpus", "--detect", "--json").json()["notes"]
    assert any("NVML Shared Library Not Found" in n for n in notes)


def test_amd_card_detected(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setitem(sys.modules, "amdsmi", fake_amdsmi([(MI300X[0], MI300X[1], MI300X[1])]))
    data = cli(
        "capacity", "--preset", "gqa-70b", "--gpu", "auto", "--json", "--ledger", "textbook"
    ).json()
    assert data["gpu"]["id"] == "mi300x" and data["hbm_bytes"] == 206_158_430_208


def test_amdsmi_without_rocm_raises_keyerror_at_import(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The real wheel without ROCm prints to stdout, then raises KeyError at import (NOTES.md).
    pkg = tmp_path / "amdsmi"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "print('/opt/rocm/lib/libamd_smi.so: cannot open shared object file')\n"
        "print('Unable to find libamd_smi.so library try installing amd-smi-lib')\n"
        "raise KeyError('libamd_smi.so')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "amdsmi", raising=False)
    monkeypatch.setitem(sys.modules, "pynvml", None)
    r = cli("gpus", "--detect", "--json")
    assert r.code == 0
    assert any("libamd_smi.so (ROCm amd-smi-lib) is not" in n for n in r.json()["notes"])


def test_amd_driver_missing(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setitem(sys.modules, "amdsmi", fake_amdsmi([], init_error=True))
    notes = cli("gpus", "--detect", "--json").json()["notes"]
    assert any("amdsmi_init failed" in n for n in notes)


def test_catalog_json_entries(cli: Cli) -> None:
    data = cli("gpus", "--json").json()
    assert data["detected"] == []
    by_id = {g["id"]: g for g in data["catalog"]}
    h100 = by_id["h100-sxm5-80gb"]
    assert h100["memory_bytes_marketed"] == 80 * 10**9
    assert h100["memory_bytes_nvml"] == 81559 * 2**20
    assert h100["bf16_dense_flops"] == 989 * 10**12  # dense: the datasheet's 1,979 is sparse
    assert by_id["a100-sxm4-80gb"]["fp8_dense_flops"] is None
    for extra in ("t4", "rtx-4080", "gb10", "v100-sxm2-32gb", "rtx-a6000"):
        assert extra in by_id
    for g in data["catalog"]:
        assert {
            "id",
            "vendor",
            "device_names",
            "memory_bytes_marketed",
            "memory_bytes_nvml",
            "memory_bytes_cuda",
            "hbm_bandwidth_bytes_per_s",
            "bf16_dense_flops",
            "fp8_dense_flops",
            "source",
        } <= g.keys()


def test_every_card_has_a_tensor_rate_and_blackwell_keeps_its_ratios(cli: Cli) -> None:
    """The step model prices a prefill at the card's tensor rate, so a card without one cannot
    be simulated: every catalog card carries one. Blackwell tensor cores double the rate at
    each halving of the width (B200: 2.25 / 4.5 / 9 PFLOPS dense BF16 / FP8 / FP4); the cards
    whose rates are read off a sparse FP4 headline keep those ratios, and the A10G its
    datasheet's 70 TFLOPS against the A10's 125."""
    from planner.sources.presets import gpu_catalog

    for card in gpu_catalog():
        assert card.bf16_dense_flops or card.fp16_dense_flops, card.id
    catalog = {g["id"]: g for g in cli("gpus", "--json").json()["catalog"]}
    for gpu_id in ("b200-sxm-180gb", "rtx-pro-6000-blackwell", "gb10"):
        g = catalog[gpu_id]
        assert g["fp8_dense_flops"] == 2 * g["bf16_dense_flops"], gpu_id
        assert g["fp4_dense_flops"] == 2 * g["fp8_dense_flops"], gpu_id
    assert catalog["rtx-pro-6000-blackwell"]["fp4_dense_flops"] == 4000 * 10**12 // 2
    assert catalog["a10g"]["bf16_dense_flops"] == 70 * 10**12
    assert catalog["a10"]["bf16_dense_flops"] == 125 * 10**12


def test_every_multi_gpu_board_names_its_scale_up_link() -> None:
    """SXM and OAM cards sit on 8-GPU boards joined by NVLink or Infinity Fabric: the
    all-reduce runs over that link, not over the PCIe fallback a card without one gets."""
    from planner.core.step.comm import DEFAULT_LINK_BYTES_PER_S, link_bytes_per_s
    from planner.sources.presets import find_gpu

    boards = ("v100-sxm2-32gb", "a100-sxm4-80gb", "h100", "h200", "b200", "b300", "gb200")
    for gpu_id in (*boards, "mi250x", "mi300x", "mi325x", "mi355x"):
        assert link_bytes_per_s(find_gpu(gpu_id)) >= 150e9, gpu_id
    assert link_bytes_per_s(find_gpu("mi355x")) == 1075e9 / 2  # 7 links x 153.6 GB/s
    assert link_bytes_per_s(find_gpu("l40s")) == DEFAULT_LINK_BYTES_PER_S  # PCIe Gen4 only


def test_engine_mode_on_a_detected_card(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, no_amd: None
) -> None:
    use_nvml(monkeypatch, [Dev(H100[0], H100[1], 80 * GIB)])
    monkeypatch.setitem(sys.modules, "torch", None)  # no CUDA runtime: the catalog's CUDA total
    data = cli(
        "capacity", "--preset", "gqa-8b", "--gpu", "auto", "--engine", "vllm", "--json"
    ).json()
    assert data["engine"]["term_sources"]["total_memory_bytes"] == "calibrated"
    assert data["hbm_basis"] == "device"
