#!/usr/bin/env bash
# bench/live.sh BUILD_DIR: checkpoint --live against a stop-the-world
# checkpoint, side by side, round by round (bench/README.md, "Live
# checkpoint").
#
# Two programs, each under its own memvisor:
#   idle    bench/ckpt_fill: LIVE_MIB MiB written densely, then idle
#   writer  tests/workloads/live_counter: LIVE_MIB MiB that LIVE_THREADS
#           threads keep writing, one word a page, sweep after sweep
# Each round checkpoints each program twice, stop-the-world and --live
# (in alternating order), and reports the pause, the job time, and for
# the writer its sweep rate over the job against its rate over the 2 s
# before (the program's share of its steady speed while it is copied).
# Medians of LIVE_REPS rounds.
#
# With LIVE_MODES="evict evict_live" the same for `--evict` and
# `--evict --live` (each followed by an untimed `reload --wait`): the
# pause is then the sum of the program's stops (for --evict --live the
# write-protection and the drop after the commit).
#
# Knobs: LIVE_MIB=1024 LIVE_REPS=5 LIVE_THREADS=1 LIVE_DIR (where images go)
#        LIVE_MODES="stw live" (any of stw live evict evict_live)
#        LIVE_THP=1: the idle program's memory in transparent huge pages
#        (the pause is then mostly page-table walks over 512x fewer entries)
#        LIVE_BUFFER=SIZE: the checkpoints' --buffer (staging memory)
#        LIVE_HOT_MIB=H: the writer sweeps H MiB of its LIVE_MIB, the rest
#        written once (a working set smaller than the memory)
set -euo pipefail
export LC_ALL=C

BUILD=${1:-build}
MV=$BUILD/memvisor
MIB=${LIVE_MIB:-1024}
REPS=${LIVE_REPS:-5}
THREADS=${LIVE_THREADS:-1}
MODES=${LIVE_MODES:-stw live}
. "$(dirname "$0")/lib.sh"
bench_images live live.img "${LIVE_DIR:-}"
now() { date +%s.%N; }

echo "# memvisor live checkpoint benchmark"
echo
THP=()
[ "${LIVE_THP:-0}" = 1 ] && THP=(-t)
echo "command: LIVE_MIB=$MIB LIVE_REPS=$REPS LIVE_THREADS=$THREADS LIVE_THP=${LIVE_THP:-0}${LIVE_BUFFER:+ LIVE_BUFFER=$LIVE_BUFFER}${LIVE_HOT_MIB:+ LIVE_HOT_MIB=$LIVE_HOT_MIB} LIVE_MODES=\"$MODES\" $0 $*"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); host: $(uname -sr), $(nproc) CPUs; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

mkfifo "$T/in.idle" "$T/in.writer"
"$MV" run --socket "$T/idle.sock" -- "$BUILD/bench/ckpt_fill" -m "$MIB" -s 1 "${THP[@]}" <"$T/in.idle" >"$T/out.idle" &
PIDS+=($!)
exec 7>"$T/in.idle"
HOT=${LIVE_HOT_MIB:-$MIB}
COLD=()
[ "$HOT" -lt "$MIB" ] && COLD=(--cold-mib $((MIB - HOT)))
"$MV" run --socket "$T/writer.sock" -- "$BUILD/workloads/live_counter" --mib "$HOT" "${COLD[@]}" --threads "$THREADS" \
	<"$T/in.writer" >"$T/out.writer" &
PIDS+=($!)
exec 8>"$T/in.writer"
for c in idle writer; do
	for _ in $(seq 600); do grep -q '^ready' "$T/out.$c" 2>/dev/null && break; sleep 0.1; done
done

sweeps() { # the writer's sweep count now
	local n
	n=$(wc -l <"$T/out.writer")
	echo sweeps >&8
	until [ "$(wc -l <"$T/out.writer")" -gt "$n" ]; do sleep 0.01; done
	tail -1 "$T/out.writer" | awk '{print $2}'
}

ckpt() { # CASE MODE -> "pause_ms job_ms live share second_pause_ms arming_stop_ms"
	local case=$1 mode=$2 s0 t0 s1 t1 s2 t2 flags=()
	case $mode in
	live) flags=(--live) ;;
	evict) flags=(--evict) ;;
	evict_live) flags=(--evict --live) ;;
	esac
	[ -z "${LIVE_BUFFER:-}" ] || flags+=(--buffer "$LIVE_BUFFER")
	rm -rf "$DIR/live.img"
	if [ "$case" = writer ]; then
		s0=$(sweeps); t0=$(now); sleep 2; s1=$(sweeps); t1=$(now)
	fi
	"$MV" ctl --socket "$T/$case.sock" --json checkpoint "$DIR/live.img" --wait "${flags[@]}" >"$T/job.json" 2>/dev/null
	if [ "$case" = writer ]; then
		s2=$(sweeps); t2=$(now)
	fi
	case $mode in evict*) "$MV" ctl --socket "$T/$case.sock" reload "$DIR/live.img" --wait >/dev/null 2>&1 ;; esac
	python3 - "$T/job.json" "${s0:-0}" "${t0:-0}" "${s1:-0}" "${t1:-0}" "${s2:-0}" "${t2:-0}" <<-'EOF'
		import json, sys
		r = json.load(open(sys.argv[1]))["result"]
		s0, t0, s1, t1, s2, t2 = map(float, sys.argv[2:])
		steady = (s1 - s0) / (t1 - t0) if t1 > t0 else 0
		during = (s2 - s1) / (t2 - t1) if t2 > t1 else 0
		live = r.get("live", {}).get("live", False)
		second = r.get("live", {}).get("evict", {}).get("pause_ns", 0) / 1e6
		armed = r.get("live", {}).get("armed", {}).get("stop_ns", 0) / 1e6
		print((r["pause_ns"] / 1e6) + second, r["elapsed_ns"] / 1e6, int(bool(live)),
		      during / steady if steady else 0, second, armed)
	EOF
}

for c in idle writer; do ckpt "$c" stw >/dev/null; done # staging buffers made
for rep in $(seq "$REPS"); do
	order=$MODES
	[ $((rep % 2)) = 0 ] && order=$(echo "$MODES" | tr ' ' '\n' | tac | tr '\n' ' ')
	for c in idle writer; do
		for m in $order; do echo "$(ckpt "$c" "$m")" >>"$T/res.$c.$m"; done
	done
done

col() { awk -v c="$2" '{print $c}' "$T/res.$1" | median; }
echo "$MIB MiB; medians of $REPS rounds (the modes' order reversed every other round)"
echo
echo "| program | mode | pause ms | of it after the commit | arming stop ms | job ms | live copies kept | program speed during the job |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
for c in idle writer; do
	for m in $MODES; do
		kept=$(awk '{s += $3} END {print s "/" NR}' "$T/res.$c.$m")
		share=$(col "$c.$m" 4)
		[ "$c" = idle ] && share=- || share=$(awk -v s="$share" 'BEGIN {printf "%.0f%%", 100 * s}')
		printf "| %s | %s | %.1f | %.1f | %.1f | %.0f | %s | %s |\n" "$c" "$m" "$(col "$c.$m" 1)" "$(col "$c.$m" 5)" \
			"$(col "$c.$m" 6)" "$(col "$c.$m" 2)" "$(case $m in *live) echo "$kept" ;; *) echo - ;; esac)" "$share"
	done
done
echo
echo "program speed: the writer's sweeps per second over the job (copy and sync), against the 2 s before it"
echo "arming stop: --live of a tree with 32 MiB or more first stops it briefly to make its userfaultfds, then"
echo "write-protects it while it runs (docs/protocol.md, \"live\"); that stop is not part of the pause"
