"""SASS, the GPU's own instructions, from NVRTC's cubin with no GPU: ``nvdisasm`` from the
``nvidia-cuda-nvdisasm`` wheel (or a CUDA toolkit on the PATH) disassembles it, and the mix of
instructions per kernel becomes a table.

The counts are *static*: how many times each instruction appears in the binary, not how many
times it runs. An unrolled inner loop shows up as many copies of its body, so the mix still says
what the loop is made of (FFMAs against shared-memory loads, HMMAs against ldmatrix).
"""
from __future__ import annotations

import collections
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from course_lib.core import cuda

# Opcode groups the GEMM notebooks talk about: label -> opcodes. An opcode matches an instruction's
# mnemonic before its first '.', or, written with a modifier ("LDS.128"), one that carries it.
GROUPS: dict[str, tuple[str, ...]] = {
    "FFMA": ("FFMA",),
    "LDS (shared loads)": ("LDS",),
    "of which LDS.128": ("LDS.128",),
    "LDSM (ldmatrix)": ("LDSM",),
    "LDG (global loads)": ("LDG",),
    "STS (shared stores)": ("STS",),
    "LDGSTS (cp.async)": ("LDGSTS",),
    "UTMALDG (TMA)": ("UTMALDG",),
    "HMMA (mma.sync)": ("HMMA",),
    "HGMMA (wgmma)": ("HGMMA",),
    "BAR (barriers)": ("BAR",),
    "LDL/STL (local)": ("LDL", "STL"),
}


class DisassemblerUnavailable(RuntimeError):
    pass


def nvdisasm_path() -> str | None:
    """``nvdisasm`` from the wheel (``nvidia-cuda-nvdisasm``), else from the PATH, else None."""
    try:
        import nvidia
        for root in nvidia.__path__:
            for found in sorted(Path(root).glob("*/bin/nvdisasm*")):
                if os.access(found, os.X_OK):
                    return str(found)
    except ImportError:
        pass
    return shutil.which("nvdisasm")


_FUNCTION = re.compile(r"^\s*\.text\.(\w+):\s*$")
_INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*(?:\.[\w]+)*)")


def _disassembly(cubin: bytes) -> str:
    exe = nvdisasm_path()
    if exe is None:
        raise DisassemblerUnavailable("nvdisasm is not installed: `pip install nvidia-cuda-nvdisasm` (Linux and "
                                      "Windows wheels), or put a CUDA toolkit's bin/ on the PATH")
    if not cubin:
        raise DisassemblerUnavailable("no cubin to disassemble: NVRTC is not installed here, so nothing was compiled")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernels.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        proc = subprocess.run([exe, "-c", path], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise DisassemblerUnavailable(f"nvdisasm failed ({proc.returncode}): {proc.stderr.strip()[-400:]}")
    return proc.stdout


_LISTED = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;")


def _per_function(text: str, pattern: re.Pattern) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if m := _FUNCTION.match(line):
            current = out.setdefault(m.group(1), [])
        elif current is not None and (m := pattern.search(line)):
            current.append(m.group(1))
    return out


def instructions(cubin: bytes) -> dict[str, list[str]]:
    """Each kernel's SASS mnemonics with their modifiers (LDS.U.128), in order."""
    return _per_function(_disassembly(cubin), _INSTRUCTION)


def listing(cubin: bytes) -> dict[str, list[str]]:
    """Each kernel's SASS instructions in full (predicate, mnemonic, operands), in order: what a
    check reads when the operands matter (``DEPBAR.LE SB0, 0x1`` waits for all but one group)."""
    return _per_function(_disassembly(cubin), _LISTED)


def _matches(mnemonic: str, opcode: str) -> bool:
    base, *mods = mnemonic.split(".")
    want, *want_mods = opcode.split(".")
    return base == want and all(m in mods for m in want_mods)


def mix(mnemonics: list[str], groups: dict[str, tuple[str, ...]] = GROUPS) -> dict[str, int]:
    """How many of ``mnemonics`` fall in each group, and the total."""
    counts = collections.Counter(mnemonics)
    return {"instructions": len(mnemonics),
            **{label: sum(n for m, n in counts.items() if any(_matches(m, o) for o in ops))
               for label, ops in groups.items()}}


def mix_rows(family: str, kernels: list[str], arch: str) -> list[dict]:
    """One row per kernel of a course family: its static instruction mix on ``arch``."""

    by_kernel = instructions(cuda.compile_family(family, arch).cubin)
    missing = [k for k in kernels if k not in by_kernel]
    if missing:
        raise KeyError(f"{family}.cu has no kernels {missing} in its cubin; it has {sorted(by_kernel)}")
    rows = [{"kernel": k, **mix(by_kernel[k])} for k in kernels]
    used = [label for label in GROUPS if any(r[label] for r in rows)]   # drop groups no kernel uses
    return [{key: r[key] for key in ("kernel", "instructions", *used)} for r in rows]


