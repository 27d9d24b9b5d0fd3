#!/usr/bin/env bash
# bench/regions.sh BUILD_DIR: the cost of a `regions` query (reconcile the
# address-space model from the kernel) for 10, 1,000 and 50,000 regions,
# with each layout source, next to reading /proc/PID/maps and smaps with
# cat in the same run. Medians of BENCH_REPS (default 7) queries.
set -euo pipefail
export LC_ALL=C
BUILD=${1:-build}
MV=${BENCH_MEMVISOR:-$BUILD/memvisor}
REPS=${BENCH_REPS:-7}
T=$(mktemp -d "${TMPDIR:-/tmp}/memvisor-regions.XXXXXX")
cleanup() {
	exec 7>&- 2>/dev/null || true
	rm -rf "$T"
}
trap cleanup EXIT

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
now_us() { echo $(( $(date +%s%N) / 1000 )); }

echo "# bench/regions.sh $BUILD (BENCH_REPS=$REPS), $(date -u +%Y-%m-%dT%H:%MZ), $(uname -r)"
printf '| regions | source | ctl query, end to end (ms) | reconcile inside memvisor (ms) | read /proc/PID/maps (ms) | read /proc/PID/smaps (ms) |\n'
printf '|---:|---|---:|---:|---:|---:|\n'
for n in 10 1000 50000; do
	mkfifo "$T/in.$n"
	"$MV" run --socket "$T/s.$n" -- "$BUILD/bench/many_regions" "$n" <"$T/in.$n" >"$T/out.$n" &
	mvpid=$!
	exec 7>"$T/in.$n"
	for _ in $(seq 200); do grep -q ready "$T/out.$n" 2>/dev/null && break; sleep 0.05; done
	pid=$("$MV" ctl --socket "$T/s.$n" --json ps | python3 -c 'import json,sys; print([p["pid"] for p in json.load(sys.stdin)["processes"] if p["exe"].endswith("many_regions")][0])')
	count=$("$MV" ctl --socket "$T/s.$n" --json regions "$pid" | python3 -c 'import json,sys; print(json.load(sys.stdin)["count"])')
	# Reading the kernel's text alone, timed inside one process.
	read -r maps_us smaps_us < <(python3 - "$pid" "$REPS" <<'PY'
import sys, time
pid, reps = sys.argv[1], int(sys.argv[2])
def med(name):
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        with open(f"/proc/{pid}/{name}", "rb") as f:
            f.read()
        ts.append((time.perf_counter() - t) * 1e6)
    ts.sort()
    return ts[len(ts) // 2]
print(int(med("maps")), int(med("smaps")))
PY
)
	for src in procmap_query maps; do
		rm -f "$T/q" "$T/r"
		for _ in $(seq "$REPS"); do
			a=$(now_us)
			"$MV" ctl --socket "$T/s.$n" --json call regions "{\"pid\":$pid,\"source\":\"$src\"}" >"$T/res" || continue
			b=$(now_us)
			echo $((b - a)) >>"$T/q"
			python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["reconcile_ns"] // 1000)' "$T/res" >>"$T/r"
		done
		[ -s "$T/q" ] || continue
		printf '| %s | %s | %.2f | %.2f | %.2f | %.2f |\n' "$count" "$src" \
			"$(median <"$T/q" | awk '{print $1/1000}')" "$(median <"$T/r" | awk '{print $1/1000}')" \
			"$(echo "$maps_us" | awk '{print $1/1000}')" "$(echo "$smaps_us" | awk '{print $1/1000}')"
	done
	exec 7>&-
	wait "$mvpid"
done
