"""One-time upgrade of a notebook's stored run from format 1 (the experiments' results only) to the layout
``course_lib.render`` reads, for notebooks whose last live GPU run predates it.

What the run did not store is derived from what it did, and marked so (``course_run.migrated``):
- the device: from the machine manifest the run stored with its first result (name, compute capability,
  SMs, L2, shared memory per SM, memory); the three attributes a manifest lacks (registers per SM,
  threads per SM, shared memory per block) from the spec table's entry for that GPU;
- the software: from the same manifest (driver, CUDA runtime, NVRTC, CuPy, PyTorch, clocks);
- the banner's time: from the banner line the run itself printed (the first cell's output).
The kernel exercises' runs were not stored: ``values_stored`` is false, and a rendered verdict says its
kernel was not run for this page. The next live run replaces all of it.

    python scripts/migrate_stored_runs.py notebooks/NN_name.ipynb ...
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from course_lib.core import hardware, stored_run  # noqa: E402

BANNER = re.compile(r"LIVE mode: measured on .*, (\d{4}-\d\d-\d\d) (\d\d:\d\d) UTC\.")


def migrate(path: Path) -> bool:
    nb = nbformat.read(path, as_version=4)
    run = nb.metadata.get("course_run")
    if not run or run.get("format", 1) >= stored_run.FORMAT:
        return False
    m = run["results"][0]["machine"]
    sheet = hardware.spec(m["gpu"])
    device = {"name": m["gpu"], "compute_capability": m["compute_capability"], "sm_count": m["sm_count"],
              "l2_bytes": m["l2_bytes"], "smem_per_sm_bytes": m["smem_per_sm_bytes"],
              "max_smem_per_block_bytes": sheet.max_smem_per_block_bytes, "registers_per_sm": sheet.registers_per_sm,
              "max_threads_per_sm": sheet.max_threads_per_sm, "total_memory_bytes": m["total_memory_bytes"]}
    environment = {"mode": "live", "gpu": m["gpu"], "compute_capability": m["compute_capability"],
                   "driver": m["driver"], "cuda_runtime": m["cuda_runtime"], "nvrtc": m["nvrtc"], "cupy": m["cupy"],
                   "torch": m["torch"], "clocks_mhz": m.get("clocks_mhz") or {}, "problems": []}
    first = next(c for c in nb.cells if c.cell_type == "code")
    text = "".join(o.get("text", "") for o in first.outputs)
    day, minute = BANNER.search(text).groups()
    run.update(format=stored_run.FORMAT, device=device, environment=environment, values_stored=False,
               values=[{"key": "banner time", "inputs": {}, "value": f"{day}T{minute}:00Z"}],
               migrated={"from_format": 1, "derived": "device and software from the first result's machine "
                         "manifest (registers per SM, threads per SM and shared memory per block from the spec "
                         "table); the banner's time from the banner the run printed; no kernel runs stored"})
    nb.metadata["course_run"] = run
    nbformat.write(nb, path)
    return True


if __name__ == "__main__":
    for p in sys.argv[1:]:
        print(p, "migrated" if migrate(Path(p)) else "already in the current layout")
