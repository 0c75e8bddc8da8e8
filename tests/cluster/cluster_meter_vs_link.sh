#!/usr/bin/env bash
# The traffic meter's outermost-level bytes are what crosses each host's link: per host, the bytes
# its veth counted, less one Ethernet + IPv4 + TCP header (with timestamps) per packet, equal the
# bytes the meter says that host's ranks sent, plus launch, wire-up and MPI protocol headers.
# usage: cluster_meter_vs_link.sh <strata> <scripts/cluster>
STRATA=$1 CLUSTER=$2
source "$(dirname "$0")/cluster_lib.sh"
cluster_up --hosts 2 --rate 1gbit
for plan in zero3 "hier3,quant_grads=int4"; do
  "$CLUSTER" counters > "$work/before"
  on_cluster train --model tiny --steps 6 --grad-accum 2 --batch-size 2 --dtype bf16 --val-every 0 --log-every 1000 \
    --topology gpu:2,node:2 --plan "$plan" --metrics "$work/m.jsonl" > "$work/log" 2>&1 ||
    { cat "$work/log"; fail "$plan run failed"; }
  "$CLUSTER" counters > "$work/after"
  /usr/bin/python3 - "$plan" "$work/before" "$work/after" "$work/m.jsonl" <<'PY'
import json, sys
plan, before, after, metrics = sys.argv[1:]
def counters(path):
    out = {}
    for line in open(path):
        f = line.split()
        out[f[0]] = {f[i]: int(f[i + 1]) for i in range(1, len(f), 2)}
    return out
b, a = counters(before), counters(after)
traffic = [json.loads(l) for l in open(metrics) if json.loads(l).get("type") == "traffic"][-1]
nodes = traffic["outermost_by_node"]
HEADER = 14 + 20 + 32   # Ethernet, IPv4, TCP with the timestamp option: per packet (a GSO packet has one)
for n, host in enumerate(sorted(a)):
    wire = a[host]["sent_bytes"] - b[host]["sent_bytes"]
    packets = a[host]["sent_packets"] - b[host]["sent_packets"]
    meter = nodes[n]["bytes_sent"]
    rest = wire - packets * HEADER - meter
    # Not in the meter: the launch and wire-up (oob), forwarded output, MPI's own message headers
    # (tens of bytes per message and 128 KiB fragment), control sums, keepalives.
    calls = sum(l["calls"] for l in traffic["levels"]) // traffic["world_size"]
    allowance = 32 * 1024 + 0.002 * meter + 64 * calls
    print(f"{plan} {host}: link {wire} B in {packets} packets ({packets * HEADER} B of headers), meter {meter} B, "
          f"unmetered {rest} B (allowed 0 ... {allowance:.0f})")
    assert meter > 100_000, f"FAIL: the meter counted only {meter} B over the link"
    assert -4096 <= rest <= allowance, f"FAIL: {host}: {rest} B on the link beyond the meter and headers"
PY
done
