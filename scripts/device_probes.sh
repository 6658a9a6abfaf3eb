#!/usr/bin/env bash
# Device helper: notebook 13's CUDA attention checked and timed beside SDPA, then the probes that answer open
# questions of notebook 12 (decode kernel variants, the L2 read ceiling with ncu, two ops on two streams), each
# output under $OUT, then notebook 12 live in the time left.
#   OUT=... bash scripts/device_probes.sh
set -uo pipefail
cd "$(dirname "$0")/.."
T0=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
eval "$(bash scripts/gpu_host_wheels.sh install)" >/dev/null 2>&1
# unbuffered: a step cut off by its timeout still leaves what it printed in its file under $OUT
export PYTHONUNBUFFERED=1 PYTHONPATH="$(pwd)${PYTHONPATH:+:$PYTHONPATH}"
[ -f scripts/check_attention.py ] && timeout 100 python3 scripts/check_attention.py > "$OUT/attention.txt" 2>&1; tail -30 "$OUT/attention.txt" 2>/dev/null
timeout 120 python3 scripts/probe_decode_attention.py > "$OUT/decode.txt" 2>&1; tail -25 "$OUT/decode.txt"
timeout 70 python3 scripts/probe_l2_ceiling.py > "$OUT/probe.txt" 2>&1; tail -10 "$OUT/probe.txt"
for v in same cg rotated; do
  for m in 16; do
    echo "== $v $m" >> "$OUT/ncu.txt"
    timeout 40 ncu --metrics l1tex__t_sector_hit_rate.pct,lts__t_sector_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read.sum,dram__bytes_read.sum,gpu__time_duration.sum \
      -k regex:probe python3 scripts/probe_l2_ceiling.py launch $v $m >> "$OUT/ncu.txt" 2>&1
  done
done
grep -E "==|hit_rate|sectors_src|bytes_read|duration|rror" "$OUT/ncu.txt"
COURSE_MODE=live timeout 90 python3 - > "$OUT/streams.txt" 2>&1 <<PY
import json
from course_lib.measure import experiments as e
from course_lib.labs import transformer_layer as t
r = e.run_live("layer.streams", e.resolve_params("layer.streams"))
json.dump(r.to_record("layer.streams probe"), open("$OUT/streams.json", "w"), default=str)
for row in t.stream_rows(r):
    print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in row.items()})
for c in r.cases:
    if "timeline_us" in c.extra:
        print(c.name, c.extra["timeline_us"])
PY
tail -12 "$OUT/streams.txt"
echo "probes done at $(( $(date +%s) - T0 )) s"
# NOTEBOOKS=none: the probes only (device_notebooks.sh would try to run a notebook named "none")
if [ "${NOTEBOOKS:-}" != none ]; then
  OUT=$OUT LIMIT=$(( ${LIMIT:-585} - ($(date +%s) - T0) )) NEED=150 bash scripts/device_notebooks.sh ${NOTEBOOKS:-12_transformer_layer.ipynb}
fi
