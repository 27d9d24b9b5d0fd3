#!/usr/bin/env bash
# make demo: run a small program under memvisor, query it over the control
# socket while it runs, and show what memvisor counted.
set -euo pipefail
build=${1:-build}
mv="$build/memvisor"
dir=$(mktemp -d)
trap 'exec 7>&- 2>/dev/null || true; rm -rf "$dir"' EXIT
sock="$dir/demo.sock"
mkfifo "$dir/in"

echo "== $mv run --notify-all --socket $sock -- $build/workloads/mappings"
echo "   (a program that maps anonymous, file, shared and sparse memory, then waits)"
"$mv" run --notify-all --socket "$sock" --stats-json "$dir/stats.json" -- "$build/workloads/mappings" \
	<"$dir/in" >"$dir/out" &
run_pid=$!
exec 7>"$dir/in"
for _ in $(seq 100); do grep -q '^ready' "$dir/out" 2>/dev/null && break; sleep 0.05; done
pid=$(awk '/^ready/{print $2}' "$dir/out")

echo
echo "== $mv ctl ps"
"$mv" ctl --socket "$sock" ps
echo
echo "== $mv ctl status"
"$mv" ctl --socket "$sock" status
echo
echo "== $mv ctl regions $pid   (the address space as the kernel has it now)"
"$mv" ctl --socket "$sock" regions "$pid"
echo
echo "== $mv ctl stats $pid"
"$mv" ctl --socket "$sock" stats "$pid"

exec 7>&-
wait "$run_pid"
echo
echo "== the program exited with status $?; counters written to --stats-json:"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
t = d["totals"]
n = len(d["processes"])
print("%d notifications, %d process%s; service time p50 %d ns, p99 %d ns" % (
    d["notifications"], n, "" if n == 1 else "es", t["service_ns"]["p50"], t["service_ns"]["p99"]))
' "$dir/stats.json"
