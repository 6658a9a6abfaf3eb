"""Operands the GEMM launchers and their callers share: random matrices, bf16 bit patterns, a zero-copy
torch view of a CuPy array, and the tolerance a result is held to."""
from __future__ import annotations


def to_bf16_bits(x):
    """float32 CuPy array -> bf16 bit patterns (uint16), round to nearest even."""
    import cupy

    u = cupy.ascontiguousarray(x, dtype=cupy.float32).view(cupy.uint32)
    return ((u + (((u >> 16) & 1) + 0x7FFF)) >> 16).astype(cupy.uint16)


def bf16_bits_to_float32(bits):
    import cupy

    return (bits.astype(cupy.uint32) << 16).view(cupy.float32)


def random_operand(shape, seed: int):
    import cupy

    return cupy.random.default_rng(seed).random(shape, dtype=cupy.float32) - 0.5


def torch_view(x):
    """A zero-copy torch tensor over a CuPy array (bf16 bit patterns come back as torch.bfloat16)."""
    import cupy
    import torch

    if x.dtype == cupy.uint16:
        return torch.as_tensor(x.view(cupy.int16), device="cuda").view(torch.bfloat16)
    return torch.as_tensor(x, device="cuda")


def bf16_bits(t):
    """The bf16 bit patterns (uint16) of a torch bf16 tensor as a zero-copy CuPy array: the inverse
    of ``torch_view``, for handing PyTorch's operands to a course kernel."""
    import cupy
    import torch

    return cupy.from_dlpack(t.contiguous().view(torch.int16)).view(cupy.uint16)


FP32_RTOL = 1e-5   # times max(1, K/1024) times max|reference|: fp32 rounding grows with the reduction


def fp32_tolerance(k: int) -> float:
    return FP32_RTOL * max(1.0, k / 1024)


def bf16_tolerance_rel() -> float:
    # Both kernels accumulate in fp32 and round once to bf16: they may differ by one bf16 ulp
    # (2^-8 relative) of an output, bounded here by two ulps of the largest output.
    return 2.0 ** -7


def gelu_tanh_reference(x):
    """torch.nn.functional.gelu(x, approximate="tanh") in x's precision, NumPy or CuPy (np.tanh
    dispatches to CuPy for a CuPy array): the fused epilogues' reference."""
    import numpy as np

    return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))


def bf16_tolerance(want) -> float:
    """What a bf16 result may be off from ``want`` (a NumPy or CuPy array): the relative bound times
    its largest magnitude."""
    return bf16_tolerance_rel() * float(abs(want).max())
