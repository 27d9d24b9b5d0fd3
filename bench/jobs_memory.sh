#!/usr/bin/env bash
# bench/jobs_memory.sh BUILD_DIR [ROUNDS] [STEP] [MODE]: does memvisor's
# memory grow with the number of jobs? (docs/reliability.md, "Memory over
# many jobs").
#
# A small program (tests/workloads/reload_wl, 4 MiB) under memvisor, then
# ROUNDS (300) rounds of one of, by MODE:
#   plain   ctl checkpoint DIR --wait
#   live    ctl checkpoint DIR --live --wait
#   evict   ctl checkpoint DIR --evict --wait, then ctl reload DIR --wait
# each image removed after its round. Every STEP (50) rounds, one line:
# memvisor's VmRSS, and with gdb, malloc's totals (malloc_stats: bytes
# taken from the kernel, bytes in use) and how many arenas it has. Bytes
# in use that grow are a leak; bytes from the kernel and VmRSS that grow
# while those in use do not are the allocator keeping what was freed.
# Extra arguments are the environment of memvisor (MALLOC_ARENA_MAX=2).
set -euo pipefail
export LC_ALL=C

BUILD=$(cd "${1:-build}" && pwd)
ROUNDS=${2:-300}
STEP=${3:-50}
MODE=${4:-plain}
shift $(($# < 4 ? $# : 4))
D=$(mktemp -d "${TMPDIR:-/tmp}/jobsmem.XXXXXX")
trap 'exec 7>&- 2>/dev/null || true; rm -rf "$D"' EXIT
mkfifo "$D/in"
env "$@" "$BUILD/memvisor" run --socket "$D/s" -- "$BUILD/workloads/reload_wl" --mib 4 \
	<"$D/in" >"$D/out" 2>>"$D/err" &
MV=$!
exec 7>"$D/in"
for _ in $(seq 100); do
	[ -S "$D/s" ] && grep -q ready "$D/out" && break
	sleep 0.1
done

report() { # ROUND
	local rss malloc=""
	rss=$(awk '/^VmRSS/{print $2}' /proc/$MV/status)
	if command -v gdb >/dev/null; then
		: >"$D/err"
		gdb -p $MV -batch -ex 'call (void)malloc_stats()' >/dev/null 2>&1 || true
		malloc=$(awk '/^Total \(incl. mmap\):/{t=1}
			t && /system bytes/{s=$NF} t && /in use bytes/{u=$NF}
			/^Arena [0-9]+:/{n++}
			END{printf "malloc from the kernel %d B, in use %d B, %d arenas", s, u, n}' "$D/err")
	fi
	echo "round $1: VmRSS $rss kB; $malloc"
}

c() { "$BUILD/memvisor" ctl --socket "$D/s" "$@" >/dev/null 2>&1 || echo "round $i: ctl $* failed"; }

report 0
for i in $(seq 1 "$ROUNDS"); do
	case $MODE in
	live) c checkpoint "$D/img" --live --wait ;;
	evict)
		c checkpoint "$D/img" --evict --wait
		c reload "$D/img" --wait
		;;
	*) c checkpoint "$D/img" --wait ;;
	esac
	rm -rf "$D/img"
	[ $((i % STEP)) -ne 0 ] || report "$i"
done
exec 7>&-
wait $MV
