#!/usr/bin/env bash
# bench/reload.sh BUILD_DIR: evict and reload under load (bench/reload.md).
#
# The seed workload of gVisor PR #16565 (bench/reload_hot.c): a mapping of
# RELOAD_MIB MiB, every page dirtied, N hot threads calling getcpu with
# their output in the mapping, the call rate sampled every 50 ms. Each run:
# steady state, `ctl checkpoint DIR --evict --wait`, `ctl reload DIR --rate
# RATE --wait` (with the walker: one getcpu per 2 MiB right after the
# reload starts), and on until 20 s after the reload began. Reported per
# configuration (medians of RELOAD_REPS runs): hot-call rate during the
# reload relative to the steady rate in the windows 0-5 s and 0-20 s after
# the reload started, per-call latency p50/p99/p99.9 before and during the
# reload, time to full reload, fault latency. Then the fill bandwidth of
# an unthrottled reload from a page-cache-resident image, next to memcpy
# into fresh memory. Each configuration's first run is kept as CSV and
# plotted as SVG in RELOAD_OUT.
#
# Knobs: RELOAD_MIB=1024 RELOAD_REPS=3 RELOAD_RATE=131 RELOAD_CONFIGS="8 32 8w"
#        RELOAD_THP=1 (the mapping madvise(MADV_HUGEPAGE)d; 0: small pages)
#        RELOAD_OUT=bench/reload-results RELOAD_DIR (where images go)
set -euo pipefail
export LC_ALL=C

BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
MV=$BUILD/memvisor
HOT=$BUILD/bench/reload_hot
MIB=${RELOAD_MIB:-1024}
REPS=${RELOAD_REPS:-3}
RATE=${RELOAD_RATE:-131}
CONFIGS=${RELOAD_CONFIGS:-8 32 8w}
THP=()
[ "${RELOAD_THP:-1}" = 0 ] || THP=(--thp)
OUT=${RELOAD_OUT:-$HERE/reload-results}
T=$(mktemp -d "${TMPDIR:-/tmp}/memvisor-reload.XXXXXX")
DIR=${RELOAD_DIR:-$T}
mkdir -p "$OUT"
MVPID=
cleanup() {
	exec 7>&- 2>/dev/null || true
	[ -z "$MVPID" ] || kill "$MVPID" 2>/dev/null || true
	rm -rf "$T" "$DIR/reload.img"
}
trap cleanup EXIT

ctl() { "$MV" ctl --socket "$T/s" "$@"; }

start() { # THREADS
	rm -f "$T/in" "$T/out"
	mkfifo "$T/in"
	"$MV" run --socket "$T/s" -- "$HOT" --mib "$MIB" --threads "$1" --csv "$T/run.csv" "${THP[@]}" \
		<"$T/in" >"$T/out" 2>"$T/err" 7>&- &
	MVPID=$!
	exec 7>"$T/in"
	until grep -q '^ready' "$T/out" 2>/dev/null; do sleep 0.1; done
}

say() { # LINE WORD: send, wait for WORD
	local n
	n=$(wc -l <"$T/out")
	echo "$1" >&7
	until tail -n +$((n + 1)) "$T/out" | grep -q "$2"; do sleep 0.02; done
}

finish() {
	echo quit >&7
	exec 7>&-
	wait "$MVPID" || true
	MVPID=
}

one_run() { # CONFIG REP
	local threads=${1%w} walker=
	[ "$1" = "${1%w}" ] || walker=1
	start "$threads"
	sleep 6
	say "mark evict" marked
	rm -rf "$DIR/reload.img"
	ctl --json checkpoint "$DIR/reload.img" --evict --wait | tail -1 >"$T/evict.json"
	say "mark reload" marked
	local t0=$SECONDS
	ctl --json reload "$DIR/reload.img" --rate "$RATE" >"$T/reload.json"
	[ -z "$walker" ] || say walk walked
	ctl --json job "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job"])' "$T/reload.json")" --wait |
		tail -1 >"$T/job.json"
	say "mark after" marked
	while [ $((SECONDS - t0)) -lt 21 ]; do sleep 0.5; done
	finish
	python3 "$HERE/reload_report.py" run "$1" "$T/run.csv" "$T/out" "$T/job.json" "$T/evict.json" >>"$T/runs.jsonl"
	[ "$2" != 1 ] || cp "$T/run.csv" "$OUT/reload-$1.csv"
}

fill_bandwidth() {
	start 0
	rm -rf "$DIR/reload.img"
	ctl --json checkpoint "$DIR/reload.img" --evict --wait >/dev/null
	cat "$DIR/reload.img/pages" >/dev/null # page-cache resident
	ctl --json reload "$DIR/reload.img" --wait | tail -1 >"$T/fill.json"
	finish
	"$HOT" --mib "$MIB" --memcpy "$MIB" >"$T/memcpy.txt"
	python3 "$HERE/reload_report.py" fill "$T/fill.json" "$T/memcpy.txt" >>"$T/runs.jsonl"
}

for rep in $(seq 1 "$REPS"); do
	for c in $CONFIGS; do
		echo "run $rep: $c hot threads, $MIB MiB, --rate $RATE" >&2
		one_run "$c" "$rep"
	done
done
fill_bandwidth
python3 "$HERE/reload_report.py" report "$T/runs.jsonl" "$OUT" "$MIB" "$RATE"
