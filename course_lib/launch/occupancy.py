"""Host launcher of ``kernels/occupancy.cu`` (notebook 03's kernels): the one-float copies at 1, 2, 4 or 8
loads per thread with unused dynamic shared memory setting their residency, the register-pressure
accumulation under ``--maxrregcount`` caps, and the generated ``__maxnreg__`` kernels the occupancy API
is checked on; each case with its residency model; the launches that profile them; and the family's
smoke launch."""
from __future__ import annotations

from course_lib.core import cuda
from course_lib.core.hardware import KIB, detect
from course_lib.measure.experiments import check_close, launch_record
from course_lib.measure.launches import Launch, launch_profiled
from course_lib.measure.smoke import covers
from course_lib.models import occupancy as occ

BLOCK = 256
ILP_KERNELS = {1: "copy_ilp1", 2: "copy_ilp2", 4: "copy_ilp4", 8: "copy_ilp8"}
ACCUMULATORS = 64


# --------------------------------------------------------------------------- the copies

def device_budget() -> occ.SmBudget:
    """The SM budget of the GPU in use (live mode)."""

    return occ.budget_from_device(detect())


def model_extra(res: occ.Residency, bytes_per_thread: int | None = None) -> dict:
    out = {"resident_blocks": res.resident_blocks, "active_warps": res.active_warps,
           "occupancy": res.occupancy, "limiter": res.limiter, "budget": res.budget}
    if bytes_per_thread is not None:
        out["bytes_in_flight_per_sm"] = occ.bytes_in_flight_per_sm(res, bytes_per_thread)
    return out


def copy_buffers(n: int):
    import cupy

    a = cupy.random.default_rng(3).random(n, dtype=cupy.float32)
    return a, cupy.empty_like(a)


def copy_launch(a, out, n: int, ilp: int, smem: int, b: occ.SmBudget, name: str, params: dict) -> Launch:
    import cupy

    kernel = ILP_KERNELS[ilp]
    fn = cuda.kernel("occupancy", kernel)
    res = cuda.resources("occupancy", kernel)
    # Above 48 KiB of dynamic shared memory a kernel must opt in; allow it the most a block may have.
    fn.max_dynamic_shared_size_bytes = b.max_smem_per_block_bytes - res.static_smem_bytes
    grid, block = ((n + BLOCK * ilp - 1) // (BLOCK * ilp),), (BLOCK,)
    args = (out, a, cupy.int64(n))
    model = occ.residency(b, BLOCK, res.registers, res.static_smem_bytes + smem)

    def run():
        fn(grid, block, args, shared_mem=smem)

    def check():
        out.fill(-1)
        run()
        return check_close(out, a, "source array", 0.0)

    return Launch(name, params, f"occupancy.{kernel}", run, check, 8.0 * n, 0.0,
                  launch_record(grid, block, res, smem),
                  {"ilp": ilp, "dynamic_smem_bytes": smem, **model_extra(model, 4 * ilp)}, kernel)


def cupy_copy_launch(a, out, n: int) -> Launch:
    def run():
        out.data.copy_from_device_async(a.data, a.nbytes)

    def check():
        out.fill(-1)
        run()
        return check_close(out, a, "source array", 0.0)

    return Launch("CuPy device-to-device copy", {"ceiling": True}, "cudaMemcpyAsync (CuPy)", run, check, 8.0 * n,
                  0.0, library=True)


def sweep_launches(n: int, smem_kib: list[int]) -> list[Launch]:
    a, out = copy_buffers(n)
    b = device_budget()
    launches = [cupy_copy_launch(a, out, n)]
    for kib in smem_kib:
        launches.append(copy_launch(a, out, n, 1, int(kib * KIB), b, f"{kib} KiB shared memory per block",
                                     {"smem_kib": kib}))
    return launches


def ilp_launches(n: int, ilp: list[int], resident_blocks: list[int]) -> list[Launch]:
    a, out = copy_buffers(n)
    b = device_budget()
    bad = [k for k in ilp if k not in ILP_KERNELS]
    if bad:
        raise ValueError(f"ILP must be one of {sorted(ILP_KERNELS)}, got {bad}")
    launches = [cupy_copy_launch(a, out, n)]
    for k in ilp:
        for blocks in resident_blocks:
            smem = 0 if blocks >= b.max_threads_per_sm // BLOCK else occ.smem_for_resident_blocks(b, blocks)
            launches.append(copy_launch(a, out, n, k, smem, b, f"ILP {k}, {blocks} blocks/SM wanted",
                                         {"ilp": k, "resident_blocks": blocks}))
    return launches


# --------------------------------------------------------------------------- register pressure

def accumulate_reference_factor() -> float:
    """out = (sum of the thread's inputs) × this, for ``register_pressure`` (its constants, in float32)."""
    import numpy as np

    r = np.arange(ACCUMULATORS)
    c = (np.float32(1.0) + r.astype(np.float32) * np.float32(0.015625)).astype(np.float64)
    w = (np.float32(1.0) / (r + 1).astype(np.float32)).astype(np.float64)
    return float((c * w).sum())


def cap_label(cap: int) -> str:
    return "as compiled (no cap)" if cap == 0 else f"--maxrregcount={cap}"


def spill_launches(n_threads: int, k: int, caps: list[int]) -> list[Launch]:
    import cupy

    x = cupy.random.default_rng(4).random((k, n_threads), dtype=cupy.float32)
    out = cupy.empty(n_threads, dtype=cupy.float32)
    ref = x.astype(cupy.float64).sum(axis=0) * accumulate_reference_factor()
    arch = cuda.device_arch()
    b = device_budget()
    grid, block = ((n_threads + BLOCK - 1) // BLOCK,), (BLOCK,)
    args = (out, x, cupy.int32(n_threads), cupy.int32(k))
    launches = []
    for cap in caps:
        fam = cuda.compile_family("occupancy", arch, (f"--maxrregcount={cap}",) if cap else ())
        res = fam.resources["register_pressure"]
        fn = fam.function("register_pressure")
        model = occ.residency(b, BLOCK, res.registers, res.static_smem_bytes)

        def run(fn=fn):
            fn(grid, block, args)

        def check(run=run):
            out.fill(float("nan"))
            run()
            return check_close(out, ref, "float64 sum × constants (CuPy)", 1e-4)

        launches.append(Launch(
            cap_label(cap), {"caps": cap}, f"occupancy.register_pressure ({cap_label(cap)})", run, check,
            4.0 * (k + 1) * n_threads, 2.0 * ACCUMULATORS * k * n_threads, launch_record(grid, block, res),
            {"cap": cap, "registers": res.registers, "spill_store_bytes": res.spill_store_bytes,
             "spill_load_bytes": res.spill_load_bytes, "stack_frame_bytes": res.stack_frame_bytes,
             **model_extra(model)}, "register_pressure"))
    return launches


def profile_sweep(n: int, smem_kib: list[int]) -> None:
    """What runs under ncu for ``occupancy.smem_sweep``."""
    launch_profiled(sweep_launches(n, smem_kib))


def profile_ilp(n: int, ilp: list[int], resident_blocks: list[int]) -> None:
    """What runs under ncu for ``occupancy.ilp``."""
    launch_profiled(ilp_launches(n, ilp, resident_blocks))


def profile_spill(n_threads: int, k: int, caps: list[int]) -> None:
    """What runs under ncu for ``occupancy.register_spill``."""
    launch_profiled(spill_launches(n_threads, k, caps))


# --------------------------------------------------------------------------- the occupancy API's kernels

def pressure_source(caps: list[int]) -> str:
    """The occupancy family plus one generated kernel per register cap (``__maxnreg__``), each
    with more accumulators than the cap allows, so the compiler uses exactly the cap."""

    wrappers = [f'extern "C" __global__ void __maxnreg__({r}) pressure_r{r}(float* o, const float* i, int n, '
                f'int k) {{ accumulate_body<{min(r + 16, 256)}>(o, i, n, k); }}' for r in caps]
    return cuda.source("occupancy") + "\n// generated by course_lib.launch.occupancy.pressure_source\n" + "\n".join(wrappers) + "\n"

def pressure_functions(register_caps: list[int], arch: str) -> tuple[dict, dict]:
    """``pressure_source``'s kernels compiled for ``arch`` and loaded: (cap -> function, ptxas's report by name)."""
    cubin, log = cuda.compile_source(pressure_source(register_caps), arch, "occupancy_pressure.cu")
    ptxas = cuda.parse_ptxas_report(log, arch)
    module = cuda.load_cubin(cubin)
    return {cap: module.get_function(f"pressure_r{cap}") for cap in register_caps}, ptxas


def pressure_launch(fn, out, x, n: int, k: int):
    """(grid, block, run) of one generated pressure kernel over ``x``'s k rows of n."""
    import cupy

    grid, block = ((n + BLOCK - 1) // BLOCK,), (BLOCK,)
    args = (out, x, cupy.int32(n), cupy.int32(k))
    return grid, block, lambda: fn(grid, block, args)


# --------------------------------------------------------------------------- smoke launches (sanitizer)

@covers("occupancy", "copy_ilp1", "copy_ilp2", "copy_ilp4", "copy_ilp8", "register_pressure")
def occupancy_smoke() -> None:
    import cupy

    for n in (1, 300, 5000):
        a = cupy.arange(n, dtype=cupy.float32)
        for ilp_, kernel in ILP_KERNELS.items():
            out = cupy.full(n, -1, dtype=cupy.float32)
            cuda.kernel("occupancy", kernel)(((n + BLOCK * ilp_ - 1) // (BLOCK * ilp_),), (BLOCK,),
                                             (out, a, cupy.int64(n)), shared_mem=1024)
            if not bool((out == a).all()):
                raise AssertionError(f"occupancy.{kernel} wrong at n={n}")
    n_threads, k = 300, 3
    x = cupy.random.default_rng(0).random((k, n_threads), dtype=cupy.float32)
    out = cupy.full(n_threads, float("nan"), dtype=cupy.float32)
    cuda.kernel("occupancy", "register_pressure")(((n_threads + BLOCK - 1) // BLOCK,), (BLOCK,),
                                                  (out, x, cupy.int32(n_threads), cupy.int32(k)))
    ref = x.astype(cupy.float64).sum(axis=0) * accumulate_reference_factor()
    if not float(cupy.abs(out - ref).max()) <= 1e-4 * float(cupy.abs(ref).max()):
        raise AssertionError("occupancy.register_pressure wrong")
