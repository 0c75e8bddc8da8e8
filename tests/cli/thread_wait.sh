#!/usr/bin/env bash
# --thread-wait reaches the OpenMP runtime, which reads its policy only when it loads: passive
# starts the program again with OMP_WAIT_POLICY=passive (the header says so), spin keeps the
# default, and a user's own OMP_WAIT_POLICY is kept whatever the flag says.
# usage: thread_wait.sh <strata>
STRATA=$1
source "$(dirname "$0")/checkpoint_lib.sh"
unset OMP_WAIT_POLICY GOMP_SPINCOUNT STRATA_THREAD_WAIT_SETTLED
run() { "$STRATA" train --model tiny --steps 1 --threads 2 "${quiet[@]}" "$@" 2>&1 | grep "^threads: "; }
line=$(run --thread-wait passive)
[[ $line == *"sleep (OMP_WAIT_POLICY=passive)"* ]] || fail "--thread-wait passive gave '$line'"
line=$(run --thread-wait spin)
[[ $line == *"OpenMP's default"* ]] || fail "--thread-wait spin gave '$line'"
line=$(OMP_WAIT_POLICY=active run --thread-wait passive)
[[ $line == *"spin (OMP_WAIT_POLICY=active)"* ]] || fail "a user's OMP_WAIT_POLICY=active gave '$line'"
"$STRATA" train --thread-wait sleep > "$work/bad.log" 2>&1 && fail "--thread-wait sleep was accepted"
grep -q "thread-wait" "$work/bad.log" || fail "the refusal of --thread-wait sleep does not name the flag"
echo "thread_wait: ok"
