#!/usr/bin/env bash
# bench/shm_evict.sh BUILD_DIR: evict and reload of shared memory against
# private memory of the same size, in the same run (bench/README.md,
# "Shared memory").
#
# Each repetition runs tests/workloads/shm_tree twice under memvisor: a
# parent and 4 children sharing a memfd of SHM_MIB MiB ("shared"), and the
# same tree with SHM_MIB MiB of private memory in the parent and 1 MiB
# shared ("private"). For each: the tree's Rss (smaps_rollup) and
# RssShmem (status) summed over its processes, and the system's Shmem
# (meminfo), before the evict, after it, after an unthrottled reload
# (the processes have not touched anything yet: a loaded shared page is in
# the page cache, not yet in their page tables), and after every process
# read every page; the reload's rate (bytes over load_ns). Medians of
# SHM_REPS runs.
#
# Knobs: SHM_MIB=256 SHM_REPS=3
set -euo pipefail
export LC_ALL=C

BUILD=${1:-build}
MV=$BUILD/memvisor
WL=$BUILD/workloads/shm_tree
MIB=${SHM_MIB:-256}
REPS=${SHM_REPS:-3}
T=$(mktemp -d -t memvisor-shm.XXXXXX)
MVPID=
cleanup() {
	exec 7>&- 2>/dev/null || true
	[ -z "$MVPID" ] || kill "$MVPID" 2>/dev/null || true
	rm -rf "$T"
}
trap cleanup EXIT

echo "# $0 $* (SHM_MIB=$MIB SHM_REPS=$REPS)"

ctl() { "$MV" ctl --socket "$T/s" "$@"; }

say() { # LINE PATTERN
	local n
	n=$(wc -l <"$T/out")
	echo "$1" >&7
	until [ "$(wc -l <"$T/out")" -gt "$n" ]; do sleep 0.05; done
	tail -n +$((n + 1)) "$T/out" | head -1 | grep -q "$2"
}

# "rss_kB rssshmem_kB shmem_kB" of the tree and the system.
mem() {
	local p r=0 s=0
	for p in $PIDS; do
		r=$((r + $(awk '/^Rss:/{print $2}' /proc/"$p"/smaps_rollup)))
		s=$((s + $(awk '/^RssShmem:/{print $2}' /proc/"$p"/status)))
	done
	echo "$r $s $(awk '/^Shmem:/{print $2}' /proc/meminfo)"
}

run() { # KIND REP
	local args
	if [ "$1" = shared ]; then args=(--kind memfd --mib "$MIB"); else args=(--kind anon --mib 1 --private-mib "$MIB"); fi
	rm -rf "$T/in" "$T/out" "$T/img" "$T/s"
	mkfifo "$T/in"
	"$MV" run --socket "$T/s" -- "$WL" "${args[@]}" <"$T/in" >"$T/out" 2>"$T/err" 7>&- &
	MVPID=$!
	exec 7>"$T/in"
	until grep -q '^ready' "$T/out" 2>/dev/null; do sleep 0.1; done
	say pids '^pids'
	PIDS=$(grep '^pids' "$T/out" | cut -d' ' -f2-)
	local before evicted reloaded touched
	before=$(mem)
	ctl checkpoint "$T/img" --evict --wait >/dev/null 2>&1
	evicted=$(mem)
	ctl --json reload "$T/img" --wait 2>/dev/null | tail -1 >"$T/r.json"
	reloaded=$(mem)
	say check '^ok 5'
	touched=$(mem)
	local rate
	rate=$(python3 -c "import json;r=json.load(open('$T/r.json'))['result'];print(r['bytes']*1e3//max(r['load_ns'],1)/1e3)")
	echo "$1 $before $evicted $reloaded $touched $rate" >>"$T/raw"
	exec 7>&-
	wait "$MVPID" || true
	MVPID=
}

for ((rep = 0; rep < REPS; rep++)); do
	run shared "$rep"
	run private "$rep"
done

python3 - "$T/raw" "$MIB" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
mib = int(sys.argv[2])
print(f"{mib} MiB, medians of {len(rows)//2} runs; MiB (Rss / RssShmem of the tree, Shmem of the system)")
print(f"{'memory':8} {'before':>20} {'after evict':>20} {'after reload':>20} {'after touch':>20} {'reload GB/s':>12}")
for kind in ("shared", "private"):
    r = [x[1:] for x in rows if x[0] == kind]
    med = lambda i: statistics.median(float(x[i]) for x in r)
    cols = []
    for s in range(4):
        cols.append(f"{med(3*s)/1024:6.0f}/{med(3*s+1)/1024:5.0f}/{med(3*s+2)/1024:6.0f}")
    print(f"{kind:8} {cols[0]:>20} {cols[1]:>20} {cols[2]:>20} {cols[3]:>20} {med(12):12.2f}")
EOF
