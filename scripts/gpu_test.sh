#!/usr/bin/env bash
# On a CUDA machine: (optionally) record every experiment, execute every notebook live with its
# outputs written back, then run nbval over them live. Works on a host without internet when the
# notebook stack was brought as wheels (scripts/gpu_host_wheels.sh).
#
#   scripts/gpu_test.sh            # execute + nbval
#   RECORD=1 scripts/gpu_test.sh   # record data/recorded/<gpu>/ first
#   NBVAL=0 scripts/gpu_test.sh    # execute and write back, without the second (nbval) run
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
export PYTHONUNBUFFERED=1
export PYTHONPATH="$(pwd)${PYTHONPATH:+:$PYTHONPATH}"
if ! why=$($PY -c 'from course_lib.core import runtime; ok, why = runtime._probe_gpu(); print(why); raise SystemExit(not ok)' 2>&1); then
  echo "make gpu-test runs the notebooks live on a CUDA GPU, and none can be used here (${why##*$'\n'})." >&2
  echo "Without a GPU, 'make test' replays them and 'make render' draws them from their stored runs." >&2
  exit 2
fi
if ! $PY -c 'import nbval, nbclient, ipykernel, ipywidgets' 2>/dev/null; then
  eval "$(bash scripts/gpu_host_wheels.sh install)"
fi
export COURSE_MODE=live   # the suite's conftest.py defaults to replay; this is the live run
$PY -c 'from course_lib.core import runtime; assert runtime.mode() == "live", "no usable GPU: this is the GPU test"'

if [ "${RECORD:-0}" = 1 ]; then
  $PY -m course_lib.record
fi

$PY - "$@" <<'PY'
import os, sys, tempfile, time
from pathlib import Path
import nbformat
from nbclient import NotebookClient
sys.path.insert(0, "scripts")
from notebook_run import stamp_run
from course_lib.core.session import now_utc

paths = [Path(p) for p in sys.argv[1:]] or sorted(Path("notebooks").glob("[0-9]*.ipynb"))
for path in paths:
    nb = nbformat.read(path, as_version=4)
    t0, started = time.perf_counter(), now_utc()
    log = Path(tempfile.mkdtemp()) / "results.jsonl"
    os.environ["COURSE_RUN_LOG"] = str(log)   # the kernel inherits it: its live results land there
    # store_widget_state: the calculators are drawn when the committed notebook is opened, before a run.
    NotebookClient(nb, timeout=600, kernel_name="python3", store_widget_state=True,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    stamp_run(nb, log, started)
    nbformat.write(nb, path)
    print(f"executed {path} live in {time.perf_counter() - t0:.1f} s")
PY
# The committed outputs are the render of the stored run (course_lib.render, on any machine): render the
# notebooks where the course's pinned packages are (make render NOTEBOOKS=...) before committing them.
# The prose against the run just made: a figure that moved outside its claim fails, naming the sentence.
if [ $# -gt 0 ]; then ran=("$@"); else ran=(notebooks/[0-9]*.ipynb); fi
$PY -m course_lib.measure.claims --source notebook "${ran[@]}"
if [ "${NBVAL:-1}" = 0 ]; then exit 0; fi   # NBVAL=0: execute and write back only (saves a second run)
$PY -m pytest -p no:cacheprovider --nbval-lax --nbval-current-env -q "${ran[@]}"
