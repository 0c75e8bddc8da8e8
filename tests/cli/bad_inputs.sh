#!/usr/bin/env bash
# A table of bad inputs (flags, config files, data and checkpoint paths, launches): each must end
# within 30 s with a non-zero exit and its sentence, and leave no partial file and no changed
# input behind. One line per case; the first failure stops the table.
# usage: bad_inputs.sh <strata> <mpirun command ending in -np>
STRATA=$1; shift; MPIRUN=("$@")
source "$(dirname "$0")/checkpoint_lib.sh"
STRATA=$(readlink -f "$STRATA")
cd "$work"
mkfifo fifo
mkdir adir
printf 'hello world, some training text that is long enough\n%.0s' $(seq 200) > data.txt
printf '# notes\nUTF-8 text, caf\xc3\xa9, not tokens\n' > notes.md
printf '[model]\nlr = 0.1\n' > misplaced.toml
printf 'grad-clip = 1.0\ngrad_clip = 2.0\n' > twice.toml
printf 'lr = inf\n' > inf.toml
printf 'stepz = 3\n' > typo.toml
printf 'save_every = 3\n' > renamed.toml
printf 'base = "cpu"\n[device]\nefficiency = 5\n' > efficient.toml
cp data.txt data.orig
"$STRATA" train --steps 2 --save good "${quiet[@]}" > /dev/null
cp -r good good.orig
"$STRATA" export good --out good.safetensors > /dev/null
n=0
check() {  # check <expected exit: usage|fail> <regex> <command...>
  local want=$1 pattern=$2; shift 2
  set +e
  out=$(timeout 30 "$@" 2>&1 < /dev/null)
  status=$?
  set -e
  n=$((n + 1))
  [ "$status" -ne 124 ] || fail "case $n hung: $*"
  [ "$status" -ne 0 ] || fail "case $n was accepted: $*"
  [ "$want" != usage ] || [ "$status" -eq 2 ] || { echo "$out"; fail "case $n exited $status, not the usage code 2: $*"; }
  printf '%s\n' "$out" | grep -qE -- "$pattern" || { echo "$out"; fail "case $n: no line matches /$pattern/: $*"; }
  [ -z "$(find . -name '*.partial')" ] || fail "case $n left a partial file: $*"
  cmp -s data.txt data.orig || fail "case $n changed the data file: $*"
  diff -r good good.orig > /dev/null || fail "case $n changed the checkpoint: $*"
  printf '%3d  exit %-3d %s\n     -> %s\n' "$n" "$status" "$*" "$(printf '%s\n' "$out" | grep -E -- "$pattern" | head -1)"
}
S=$STRATA
check usage "Could not convert: --steps = x" $S train --steps x
check usage "The following arguments were not expected: 3 --stepz" $S train --stepz 3
check usage "lr must be a finite number \(got inf\)" $S train --lr inf
check usage "weight-decay must be a finite number" $S train --weight-decay nan
check usage "lr must be a finite number" $S train --config inf.toml
check usage "unknown key 'stepz'" $S train --config typo.toml
check usage "'save_every' was renamed 'checkpoint-every'" $S train --config renamed.toml
check usage "key 'lr' belongs in \[optimizer\], not in \[model\]" $S train --config misplaced.toml
check usage "'grad_clip' sets grad-clip a second time" $S train --config twice.toml
check usage "--data 'fifo' is a FIFO \(named pipe\); it must be a regular file" $S train --data fifo
check usage "--data 'adir' is a directory; it must be a regular file" $S train --data adir
check usage "--data 'missing.bin': no such file" $S train --data missing.bin
check usage "notes.md: looks like text" $S train --data notes.md
check usage "--metrics 'data.txt' would write over 'data.txt', an input of this run" $S train --data data.txt --metrics data.txt
check usage "--metrics '/dev/null' is a character device" $S train --metrics /dev/null
check usage "--save 'data.txt' is not a directory" $S train --data data.txt --save data.txt
check usage "--save '/dev/full' is not a directory" $S train --save /dev/full
check usage "--save 'no-such-dir/ck': the directory 'no-such-dir' does not exist" $S train --save no-such-dir/ck
check usage "--metrics 'good/step-00000002/manifest.json' is inside a checkpoint directory" $S train --resume good --metrics good/step-00000002/manifest.json
check usage "--resume 'nowhere': no such checkpoint directory" $S train --resume nowhere
check usage "--resume 'data.txt' is not a directory" $S train --resume data.txt
check usage "--resume auto needs --save" $S train --resume auto
check usage "was written for model 'tiny' \(L2 C64" $S train --n-embd 32 --resume good
check usage "has completed 2 steps, more than --steps 1" $S train --steps 1 --resume good
check usage "the inner levels hold 4294967294 ranks, more than the job's 2" "${MPIRUN[@]}" 2 $S train --topology gcd:2147483647,gpu:2,node:*
check usage "describes 12 ranks but the job has 2" "${MPIRUN[@]}" 2 $S train --topology gcd:2,gpu:3,node:2
check usage "rank 1 was started with other settings than rank 0: \[optimizer\] 'steps' is 9 here and 5 on rank 0" \
  "${MPIRUN[@]}" 1 $S train --topology gcd:2 --plan zero3 --steps 5 "${quiet[@]}" : -np 1 $S train --topology gcd:2 --plan zero3 --steps 9 "${quiet[@]}"
check usage "unknown cluster 'nowhere'" $S simulate --cluster nowhere
check usage "checkpoint 'data.txt' is not a directory" $S inspect data.txt
check usage "--out 'adir' is a directory; an output is a regular file, and this one is not replaced" $S export good --out adir
check usage "--max-live-bytes: 99999999999999999999 is out of range" $S train --max-live-bytes 99999999999999999999
check usage "'gcd:2@infGB/s': 'inf' is not a valid bandwidth" "${MPIRUN[@]}" 2 $S train --topology 'gcd:2@infGB/s'
check usage "level name 'g#p\\\$u!' must start with a letter" "${MPIRUN[@]}" 2 $S train --topology 'g#p$u!:2'
check usage "'device.efficiency' is a fraction of the peak and must be at most 1 \(got 5\)" $S simulate --cluster efficient.toml
check usage "--save-every was renamed --checkpoint-every" $S train --save-every 3
check usage "--save '/proc/self': cannot write in the directory '/proc/self'" $S train --save /proc/self
check usage "needs about .* on each rank .* more than this machine's" $S train --model custom --n-layer 200 --n-embd 16384 --n-head 128 --vocab-size 50257 --context-length 2048
check usage "vocab_pad 128\), not this run's 'tiny' \(.* vocab_pad 64\)" $S train --vocab-pad 64 --resume good
check usage "STRATA_INJECT_FAILURE=0:0 needs the sharding engine" env STRATA_INJECT_FAILURE=0:0 $S train
check usage "STRATA_INJECT_FAILURE=9:0 names rank 9, and the job has ranks 0 .. 1" env STRATA_INJECT_FAILURE=9:0 "${MPIRUN[@]}" 2 $S train --topology gcd:2 --plan zero3
check usage "STRATA_INJECT_FAILURE=1:7 names step 7 \(0-based\), and the run has steps 0 .. 1" env STRATA_INJECT_FAILURE=1:7 "${MPIRUN[@]}" 2 $S train --steps 2 --topology gcd:2 --plan zero3
check usage "STRATA_INJECT_FAILURE=1:5 names step 5 \(0-based\), and this run takes steps 0 .. 1: it would never fire" env STRATA_INJECT_FAILURE=1:5 "${MPIRUN[@]}" 2 $S train --steps 10 --stop-after 2 --topology gcd:2 --plan zero3
check usage "--init-from 'data.txt' is not a safetensors file: its first 8 bytes give a header of" $S train --init-from data.txt
check usage "--init-from 'adir' is a directory" $S train --init-from adir
check usage "--model small is L4 C256 heads 4 vocab 8192 context 128, but --init-from 'good.safetensors' holds L2 C64" $S train --init-from good.safetensors --model small
check usage "--n-embd 32 disagrees with --init-from 'good.safetensors', which holds 64" $S train --init-from good.safetensors --n-embd 32
check usage "is not a safetensors file" "${MPIRUN[@]}" 2 $S train --topology gcd:2 --plan zero3 --init-from data.txt
echo "ok: $n bad inputs, each refused with its sentence; no hang, no partial file, inputs unchanged"
