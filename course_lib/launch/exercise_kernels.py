"""The CUDA of the write-it-yourself kernel exercises, as files: ``kernels/exercises/<name>/``
holds ``starter.cu`` (what the learner edits), ``solution.cu`` (the hidden reference) and
``wrong_<label>.cu`` (deliberately wrong solutions). Each is read and compiled the way a learner's
cell is (course headers pasted in, NVRTC's messages naming the cell's lines), so notebook 11's lab
can launch the same variants the checker judges."""
from __future__ import annotations

import re
from dataclasses import dataclass

from course_lib.core import cuda

EXERCISE_DIR = cuda.KERNEL_DIR / "exercises"
CELL_NAME = "your cell"
MYSTERY_THREADS = 256   # the row kernels' block size (capstone, row sums): ⌈rows / ROWS_PER_BLOCK⌉ blocks of 256

_ROWS_PER_BLOCK = re.compile(r"#define\s+ROWS_PER_BLOCK\s+(\d+)")
_NUMERIC_DEFINE = re.compile(r"^\s*#define\s+([A-Za-z_]\w*)\s+(-?\d+)\s*$", re.M)


def strip_comments(source: str) -> str:
    return re.sub(r"//[^\n]*|/\*.*?\*/", "", source, flags=re.S)


def numeric_defines(source: str) -> dict[str, int]:
    """Every ``#define NAME <integer>`` of ``source`` (comments stripped first), as NAME -> value."""
    return {name: int(value) for name, value in _NUMERIC_DEFINE.findall(strip_comments(source))}


def rows_per_block(source: str) -> int | None:
    """The ROWS_PER_BLOCK a row kernel's source defines (the checker's launch reads it), or None."""
    m = _ROWS_PER_BLOCK.search(strip_comments(source))
    return int(m.group(1)) if m else None


@dataclass(frozen=True)
class ExerciseKernel:
    """One exercise's folder of CUDA files and the entry point they define."""

    name: str      # the folder under kernels/exercises/
    kernel: str    # the extern "C" __global__ entry point

    def source(self, file: str) -> str:
        """The text of ``<name>/<file>.cu`` (file: "starter", "solution", "wrong_<label>", ...)."""
        path = EXERCISE_DIR / self.name / f"{file}.cu"
        if not path.exists():
            raise FileNotFoundError(f"no {path.name} for exercise {self.name!r}; there are: {', '.join(self.files())}")
        return path.read_text()

    def files(self) -> list[str]:
        """The names (stems) of the exercise's .cu files."""
        return sorted(p.stem for p in (EXERCISE_DIR / self.name).glob("*.cu"))

    def compile(self, source: str, arch: str) -> tuple[bytes, cuda.KernelResources | None, list[str]]:
        """(cubin, the kernel's resources, problems) of a source compiled as a learner's cell: a cell
        may #include a course header, and NVRTC's messages keep the cell's line numbers."""
        try:
            code = f'#line 1 "{CELL_NAME}"\n{cuda.paste_headers(source, CELL_NAME)}'
        except FileNotFoundError as exc:
            return b"", None, [f"{exc}. The headers a cell can include are: "
                               f"{', '.join(sorted(h.name for h in cuda.KERNEL_DIR.glob('*.cuh')))}."]
        try:
            cubin, log = cuda.compile_source(code, arch, f"{self.name}.cu", use_cache=False)
        except cuda.NvrtcUnavailable as exc:
            return b"", None, [f"Not compiled: {exc} Run the notebook where NVRTC installs (Linux, or a GPU machine)."]
        except cuda.CompileError as exc:
            lines = [ln for ln in str(exc).splitlines()[1:] if ln.strip()]
            return b"", None, ["Your code did not compile. NVRTC says:", *[f"  {ln}" for ln in lines[:20]]]
        res = cuda.parse_ptxas_report(log, arch).get(self.kernel)
        if res is None:
            return b"", None, [f'Your cell compiled but defines no kernel `extern "C" __global__ void {self.kernel}(...)`; '
                               f"the checker launches that name."]
        return cubin, res, []

    def resources(self, source: str, arch: str) -> cuda.KernelResources:
        """ptxas's report of ``source``; a source that does not compile raises ValueError with NVRTC's log."""
        _, res, problems = self.compile(source, arch)
        if problems:
            raise ValueError("\n".join(problems))
        return res

    def load(self, file: str, arch: str) -> tuple[object, cuda.KernelResources]:
        """(launchable function, resources) of one of the exercise's files, compiled for ``arch`` (a GPU)."""
        cubin, res, problems = self.compile(self.source(file), arch)
        if problems:
            raise RuntimeError("\n".join(problems))
        return cuda.load_cubin(cubin).get_function(self.kernel), res


MYSTERY_RMS_NORM = ExerciseKernel("mystery_rms_norm", "rms_norm")   # notebook 11's capstone
TRANSPOSE_TILE = ExerciseKernel("transpose_tile", "transpose")      # notebook 05's tiled transpose
