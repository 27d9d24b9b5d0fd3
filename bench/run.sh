#!/usr/bin/env bash
# bench/run.sh BUILD_DIR: the "memvisor run" benchmark (bench/README.md).
#
# Runs each benchmark natively and under memvisor, interleaved in ABBA
# order (native, supervised, then supervised, native in the next
# repetition) so drift and warm caches favour neither side, and in every
# repetition also the raw notification floor (notif_floor). Raw numbers
# go to one file, one per line; bench/report.py turns them into markdown
# tables of medians.
#
# Knobs (environment):
#   BENCH_REPS=5        repetitions; medians are over these
#   BENCH_ONLY=a,b      run only these benchmarks (names in the first column)
#   BENCH_MV_ARGS=...   extra "memvisor run" options, e.g. "--policy FILE"
#   BENCH_MEMVISOR=PATH another memvisor binary to measure (default BUILD/memvisor)
#   BENCH_LOOP_N=2000   ops per batch of mmap_loop (5 batches a run)
#   BENCH_FLOOR_N=1000  ops per batch of notif_floor (5 batches a run)
#   BENCH_PYTHON=python3, BENCH_NODE=node, BENCH_GCC=gcc
#   BENCH_RAW=FILE      keep the raw numbers (default: a temporary file)
#   BENCH_CHECKPOINT=1  then the checkpoint benchmark (bench/checkpoint.sh,
#                       3 repetitions unless CKPT_REPS says); 0 skips it
set -euo pipefail
export LC_ALL=C

BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
MV=${BENCH_MEMVISOR:-$BUILD/memvisor}
REPS=${BENCH_REPS:-5}
LOOP_N=${BENCH_LOOP_N:-2000}
FLOOR_N=${BENCH_FLOOR_N:-1000}
read -r -a MV_ARGS <<<"${BENCH_MV_ARGS:-}"

T=$(mktemp -d "${TMPDIR:-/tmp}/memvisor-bench.XXXXXX")
trap 'rm -rf "$T"' EXIT
RAW=${BENCH_RAW:-$T/raw}
: >"$RAW"

die() {
	echo "bench: $*" >&2
	exit 1
}

# The interpreter itself, not a wrapper such as a pyenv shim (a bash
# script that would add its own forks and execs to every run).
resolve_python() {
	local py=${BENCH_PYTHON:-python3}
	command -v "$py" >/dev/null || return 0
	"$py" -c 'import sys; print(sys.executable)'
}

PY=$(resolve_python)
NODE=$(command -v "${BENCH_NODE:-node}" || true)
GCC=$(command -v "${BENCH_GCC:-gcc}" || true)

# name, unit (ns: the loop's own ns per op; ms: wall time of the whole
# program), notified calls per op (loops) or - (programs), label.
BENCHES=(
	"pair ns 2 mmap+touch+munmap 64 KiB"
	"munmap ns 1 munmap of an unmapped range"
	"mprotect ns 1 mprotect 64 KiB R<->RW"
	"getppid ns 0 getppid (never notified)"
	"true ms - true (memvisor start and exit)"
	"python ms - python3 alloc.py 4"
	"gcc ms - gcc -O2 -g notif_floor.c"
	"bash ms - bash subshells.sh 15"
	"node ms - node alloc.js 1"
)
declare -A UNIT

# Sets CMD to the benchmark's command line; fails when its tool is absent.
cmd_of() {
	local loop=("$BUILD/bench/mmap_loop" -b 5 -m)
	case $1 in
	pair | munmap | mprotect | getppid) CMD=("${loop[@]}" "$1" "$LOOP_N") ;;
	python) [ -n "$PY" ] && CMD=("$PY" "$HERE/alloc.py" 4) ;;
	gcc) [ -n "$GCC" ] && CMD=("$GCC" -O2 -g -D_GNU_SOURCE -o "$T/nf" "$HERE/notif_floor.c") ;;
	true) CMD=("$(type -P true)") ;;
	bash) CMD=(bash "$HERE/subshells.sh" 15) ;;
	node) [ -n "$NODE" ] && CMD=("$NODE" "$HERE/alloc.js" 1) ;;
	*) return 1 ;;
	esac
}

selected() {
	[ -z "${BENCH_ONLY:-}" ] || [[ ",$BENCH_ONLY," == *",$1,"* ]]
}

# run_one NAME UNIT MODE: one timed run, recorded as "run NAME MODE VALUE".
# Loops report their own ns per op (startup excluded); programs are timed
# by wall clock around the whole command, in ms.
run_one() {
	local name=$1 unit=$2 mode=$3 out=$T/out pre=() v
	[ "$mode" = sup ] && pre=("$MV" run "${MV_ARGS[@]}" --)
	local t0=$EPOCHREALTIME
	"${pre[@]}" "${CMD[@]}" >"$out" 2>"$T/err" || {
		cat "$T/err" >&2
		die "$name ($mode) failed: ${pre[*]} ${CMD[*]}"
	}
	local t1=$EPOCHREALTIME
	if [ "$unit" = ns ]; then
		v=$(sed -n 's/.*ns_per_op=\([0-9.]*\).*/\1/p' "$out")
	else
		v=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) * 1000 }')
	fi
	echo "run $name $mode $v" >>"$RAW"
}

# The floor, once a repetition: its key=value lines, prefixed "floor".
run_floor() {
	"$BUILD/bench/notif_floor" -n "$FLOOR_N" -b 5 >"$T/out" || die "notif_floor failed"
	sed 's/^/floor /' "$T/out" >>"$RAW"
}

# One untimed supervised run with --stats-json: the notifications memvisor
# answered and the time it spent on them (RECV to SEND), over all processes:
# "stats NAME COUNT SERVICE_TOTAL_NS WORST_P99_NS MAX_NS".
count_notifications() {
	local name=$1
	"$MV" run "${MV_ARGS[@]}" --stats-json "$T/stats.json" -- "${CMD[@]}" >/dev/null 2>&1 || return 0
	"$PY" - "$T/stats.json" "$name" >>"$RAW" <<-'EOF' || true
		import json, sys
		d = json.load(open(sys.argv[1]))
		svc = [p["stats"]["service_ns"] for p in d["processes"]]
		total = sum(s["count"] * s["mean"] for s in svc)
		p99 = max([s["p99"] for s in svc] or [0])
		mx = max([s["max"] for s in svc] or [0])
		print("stats", sys.argv[2], d["notifications"], round(total), p99, mx)
	EOF
}

header() {
	local cpu
	cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
	echo "# memvisor run benchmark"
	echo
	echo "command: BENCH_REPS=$REPS BENCH_LOOP_N=$LOOP_N BENCH_FLOOR_N=$FLOOR_N" \
		"${BENCH_ONLY:+BENCH_ONLY=$BENCH_ONLY }${BENCH_MV_ARGS:+BENCH_MV_ARGS=\"$BENCH_MV_ARGS\" }${BENCH_MEMVISOR:+BENCH_MEMVISOR=$BENCH_MEMVISOR }$0 $*"
	echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "host: $(uname -sr), $(nproc) CPUs, ${cpu:-unknown CPU}"
	echo "memvisor: $("$MV" --version 2>/dev/null) ${BENCH_MV_ARGS:-(no --policy)}," \
		"listener SYNC_WAKE_UP $MV_SYNC"
	echo "tools: $("$PY" -V 2>&1) ($PY), node ${NODE:+$("$NODE" --version)}," \
		"gcc ${GCC:+$("$GCC" -dumpversion)}"
	echo
}

# memvisor logs at info level when the kernel refuses the flag.
mv_sync_state() {
	if "$MV" run --log-level info -- true 2>&1 | grep -q 'SYNC_WAKE_UP unavailable'; then
		echo "refused"
	else
		echo "set"
	fi
}

# One repetition: every benchmark native and supervised, then the floor.
repetition() {
	local rep=$1 name mode
	printf 'repetition %d/%d:' "$rep" "$REPS" >&2
	for name in "${NAMES[@]}"; do
		cmd_of "$name"
		printf ' %s' "$name" >&2
		for mode in $( ((rep % 2)) && echo nat sup || echo sup nat); do
			run_one "$name" "${UNIT[$name]}" "$mode"
		done
	done
	printf ' floor\n' >&2
	run_floor
}

main() {
	[ -x "$MV" ] || die "$MV not built (run make first)"
	[ -n "$PY" ] || die "python3 is needed for the report"
	MV_SYNC=$(mv_sync_state)
	header "$@"
	echo "meta reps $REPS" >>"$RAW"
	echo "meta mv_sync $MV_SYNC" >>"$RAW"
	NAMES=()
	local b name unit
	for b in "${BENCHES[@]}"; do
		read -r name unit _ <<<"$b"
		UNIT[$name]=$unit
		selected "$name" && cmd_of "$name" && NAMES+=("$name") && echo "bench $b" >>"$RAW"
	done
	for ((rep = 1; rep <= REPS; rep++)); do
		repetition "$rep"
	done
	for name in "${NAMES[@]}"; do
		cmd_of "$name"
		count_notifications "$name"
	done
	"$PY" "$HERE/report.py" "$RAW"
	if [ "${BENCH_CHECKPOINT:-1}" != 0 ]; then
		echo
		CKPT_REPS=${CKPT_REPS:-3} "$HERE/checkpoint.sh" "$BUILD"
	fi
}

main "$@"
