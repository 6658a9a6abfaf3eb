#!/usr/bin/env bash
# Every course kernel once, small, under compute-sanitizer: memcheck, racecheck, synccheck
# and initcheck. Fails if any tool reports an error. Needs a CUDA GPU.
# memcheck runs without --leak-check: the course's kernels allocate nothing, and the host
# allocations it would report are CuPy's own caches (memory pool, cuRAND states) alive at exit.
# API errors are not reported: cuda.bindings (the TMA's tensor maps are encoded through it) probes
# driver entry points with cuGetProcAddress, and the ones this driver lacks answer "invalid value"
# by design. Errors in the kernels themselves are still reported.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$(pwd)${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY=${PY:-python3}
SAN=${SANITIZER:-compute-sanitizer}
# Nothing is checked without the tool or a GPU: say so, rather than report every tool as failing.
if ! command -v "$SAN" >/dev/null; then
  echo "make sanitize needs $SAN, which ships with the CUDA toolkit (its bin/ folder), on a machine with an NVIDIA GPU;" \
       "it is not on PATH here, so nothing was checked." >&2
  exit 2
fi
if ! why=$($PY -c 'from course_lib.core import runtime; ok, why = runtime._probe_gpu(); print(why); raise SystemExit(not ok)'); then
  echo "make sanitize runs every kernel on a CUDA GPU, and none can be used here ($why): nothing was checked." >&2
  exit 2
fi
status=0
for tool in memcheck racecheck synccheck initcheck; do
  echo "== compute-sanitizer --tool $tool"
  extra=()
  [ "$tool" = racecheck ] && extra=(--racecheck-report all)
  if ! "$SAN" --tool "$tool" "${extra[@]}" --report-api-errors no --error-exitcode 86 --print-limit 20 $PY -m course_lib.sanitize; then
    echo "!! $tool reported errors"; status=1
  fi
done
exit $status
