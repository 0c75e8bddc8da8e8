#!/usr/bin/env bash
# Runs a command that must fail: within a time limit (no hang), with a non-zero exit status, and
# printing a line that matches the expected sentence exactly once.
# usage: expect_failure.sh <seconds> <extended regex> <command> [args...]
set -u
limit=$1; pattern=$2; shift 2
output=$(timeout "$limit" "$@" 2>&1)
status=$?
if [ "$status" -eq 124 ]; then
  echo "FAIL: '$*' did not finish within ${limit}s (a hang)"; exit 1
fi
if [ "$status" -eq 0 ]; then
  echo "FAIL: '$*' succeeded but should have been refused"; echo "$output"; exit 1
fi
count=$(printf '%s\n' "$output" | grep -cE -- "$pattern")
if [ "$count" -ne 1 ]; then
  echo "FAIL: expected one line matching /$pattern/, found $count, in:"; echo "$output"; exit 1
fi
echo "ok: exit status $status, message: $(printf '%s\n' "$output" | grep -E -- "$pattern")"
