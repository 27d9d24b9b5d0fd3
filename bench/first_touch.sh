#!/usr/bin/env bash
# bench/first_touch.sh BUILD_DIR: how long a thread waits on its first
# touch of an evicted page (bench/first_touch.c), served from an image in
# the page cache, one page at a time, no reload running.
#
# FT_MIB (256) MiB in small pages, evicted; the image's pages file read
# once into the page cache; then FT_TOUCHES (1000) touches of random
# pages. Touches of pages a read-ahead already put back cost a few
# microseconds (the VM's first user access to a page); the others waited
# for a fault worker. FT_REPS (5) runs: the medians of each run's fault
# p50/p90/p99, the count of faults, and the p50 of all touches. Run on a
# machine with no other job.
set -euo pipefail
BUILD=${1:-build}
MV=$BUILD/memvisor
PROG=$BUILD/bench/first_touch
REPS=${FT_REPS:-5}
T=$(mktemp -d "${TMPDIR:-/tmp}/memvisor-ft.XXXXXX")
trap 'exec 7>&- 2>/dev/null || true; rm -rf "$T"' EXIT
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
: >"$T/rows"
for r in $(seq "$REPS"); do
	rm -rf "$T/img" "$T/sock" "$T/in"
	mkfifo "$T/in"
	"$MV" run --socket "$T/sock" -- "$PROG" "${FT_MIB:-256}" 0 <"$T/in" >"$T/out" &
	mv=$!
	exec 7>"$T/in"
	for _ in $(seq 100); do grep -q ready "$T/out" 2>/dev/null && break; sleep 0.1; done
	"$MV" ctl --socket "$T/sock" checkpoint "$T/img" --evict --wait >/dev/null 2>&1
	cat "$T/img/pages" >/dev/null
	echo "go ${FT_TOUCHES:-1000}" >&7
	for _ in $(seq 600); do grep -q '^touch' "$T/out" && break; sleep 0.1; done
	exec 7>&-
	wait $mv
	grep -q '^bad' "$T/out" && { echo "run $r: a page did not hold its pattern"; exit 1; }
	awk '/^touch/{t=$4} /^faults/{print $2, $4, $6, $8, t}' "$T/out" >>"$T/rows"
done
col() { awk -v c="$1" '{print $c}' "$T/rows" | median; }
printf '| faults (of %s touches) | fault p50, us | p90 | p99 | all touches p50, us |\n|---|---|---|---|---|\n' "${FT_TOUCHES:-1000}"
printf '| %s | %s | %s | %s | %s |\n' "$(col 1)" "$(col 2)" "$(col 3)" "$(col 4)" "$(col 5)"
