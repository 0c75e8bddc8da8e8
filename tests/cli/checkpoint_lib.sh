# Shared by the checkpoint tests: the strata binary, mpirun with its flags, a scratch directory,
# and metrics helpers. Sourced; expects STRATA and MPIRUN (an mpirun command line ending in -np).
set -euo pipefail
work=$(mktemp -d /tmp/strata-ckpt-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
quiet=(--metrics "" --val-every 0 --log-every 1000)
# The loss of step N from a metrics file, to full precision.
loss_at() { /usr/bin/python3 -c "import json,sys
for l in open(sys.argv[1]):
    d=json.loads(l)
    if d.get('type')=='step' and d['step']==int(sys.argv[2]): print(repr(d['loss']))" "$1" "$2"; }
losses_from() { /usr/bin/python3 -c "import json,sys
print(' '.join(repr(d['loss']) for d in map(json.loads, open(sys.argv[1])) if d.get('type')=='step' and d['step']>=int(sys.argv[2])))" "$1" "$2"; }
digests() { "$STRATA" inspect "$1" | sed -n '/^digests/,$p'; }
fail() { echo "FAIL: $*"; exit 1; }
