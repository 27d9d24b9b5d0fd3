#!/usr/bin/env bash
# make demo: run a small program under memvisor, query it over the control
# socket while it runs, and show what memvisor counted.
set -euo pipefail
build=${1:-build}
mv="$build/memvisor"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
sock="$dir/demo.sock"

echo "== memvisor run -- python3 (allocating, then sleeping while we ask)"
"$mv" run --socket "$sock" --stats-json "$dir/stats.json" -- python3 -c '
import time
blocks = [bytearray(1 << 20) for _ in range(64)]
print("demo: allocated 64 MiB", flush=True)
time.sleep(1.5)
print("demo: done", flush=True)
' &
pid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
sleep 0.5
if [ -S "$sock" ]; then
	echo "== memvisor ctl --socket $sock ps"
	"$mv" ctl --socket "$sock" ps
	echo "== memvisor ctl --socket $sock status"
	"$mv" ctl --socket "$sock" status
fi
wait "$pid"
echo "== per-process counters written at exit ($dir/stats.json)"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
for p in d["processes"]:
    s = p["stats"]
    print("pid %d %s: %d calls %s, p50 %d ns, p99 %d ns" % (p["pid"], p["exe"], s["total"],
          {k: sum(v.values()) for k, v in s["calls"].items()}, s["service_ns"]["p50"], s["service_ns"]["p99"]))
' "$dir/stats.json"
