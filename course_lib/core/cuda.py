"""Compile the course's CUDA C with NVRTC, report each kernel's resources, launch on CuPy arrays.

Compiling needs no GPU: NVRTC turns source into a cubin for any architecture
(``sm_75`` … ``sm_100``, ``sm_90a``), and ptxas's verbose report gives each
kernel's registers, shared memory and local memory (spills). Launching needs a
GPU (live mode) and goes through CuPy.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from course_lib.core import runtime
from course_lib.core.hardware import detect, spec
from course_lib.core.runtime import PACKAGE_DIR, REPO_ROOT

# NVRTC 12.9+ caches compiled programs, and a program served from that cache comes back without
# ptxas's -v report, which is where the course reads registers and spills from. Set before NVRTC
# loads; compile_family also retries a compile whose report came back empty (see there).
os.environ.setdefault("CUDA_CACHE_DISABLE", "1")

KERNEL_DIR = PACKAGE_DIR / "kernels"
# ptxas's reports for the compiles the notebooks ask for, made where NVRTC runs (scripts/
# record_compile_reports.py): on a machine without NVRTC (macOS, Windows) they stand in, labelled.
RECORDED_REPORTS = REPO_ROOT / "data" / "compile_reports.json"
COMPILE_TEST_ARCHS = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100")
_ENTRY = re.compile(r'extern\s+"C"\s+__global__\s+(?:__launch_bounds__\([^)]*\)\s+)?void\s+'
                    r'(?:(?:__cluster_dims__\([^)]*\)|[A-Z][A-Z_]+)\s+)?(\w+)\s*\(')


class CompileError(RuntimeError):
    """NVRTC rejected the source; the message carries its log."""


class NvrtcUnavailable(CompileError):
    """NVRTC is not installed here, and no recorded report covers the compile asked for."""


@dataclass(frozen=True)
class KernelResources:
    """What ptxas allocated for one kernel on one architecture."""

    kernel: str
    arch: str
    registers: int
    static_smem_bytes: int
    stack_frame_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int

    @property
    def spills(self) -> bool:
        return self.spill_store_bytes > 0 or self.spill_load_bytes > 0


@dataclass(frozen=True)
class CompiledFamily:
    family: str
    arch: str
    cubin: bytes
    log: str
    resources: dict[str, KernelResources]
    recorded_nvrtc: str | None = None   # set when the report was recorded elsewhere (no NVRTC here)

    @property
    def compiler(self) -> str:
        """Which NVRTC produced the report, and whether it ran here."""
        if self.recorded_nvrtc:
            return f"NVRTC {self.recorded_nvrtc} (a recorded report: NVRTC is not installed here)"
        return f"NVRTC {installed_nvrtc_version()}"

    def function(self, name: str):
        """A launchable CuPy function (live mode only)."""
        if name not in self.resources:
            raise KeyError(f"{self.family}.cu has no kernel {name!r}; it has {', '.join(self.resources)}")
        if not self.cubin:
            raise NvrtcUnavailable(f"{self.family}.cu was not compiled here (NVRTC is missing), so it cannot run")
        return load_cubin(self.cubin).get_function(name)


def families() -> list[str]:
    """Every kernel family: one ``.cu`` file each under ``course_lib/kernels/``."""
    return sorted(p.stem for p in KERNEL_DIR.glob("*.cu"))


_INCLUDE = re.compile(r'^#include "(\w+\.cuh)"[ \t]*(?://[^\n]*)?$', re.M)
_ARCHS = re.compile(r"^// archs: ([\w ]+)$", re.M)


def paste_headers(text: str, name: str, _pasted: set[str] | None = None) -> str:
    """The family's ``#include "x.cuh"`` lines replaced by the headers themselves (from kernels/),
    with ``#line`` marks so that NVRTC's messages still name the right file and line. A header's own
    includes are pasted the same way, each header once (a second include of it pastes nothing)."""
    pasted = set() if _pasted is None else _pasted

    def paste(m: re.Match) -> str:
        header = KERNEL_DIR / m.group(1)
        if not header.exists():
            raise FileNotFoundError(f"{name} includes {m.group(1)}, which is not in {KERNEL_DIR}")
        after = text.count("\n", 0, m.start()) + 2
        if header.name in pasted:
            return f'// {header.name}: pasted above\n#line {after} "{name}"'
        pasted.add(header.name)
        body = paste_headers(header.read_text(), header.name, pasted)
        return f'#line 1 "{header.name}"\n{body}\n#line {after} "{name}"'
    return _INCLUDE.sub(paste, text)


def source(family: str) -> str:
    """A family's CUDA C as NVRTC compiles it: the ``.cu`` file with its course headers pasted in."""
    path = KERNEL_DIR / f"{family}.cu"
    if not path.exists():
        raise FileNotFoundError(f"no kernel family {family!r}; known: {', '.join(families())}")
    return paste_headers(path.read_text(), path.name)


def family_archs(family: str) -> tuple[str, ...]:
    """The architectures a family compiles for: those its first lines name (``// archs: sm_90a``,
    for instructions only one architecture has), else every one the course tests."""
    m = _ARCHS.search((KERNEL_DIR / f"{family}.cu").read_text()[:200])
    return tuple(m.group(1).split()) if m else (*COMPILE_TEST_ARCHS, "sm_90a")


def kernel_names(family: str) -> list[str]:
    """The ``extern "C" __global__`` entry points of a family, in source order."""
    return _ENTRY.findall(source(family))


def kernel_source(family: str, name: str) -> str:
    """The source of one kernel, with its header comment: for showing in a notebook."""
    text = source(family)
    m = re.search(r'extern\s+"C"\s+__global__[^{]*\b' + re.escape(name) + r'\s*\(', text)
    if not m:
        raise KeyError(f"{family}.cu has no kernel {name!r}")
    start = m.start()
    lines = text[:start].split("\n")
    while len(lines) > 1 and lines[-2].lstrip().startswith("//"):
        lines.pop(-2)
    start = len("\n".join(lines[:-1])) + (1 if len(lines) > 1 else 0)
    depth, i = 0, text.index("{", m.end())
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[start:j + 1]
    raise CompileError(f"unbalanced braces in {family}.cu after {name}")


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as exc:
        raise NvrtcUnavailable(
            "NVRTC's Python bindings are missing: install the pinned cuda-bindings and "
            "nvidia-cuda-nvrtc-cu12 (make setup does; there are no such wheels for macOS)") from exc
    return nvrtc


def _check(result, what: str):
    err, *rest = result
    nvrtc = _nvrtc()
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, msg = nvrtc.nvrtcGetErrorString(err)
        raise CompileError(f"{what} failed: {msg.decode() if isinstance(msg, bytes) else msg}")
    return rest[0] if len(rest) == 1 else rest


@functools.lru_cache(maxsize=1)
def installed_nvrtc_version() -> str:
    """The NVRTC that compiles here; NvrtcUnavailable where there is none."""
    major, minor = _check(_nvrtc().nvrtcVersion(), "nvrtcVersion")
    return f"{major}.{minor}"


def nvrtc_version() -> str:
    """The NVRTC behind the compile reports a notebook shows: the one installed here, or, where
    none is, the one that made the recorded reports, marked so."""
    try:
        return installed_nvrtc_version()
    except NvrtcUnavailable:
        made_by = sorted({r["nvrtc"] for r in recorded_reports().values()})
        if not made_by:
            raise
        return f"{', '.join(made_by)} (recorded reports; NVRTC is not installed here)"


def supported_archs() -> list[str]:
    nvrtc = _nvrtc()
    n = _check(nvrtc.nvrtcGetNumSupportedArchs(), "nvrtcGetNumSupportedArchs")
    archs = _check(nvrtc.nvrtcGetSupportedArchs(), "nvrtcGetSupportedArchs")
    return [f"sm_{a}" for a in archs[:n]]


def _cache_dir() -> Path:
    root = os.environ.get("COURSE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "course_lib")
    return Path(root) / "cubin"


_RES_HEADER = re.compile(r"Compiling entry function '(\w+)' for '(\w+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")


def parse_ptxas_report(log: str, arch: str) -> dict[str, KernelResources]:
    """Each kernel's resources from ``ptxas -v`` output (as NVRTC returns it in its log)."""
    out: dict[str, KernelResources] = {}
    current, frame = None, (0, 0, 0)
    for line in log.splitlines():
        if m := _RES_HEADER.search(line):
            current, frame = m.group(1), (0, 0, 0)
        elif current and (m := _FRAME.search(line)):
            frame = tuple(int(x) for x in m.groups())
        elif current and (m := _USED.search(line)):
            smem = _SMEM.search(line)
            out[current] = KernelResources(current, arch, int(m.group(1)), int(smem.group(1)) if smem else 0, *frame)
            current = None
    return out


def compile_source(code: str, arch: str, name: str = "kernel.cu", options: tuple[str, ...] = (),
                   use_cache: bool = True) -> tuple[bytes, str]:
    """NVRTC: CUDA C → cubin for ``arch``, and the compile log (with ptxas's resource report)."""
    opts = (f"--gpu-architecture={arch}", "-std=c++17", "--ptxas-options=-v", "-lineinfo", *options)
    key = hashlib.sha256("\0".join((code, installed_nvrtc_version(), *opts)).encode()).hexdigest()[:24]
    cache = _cache_dir() / f"{key}.cubin"
    if use_cache and cache.exists() and cache.with_suffix(".log").exists():
        return cache.read_bytes(), cache.with_suffix(".log").read_text()
    nvrtc = _nvrtc()
    prog = _check(nvrtc.nvrtcCreateProgram(code.encode(), name.encode(), 0, [], []), "nvrtcCreateProgram")
    try:
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
        size = _check(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
        buf = b" " * size
        _check(nvrtc.nvrtcGetProgramLog(prog, buf), "nvrtcGetProgramLog")
        log = buf.decode(errors="replace").rstrip("\x00 \n")
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            if "invalid value for --gpu-architecture" in log:
                hint = f" (NVRTC {installed_nvrtc_version()} supports: {', '.join(supported_archs())})"
            else:
                hint = ""
            raise CompileError(f"{name} did not compile for {arch}{hint}:\n{log}")
        size = _check(nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
        cubin = b" " * size
        _check(nvrtc.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    if use_cache:
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_bytes(cubin)
            cache.with_suffix(".log").write_text(log)
        except OSError:
            pass  # a read-only home only costs recompiles
    return cubin, log


def arch_for(family: str, arch: str) -> str:
    """The architecture to build a family for on a GPU of ``arch``: ``arch`` itself, or its
    architecture-specific variant (sm_90 -> sm_90a) where the family compiles for that alone."""
    archs = family_archs(family)
    return f"{arch}a" if arch not in archs and f"{arch}a" in archs else arch


def device_arch() -> str:
    info = detect()
    if info is None:
        raise RuntimeError("no GPU in use: name an architecture, e.g. arch='sm_90'")
    return info.arch


def report_key(family: str, arch: str, options: tuple[str, ...] = ()) -> str:
    return " ".join((family, arch, *options))


def source_sha256(family: str) -> str:
    return hashlib.sha256(source(family).encode()).hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def recorded_reports() -> dict[str, dict]:
    return json.loads(RECORDED_REPORTS.read_text()) if RECORDED_REPORTS.exists() else {}


def _recorded(family: str, arch: str, options: tuple[str, ...], why: NvrtcUnavailable) -> tuple[str, str]:
    """(log, NVRTC version) of a recorded report for this exact source, or NvrtcUnavailable saying so."""
    rec = recorded_reports().get(report_key(family, arch, options))
    if rec is None or rec["source_sha256"] != source_sha256(family):
        state = "no report of it was recorded" if rec is None else "its recorded report is of an older source"
        raise NvrtcUnavailable(f"{why} To compile {family}.cu for {arch} {' '.join(options)} this machine needs "
                               f"NVRTC, and {state}. The calculators and tables that need it say so; "
                               "everything else replays.") from None
    return rec["log"], rec["nvrtc"]


_REPORT_RETRIES: list[str] = []


@functools.lru_cache(maxsize=None)
def compile_family(family: str, arch: str | None = None, options: tuple[str, ...] = ()) -> CompiledFamily:
    """Compile ``kernels/<family>.cu`` for ``arch`` (default: the current GPU's). Without NVRTC, the
    report recorded for exactly this source, arch and options stands in (no cubin: nothing runs)."""
    arch = arch or arch_for(family, device_arch())
    if os.environ.get("COURSE_LOG_COMPILES"):
        with open(os.environ["COURSE_LOG_COMPILES"], "a") as f:
            f.write(json.dumps([family, arch, list(options)]) + "\n")
    recorded_with = None
    try:
        cubin, log = compile_source(source(family), arch, f"{family}.cu", options)
    except NvrtcUnavailable as why:
        (log, recorded_with), cubin = _recorded(family, arch, options, why), b""
    resources = parse_ptxas_report(log, arch)
    missing = set(kernel_names(family)) - set(resources)
    if missing and recorded_with is None and not log.strip():
        # Served from NVRTC's own cache without a report: compile again with a define nothing reads
        # (the same code, but a key that cache has never seen), so that ptxas runs and reports.
        nonce = f"-DCOURSE_PTXAS_REPORT_{os.getpid()}_{len(_REPORT_RETRIES)}"
        _REPORT_RETRIES.append(nonce)
        cubin, log = compile_source(source(family), arch, f"{family}.cu", options + (nonce,), use_cache=False)
        resources = parse_ptxas_report(log, arch)
        missing = set(kernel_names(family)) - set(resources)
    if missing:
        raise CompileError(f"ptxas reported no resources for {sorted(missing)} in {family}.cu:\n{log}")
    return CompiledFamily(family, arch, cubin, log, resources, recorded_with)


@functools.lru_cache(maxsize=64)
def compile_generated(code: str, name: str, arch: str | None = None) -> CompiledFamily:
    """Compile CUDA C that Python generated (``lab_fusion``'s chains): like ``compile_family``, but
    with no recorded report to fall back on, so it needs NVRTC (the experiment's record keeps the
    resources ptxas reported)."""
    arch = arch or device_arch()
    cubin, log = compile_source(code, arch, f"{name}.cu")
    return CompiledFamily(name, arch, cubin, log, parse_ptxas_report(log, arch))


def resources(family: str, kernel: str, arch: str | None = None) -> KernelResources:
    return compile_family(family, arch).resources[kernel]


def resources_table(arch: str) -> list[dict]:
    """Every kernel of every family on ``arch``: for notebooks and the compile test."""
    return [asdict(r) | {"family": f} for f in families() for r in compile_family(f, arch).resources.values()]


@functools.lru_cache(maxsize=None)
def load_cubin(cubin: bytes):
    """A CuPy module of a cubin (one per distinct cubin): where a function compiled outside a family is launched from."""
    import cupy

    # CuPy loads a module lazily, from its path, at the first get_function: the file must stay.
    path = _cache_dir() / f"module-{hashlib.sha256(cubin).hexdigest()[:24]}.cubin"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(cubin)
    return cupy.RawModule(path=str(path))


def kernel(family: str, name: str):
    """The launchable kernel ``name`` of ``family``, compiled for the current GPU."""
    return compile_family(family).function(name)


def launch(family: str, name: str, grid, block, args, shared_mem: int = 0) -> None:
    """Launch a course kernel on the current stream (asynchronous, like any CUDA launch)."""
    kernel(family, name)(tuple(grid), tuple(block), tuple(args), shared_mem=shared_mem)


def to_json(r: KernelResources) -> str:
    return json.dumps(asdict(r))


def target_arch() -> str:
    """The architecture the notebooks compile for: this GPU's live, the recorded GPU's in replay."""

    if runtime.shows_gpu_run():
        return device_arch()

    return "sm_" + spec(runtime.replay_gpu()).compute_capability.replace(".", "")


def describe(family: str, name: str, arch: str | None = None) -> str:
    """A kernel's source and what the compiler gave it: the text a notebook shows."""
    arch = arch or arch_for(family, target_arch())
    fam = compile_family(family, arch)
    r = fam.resources[name]
    spill = (f"spills {r.spill_store_bytes} B stored / {r.spill_load_bytes} B loaded" if r.spills
             else "no spills")
    return (f"{kernel_source(family, name)}\n\n"
            f"// {fam.compiler} for {arch}: {r.registers} registers/thread, "
            f"{r.static_smem_bytes} B static shared memory, {r.stack_frame_bytes} B stack, {spill}")


# --------------------------------------------------------------------------- tile macros

@functools.lru_cache(maxsize=None)
def macro_defaults(family: str) -> dict[str, int]:
    """The numeric ``#define`` defaults of a family's tile macros (WT_*, WB_* and TC_*)."""
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"#define\s+((?:WT|WB|TC|HG)_\w+)\s+(\d+)\b", source(family))}


def macros(family: str, defines: dict[str, int] | None = None) -> dict[str, int]:
    """A family's tile macros as a compile with ``defines`` sees them: the defaults, overridden."""
    return {**macro_defaults(family), **(defines or {})}


def defines_to_options(defines: dict[str, int] | None) -> tuple[str, ...]:
    return tuple(f"-D{k}={v}" for k, v in sorted((defines or {}).items()))
