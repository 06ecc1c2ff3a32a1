"""Dense peak FLOP/s of GPUs by name and dtype, from the vendors' datasheets.

Every number is the dense peak (datasheets print Tensor Core figures "with sparsity", twice the
dense rate; those are halved here). ``fp32`` is the non-Tensor-Core FP32 rate (on AMD CDNA, the
FP32 matrix rate), ``tf32`` the TF32 Tensor Core rate, ``bf16``/``fp16`` the 16-bit Tensor Core
rate with FP32 accumulation (what torch.autocast uses). A dtype a GPU has no peak for is absent.
AMD MI250/MI250X are two dies (GCDs) per package and torch sees each GCD as one device, so their
rows are per GCD (half the package figure).

``hbm_tb_per_s`` is the memory bandwidth of the datasheet (decimal TB/s), the roof of memory-bound
ops; where one name covers boards of different bandwidth (an A100 whose memory size the name does
not give) the highest is used, so that a share of it is never overstated. ``vector_fp32`` is the
CUDA-core (vector) FP32 rate where it differs from ``fp32`` (AMD CDNA2 lists a faster FP32 matrix
rate): the compute roof of element-wise work.

``device_peak`` matches the names torch and nsys record ("NVIDIA A100-SXM4-80GB", "Tesla
V100-SXM2-16GB", "NVIDIA H100 80GB HBM3", "AMD Instinct MI250X"), most specific pattern first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class DevicePeak:
    """One GPU's datasheet peaks: dense TFLOP/s per dtype and memory bandwidth."""

    name: str  # canonical GPU name of the row
    tflops: dict[str, float]  # dtype -> dense peak TFLOP/s
    hbm_tb_per_s: float | None  # memory bandwidth, TB/s
    source: str  # the datasheet the row comes from
    note: str = ""
    aliases: tuple[str, ...] = field(default=())
    vector_fp32: float | None = None  # CUDA-core FP32 TFLOP/s where it is not ``tflops["fp32"]``

    def peak_tflops(self, dtype: str | None) -> float | None:
        return self.tflops.get(dtype or "")

    @property
    def tensor_core_tflops(self) -> float | None:
        """The 16-bit matrix peak (bf16, else fp16): what a mixed-precision run can reach."""
        return self.tflops.get("bf16") or self.tflops.get("fp16")

    @property
    def vector_tflops(self) -> float | None:
        """The FP32 rate of non-matrix (element-wise) work."""
        return self.vector_fp32 or self.tflops.get("fp32")

    def ridge_flops_per_byte(self, dtype: str | None) -> float | None:
        """Arithmetic intensity above which a kernel at this dtype can be compute-bound."""
        peak = self.peak_tflops(dtype)
        return peak / self.hbm_tb_per_s if peak and self.hbm_tb_per_s else None


def _row(name, pattern, tflops, hbm, source, note="", vector_fp32=None):
    return re.compile(pattern, re.I), DevicePeak(name, tflops, hbm, source, note, vector_fp32=vector_fp32)


_A100 = {"fp64": 9.7, "fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312}
_A100_NOTE = "PCIe boards run at 250-300 W and sustain less than SXM4 under load"

# Ordered: the first pattern that matches wins, so variants come before the family.
_TABLE: list[tuple[re.Pattern, DevicePeak]] = [
    _row(
        "B200",
        r"\bB200\b(?!.*GB200)",
        {"fp64": 37, "fp32": 75, "tf32": 1100, "bf16": 2250, "fp16": 2250, "fp8": 4500},
        8.0,
        "NVIDIA HGX B200 datasheet (8-GPU system figures / 8, sparse halved)",
    ),
    _row(
        "GB200",
        r"\bGB200\b",
        {"fp64": 40, "fp32": 80, "tf32": 1250, "bf16": 2500, "fp16": 2500, "fp8": 5000},
        8.0,
        "NVIDIA GB200 NVL72 datasheet (72-GPU rack figures / 72, sparse halved)",
    ),
    _row(
        "H200 NVL",
        r"\bH200\b.*\bNVL\b",
        {"fp64": 30, "fp32": 60, "tf32": 417.5, "bf16": 835, "fp16": 835, "fp8": 1670},
        4.8,
        "NVIDIA H200 Tensor Core GPU datasheet (H200 NVL)",
    ),
    _row(
        "H200 SXM",
        r"\bH200\b|\bGH200\b",
        {"fp64": 34, "fp32": 67, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9},
        4.8,
        "NVIDIA H200 Tensor Core GPU datasheet (H200 SXM; GH200 has the same GPU peaks)",
    ),
    _row(
        "H100 NVL",
        r"\bH100\b.*\bNVL\b",
        {"fp64": 30, "fp32": 60, "tf32": 417.5, "bf16": 835, "fp16": 835, "fp8": 1670.5},
        3.9,
        "NVIDIA H100 Tensor Core GPU datasheet (H100 NVL)",
    ),
    _row(
        "H100 PCIe",
        r"\bH100\b.*\bPCIe\b",
        {"fp64": 26, "fp32": 51, "tf32": 378, "bf16": 756, "fp16": 756, "fp8": 1513},
        2.0,
        "NVIDIA H100 Tensor Core GPU datasheet (H100 PCIe)",
    ),
    _row(
        "H100 SXM",
        r"\bH100\b|\bH800\b",
        {"fp64": 34, "fp32": 67, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9},
        3.35,
        "NVIDIA H100 Tensor Core GPU datasheet (H100 SXM; also 'H100 80GB HBM3')",
    ),
    _row(
        "A100 PCIe 80GB",
        r"\bA100\b.*\b80\s?GB\b.*\bPCIe\b|\bA100\b.*\bPCIe\b.*\b80\s?GB\b",
        _A100,
        1.935,
        "NVIDIA A100 Tensor Core GPU datasheet (A100 80GB PCIe)",
        _A100_NOTE,
    ),
    _row(
        "A100 80GB",
        r"\bA100\b.*\b80\s?GB\b",
        _A100,
        2.039,
        "NVIDIA A100 Tensor Core GPU datasheet (A100 80GB SXM)",
        _A100_NOTE,
    ),
    _row(
        "A100 40GB",
        r"\bA100\b.*\b40\s?GB\b",
        _A100,
        1.555,
        "NVIDIA A100 Tensor Core GPU datasheet (A100 40GB, SXM and PCIe)",
        _A100_NOTE,
    ),
    _row(
        "A100",
        r"\bA100\b|\bA800\b",
        _A100,
        2.039,
        "NVIDIA A100 Tensor Core GPU datasheet (SXM4 and PCIe, 40 GB and 80 GB share these peaks)",
        _A100_NOTE + "; the memory size is not named, so the highest bandwidth (80GB SXM) is used",
    ),
    _row(
        "A10G",
        r"\bA10G\b",
        {"fp32": 31.2, "tf32": 62.5, "bf16": 125, "fp16": 125},
        0.6,
        "NVIDIA A10 Tensor Core GPU datasheet (A10G is the AWS variant with no public datasheet; A10 figures used)",
        "A10G peaks are not published; the A10 figures are an estimate",
    ),
    _row(
        "A10",
        r"\bA10\b",
        {"fp32": 31.2, "tf32": 62.5, "bf16": 125, "fp16": 125},
        0.6,
        "NVIDIA A10 Tensor Core GPU datasheet",
    ),
    _row(
        "L40S",
        r"\bL40S\b",
        {"fp32": 91.6, "tf32": 183, "bf16": 362.05, "fp16": 362.05, "fp8": 733},
        0.864,
        "NVIDIA L40S GPU datasheet",
    ),
    _row(
        "L4",
        r"\bL4\b",
        {"fp32": 30.3, "tf32": 60, "bf16": 121, "fp16": 121, "fp8": 242.5},
        0.3,
        "NVIDIA L4 Tensor Core GPU datasheet",
    ),
    _row("T4", r"\bT4\b", {"fp32": 8.1, "fp16": 65}, 0.32, "NVIDIA T4 Tensor Core GPU datasheet"),
    _row(
        "V100S PCIe",
        r"\bV100S\b",
        {"fp64": 8.2, "fp32": 16.4, "fp16": 130},
        1.134,
        "NVIDIA V100 Tensor Core GPU datasheet (V100S PCIe)",
    ),
    _row(
        "V100 PCIe",
        r"\bV100\b.*\bPCIe\b",
        {"fp64": 7, "fp32": 14, "fp16": 112},
        0.9,
        "NVIDIA V100 Tensor Core GPU datasheet (V100 PCIe)",
    ),
    _row(
        "V100 SXM2",
        r"\bV100\b",
        {"fp64": 7.8, "fp32": 15.7, "fp16": 125},
        0.9,
        "NVIDIA V100 Tensor Core GPU datasheet (V100 SXM2)",
    ),
    _row(
        "RTX 4090",
        r"\bRTX\s*4090\b(?!\s*D\b)",
        {"fp32": 82.6, "tf32": 82.6, "bf16": 165.2, "fp16": 165.2, "fp8": 330.3},
        1.008,
        "NVIDIA Ada Lovelace GPU architecture whitepaper (GeForce RTX 4090; FP32 accumulate)",
    ),
    _row(
        "RTX 3090",
        r"\bRTX\s*3090\b(?!\s*Ti\b)",
        {"fp32": 35.6, "tf32": 35.6, "bf16": 71, "fp16": 71},
        0.936,
        "NVIDIA Ampere GA102 GPU architecture whitepaper (GeForce RTX 3090; FP32 accumulate)",
    ),
    _row(
        "MI300X",
        r"\bMI300X\b|\bMI325X\b",
        {"fp64": 163.4, "fp32": 163.4, "tf32": 653.7, "bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9},
        5.3,
        "AMD Instinct MI300X accelerator datasheet (MI325X has the same compute peaks)",
    ),
    _row(
        "MI250X (per GCD)",
        r"\bMI250X\b",
        {"fp64": 47.85, "fp32": 47.85, "bf16": 191.5, "fp16": 191.5},
        1.6,
        "AMD Instinct MI250X accelerator datasheet (package figures / 2: torch sees one GCD per device)",
        vector_fp32=23.95,
    ),
    _row(
        "MI250 (per GCD)",
        r"\bMI250\b",
        {"fp64": 45.25, "fp32": 45.25, "bf16": 181.0, "fp16": 181.0},
        1.6,
        "AMD Instinct MI250 accelerator datasheet (package figures / 2: torch sees one GCD per device)",
        vector_fp32=22.63,
    ),
]


def device_peak(name: str | None) -> DevicePeak | None:
    """The peak row for a recorded GPU name, or None when the GPU is not in the table."""
    if not name:
        return None
    text = re.sub(r"[-_]", " ", str(name))
    for pattern, row in _TABLE:
        if pattern.search(text):
            return row
    return None


def known_devices() -> list[DevicePeak]:
    return [row for _, row in _TABLE]
