#!/usr/bin/env bash
# A refactor guard: 4-rank hier3 runs with int8 weight gathers and int4 gradient reduction (fp32
# and bf16 working weights, two micro-batches, an evaluation every 3 steps) must give the losses,
# gradient norms, traffic-meter totals and checkpoint file digests recorded in
# tests/golden/hier3_quantized.<vector set>.txt, bit for bit. The plain-loop matmul keeps the bits
# independent of the BLAS kernels a CPU picks. A change meant to alter results records anew with
# `golden_run.sh <strata> <mpirun...> --record` and says why in its commit.
# usage: golden_run.sh <strata> <mpirun command ending in -np> [--record]
set -euo pipefail
STRATA=$1; shift
record=0
if [ "${*: -1}" = "--record" ]; then record=1; set -- "${@:1:$#-1}"; fi
MPIRUN=("$@")
# The kernels' reductions (omp simd) run as wide as the build's vector set: 16 lanes and 8 sum in
# different orders, so the bits are recorded per set (`strata --version` names it).
isa=$("$STRATA" --version | sed -n 's/.*(\(.*\) build).*/\1/p')
[ -n "$isa" ] || { echo "FAIL: '$STRATA --version' names no vector instruction set"; exit 1; }
golden="$(dirname "$0")/../golden/hier3_quantized.$isa.txt"
if [ "$record" = 0 ] && [ ! -f "$golden" ]; then
  echo "FAIL: no results are recorded for a $isa build ($golden): record them once with" \
    "golden_run.sh <strata> <mpirun...> --record on a commit whose results are trusted"
  exit 1
fi
work=$(mktemp -d /tmp/strata-golden.XXXXXX)
trap 'rm -rf "$work"' EXIT
for dtype in fp32 bf16; do
  "${MPIRUN[@]}" 4 "$STRATA" train --topology gcd:2,gpu:2 --plan hier3,quant_weights=int8,quant_grads=int4 \
    --dtype "$dtype" --matmul reference --threads 1 --steps 6 --grad-accum 2 --batch-size 2 --val-every 3 \
    --log-every 1000 --save "$work/$dtype" --metrics "$work/$dtype.jsonl" > "$work/$dtype.out" 2>&1 ||
    { cat "$work/$dtype.out"; echo "FAIL: the $dtype run failed"; exit 1; }
  # The figures that must not move (not the timings), then every shard file's digest.
  /usr/bin/python3 - "$dtype" "$work/$dtype.jsonl" >> "$work/now.txt" <<'PY'
import json, sys
dtype, path = sys.argv[1], sys.argv[2]
for line in open(path):
    d = json.loads(line)
    if d["type"] == "step":
        print(f"{dtype} step {d['step']} loss {d['loss']!r} grad_norm {d['grad_norm']!r}")
    elif d["type"] == "val":
        print(f"{dtype} step {d['step']} val_loss {d['val_loss']!r}")
    elif d["type"] == "traffic":
        print(f"{dtype} traffic {json.dumps(d, sort_keys=True)}")
PY
  for f in "$work/$dtype"/step-00000006/rank-*.bin; do
    echo "$dtype $(basename "$f") sha256 $(sha256sum "$f" | cut -d' ' -f1)" >> "$work/now.txt"
  done
done
if [ "$record" = 1 ]; then
  cp "$work/now.txt" "$golden"
  echo "recorded $(wc -l < "$golden") lines in $golden"
  exit 0
fi
if ! diff -u "$golden" "$work/now.txt"; then
  echo "FAIL: the runs differ from $golden (lines with - were recorded, + are now)"
  exit 1
fi
echo "ok: $(wc -l < "$golden") recorded figures and digests identical (fp32 and bf16 hier3 int8/int4 on 4 ranks)"
