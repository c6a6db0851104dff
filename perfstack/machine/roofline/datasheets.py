"""Published peaks of the GPUs perfstack knows, for traces recorded on a machine it never saw.

Dense figures (no structured sparsity), at the boost clock, from each vendor's datasheet;
the sources are listed in docs/roofline.md. ``fp32`` is the plain (CUDA-core, or vector on
AMD) rate; ``tf32`` the tensor-core rate fp32 matrix products reach when TF32 is allowed;
``fp16``/``bf16``/``int8`` the tensor-core (matrix-core) rates. An AMD MI250 or MI250X shows
itself to torch as two devices, one per GCD: each gets half the card's figures.
"""

from __future__ import annotations

from typing import Any

from perfstack.machine.roofline.ceilingrecord import Ceilings
from perfstack.records import datarecord

T = 1e12


@datarecord(frozen=True)
class Datasheet:
    """One GPU model's published peaks: FLOP/s per type and memory bandwidth in bytes/s."""

    model: str
    peak_flops: dict[str, float]
    bandwidth: float
    source: str
    #: the host link, bytes/s in one direction (the datasheet's figure for both, halved),
    #: and what it is
    host_link: float | None = None
    host_link_what: str | None = None


#: The host links of the datasheets below, one direction.
PCIE3 = (16e9, "PCIe Gen3 x16, one direction (the datasheet's 32 GB/s both ways, halved)")
PCIE4 = (32e9, "PCIe Gen4 x16, one direction (the datasheet's 64 GB/s both ways, halved)")
PCIE5 = (64e9, "PCIe Gen5 x16, one direction (the datasheet's 128 GB/s both ways, halved)")


A100_SXM_40 = Datasheet("NVIDIA A100 SXM4 40GB", {
    "fp64": 9.7 * T, "fp32": 19.5 * T, "tf32": 156 * T, "fp16": 312 * T, "bf16": 312 * T,
    "int8": 624 * T}, 1555e9, "NVIDIA A100 Tensor Core GPU datasheet (2021)", *PCIE4)
A100_SXM_80 = Datasheet("NVIDIA A100 SXM4 80GB", A100_SXM_40.peak_flops, 2039e9,
                        "NVIDIA A100 Tensor Core GPU datasheet (2021)", *PCIE4)
A100_PCIE_80 = Datasheet("NVIDIA A100 PCIe 80GB", A100_SXM_40.peak_flops, 1935e9,
                         "NVIDIA A100 Tensor Core GPU datasheet (2021)", *PCIE4)
V100_SXM2 = Datasheet("NVIDIA V100 SXM2", {
    "fp64": 7.8 * T, "fp32": 15.7 * T, "fp16": 125 * T}, 900e9,
    "NVIDIA Tesla V100 GPU datasheet (2020)", *PCIE3)
V100_PCIE = Datasheet("NVIDIA V100 PCIe", {
    "fp64": 7 * T, "fp32": 14 * T, "fp16": 112 * T}, 900e9,
    "NVIDIA Tesla V100 GPU datasheet (2020)", *PCIE3)
H100_SXM = Datasheet("NVIDIA H100 SXM5", {
    "fp64": 34 * T, "fp32": 67 * T, "tf32": 494.7 * T, "fp16": 989.4 * T, "bf16": 989.4 * T,
    "int8": 1978.9 * T}, 3.35e12, "NVIDIA H100 Tensor Core GPU datasheet (2023)", *PCIE5)
H100_PCIE = Datasheet("NVIDIA H100 PCIe", {
    "fp64": 26 * T, "fp32": 51 * T, "tf32": 378 * T, "fp16": 756 * T, "bf16": 756 * T,
    "int8": 1513 * T}, 2.0e12, "NVIDIA H100 Tensor Core GPU datasheet (2023)", *PCIE5)
H200_SXM = Datasheet("NVIDIA H200 SXM", H100_SXM.peak_flops, 4.8e12,
                     "NVIDIA H200 Tensor Core GPU datasheet (2024)", *PCIE5)
#: one GCD of an MI250 (the card's 45.3 TF fp32 vector, 362.1 TF fp16/bf16 matrix, 3.2 TB/s
#: HBM2e, halved)
MI250_GCD = Datasheet("AMD Instinct MI250 (one GCD)", {
    "fp64": 45.3 / 2 * T, "fp32": 45.3 / 2 * T, "fp16": 362.1 / 2 * T,
    "bf16": 362.1 / 2 * T, "int8": 362.1 / 2 * T}, 3.2768e12 / 2,
    "AMD Instinct MI250 accelerator datasheet (2021)", *PCIE4)
MI250X_GCD = Datasheet("AMD Instinct MI250X (one GCD)", {
    "fp64": 47.9 / 2 * T, "fp32": 47.9 / 2 * T, "fp16": 383 / 2 * T, "bf16": 383 / 2 * T,
    "int8": 383 / 2 * T}, 3.2768e12 / 2, "AMD Instinct MI250X accelerator datasheet (2021)",
    *PCIE4)

GIB = 1 << 30


def identify(props: dict[str, Any]) -> Datasheet | None:
    """The datasheet of the GPU a trace's ``deviceProperties`` entry describes, or None.

    NVIDIA parts are known by name (an A100's memory tells 40 GB from 80 GB); an MI250's GCD
    calls itself "AMD Radeon Graphics" in traces, so it is known by its compute capability
    (9.0, gfx90a) and its 104 compute units (an MI250X GCD has 110).
    """
    name = str(props.get("name") or "")
    memory = props.get("totalGlobalMem")
    big = isinstance(memory, (int, float)) and memory > 48 * GIB
    if "H200" in name:
        return H200_SXM
    if "H100" in name:
        return H100_PCIE if "PCIe" in name else H100_SXM
    if "A100" in name:
        if "PCIe" in name:
            return A100_PCIE_80 if big else A100_SXM_40
        return A100_SXM_80 if big else A100_SXM_40
    if "V100" in name:
        return V100_PCIE if "PCIE" in name.upper() else V100_SXM2
    if (props.get("computeMajor"), props.get("computeMinor")) == (9, 0) \
            and props.get("warpSize") == 64:
        return {104: MI250_GCD, 110: MI250X_GCD}.get(props.get("numSms"))  # type: ignore[arg-type]
    return None


def ceilings_of(props: dict[str, Any]) -> Ceilings | None:
    """The ceilings a recorded trace's GPU is measured against, or None when unknown."""
    sheet = identify(props)
    if sheet is None:
        return None
    how: dict[str, Any] = {"source": sheet.source, "device_name": props.get("name")}
    if sheet.host_link:
        how["link"] = link_of(sheet)
    return Ceilings(device="gpu", source="datasheet", peak_flops=dict(sheet.peak_flops),
                    bandwidth=sheet.bandwidth, name=sheet.model, how=how)


def link_of(sheet: Datasheet) -> dict[str, Any]:
    """The host link as the ceilings' ``how.link`` holds a published one."""
    return {"per_direction": sheet.host_link, "what": sheet.host_link_what,
            "source": "datasheet"}
