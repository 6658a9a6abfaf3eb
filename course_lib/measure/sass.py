"""SASS, the GPU's own instructions, from NVRTC's cubin with no GPU: ``nvdisasm`` from the
``nvidia-cuda-nvdisasm`` wheel (or a CUDA toolkit on the PATH) disassembles it, and the mix of
instructions per kernel becomes a table.

The counts are *static*: how many times each instruction appears in the binary, not how many
times it runs. An unrolled inner loop shows up as many copies of its body, so the mix still says
what the loop is made of (FFMAs against shared-memory loads, HMMAs against ldmatrix).

What else the kernel exercises' checks read of a compiled kernel, still with no GPU: the listing's
labels, so that a rule can follow every control-flow path (``first_unguarded``: a fence between the
reads and the release on every path, however far apart); the cubin's ELF (its kernels, and the PTX
NVRTC keeps in it with ``-lineinfo``); and that PTX run on the CPU for one block (``emulate``), which
gives the addresses the kernel computes (the bank model reads them), the words two warps touch between
barriers, and any access past the end of its array.
"""
from __future__ import annotations

import collections
import os
import re
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

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




# --------------------------------------------------------------------------- the cubin's ELF: its entry points, its PTX

def _elf(cubin: bytes) -> tuple[dict[str, bytes], list[tuple[str, int]]]:
    """(section name -> contents, the symbol table's (name, st_other)) of a 64-bit little-endian cubin."""
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2:
        raise ValueError("not a 64-bit ELF cubin")
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    entsize, count, names_at = struct.unpack_from("<HHH", cubin, 0x3A)
    headers = [struct.unpack_from("<IIQQQQII", cubin, shoff + i * entsize) for i in range(count)]
    names = headers[names_at]

    def name(offset: int, table: tuple) -> str:
        start = table[4] + offset
        return cubin[start:cubin.index(b"\0", start)].decode(errors="replace")

    sections = {name(h[0], names): cubin[h[4]:h[4] + h[5]] for h in headers if h[1] != 8}   # 8: NOBITS
    symbols = []
    for h in headers:
        if h[1] == 2:   # SYMTAB: 24-byte entries, their names in the section its sh_link names
            strings = headers[h[6]]
            for at in range(h[4], h[4] + h[5], 24):
                st_name, _info, st_other = struct.unpack_from("<IBB", cubin, at)
                symbols.append((name(st_name, strings), st_other))
    return sections, symbols


STO_CUDA_ENTRY = 0x10   # the st_other bit that marks a kernel (a __global__ function) in a cubin's symbol table


def entry_points(cubin: bytes) -> list[str]:
    """The kernels (``__global__`` functions) a cubin holds, from its ELF symbol table: what was compiled, however
    the source spelled it (a kernel declared twice is one entry point, a macro's kernel is one)."""
    _, symbols = _elf(cubin)
    return sorted({name for name, other in symbols if other & STO_CUDA_ENTRY})


def embedded_ptx(cubin: bytes) -> str | None:
    """The PTX NVRTC compiled the cubin from. With ``-lineinfo`` (every course compile passes it) NVRTC keeps it in
    the cubin's ``.nv_debug_ptx_txt`` section, its lines separated by NULs; None where the cubin has none."""
    try:
        text = _elf(cubin)[0].get(".nv_debug_ptx_txt")
    except ValueError:
        return None
    return text.replace(b"\0", b"\n").decode(errors="replace") if text else None


# --------------------------------------------------------------------------- PTX: parsed, and run on the CPU

class NotEmulated(RuntimeError):
    """The PTX does something the emulator does not follow (a call, an address computed from a loaded value, an
    instruction it does not know feeding an address or a branch): nothing can be concluded from it."""


_LABELS_ONLY = re.compile(r"(?:[$\w.]+\s*:\s*)+")
_LABEL = re.compile(r"^\s*([$\w.]+)\s*:\s*(.*)$", re.S)
_REG_DECL = re.compile(r"^\.reg\s+\.\w+\s+(.*)$", re.S)
_VAR_DECL = re.compile(r"^(?:\.extern\s+)?\.(shared|local|global|const)\s+(?:\.align\s+(\d+)\s+)?\.(\w+)\s+([$\w.]+)"
                       r"\s*((?:\[\s*\d*\s*\])*)")
_ENTRY = re.compile(r"\.entry\s+([$\w]+)\s*\((.*?)\)", re.S)
_PARAM = re.compile(r"\.param\s+(?:\.align\s+\d+\s+)?\.(\w+)\s+(?:\.ptr\s+)?(?:\.(?:global|shared|const|local)\s+)?"
                    r"(?:\.align\s+\d+\s+)?([$\w]+)(?:\s*\[\s*(\d+)\s*\])?")
_TYPE_BYTES = {"b8": 1, "u8": 1, "s8": 1, "b16": 2, "u16": 2, "s16": 2, "f16": 2, "bf16": 2, "b32": 4, "u32": 4,
               "s32": 4, "f32": 4, "b64": 8, "u64": 8, "s64": 8, "f64": 8, "b128": 16, "pred": 1}


@dataclass(frozen=True)
class Statement:
    """One PTX instruction: its guard (``@%p`` / ``@!%p``), opcode with modifiers, and operands as written."""

    guard: str | None
    negated: bool
    opcode: str
    operands: tuple[str, ...]

    @property
    def text(self) -> str:
        guard = f"@{'!' * self.negated}{self.guard} " if self.guard else ""
        return f"{guard}{self.opcode} {', '.join(self.operands)}".strip()


@dataclass(frozen=True)
class PtxVariable:
    space: str        # shared, local, global, const
    name: str
    size_bytes: int   # 0 for an extern (dynamic) array


@dataclass(frozen=True)
class PtxKernel:
    """One ``.entry`` of a PTX module: its parameters in order, its instructions, where its labels point, and the
    variables it can address (its own and the module's)."""

    name: str
    params: tuple[tuple[str, str], ...]          # (name, type) in order
    statements: tuple[Statement, ...]
    labels: dict[str, int]
    variables: tuple[PtxVariable, ...]

    def reads(self, special: str) -> bool:
        """Whether any instruction reads a special register (``%nctaid.x``: gridDim.x)."""
        return any(special in op for s in self.statements for op in s.operands)

    def opcodes(self) -> list[str]:
        return [s.opcode for s in self.statements]


def _tokens(body: str) -> list[str]:
    """A function body's statements (each up to its ``;``, labels in front) and the ``{`` ``}`` of its blocks: a brace
    opens or closes a block only where a statement could start (``{%f1, %f2}`` is a vector operand)."""
    tokens, current = [], ""
    for ch in body:
        if ch in "{}" and (not current.strip() or _LABELS_ONLY.fullmatch(current.strip())):
            if current.strip():
                tokens.append(current.strip())
            tokens.append(ch)
            current = ""
            continue
        current += ch
        if ch == ";":
            tokens.append(current.strip())
            current = ""
    if current.strip():
        tokens.append(current.strip())
    return tokens


def _split_operands(text: str) -> list[str]:
    out, depth, current = [], 0, ""
    for ch in text:
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        out.append(current.strip())
    return out


def _declared_names(decl: str) -> list[str]:
    """The register names a ``.reg`` declaration makes: ``%r<12>`` is %r0 … %r11; ``p, q`` are p and q."""
    names = []
    for item in decl.split(","):
        item = item.strip()
        if m := re.match(r"^([%$\w]+)<(\d+)>$", item):
            names += [f"{m.group(1)}{i}" for i in range(int(m.group(2)))]
        elif item:
            names.append(item)
    return names


def _variable_bytes(kind: str, dims: str) -> int:
    size = _TYPE_BYTES.get(kind, 4)
    for d in re.findall(r"\[\s*(\d*)\s*\]", dims):
        size *= int(d) if d else 0
    return size


def _scoped(text: str, renames: list[dict[str, str]]) -> str:
    """``text`` with the names an inner ``{ … }`` block declared (inline asm's ``.reg .pred p``) made unique."""
    if len(renames) == 1:
        return text
    merged: dict[str, str] = {}
    for scope in renames:
        merged.update(scope)
    if not merged:
        return text
    pattern = re.compile(r"(?<![\w%$.])(" + "|".join(re.escape(n) for n in sorted(merged, key=len, reverse=True))
                         + r")(?![\w$])")
    return pattern.sub(lambda m: merged[m.group(1)], text)


def _parse_body(body: str, module_vars: list[PtxVariable]) -> tuple[list[Statement], dict[str, int], list[PtxVariable]]:
    tokens = _tokens(body)
    # first pass: the labels each { … } block defines (inline asm's own loops), which are that block's alone
    block_labels: dict[int, set[str]] = {0: set()}
    stack, blocks = [0], 0
    for token in tokens:
        if token == "{":
            blocks += 1
            stack.append(blocks)
            block_labels[blocks] = set()
        elif token == "}":
            if len(stack) > 1:
                stack.pop()
        else:
            while (m := _LABEL.match(token)) and not token.startswith("."):
                block_labels[stack[-1]].add(m.group(1))
                token = m.group(2).strip()
    statements: list[Statement] = []
    labels: dict[str, int] = {}
    variables = list(module_vars)
    renames: list[dict[str, str]] = [{}]
    stack, blocks = [0], 0
    for token in tokens:
        if token == "{":
            blocks += 1
            stack.append(blocks)
            renames.append({name: f"{name}@{blocks}" for name in block_labels[blocks]})
            continue
        if token == "}":
            if len(stack) > 1:
                stack.pop()
                renames.pop()
            continue
        token = token.rstrip(";").strip()
        while (m := _LABEL.match(token)) and not token.startswith("."):
            labels[_scoped(m.group(1), renames)] = len(statements)
            token = m.group(2).strip()
        if not token:
            continue
        if m := _REG_DECL.match(token):
            if len(renames) > 1:
                for name in _declared_names(m.group(1)):
                    renames[-1][name] = f"{name}@{stack[-1]}"
            continue
        if m := _VAR_DECL.match(token):
            variables.append(PtxVariable(m.group(1), m.group(4), _variable_bytes(m.group(3), m.group(5))))
            continue
        if token.startswith("."):   # .pragma, .loc, .maxntid, ...
            continue
        token = _scoped(token, renames)
        guard, negated = None, False
        if m := re.match(r"^@(!?)([%$\w@]+)\s+(.*)$", token, re.S):
            negated, guard, token = m.group(1) == "!", m.group(2), m.group(3)
        parts = token.split(None, 1)
        statements.append(Statement(guard, negated, parts[0], tuple(_split_operands(parts[1])) if len(parts) > 1 else ()))
    return statements, labels, variables


def ptx_kernels(ptx: str) -> dict[str, PtxKernel]:
    """Each ``.entry`` of a PTX module, parsed (comments dropped, inline asm's scoped names made unique)."""
    text = re.sub(r"//[^\n]*", "", ptx)
    module_vars: list[PtxVariable] = []
    depth = 0
    for line in text.splitlines():   # the module's own variables: declared outside every function body
        if depth == 0 and (m := _VAR_DECL.match(line.strip().removeprefix(".visible ").removeprefix(".weak "))):
            module_vars.append(PtxVariable(m.group(1), m.group(4), _variable_bytes(m.group(3), m.group(5))))
        depth += line.count("{") - line.count("}")
    out = {}
    for m in _ENTRY.finditer(text):
        params = tuple((p.group(2), p.group(1)) for p in _PARAM.finditer(m.group(2)))
        start = text.index("{", m.end())
        depth, at = 0, start
        while at < len(text):
            depth += {"{": 1, "}": -1}.get(text[at], 0)
            if depth == 0:
                break
            at += 1
        statements, labels, variables = _parse_body(text[start + 1:at], module_vars)
        out[m.group(1)] = PtxKernel(m.group(1), params, tuple(statements), labels, tuple(variables))
    return out


def kernel_ptx(cubin: bytes, kernel: str) -> PtxKernel | None:
    """The PTX of one kernel of the cubin, parsed; None where the cubin carries no PTX (or not this kernel's)."""
    text = embedded_ptx(cubin)
    return ptx_kernels(text).get(kernel) if text else None


# The emulator's own address map: each shared or local variable and each global array at a base of its own, far
# from the next, so that an access past one never lands in another and is seen for what it is.
SHARED_WINDOW = 1 << 44     # generic addresses of shared memory start here (cvta.shared)
LOCAL_WINDOW = 1 << 45      # generic addresses of local memory start here (cvta.local)
VARIABLE_STRIDE = 1 << 20   # shared and local variable k at (k + 1) MiB of its space
ARRAY_STRIDE = 1 << 36      # global array k (the k-th parameter) at (k + 1) × 64 GiB
_CMP = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b, "le": lambda a, b: a <= b,
        "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b, "lo": lambda a, b: a < b, "ls": lambda a, b: a <= b,
        "hi": lambda a, b: a > b, "hs": lambda a, b: a >= b}
_FLOATS = {"f16", "f16x2", "bf16", "bf16x2", "f32", "f64", "tf32", "e4m3", "e5m2"}
_SPACES = ("global", "shared", "local", "param", "const")
# Instructions that write no register, whatever their first operand (a source here)
_NO_RESULT = {"membar", "fence", "nanosleep", "prefetch", "prefetchu", "griddepcontrol", "pmevent", "setmaxnreg",
              "applypriority", "discard", "brkpt"}


@dataclass(frozen=True)
class Array:
    """A global allocation an emulated launch passes for a pointer parameter: the emulator checks every access
    against its size."""

    name: str
    size_bytes: int


@dataclass(frozen=True)
class MemoryAccess:
    """One thread's access, as the emulator ran it."""

    thread: tuple[int, int, int]   # threadIdx
    warp: int                      # linear thread index // 32
    lane: int                      # linear thread index % 32
    statement: int                 # which PTX instruction (``PtxKernel.statements``)
    occurrence: int                # the how-many-th time this thread reached it (lanes of a warp line up by it)
    phase: int                     # how many barriers the thread had passed
    space: str                     # shared, local or global
    kind: str                      # ld, st or atom
    offset: int                    # bytes from the start of the variable or array it falls in (or would)
    size_bytes: int
    variable: str                  # that variable or array
    inside: bool                   # whether all its bytes lie inside it


@dataclass
class Trace:
    """What an emulated block did: its shared-memory accesses (all of them) and, per thread, its first access
    outside the variable or array its address came from (the thread was stopped there: past it, nothing it
    does is defined)."""

    shared: list[MemoryAccess]
    outside: list[MemoryAccess]
    steps: int
    sizes: dict[str, int]          # each variable and array -> its bytes


def _mask(value: int, bits: int) -> int:
    return value & ((1 << bits) - 1)


def _to_signed(value: int, bits: int) -> int:
    value = _mask(value, bits)
    return value - (1 << bits) if value >> (bits - 1) else value


def _bits(kind: str) -> int:
    return 8 * _TYPE_BYTES.get(kind, 4) if kind != "pred" else 1


class _Thread:
    __slots__ = ("tid", "linear", "regs", "pc", "done", "seen", "phase", "special")

    def __init__(self, tid: tuple[int, int, int], linear: int, special: dict[str, int | None]):
        self.tid, self.linear, self.regs, self.pc, self.done = tid, linear, {}, 0, False
        self.seen: dict[int, int] = {}
        self.phase = 0
        self.special = special


class _Emulation:
    def __init__(self, kernel: PtxKernel, args: Sequence, block: tuple[int, int, int], grid: tuple[int, int, int],
                 block_idx: tuple[int, int, int], dynamic_smem_bytes: int):
        if len(args) != len(kernel.params):
            raise ValueError(f"{kernel.name} takes {len(kernel.params)} parameters, the emulation was given {len(args)}")
        self.kernel, self.block, self.grid, self.block_idx = kernel, block, grid, block_idx
        self.params: dict[str, int | None] = {}
        self.arrays: list[tuple[int, str, int]] = []            # (base, name, size) of each global array
        for k, ((name, kind), arg) in enumerate(zip(kernel.params, args)):
            if isinstance(arg, Array):
                base = (k + 1) * ARRAY_STRIDE
                self.arrays.append((base, arg.name, arg.size_bytes))
                self.params[name] = base
            elif isinstance(arg, float):
                self.params[name] = struct.unpack("<Q" if kind.endswith("64") else "<I",
                                                  struct.pack("<d" if kind.endswith("64") else "<f", arg))[0]
            else:
                self.params[name] = None if arg is None else _mask(int(arg), _bits(kind))
        self.symbols: dict[str, tuple[str, int]] = {}           # variable name -> (space, its base there)
        self.windows: dict[str, list[tuple[int, str, int]]] = {"shared": [], "local": []}
        counts = {"shared": 0, "local": 0, "global": len(kernel.params) + 100}
        for v in kernel.variables:
            if v.space in ("shared", "local"):
                counts[v.space] += 1
                base = counts[v.space] * VARIABLE_STRIDE
                size = v.size_bytes or (dynamic_smem_bytes if v.space == "shared" else 0)
                self.windows[v.space].append((base, v.name, size))
            elif v.space == "global":
                counts["global"] += 1
                base = counts["global"] * ARRAY_STRIDE
                self.arrays.append((base, v.name, v.size_bytes))
            else:
                continue
            self.symbols[v.name] = (v.space, base)
        self.shared: list[MemoryAccess] = []
        self.outside: list[MemoryAccess] = []
        self.steps = 0
        self.code = [self._compile(n, s) for n, s in enumerate(kernel.statements)]

    # ---- operands

    def _getter(self, op: str):
        op = op.strip()
        if op.startswith("!"):
            inner = self._getter(op[1:])
            return lambda th: None if (v := inner(th)) is None else int(not v)
        if re.fullmatch(r"-?(0x[0-9a-fA-F]+|\d+)U?", op):
            value = int(op.rstrip("U"), 0)
            return lambda th: value
        if re.fullmatch(r"0[fF][0-9a-fA-F]{8}|0[dD][0-9a-fA-F]{16}", op):
            value = int(op[2:], 16)
            return lambda th: value
        if op.startswith("%") and re.fullmatch(r"%(tid|ntid|ctaid|nctaid)\.[xyz]|%laneid|%warpid|%nwarpid|"
                                               r"%lanemask_\w+|%clock\w*|%globaltimer\w*|%smid|%nsmid|%gridid|"
                                               r"%dynamic_smem_size|%total_smem_size|%envreg\d+|%cluster\w*(\.[xyz])?|"
                                               r"%is_explicit_cluster", op):
            return lambda th: th.special.get(op)
        if op in self.symbols:
            address = self.symbols[op][1]
            return lambda th: address
        if op in self.params:   # a parameter's name used as a value: its address in the param space is not modelled
            return lambda th: None
        return lambda th: th.regs.get(op)

    def _setter(self, op: str):
        op = op.strip()
        if op.startswith("{"):
            names = [o.strip() for o in op.strip("{}").split(",")]

            def set_all(th, value):
                for n in names:
                    if n != "_":
                        th.regs[n] = None
            return set_all
        if "|" in op:
            first, second = (o.strip() for o in op.split("|"))

            def set_pair(th, value):   # shfl's d|p: the value, and a predicate the emulator does not follow
                th.regs[first] = value
                th.regs[second] = None
            return set_pair
        if op == "_":
            return lambda th, value: None
        return lambda th, value: th.regs.__setitem__(op, value)

    def _address(self, op: str):
        """A ``[base+offset]`` operand: (getter of the address, the parameter it names or None)."""
        inner = op.strip()[1:-1].strip()
        m = re.fullmatch(r"([%$\w.@]+)\s*(?:\+\s*(-?(?:0x[0-9a-fA-F]+|\d+)))?", inner)
        if not m:
            return (lambda th: None), None
        base, offset = m.group(1), int(m.group(2), 0) if m.group(2) else 0
        if base in self.params:
            return (lambda th: offset), base
        get = self._getter(base)
        return (lambda th: None if (v := get(th)) is None else v + offset), None

    # ---- memory

    def _resolve(self, space: str, address: int) -> tuple[str, int]:
        if space == "generic":
            if SHARED_WINDOW <= address < SHARED_WINDOW + (1 << 32):
                return "shared", address - SHARED_WINDOW
            if LOCAL_WINDOW <= address < LOCAL_WINDOW + (1 << 32):
                return "local", address - LOCAL_WINDOW
            return "global", address
        return space, address

    def _access(self, th: _Thread, n: int, occurrence: int, space: str, kind: str, address: int, size: int) -> bool:
        """Record one access; False (and the thread stopped) where it falls outside its variable or array."""
        space, address = self._resolve(space, address)
        if space == "global":
            homes = self.arrays
            stride = ARRAY_STRIDE
        elif space in self.windows:
            homes = self.windows[space]
            stride = VARIABLE_STRIDE
            address = _mask(address, 32)   # shared and local addresses are 32-bit
        else:
            return True
        name, offset, inside = "(no variable)", address, False
        for base, var, var_size in homes:
            if base <= address < base + stride:
                name, offset = var, address - base
                inside = offset + size <= var_size
                break
        access = MemoryAccess(th.tid, th.linear // 32, th.linear % 32, n, occurrence, th.phase, space, kind, offset, size, name, inside)
        if space == "shared":
            self.shared.append(access)
        if not inside:
            self.outside.append(access)
            th.done = True
            return False
        return True

    # ---- instructions

    def _compile(self, n: int, s: Statement):
        parts = s.opcode.split(".")
        base, mods = parts[0], parts[1:]
        types = [m for m in mods if m in _TYPE_BYTES or m in _FLOATS]
        kind = types[-1] if types else "b32"
        bits = _bits(kind)
        floating = any(t in _FLOATS for t in types)
        ops = s.operands
        guard = self._getter(("!" if s.negated else "") + s.guard) if s.guard else None

        def fail(why: str):
            def run(th):
                raise NotEmulated(f"{why}: `{s.text}`")
            return run

        def guarded(body, memory: bool = False):
            if guard is None:
                return body

            def run(th):
                g = guard(th)
                if g is None:
                    if memory or base == "bra":
                        raise NotEmulated(f"whether it runs depends on a value the emulator does not know: `{s.text}`")
                    for d in dests:
                        d(th, None)
                    return None
                return body(th) if g else None
            return run

        first_is_register = bool(ops) and not ops[0].startswith("[")
        dests = [self._setter(ops[0])] if first_is_register else []

        if base in ("ret", "exit", "trap"):
            def finish(th):
                th.done = True
                return -1
            return guarded(finish)
        if base == "bra":
            target = self.kernel.labels.get(ops[-1].strip())
            if target is None:
                return fail("a branch to a label the emulator did not find")
            return guarded(lambda th: target)
        if base in ("call", "brx", "jmp"):
            return fail("a call or an indirect branch")
        if base in _NO_RESULT or (base in ("bar", "barrier") and mods[:1] in (["warp"], ["arrive"], ["cluster"])):
            return lambda th: None   # no register written (bar.warp.sync's mask, nanosleep's time are sources)
        if base in ("bar", "barrier"):
            return guarded(lambda th: -2)   # -2: wait at the barrier
        if base in ("ld", "ldu", "st", "atom", "red"):
            return self._memory(n, s, base, mods, kind, guarded, dests, fail)
        if base == "cp" and mods[:1] == ["async"] and "shared" in ".".join(mods) and "bulk" not in mods:
            dst, _ = self._address(ops[0])
            src, _ = self._address(ops[1])
            size = int(ops[2], 0) if re.fullmatch(r"\d+", ops[2].strip()) else 16

            def copy(th):
                k = th.seen.get(n, 0)
                th.seen[n] = k + 1
                d, g = dst(th), src(th)
                if d is None:
                    raise NotEmulated(f"a shared address the emulator cannot compute: `{s.text}`")
                if self._access(th, n, k, "shared", "st", d, size) and g is not None:
                    self._access(th, n, k, "global", "ld", g, size)
                return None
            return guarded(copy, memory=True)
        if not dests:
            return lambda th: None

        dest = dests[0]
        get = [self._getter(o) for o in ops[1:]] if len(ops) > 1 else []

        def unknown(th):
            dest(th, None)
            return None

        if base == "mov":
            if ops[0].startswith("{") and len(ops) == 2 and not ops[1].startswith("{"):
                names = [o.strip() for o in ops[0].strip("{}").split(",")]
                width = bits // len(names)
                src = get[0]

                def unpack(th):
                    v = src(th)
                    for i, name in enumerate(names):
                        if name != "_":
                            th.regs[name] = None if v is None else _mask(v >> (i * width), width)
                    return None
                return guarded(unpack)
            if len(ops) == 2 and ops[1].startswith("{"):
                parts_ = [self._getter(o) for o in ops[1].strip("{}").split(",")]
                width = bits // len(parts_)

                def pack(th):
                    values = [g(th) for g in parts_]
                    dest(th, None if None in values else sum(v << (i * width) for i, v in enumerate(values)))
                    return None
                return guarded(pack)
            src = get[0]
            return guarded(lambda th: dest(th, None if (v := src(th)) is None else _mask(v, bits)))
        if base == "cvta":
            src = get[0]
            space = next((m for m in mods if m in ("shared", "local", "global", "const", "param")), "global")
            window = {"shared": SHARED_WINDOW, "local": LOCAL_WINDOW}.get(space, 0)
            sign = -1 if "to" in mods else 1
            return guarded(lambda th: dest(th, None if (v := src(th)) is None else _mask(v + sign * window, bits)))
        if base == "cvt":
            if floating or "sat" in mods or len(types) < 2:
                return guarded(unknown)
            dbits, skind = _bits(types[0]), types[1]
            sbits, ssigned = _bits(skind), skind.startswith("s")
            src = get[0]

            def convert(th):
                v = src(th)
                if v is not None:
                    v = _to_signed(v, sbits) if ssigned else _mask(v, sbits)
                    v = _mask(v, dbits)
                dest(th, v)
                return None
            return guarded(convert)
        if base == "setp":
            cmp = next((m for m in mods if m in _CMP), None)
            boolean = next((m for m in mods if m in ("and", "or", "xor")), None)
            if floating or cmp is None:
                return guarded(lambda th: [d(th, None) for d in dests] and None)
            signed = kind.startswith("s")
            a, b = get[0], get[1]
            c = get[2] if len(get) > 2 else None
            test = _CMP[cmp]
            names = [o.strip() for o in ops[0].split("|")]

            def compare(th):
                x, y = a(th), b(th)
                if x is None or y is None:
                    r = None
                else:
                    if signed:
                        x, y = _to_signed(x, bits), _to_signed(y, bits)
                    else:
                        x, y = _mask(x, bits), _mask(y, bits)
                    r = int(test(x, y))
                q = None if r is None else 1 - r
                if boolean:
                    z = c(th)
                    op_ = {"and": lambda u, w: u & w, "or": lambda u, w: u | w, "xor": lambda u, w: u ^ w}[boolean]
                    r = None if r is None or z is None else op_(r, z)
                    q = None if q is None or z is None else op_(q, z)
                th.regs[names[0]] = r
                if len(names) > 1:
                    th.regs[names[1]] = q
                return None
            return guarded(compare)
        if base == "selp":
            a, b, c = get

            def select(th):
                p = c(th)
                dest(th, None if p is None else (a(th) if p else b(th)))
                return None
            return guarded(select)
        if floating:
            return guarded(unknown)
        binary = {
            "add": lambda x, y: x + y, "sub": lambda x, y: x - y,
            "and": lambda x, y: x & y, "or": lambda x, y: x | y, "xor": lambda x, y: x ^ y,
        }
        signed = kind.startswith("s")
        if base in binary and len(get) == 2 and not set(mods) & {"cc", "sat"}:
            f = binary[base]
            a, b = get
            return guarded(lambda th: dest(th, None if (x := a(th)) is None or (y := b(th)) is None
                                           else _mask(f(x, y), bits)))
        if base in ("mul", "mad", "mul24", "mad24") and not set(mods) & {"cc", "sat"}:
            a, b = get[0], get[1]
            c = get[2] if base.startswith("mad") else (lambda th: 0)
            wide, high = "wide" in mods, "hi" in mods

            def multiply(th):
                x, y, z = a(th), b(th), c(th)
                if x is None or y is None or z is None:
                    dest(th, None)
                    return None
                x, y = (_to_signed(x, bits), _to_signed(y, bits)) if signed else (_mask(x, bits), _mask(y, bits))
                if base.endswith("24"):
                    x, y = _to_signed(x, 24) if signed else _mask(x, 24), _to_signed(y, 24) if signed else _mask(y, 24)
                product = x * y
                if wide:
                    dest(th, _mask(product + z, 2 * bits))
                elif high:
                    dest(th, _mask((product >> bits) + z, bits))
                else:
                    dest(th, _mask(product + z, bits))
                return None
            return guarded(multiply)
        if base in ("div", "rem", "min", "max"):
            a, b = get

            def arith(th):
                x, y = a(th), b(th)
                if x is None or y is None:
                    dest(th, None)
                    return None
                x, y = (_to_signed(x, bits), _to_signed(y, bits)) if signed else (_mask(x, bits), _mask(y, bits))
                if base in ("div", "rem") and y == 0:
                    dest(th, None)
                    return None
                if base == "div":
                    r = abs(x) // abs(y) * (1 if (x >= 0) == (y >= 0) else -1)
                elif base == "rem":
                    r = x - y * (abs(x) // abs(y) * (1 if (x >= 0) == (y >= 0) else -1))
                else:
                    r = min(x, y) if base == "min" else max(x, y)
                dest(th, _mask(r, bits))
                return None
            return guarded(arith)
        if base in ("shl", "shr"):
            a, b = get

            def shift(th):
                x, y = a(th), b(th)
                if x is None or y is None:
                    dest(th, None)
                    return None
                y = min(_mask(y, 32), bits)
                if base == "shl":
                    dest(th, _mask(x << y, bits))
                elif signed:
                    dest(th, _mask(_to_signed(x, bits) >> y, bits))
                else:
                    dest(th, _mask(x, bits) >> y)
                return None
            return guarded(shift)
        if base in ("not", "neg", "abs", "cnot", "popc", "clz", "brev"):
            a = get[0]

            def unary(th):
                x = a(th)
                if x is None:
                    dest(th, None)
                    return None
                if kind == "pred":
                    dest(th, int(not x) if base == "not" else None)
                    return None
                value = {"not": lambda: ~x, "neg": lambda: -_to_signed(x, bits), "abs": lambda: abs(_to_signed(x, bits)),
                         "cnot": lambda: int(_mask(x, bits) == 0), "popc": lambda: bin(_mask(x, bits)).count("1"),
                         "clz": lambda: bits - _mask(x, bits).bit_length(),
                         "brev": lambda: int(format(_mask(x, bits), f"0{bits}b")[::-1], 2)}[base]()
                dest(th, _mask(value, bits))
                return None
            return guarded(unary)
        if base == "lop3":
            a, b, c, lut = get[:4]

            def lop3(th):
                x, y, z, t = a(th), b(th), c(th), lut(th)
                if None in (x, y, z, t):
                    dest(th, None)
                    return None
                out = 0
                for i in range(32):
                    index = ((x >> i) & 1) << 2 | ((y >> i) & 1) << 1 | ((z >> i) & 1)
                    out |= ((t >> index) & 1) << i
                dest(th, out)
                return None
            return guarded(lop3)
        if base == "bfe":
            a, pos, length = get

            def extract(th):
                x, p, ln = a(th), pos(th), length(th)
                if None in (x, p, ln):
                    dest(th, None)
                    return None
                p, ln = _mask(p, 8), _mask(ln, 8)
                field = (_mask(x, bits) >> min(p, bits)) & ((1 << ln) - 1) if ln else 0
                if signed and ln and field >> (ln - 1):
                    field -= 1 << ln
                dest(th, _mask(field, bits))
                return None
            return guarded(extract)
        if base == "bfi":
            a, b, pos, length = get

            def insert(th):
                x, y, p, ln = a(th), b(th), pos(th), length(th)
                if None in (x, y, p, ln):
                    dest(th, None)
                    return None
                p, ln = _mask(p, 8), _mask(ln, 8)
                field = ((1 << ln) - 1) << p
                dest(th, _mask((y & ~field) | ((x << p) & field), bits))
                return None
            return guarded(insert)
        return guarded(unknown)   # shfl, vote, mbarrier, wgmma, ... : their results are not followed

    def _memory(self, n, s, base, mods, kind, guarded, dests, fail):
        space = next((m for m in mods if m.split("::")[0] in _SPACES), "generic").split("::")[0]
        vector = next((int(m[1:]) for m in mods if re.fullmatch(r"v\d", m)), 1)
        size = _TYPE_BYTES.get(kind, 4) * vector
        ops = s.operands
        address_op = next((o for o in ops if o.startswith("[")), None)
        if address_op is None:
            return fail("a memory access whose address the emulator did not parse")
        address, param = self._address(address_op)
        access_kind = {"ld": "ld", "ldu": "ld", "st": "st"}.get(base, "atom")
        has_dest = base in ("ld", "ldu", "atom") and dests

        if space == "param":   # a scalar parameter read whole; a field of a struct parameter is not followed
            value = self.params.get(param) if param and address(None) == 0 else None

            def load_param(th):
                dests[0](th, value)
                return None
            return guarded(load_param)
        if space == "const":
            return guarded(lambda th: [d(th, None) for d in dests] and None)

        def run(th):
            k = th.seen.get(n, 0)
            th.seen[n] = k + 1
            a = address(th)
            if a is None:
                if space == "global":   # an address from loaded data (a gather): not followed, not judged
                    for d in dests if has_dest else ():
                        d(th, None)
                    return None
                raise NotEmulated(f"an address computed from a value the emulator does not know: `{s.text}`")
            if self._access(th, n, k, space, access_kind, a, size) and has_dest:
                dests[0](th, None)
            return -1 if th.done else None
        return guarded(run, memory=True)

    # ---- running

    def run_phase(self, th: _Thread, max_steps: int) -> None:
        """Run one thread until it waits at a barrier or is done."""
        code, last = self.code, len(self.code)
        while not th.done:
            if th.pc >= last:
                th.done = True
                break
            self.steps += 1
            if self.steps > max_steps:
                raise NotEmulated(f"the emulated block ran past {max_steps:,} instructions")
            step = code[th.pc](th)
            if step is None:
                th.pc += 1
            elif step == -1:
                th.done = True
            elif step == -2:
                th.pc += 1
                return
            else:
                th.pc = step
        return


def emulate(kernel: PtxKernel, args: Sequence, block: tuple[int, int, int], grid: tuple[int, int, int] = (1, 1, 1),
            block_idx: tuple[int, int, int] = (0, 0, 0), threads: Sequence[int] | None = None,
            dynamic_smem_bytes: int = 0, max_steps: int = 3_000_000) -> Trace:
    """Run one block of a kernel's PTX on the CPU, its threads in turn from barrier to barrier.

    ``args``: one per parameter, in order: an ``Array`` for a pointer (an allocation of that size, which every
    access is checked against), an int or a float. ``threads``: the linear thread indices to run (all by default;
    a subset runs as if the rest had exited). Values loaded from memory are not known: an instruction that needs one
    for an address or a branch (and any call, or an instruction the emulator does not follow that feeds them) raises
    ``NotEmulated``; arithmetic on them just stays unknown. What it gives: the addresses each thread computes, exactly
    (the bank model reads them), and the accesses that fall outside their variable or array."""
    em = _Emulation(kernel, args, block, grid, block_idx, dynamic_smem_bytes)
    bx, by, bz = block
    special_common = {"%ntid.x": bx, "%ntid.y": by, "%ntid.z": bz, "%nctaid.x": grid[0], "%nctaid.y": grid[1],
                      "%nctaid.z": grid[2], "%ctaid.x": block_idx[0], "%ctaid.y": block_idx[1],
                      "%ctaid.z": block_idx[2], "%dynamic_smem_size": dynamic_smem_bytes, "%nwarpid": None}
    chosen = range(bx * by * bz) if threads is None else threads
    pool = []
    for linear in chosen:
        tid = (linear % bx, (linear // bx) % by, linear // (bx * by))
        lane = linear % 32
        special = dict(special_common)
        special.update({"%tid.x": tid[0], "%tid.y": tid[1], "%tid.z": tid[2], "%laneid": lane, "%warpid": linear // 32,
                        "%lanemask_eq": 1 << lane, "%lanemask_lt": (1 << lane) - 1, "%lanemask_le": (2 << lane) - 1,
                        "%lanemask_gt": _mask(~((2 << lane) - 1), 32), "%lanemask_ge": _mask(~((1 << lane) - 1), 32)})
        pool.append(_Thread(tid, linear, special))
    while any(not th.done for th in pool):
        for th in pool:
            if not th.done:
                em.run_phase(th, max_steps)
        for th in pool:
            th.phase += 1
    sizes = {name: size for homes in (em.arrays, *em.windows.values()) for _, name, size in homes}
    return Trace(em.shared, em.outside, em.steps, sizes)


# --------------------------------------------------------------------------- SASS control flow

class Listing(list):
    """One kernel's SASS instructions in full, in order (as ``listing`` gives them), and where each label of the
    disassembly points (``.L_x_5`` -> the index of the instruction after it): enough to follow its branches."""

    def __init__(self, instructions=(), labels: dict[str, int] | None = None):
        super().__init__(instructions)
        self.labels = dict(labels or {})


class ControlFlowUnknown(RuntimeError):
    """The SASS branches where the listing cannot say (an indirect branch, a call): no path can be followed."""


_SASS_LABEL = re.compile(r"^\s*(\.L_\w+):\s*$")
_BRANCH_TARGET = re.compile(r"`\(([.\w]+)\)")


def listings(cubin: bytes) -> dict[str, Listing]:
    """Each kernel's SASS (``listing``) with its labels."""
    out: dict[str, Listing] = {}
    current = None
    for line in _disassembly(cubin).splitlines():
        if m := _FUNCTION.match(line):
            current = out.setdefault(m.group(1), Listing())
        elif current is not None and (m := _SASS_LABEL.match(line)):
            current.labels[m.group(1)] = len(current)
        elif current is not None and (m := _LISTED.search(line)):
            current.append(m.group(1))
    return out


def _op(instruction: str) -> tuple[bool, str]:
    """(whether the instruction is predicated, its mnemonic with modifiers)."""
    words = instruction.split()
    if words and words[0].startswith("@"):
        return True, words[1] if len(words) > 1 else ""
    return False, words[0] if words else ""


def successors(listing: Listing, n: int) -> list[int]:
    """Where control can go after instruction ``n``: the next one, a branch's target, or nowhere (EXIT)."""
    predicated, op = _op(listing[n])
    base = op.split(".")[0]
    after = [n + 1] if n + 1 < len(listing) else []
    if base in ("CALL", "BRX", "JMX", "RET", "JMP"):
        raise ControlFlowUnknown(f"{op} at instruction {n}: the listing does not say where it goes")
    if base in ("EXIT", "BPT"):
        return after if predicated else []
    target = _BRANCH_TARGET.search(listing[n])
    if target is None:
        return after
    if target.group(1) not in listing.labels:
        raise ControlFlowUnknown(f"a branch to {target.group(1)}, which the listing does not define")
    to = listing.labels[target.group(1)]
    if base == "BRA" and op in ("BRA", "BRA.U") and not predicated:
        return [to]
    if base in ("BRA", "WARPSYNC", "BREAK"):   # a predicated branch, BRA.DIV, BRA.U.ANY: either way
        return after + [to]
    return after   # BSSY and BSYNC name a reconvergence point, not a jump


def _predecessors(listing: Listing) -> dict[int, list[int]]:
    cached = getattr(listing, "_predecessors", None)
    if cached is None:
        cached = {n: [] for n in range(len(listing))}
        for n in range(len(listing)):
            for m in successors(listing, n):
                cached[m].append(n)
        listing._predecessors = cached
    return cached


def first_unguarded(listing: Listing, start: int, hazard, guard, entry_is_hazard: bool = False) -> int | None:
    """Walking back from instruction ``start`` along every control-flow path (loops included), the first
    instruction ``hazard`` accepts that is met before one ``guard`` accepts; -1 where a path reaches the kernel's
    entry with neither and ``entry_is_hazard``; None where every path meets a guard first. A predicated guard
    does not count (it may not run); a predicated hazard does. ``hazard`` and ``guard`` take an instruction's text.
    ``ControlFlowUnknown`` where the SASS branches where the listing cannot say."""
    before = _predecessors(listing)
    seen, todo = set(), list(before[start])
    if start == 0 and entry_is_hazard:
        return -1
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        text = listing[n]
        if guard(text) and not _op(text)[0]:
            continue
        if hazard(text):
            return n
        if n == 0 and entry_is_hazard:
            return -1
        todo.extend(before[n])
    return None
