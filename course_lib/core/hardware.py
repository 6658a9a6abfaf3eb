"""The one table of spec-sheet numbers, and detection of the current GPU.

Every number in ``SPECS`` is a vendor datasheet figure, cited per GPU. Tensor
throughputs are *dense* (the datasheets' headline figures often assume 2:4
sparsity, which doubles them). Measured ceilings never live here: they come
from the ``machine.*`` experiments and say so.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from course_lib.core import runtime, stored_run

TERA = 1e12
KIB = 1024
MIB = 1024 * 1024

DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8", "fp4")
BYTES_PER_ELEMENT = {"fp32": 4.0, "tf32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "fp4": 0.5}


@dataclass(frozen=True)
class GpuSpec:
    """Spec-sheet numbers of one GPU. ``None`` means the datasheet does not say."""

    key: str
    name: str
    compute_capability: str
    sm_count: int
    boost_clock_mhz: int | None
    hbm_bandwidth_bytes_per_s: float
    l2_bytes: int | None
    smem_per_sm_bytes: int
    max_smem_per_block_bytes: int
    registers_per_sm: int
    max_threads_per_sm: int
    peak_flop_per_s: dict[str, float] = field(default_factory=dict)
    memory_bytes: float | None = None      # the datasheet's GPU memory (decimal GB, as datasheets give it)
    # Special-function (MUFU) results per clock per SM: exp2, log2, reciprocal, reciprocal square root, sine,
    # cosine. From the CUDA C++ Programming Guide, table "Throughput of Native Arithmetic Instructions"
    # (operations per clock cycle per multiprocessor), row "32-bit floating-point reciprocal, reciprocal
    # square root, base-2 logarithm, base 2 exponential, sine, cosine": 16 for cc 7.x, 8.x and 9.0. It bounds
    # the rate of a softmax's exponentials (notebook 13). None: not checked for that chip.
    sfu_results_per_clock_per_sm: int | None = None
    # NVLink between GPUs, per GPU, both directions added together as the datasheets give it ("900GB/s");
    # a collective's α–β model wants one direction: ``nvlink_per_direction_bytes_per_s``. None: no NVLink.
    nvlink_bidirectional_bytes_per_s: float | None = None
    source: str = ""
    notes: str = ""

    def peak(self, dtype: str) -> float:
        """Dense peak FLOP/s for ``dtype``; a clear error if the chip lacks it."""
        if dtype not in DTYPES:
            raise ValueError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
        if dtype not in self.peak_flop_per_s:
            have = ", ".join(self.peak_flop_per_s)
            raise ValueError(f"{self.name} has no {dtype} peak on its datasheet (it lists {have})")
        return self.peak_flop_per_s[dtype]

    @property
    def nvlink_per_direction_bytes_per_s(self) -> float | None:
        """One direction of the datasheet's NVLink figure: what a GPU can send (and, at the same time,
        receive) over all its links; None without NVLink."""
        total = self.nvlink_bidirectional_bytes_per_s
        return None if total is None else total / 2

    @property
    def dtypes(self) -> tuple[str, ...]:
        return tuple(d for d in DTYPES if d in self.peak_flop_per_s)


def _tf(**kw: float) -> dict[str, float]:
    return {k: v * TERA for k, v in kw.items()}


SPECS: dict[str, GpuSpec] = {
    s.key: s
    for s in [
        GpuSpec(
            "t4", "NVIDIA T4", "7.5", sm_count=40, boost_clock_mhz=1590,
            hbm_bandwidth_bytes_per_s=320e9, l2_bytes=4 * MIB,
            smem_per_sm_bytes=64 * KIB, max_smem_per_block_bytes=64 * KIB,
            registers_per_sm=65536, max_threads_per_sm=1024,
            peak_flop_per_s=_tf(fp32=8.1, fp16=65.0),
            memory_bytes=16e9,
            sfu_results_per_clock_per_sm=16,
            source="NVIDIA T4 Tensor Core GPU datasheet; Turing architecture whitepaper (SMs, L2)",
            notes="GDDR6, not HBM. No bf16, tf32 or fp8 tensor cores.",
        ),
        GpuSpec(
            "l4", "NVIDIA L4", "8.9", sm_count=58, boost_clock_mhz=2040,
            hbm_bandwidth_bytes_per_s=300e9, l2_bytes=48 * MIB,
            smem_per_sm_bytes=100 * KIB, max_smem_per_block_bytes=99 * KIB,
            registers_per_sm=65536, max_threads_per_sm=1536,
            peak_flop_per_s=_tf(fp32=30.3, tf32=60.0, fp16=121.0, bf16=121.0, fp8=242.5),
            memory_bytes=24e9,
            sfu_results_per_clock_per_sm=16,
            source="NVIDIA L4 Tensor Core GPU datasheet (dense = half the sparse figures); Ada Lovelace whitepaper",
            notes="GDDR6, not HBM.",
        ),
        GpuSpec(
            "a10", "NVIDIA A10", "8.6", sm_count=72, boost_clock_mhz=1695,
            hbm_bandwidth_bytes_per_s=600e9, l2_bytes=6 * MIB,
            smem_per_sm_bytes=100 * KIB, max_smem_per_block_bytes=99 * KIB,
            registers_per_sm=65536, max_threads_per_sm=1536,
            peak_flop_per_s=_tf(fp32=31.2, tf32=62.5, fp16=125.0, bf16=125.0),
            memory_bytes=24e9,
            sfu_results_per_clock_per_sm=16,
            source="NVIDIA A10 Tensor Core GPU datasheet; Ampere GA102 whitepaper",
            notes="GDDR6, not HBM.",
        ),
        GpuSpec(
            "a100-sxm", "NVIDIA A100-SXM4-80GB", "8.0", sm_count=108, boost_clock_mhz=1410,
            hbm_bandwidth_bytes_per_s=2039e9, l2_bytes=40 * MIB,
            smem_per_sm_bytes=164 * KIB, max_smem_per_block_bytes=163 * KIB,
            registers_per_sm=65536, max_threads_per_sm=2048,
            peak_flop_per_s=_tf(fp32=19.5, tf32=156.0, fp16=312.0, bf16=312.0),
            memory_bytes=80e9,
            sfu_results_per_clock_per_sm=16,
            nvlink_bidirectional_bytes_per_s=600e9,   # NVLink 3, 12 links
            source="NVIDIA A100 Tensor Core GPU datasheet (80GB SXM; NVLink 600GB/s); "
            "NVIDIA A100 architecture whitepaper",
        ),
        GpuSpec(
            "h100-sxm", "NVIDIA H100 80GB HBM3", "9.0", sm_count=132, boost_clock_mhz=1980,
            hbm_bandwidth_bytes_per_s=3.35e12, l2_bytes=50 * MIB,
            smem_per_sm_bytes=228 * KIB, max_smem_per_block_bytes=227 * KIB,
            registers_per_sm=65536, max_threads_per_sm=2048,
            peak_flop_per_s=_tf(fp32=67.0, tf32=494.7, fp16=989.4, bf16=989.4, fp8=1978.9),
            memory_bytes=80e9,
            sfu_results_per_clock_per_sm=16,
            nvlink_bidirectional_bytes_per_s=900e9,   # NVLink 4, 18 links
            source="NVIDIA H100 Tensor Core GPU datasheet (SXM; dense = half the sparse figures; NVLink 900GB/s); "
            "Hopper whitepaper",
        ),
        GpuSpec(
            "h200", "NVIDIA H200", "9.0", sm_count=132, boost_clock_mhz=1980,
            hbm_bandwidth_bytes_per_s=4.8e12, l2_bytes=50 * MIB,
            smem_per_sm_bytes=228 * KIB, max_smem_per_block_bytes=227 * KIB,
            registers_per_sm=65536, max_threads_per_sm=2048,
            peak_flop_per_s=_tf(fp32=67.0, tf32=494.7, fp16=989.4, bf16=989.4, fp8=1978.9),
            memory_bytes=141e9,
            sfu_results_per_clock_per_sm=16,
            nvlink_bidirectional_bytes_per_s=900e9,   # NVLink 4, 18 links
            source="NVIDIA H200 Tensor Core GPU datasheet (SXM; dense = half the sparse figures; NVLink 900GB/s); "
            "Hopper whitepaper",
            notes="The H200 datasheet does not list L2; 50 MB is the Hopper whitepaper's SXM5 figure. "
            "The device itself may report a different size: the machine card shows both.",
        ),
        GpuSpec(
            "b200", "NVIDIA B200", "10.0", sm_count=148, boost_clock_mhz=None,
            hbm_bandwidth_bytes_per_s=8e12, l2_bytes=None,
            smem_per_sm_bytes=228 * KIB, max_smem_per_block_bytes=227 * KIB,
            registers_per_sm=65536, max_threads_per_sm=2048,
            peak_flop_per_s=_tf(fp32=75.0, tf32=1100.0, fp16=2250.0, bf16=2250.0, fp8=4500.0, fp4=9000.0),
            memory_bytes=180e9,
            nvlink_bidirectional_bytes_per_s=1.8e12,   # NVLink 5, 18 links
            source="NVIDIA HGX B200 datasheet (per GPU; dense = half the sparse figures; NVLink 1.8TB/s); "
            "CUDA programming guide (cc 10.0 limits)",
            notes="Clock and L2 are not on the datasheet. The round numbers often quoted are 2 PFLOP/s fp16 and 8 TB/s.",
        ),
    ]
}


def spec(key_or_name: str) -> GpuSpec:
    """Look a GPU up by table key (``"h200"``) or device name (``"NVIDIA H200"``)."""
    key = key_or_name if key_or_name in SPECS else slug(key_or_name)
    if key in SPECS:
        return SPECS[key]
    for s in SPECS.values():
        if slug(s.name) == key:
            return s
    raise KeyError(f"{key_or_name!r} is not in the spec table; known: {', '.join(SPECS)}")


def gpu_spec(gpu: "GpuSpec | str") -> GpuSpec:
    """A ``GpuSpec`` as it is, or the spec-table entry of a key or device name; ValueError if unknown."""
    if isinstance(gpu, GpuSpec):
        return gpu
    try:
        return spec(gpu)
    except KeyError:
        raise ValueError(f"gpu must be a GPU of the spec table; choose one of {', '.join(SPECS)}; "
                         f"got {gpu!r}") from None


_NAME_TO_KEY = [
    (r"\bt4\b", "t4"), (r"\bl4\b", "l4"), (r"\ba10\b", "a10"), (r"\ba100\b", "a100-sxm"),
    (r"\bh100\b", "h100-sxm"), (r"\bh200\b", "h200"), (r"\bb200\b", "b200"),
]


def slug(gpu_name: str) -> str:
    """A folder-safe short name: ``"NVIDIA H200"`` → ``"h200"``."""
    s = gpu_name.lower().replace("nvidia", "").strip()
    for pattern, key in _NAME_TO_KEY:
        if re.search(pattern, s):
            return key
    return re.sub(r"[^a-z0-9]+", "-", s).strip("-") or "unknown-gpu"


@dataclass(frozen=True)
class DeviceInfo:
    """What the current GPU says about itself (live mode only)."""

    name: str
    compute_capability: str
    sm_count: int
    l2_bytes: int
    smem_per_sm_bytes: int
    max_smem_per_block_bytes: int
    registers_per_sm: int
    max_threads_per_sm: int
    total_memory_bytes: int

    @property
    def arch(self) -> str:
        return "sm_" + self.compute_capability.replace(".", "")

    @property
    def spec(self) -> GpuSpec | None:
        try:
            return spec(self.name)
        except KeyError:
            return None


def detect() -> DeviceInfo | None:
    """The current GPU's attributes, or ``None`` when no CUDA GPU is usable. Rendering a notebook from its
    stored run, the attributes of the GPU that run was made on."""

    if runtime.mode() == "render":
        return DeviceInfo(**stored_run.stored()["device"])
    if not runtime.gpu_available():
        return None
    import cupy

    dev = cupy.cuda.Device()
    attrs = dev.attributes
    props = cupy.cuda.runtime.getDeviceProperties(dev.id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    major, minor = dev.compute_capability[:-1], dev.compute_capability[-1]
    return DeviceInfo(
        name=name,
        compute_capability=f"{major}.{minor}",
        sm_count=attrs["MultiProcessorCount"],
        l2_bytes=attrs["L2CacheSize"],
        smem_per_sm_bytes=attrs["MaxSharedMemoryPerMultiprocessor"],
        max_smem_per_block_bytes=attrs["MaxSharedMemoryPerBlockOptin"],
        registers_per_sm=attrs["MaxRegistersPerMultiprocessor"],
        max_threads_per_sm=attrs["MaxThreadsPerMultiProcessor"],
        total_memory_bytes=int(props["totalGlobalMem"]),
    )


def spec_for_device(info: DeviceInfo, measured_bandwidth: float | None = None,
                    measured_peaks: dict[str, float] | None = None) -> GpuSpec:
    """A ``GpuSpec`` for a card, from the table if it is there, else from its attributes.

    For a card not in the table the peaks and bandwidth are the *measured* ones
    (pass them in), so the models still work; the ``source`` says so.
    """
    known = info.spec
    if known is not None:
        return known
    if not measured_bandwidth or not measured_peaks:
        raise ValueError(
            f"{info.name} is not in the spec table; measure its ceilings first "
            "(run the machine.* experiments) and pass them in")
    return GpuSpec(
        slug(info.name), info.name, info.compute_capability, info.sm_count, None,
        measured_bandwidth, info.l2_bytes, info.smem_per_sm_bytes, info.max_smem_per_block_bytes,
        info.registers_per_sm, info.max_threads_per_sm, dict(measured_peaks), memory_bytes=info.total_memory_bytes,
        source="measured on this card (not a datasheet)")


def with_measured_ceilings(base: GpuSpec, bandwidth: float, peaks: dict[str, float]) -> GpuSpec:
    """The same GPU with its measured copy bandwidth and library matmul peaks as the roofs."""
    return replace_peaks(base, key=base.key + "-measured", name=base.name + " (measured ceilings)",
                         bandwidth=bandwidth, peaks=peaks,
                         source="measured: device-to-device copy and library matmul")


def replace_peaks(base: GpuSpec, *, name: str, key: str, bandwidth: float, peaks: dict[str, float],
                  source: str) -> GpuSpec:
    """A variant of ``base`` with other roofs: the round numbers of the worked examples, or a typed-in GPU."""
    return replace(base, key=key, name=name, hbm_bandwidth_bytes_per_s=bandwidth,
                   peak_flop_per_s=dict(peaks), source=source)
