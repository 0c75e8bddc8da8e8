#!/usr/bin/env bash
# A disk that fills while saving: under a file-size limit (STRATA_FILE_SIZE_LIMIT: RLIMIT_FSIZE
# set after MPI's start-up, SIGXFSZ ignored, so writes fail with EFBIG as on a full disk; a
# shell's ulimit -f would break MPI's own start-up files) the save of step 4 fails with a sentence naming the
# file, the run exits non-zero, no temporary file or incomplete step directory is left, and the
# step-2 checkpoint still loads.
# usage: checkpoint_disk_full.sh <strata> <mpirun command ending in -np>
STRATA=$1; shift; MPIRUN=("$@")
source "$(dirname "$0")/checkpoint_lib.sh"
"${MPIRUN[@]}" 2 "$STRATA" train --topology gcd:2 --plan zero3 --steps 2 --save "$work/ck" "${quiet[@]}" > /dev/null
set +e
out=$(STRATA_FILE_SIZE_LIMIT=65536 timeout 60 "${MPIRUN[@]}" 2 "$STRATA" train \
  --topology gcd:2 --plan zero3 --steps 4 --resume auto --save "$work/ck" "${quiet[@]}" 2>&1)
status=$?
set -e
[ "$status" -ne 0 ] || fail "the save under a 64 KiB file limit succeeded"
line=$(printf '%s\n' "$out" | grep -E "error( on rank [01]| \(every rank\)): .*rank-0000[01]\.bin: writing failed \(File too large\); the checkpoint was not written" || true)
[ -n "$line" ] || { echo "$out"; fail "no sentence naming the shard file"; }
[ -z "$(find "$work/ck" -name '*.partial')" ] || fail "temporary files left: $(find "$work/ck" -name '*.partial')"
[ ! -e "$work/ck/step-00000004" ] || fail "the incomplete step-4 directory was left behind"
"$STRATA" inspect "$work/ck/step-00000002" > /dev/null || fail "the step-2 checkpoint no longer loads"
echo "ok: exit $status, '$line'; step 2 intact, nothing partial left"
