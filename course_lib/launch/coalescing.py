"""Host launcher of ``kernels/coalescing.cu`` (notebook 04's copies): the strided, offset, array-of-structures
and structure-of-arrays copies and the 8-byte copy, each case with its sector model; the launches that
profile them; and the family's smoke launch."""
from __future__ import annotations

from course_lib.core import cuda
from course_lib.launch.elementwise import geometry as elementwise_launch
from course_lib.measure.experiments import check_close, kernel_launch_record
from course_lib.measure.launches import Launch, launch_profiled
from course_lib.measure.smoke import covers
from course_lib.models import memory

BLOCK = 256
ELEMS = 4            # elements per thread of the coalescing family's copy-like kernels (its ELEMS)

GLOBAL_METRICS = [   # ncu's counters of global-memory traffic: requests, sectors, L2 and DRAM bytes
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "lts__t_sectors_srcunit_tex_op_read.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
]


def grid_1d(n: int, per_thread: int = ELEMS) -> tuple[tuple[int], tuple[int]]:
    return ((n + BLOCK * per_thread - 1) // (BLOCK * per_thread),), (BLOCK,)


def global_model(read_addrs, read_bytes: int, write_addrs, write_bytes: int) -> dict:
    """The sector model for one warp's read and write instruction."""
    r = memory.sector_count(read_addrs, read_bytes)
    w = memory.sector_count(write_addrs, write_bytes)
    return {"read_sectors_per_request": r.n_sectors, "read_efficiency": r.efficiency,
            "write_sectors_per_request": w.n_sectors, "write_efficiency": w.efficiency}


def read_addresses(params: dict):
    """(warp 0's read addresses, bytes per access) of one of these copies, from its parameters."""
    if "strides" in params:
        return memory.warp_addresses("strided", 4, stride=params["strides"]), 4
    if "offsets" in params:
        return memory.warp_addresses("unit", 4, offset_bytes=4 * params["offsets"]), 4
    if params.get("layout") == "aos":
        return memory.warp_addresses("strided", 4, stride=4), 4    # x of 16-byte particles
    width = params.get("access_bytes", 4)
    return memory.warp_addresses("unit", width), width


def params_model(params: dict) -> dict:
    """The sector model of one of these copies (each writes consecutive words of its access width)."""
    read, width = read_addresses(params)
    return global_model(read, width, memory.warp_addresses("unit", width), width)


def case_model(case) -> dict:
    """``params_model`` of a measured case, computed now: a table drawn from a stored run shows today's model,
    not the one the run was measured beside (its ``extra["model"]``)."""
    return params_model(case.params)


def strided_launches(n: int, strides: list[int]) -> list[Launch]:
    """out[i] = in[(i * stride) mod n] for each stride."""
    import cupy

    if n < 1 or n & (n - 1):
        raise ValueError(f"n must be a power of two (mod n is a mask in the kernel), got {n}")
    a = cupy.random.random(n, dtype=cupy.float32)
    out = cupy.empty_like(a)
    fn = cuda.kernel("coalescing", "strided_copy")
    grid, block = grid_1d(n)
    launches = []
    for s in strides:
        memory._check_stride(s)
        args = (out, a, cupy.int64(n), cupy.int64(n - 1), cupy.int64(s))

        def check(s=s, args=args):
            out.fill(-1)
            fn(grid, block, args)
            idx = (cupy.arange(n, dtype=cupy.int64) * s) & (n - 1)
            return check_close(out, a[idx], "CuPy gather a[(i * stride) mod n]", 0.0)

        params = {"strides": s}
        launches.append(Launch(f"stride {s}", params, "coalescing.strided_copy",
                               lambda args=args: fn(grid, block, args), check, 8.0 * n,
                               launch=kernel_launch_record(grid, block, "coalescing", "strided_copy"),
                               extra={"model": params_model(params)}, function="strided_copy"))
    return launches


def pattern_launches(n: int, offsets: list[int]) -> list[Launch]:
    """Misaligned copies, array-of-structures against structure-of-arrays, and 4/8/16-byte copies."""
    import cupy

    src = cupy.random.random(n + max(offsets + [0]), dtype=cupy.float32)
    out = cupy.empty(n, dtype=cupy.float32)
    grid, block = grid_1d(n)
    launches = []

    off_fn = cuda.kernel("coalescing", "offset_copy")
    for k in offsets:
        args = (out, src, cupy.int64(n), cupy.int32(k))

        def check(k=k, args=args):
            out.fill(-1)
            off_fn(grid, block, args)
            return check_close(out, src[k:k + n], "CuPy slice in[offset:offset + n]", 0.0)

        params = {"group": "offset", "offsets": k}
        launches.append(Launch(f"offset {k} ({4 * k} bytes)", params,
                               "coalescing.offset_copy", lambda args=args: off_fn(grid, block, args), check,
                               8.0 * n, launch=kernel_launch_record(grid, block, "coalescing", "offset_copy"),
                               extra={"model": params_model(params)}, function="offset_copy"))

    particles = cupy.random.random((n, 4), dtype=cupy.float32)     # x, y, z, mass: 16 bytes each
    xs = cupy.ascontiguousarray(particles[:, 0])
    for kernel, data, label in (("aos_field", particles, "array of structures: x of 16-byte particles"),
                                ("soa_field", xs, "structure of arrays: the x array")):
        fn = cuda.kernel("coalescing", kernel)
        args = (out, data, cupy.int64(n))

        def check(fn=fn, args=args):
            out.fill(-1)
            fn(grid, block, args)
            return check_close(out, xs, "the particles' x (CuPy)", 0.0)

        params = {"group": "layout", "layout": kernel[:3]}
        launches.append(Launch(label, params, f"coalescing.{kernel}",
                               lambda fn=fn, args=args: fn(grid, block, args), check, 8.0 * n,
                               launch=kernel_launch_record(grid, block, "coalescing", kernel),
                               extra={"model": params_model(params)}, function=kernel))

    a = src[:n]
    for family, kernel, width in (("elementwise", "copy", 4), ("coalescing", "copy_vec2", 8),
                                  ("elementwise", "copy_vec4", 16)):
        fn = cuda.kernel(family, kernel)
        g, b = ((n + BLOCK - 1) // BLOCK,), (BLOCK,)
        if width == 8:
            g = ((n // 2 + BLOCK - 1) // BLOCK,)
        elif width == 16:
            g, b = elementwise_launch(kernel, n)
        args = (out, a, cupy.int64(n))

        def check(fn=fn, args=args, g=g, b=b):
            out.fill(-1)
            fn(g, b, args)
            return check_close(out, a, "source array", 0.0)

        params = {"group": "vector", "access_bytes": width}
        launches.append(Launch(f"{width} bytes per thread ({kernel})", params,
                               f"{family}.{kernel}", lambda fn=fn, args=args, g=g, b=b: fn(g, b, args), check,
                               8.0 * n, launch=kernel_launch_record(g, b, family, kernel),
                               extra={"model": params_model(params)}, function=kernel))
    return launches


def l2_fetch_granularity() -> int:
    """What the runtime reports for cudaLimitMaxL2FetchGranularity, in bytes."""
    import cupy

    rt = cupy.cuda.runtime
    return rt.deviceGetLimit(rt.cudaLimitMaxL2FetchGranularity)


def set_l2_fetch_granularity(nbytes: int) -> int:
    """Ask the runtime for an L2 fetch granularity of ``nbytes`` (cudaLimitMaxL2FetchGranularity, which CUDA
    documents as a hint) and return what it reports back."""
    import cupy

    rt = cupy.cuda.runtime
    rt.deviceSetLimit(rt.cudaLimitMaxL2FetchGranularity, nbytes)
    return l2_fetch_granularity()


def l2_fetch_launches(n: int, strides: list[int], granularities: list[int]) -> list[Launch]:
    """The strided copy at each stride under each L2 fetch granularity. The limit is a device setting, so
    each case sets it in its check, which ``measure`` runs just before timing that case (the timed calls
    change nothing)."""
    launches = []
    for g in granularities:
        for la in strided_launches(n, strides):
            extra = dict(la.extra)   # the case's: measure copies it after the check has run

            def check(la=la, g=g, extra=extra):
                extra["granularity_read_back"] = set_l2_fetch_granularity(g)
                return la.check()
            launches.append(Launch(f"{la.name}, fetch {g} B", {**la.params, "granularity": g}, la.kernel, la.run,
                                   check, la.bytes, launch=la.launch, extra=extra, function=la.function))
    return launches


def profile_l2_fetch(n: int, strides: list[int], granularities: list[int]) -> None:
    """What runs under ncu for ``coalescing.l2_fetch``: every case once, its granularity set first."""
    before = l2_fetch_granularity()
    for g in granularities:
        set_l2_fetch_granularity(g)
        launch_profiled(strided_launches(n, strides))
    set_l2_fetch_granularity(before)


def profile_strided(n: int, strides: list[int]) -> None:
    """What runs under ncu for ``coalescing.strided_copy``."""
    launch_profiled(strided_launches(n, strides))


def profile_patterns(n: int, offsets: list[int]) -> None:
    """What runs under ncu for ``coalescing.patterns``."""
    launch_profiled(pattern_launches(n, offsets))


@covers("coalescing", "strided_copy", "offset_copy", "aos_field", "soa_field", "copy_vec2", "scale_rows")
def coalescing_smoke() -> None:
    import cupy

    k = lambda name: cuda.kernel("coalescing", name)
    for n in (16, 2048):
        a = cupy.arange(n + 3, dtype=cupy.float32)
        out = cupy.full(n, -1, dtype=cupy.float32)
        k("strided_copy")(*grid_1d(n), (out, a, cupy.int64(n), cupy.int64(n - 1), cupy.int64(3)))
        assert bool((out == a[(cupy.arange(n) * 3) & (n - 1)]).all()), f"strided_copy n={n}"
    for n in (1, 1027):
        a = cupy.arange(n + 3, dtype=cupy.float32)
        out = cupy.full(n, -1, dtype=cupy.float32)
        k("offset_copy")(*grid_1d(n), (out, a, cupy.int64(n), cupy.int32(3)))
        assert bool((out == a[3:3 + n]).all()), f"offset_copy n={n}"
        p = cupy.arange(4 * n, dtype=cupy.float32).reshape(n, 4)
        k("aos_field")(*grid_1d(n), (out, p, cupy.int64(n)))
        assert bool((out == p[:, 0]).all()), f"aos_field n={n}"
        x = cupy.ascontiguousarray(p[:, 1])
        k("soa_field")(*grid_1d(n), (out, x, cupy.int64(n)))
        assert bool((out == x).all()), f"soa_field n={n}"
        out.fill(-1)
        k("copy_vec2")(((n // 2 + BLOCK - 1) // BLOCK or 1,), (BLOCK,), (out, a, cupy.int64(n)))
        assert bool((out == a[:n]).all()), f"copy_vec2 n={n}"
    rows, cols = 37, 70
    a = cupy.arange(rows * cols, dtype=cupy.float32).reshape(rows, cols)
    out = cupy.full_like(a, -1)
    k("scale_rows")(((cols + 31) // 32, (rows + 7) // 8), (32, 8), (out, a, cupy.int32(rows), cupy.int32(cols)))
    assert bool((out == 2 * a).all()), "scale_rows"
