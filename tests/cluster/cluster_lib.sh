# Shared by the virtual-cluster tests: skip (exit 77, with the reason) where namespaces cannot be
# made, a scratch directory, a 2-host cluster made for the test and always removed, and helpers.
# Sourced; expects STRATA (the binary) and CLUSTER (scripts/cluster).
set -euo pipefail
if ! why=$("$CLUSTER" check); then echo "SKIP: $why"; exit 77; fi
work=$(mktemp -d /tmp/strata-cluster-test.XXXXXX)
"$CLUSTER" down 2>/dev/null || true
trap '"$CLUSTER" down 2>/dev/null || true; rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1
fail() { echo "FAIL: $*"; exit 1; }
# Up, or a skip when this machine makes the hosts but TCP cannot cross between them (exit 77).
cluster_up() { local status=0; "$CLUSTER" up "$@" || status=$?; [ "$status" -ne 77 ] || exit 77
  [ "$status" -eq 0 ] || fail "scripts/cluster up failed"; }
# 2 hosts x 2 ranks: gpu is the level inside a host, node the link between hosts.
on_cluster() { "$CLUSTER" run --ranks-per-host 2 --timeout "${run_timeout:-120}" -- "$STRATA" "$@" < /dev/null; }
losses_from() { /usr/bin/python3 -c "import json,sys
print(' '.join(repr(d['loss']) for d in map(json.loads, open(sys.argv[1])) if d.get('type')=='step'))" "$1"; }
# The 4 step losses of RUN.jsonl equal ONE.jsonl's (the one-process run) within 1e-5 relative.
# usage: losses_match_one_process LABEL RUN.jsonl ONE.jsonl
losses_match_one_process() {
  /usr/bin/python3 - "$1" "$(losses_from "$2")" "$(losses_from "$3")" <<'PY'
import sys
label, got, want = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
assert len(got) == len(want) == 4, f"FAIL: {label}: {len(got)} and {len(want)} steps"
for step, (g, w) in enumerate(zip(got, want), 1):
    rel = abs(g - w) / abs(w)
    assert rel < 1e-5, f"FAIL: {label} step {step}: loss {g!r} vs {w!r} in one process ({rel:.1e})"
print(f"ok: {label} matches one process: {got}")
PY
}
digests() { "$STRATA" inspect "$1" | sed -n '/^digests/,$p'; }
