#!/usr/bin/env bash
# bench/mark.sh BUILD_DIR: the cost of a mark against `checkpoint --live`
# of the same memory, side by side, round by round (issue 26: a mark
# within 1.2x of a live checkpoint; bench/README.md, "The mark").
#
# One program per size, under its own memvisor: bench/ckpt_fill, MIB MiB
# written densely in 4 KiB pages, then idle. Each round marks it (then
# unmarks) and checkpoints it --live into MARK_DIR (then removes the
# image), in alternating order. Reported: each one's pause (the program
# stopped) and job time (request to result), medians of MARK_REPS rounds,
# and the mark's over the live checkpoint's.
#
# Knobs: MARK_MIBS="256 1024" MARK_REPS=5 MARK_DIR (where images go)
set -euo pipefail
export LC_ALL=C

BUILD=${1:-build}
MV=$BUILD/memvisor
MIBS=${MARK_MIBS:-256 1024}
REPS=${MARK_REPS:-5}
. "$(dirname "$0")/lib.sh"
bench_images mark mark.img "${MARK_DIR:-}"
# field F (Python on the job object d) of a --json job line
field() { python3 -c 'import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(eval(sys.argv[1]))' "$1"; }

echo "# memvisor: a mark against checkpoint --live"
echo
echo "command: MARK_MIBS=\"$MIBS\" MARK_REPS=$REPS $0 $*"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); host: $(uname -sr), $(nproc) CPUs; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| MiB | mark pause ms | live pause ms | mark job ms | live job ms | mark/live job | mark/live pause |"
echo "|---:|---:|---:|---:|---:|---:|---:|"
for mib in $MIBS; do
	rm -f "$T/in"
	mkfifo "$T/in"
	sock=$T/m$mib.sock
	"$MV" run --socket "$sock" -- "$BUILD/bench/ckpt_fill" -m "$mib" -s 1 <"$T/in" >"$T/out" &
	PIDS+=($!)
	exec 7>"$T/in"
	until grep -q ready "$T/out" 2>/dev/null; do sleep 0.05; done
	ctl() { "$MV" ctl --socket "$sock" --json "$@"; }
	: >"$T/mp" && : >"$T/lp" && : >"$T/mj" && : >"$T/lj"
	for r in $(seq 1 "$REPS"); do
		for what in $([ $((r % 2)) = 1 ] && echo "mark live" || echo "live mark"); do
			if [ "$what" = mark ]; then
				j=$(ctl mark)
				ctl unmark >/dev/null
				echo "$j" | field 'd["result"]["pause_ns"] / 1e6' >>"$T/mp"
				echo "$j" | field 'd["elapsed_ns"] / 1e6' >>"$T/mj"
			else
				j=$(ctl checkpoint "$DIR/mark.img" --live --wait)
				rm -rf "$DIR/mark.img"
				echo "$j" | field 'd["result"]["pause_ns"] / 1e6' >>"$T/lp"
				echo "$j" | field 'd["elapsed_ns"] / 1e6' >>"$T/lj"
			fi
		done
	done
	exec 7>&-
	mp=$(median <"$T/mp") lp=$(median <"$T/lp") mj=$(median <"$T/mj") lj=$(median <"$T/lj")
	awk -v m="$mib" -v mp="$mp" -v lp="$lp" -v mj="$mj" -v lj="$lj" \
		'BEGIN {printf "| %d | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f |\n", m, mp, lp, mj, lj, mj / lj, mp / lp}'
done
