#!/usr/bin/env bash
# bench/held.sh BUILD_DIR: what looking at each thread costs the pause of
# checkpoint --live and --evict (supervisor/checkpoint/held.c: robust
# list, rseq, the exit word by an injected prctl, io_uring tables).
#
# For N idle threads (HELD_THREADS, default "1 16 128") over 64 MiB of
# memory, HELD_REPS (5) checkpoints --live each: the median pause, and the
# median time of the held scan inside it (memvisor's debug log), per
# thread. Run as root on a machine with no other job.
set -euo pipefail
BUILD=${1:-build}
MV=$BUILD/memvisor
PROG=$BUILD/bench/idle_threads
REPS=${HELD_REPS:-5}
T=$(mktemp -d "${TMPDIR:-/tmp}/memvisor-held.XXXXXX")
trap 'rm -rf "$T"' EXIT
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
printf '| threads | --live pause, ms (median of %s) | held scan, ms | per thread, us |\n|---|---|---|---|\n' "$REPS"
for n in ${HELD_THREADS:-1 16 128}; do
	: >"$T/pause"
	: >"$T/held"
	for r in $(seq "$REPS"); do
		rm -rf "$T/img" "$T/log" "$T/sock"
		mkfifo "$T/in.$n.$r"
		"$MV" run -L debug --log "$T/log" --socket "$T/sock" -- "$PROG" "$n" 64 <"$T/in.$n.$r" >"$T/out" &
		mv=$!
		exec 7>"$T/in.$n.$r"
		for _ in $(seq 100); do grep -q ready "$T/out" 2>/dev/null && break; sleep 0.1; done
		"$MV" ctl --socket "$T/sock" --json checkpoint "$T/img" --live --wait | tail -1 |
			python3 -c 'import json,sys; print(json.load(sys.stdin)["result"]["pause_ns"]/1e6)' >>"$T/pause"
		exec 7>&-
		wait $mv
		grep -o 'held: process [0-9]*: .*, \([0-9.]*\) ms' "$T/log" | awk '{print $(NF-1)}' >>"$T/held"
	done
	p=$(median <"$T/pause")
	h=$(median <"$T/held")
	printf '| %s | %.1f | %.2f | %.0f |\n' "$n" "$p" "$h" "$(echo "$h * 1000 / $n" | bc -l)"
done
