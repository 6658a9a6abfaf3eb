#!/usr/bin/env bash
# Device helper: record the named experiments (each on its own, so one failure keeps the others),
# then optionally run compute-sanitizer tools on a Python smoke expression. Results under $OUT.
#   OUT=... SMOKE='from course_lib.labs import fusion as lab_fusion; lab_fusion.fusion_smoke()' TOOLS="memcheck racecheck" \
#     bash scripts/device_run.sh fusion.chains fusion.epilogue
set -uo pipefail
cd "$(dirname "$0")/.."
eval "$(bash scripts/gpu_host_wheels.sh install)"
export PYTHONUNBUFFERED=1 COURSE_MODE=live PYTHONPATH="$(pwd)"
mkdir -p "$OUT"
if [ -n "${SMOKE:-}" ]; then
  python -c "$SMOKE" && echo "smoke passed"
fi
for name in "$@"; do
  python -m course_lib.record "$name" 2>&1 | tail -80
done
for tool in ${TOOLS:-}; do
  echo "== compute-sanitizer --tool $tool"
  timeout "${TOOL_TIMEOUT:-200}" compute-sanitizer --tool "$tool" --error-exitcode 9 python -c "$SMOKE" 2>&1 | tail -8
  echo "rc=${PIPESTATUS[0]}"
done
tar czf "$OUT/recorded.tgz" data/recorded
