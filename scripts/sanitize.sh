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
