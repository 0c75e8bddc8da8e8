#!/usr/bin/env bash
# Runs a command that must succeed: within a time limit, with exit status 0, and printing output
# that matches every expected extended regex (each on some line).
# usage: expect_success.sh <seconds> <regex> [<regex>...] -- <command> [args...]
set -u
limit=$1; shift
patterns=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do patterns+=("$1"); shift; done
shift  # the --
output=$(timeout "$limit" "$@" 2>&1)
status=$?
if [ "$status" -ne 0 ]; then
  echo "FAIL: '$*' exited with status $status"; echo "$output"; exit 1
fi
for p in "${patterns[@]}"; do
  if ! printf '%s\n' "$output" | grep -qE -- "$p"; then
    echo "FAIL: no line matches /$p/ in:"; echo "$output"; exit 1
  fi
done
echo "ok: exit status 0, every expected line present"
