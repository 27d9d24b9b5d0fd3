#!/usr/bin/env bash
# bench/sparse_evict.sh BUILD_DIR: an evict's stop against the kernel's
# own walk of the same page tables, for a program that reserves
# terabytes and writes a few pages in them (sanitizers, JVMs, Go, V8 and
# WebAssembly runtimes), plus a heap.
#
# tests/workloads/sparse_reserve with SPARSE_TIB (64) TiB reserved, one
# page written every SPARSE_GIB (4) GiB, SPARSE_HEAP (100) MiB of heap.
# SPARSE_REPS (5) rounds of: the program's own PAGEMAP_SCAN of the
# reservation ("walk", the floor: every page table of it is visited),
# checkpoint --evict (the pause and its phases), reload, check. Medians,
# and the pause as a multiple of the walk. Run on a machine with no
# other job.
set -euo pipefail
BUILD=${1:-build}
MV=$BUILD/memvisor
PROG=$BUILD/workloads/sparse_reserve
REPS=${SPARSE_REPS:-5}
T=$(mktemp -d "${TMPDIR:-/tmp}/memvisor-sparse.XXXXXX")
mv=
cleanup() {
	exec 7>&- 2>/dev/null || true
	[ -n "$mv" ] && wait "$mv" 2>/dev/null || true
	rm -rf "$T"
}
trap cleanup EXIT
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
mkfifo "$T/in"
"$MV" run --socket "$T/sock" -- "$PROG" --tib "${SPARSE_TIB:-64}" --every-gib "${SPARSE_GIB:-4}" \
	--heap-mib "${SPARSE_HEAP:-100}" <"$T/in" >"$T/out" &
mv=$!
exec 7>"$T/in"
for _ in $(seq 600); do grep -q '^ready' "$T/out" 2>/dev/null && break; sleep 0.1; done
ask() { # LINE: the program's next line
	local n
	n=$(wc -l <"$T/out")
	echo "$1" >&7
	for _ in $(seq 600); do [ "$(wc -l <"$T/out")" -gt "$n" ] && break; sleep 0.05; done
	tail -n +$((n + 1)) "$T/out" | head -1
}
: >"$T/walk"
: >"$T/pause"
: >"$T/phases"
for r in $(seq "$REPS"); do
	w=$(ask walk)
	[ "$w" != "walk none" ] || { echo "no PAGEMAP_SCAN here (Linux 6.7)"; exit 0; }
	echo "${w#walk }" >>"$T/walk"
	rm -rf "$T/img"
	"$MV" ctl --socket "$T/sock" --json checkpoint "$T/img" --evict --wait 2>/dev/null | tail -1 >"$T/ck.json"
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["result"]; print(d["pause_ns"]/1e6)' "$T/ck.json" >>"$T/pause"
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["result"]; print("stop %.1f layout %.1f copy %.1f" % (d["stop_ns"]/1e6, d["layout_ns"]/1e6, d["copy_ns"]/1e6))' "$T/ck.json" >>"$T/phases"
	"$MV" ctl --socket "$T/sock" reload "$T/img" --wait >/dev/null 2>&1
	c=$(ask check)
	[ "$c" = ok ] || { echo "round $r: check says: $c"; exit 1; }
done
pages=$(awk '/^ready/{print $3}' "$T/out")
wm=$(median <"$T/walk")
pm=$(median <"$T/pause")
printf '| reserved | pages written | heap | kernel walk, ms | evict pause, ms | pause / walk |\n|---|---|---|---|---|---|\n'
printf '| %s TiB | %s | %s MiB | %.1f | %.1f | %.1f |\n' "${SPARSE_TIB:-64}" "$pages" "${SPARSE_HEAP:-100}" "$wm" "$pm" "$(echo "$pm / $wm" | bc -l)"
echo "phases of each pause (ms):"
cat "$T/phases"
