"""Record ptxas's reports for every compile the notebooks ask for, into data/compile_reports.json.

    python scripts/record_compile_reports.py

Runs where NVRTC is installed (no GPU needed). It compiles every kernel family for every
architecture the course supports, plus each variant (tile macros, register caps) that a notebook
compiles in replay: those it finds by running the notebooks under nbval with
COURSE_LOG_COMPILES set. A machine without NVRTC (macOS, Windows) then shows these reports,
labelled as recorded; tests/test_no_cuda_packages.py fails when one is missing or stale.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from course_lib.core import cuda  # noqa: E402


def notebook_compiles() -> set[tuple[str, str, tuple[str, ...]]]:
    with tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False) as log:
        path = log.name
    env = dict(os.environ, COURSE_MODE="replay", COURSE_LOG_COMPILES=path)
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
                    "notebooks/", "tests/test_widgets.py", "tests/test_widgets_occupancy.py"],
                   cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    found = {(f, a, tuple(o)) for f, a, o in map(json.loads, Path(path).read_text().splitlines())}
    os.unlink(path)
    return found


def main() -> int:
    wanted = {(f, a, ()) for f in cuda.families() for a in cuda.family_archs(f)}
    wanted |= notebook_compiles()
    reports = {}
    for family, arch, options in sorted(wanted):
        fam = cuda.compile_family(family, arch, options)
        reports[cuda.report_key(family, arch, options)] = {
            "source_sha256": cuda.source_sha256(family), "nvrtc": cuda.installed_nvrtc_version(), "log": fam.log}
    cuda.RECORDED_REPORTS.write_text(json.dumps(reports, indent=1, sort_keys=True) + "\n")
    print(f"{len(reports)} reports -> {cuda.RECORDED_REPORTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
