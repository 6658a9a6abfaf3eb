#!/usr/bin/env bash
# Device helper: execute notebooks live, one after another, while the call's time lasts, each copied to
# $OUT/nb/ as soon as it is written (so a call cut short still returns the ones that ran), with its log.
# A notebook that would not finish in the time left is skipped, not started.
#   OUT=... LIMIT=580 bash scripts/device_notebooks.sh 08_fusion.ipynb 11_failure_lab.ipynb
# LIMIT: seconds this call may use in all (default 560); NEED: seconds to reserve for a notebook of unknown
# length (default 100; NEED_<NN> overrides it for notebook NN, e.g. NEED_08=220).
set -uo pipefail
cd "$(dirname "$0")/.."
T0=$(date +%s)
eval "$(bash scripts/gpu_host_wheels.sh install)" >/dev/null 2>&1
export PYTHONUNBUFFERED=1 COURSE_MODE=live PYTHONPATH="$(pwd)${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT/nb"
echo "setup $(( $(date +%s) - T0 )) s"
for nb in "$@"; do
  left=$(( ${LIMIT:-560} - ($(date +%s) - T0) ))
  var="NEED_${nb:0:2}"
  need=${!var:-${NEED:-100}}
  if [ "$left" -lt "$need" ]; then echo "SKIP $nb ($left s left, $need needed)"; continue; fi
  timeout $((left - 5)) env NBVAL=0 bash scripts/gpu_test.sh "notebooks/$nb" > "$OUT/nb/$nb.log" 2>&1
  echo "$nb rc=$? at $(( $(date +%s) - T0 )) s"
  grep -v "^\s*$" "$OUT/nb/$nb.log" | tail -6
  cp "notebooks/$nb" "$OUT/nb/"
done
