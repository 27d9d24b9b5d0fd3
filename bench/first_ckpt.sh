#!/usr/bin/env bash
# bench/first_ckpt.sh BUILD_DIR [BUILD_DIR2]: the first checkpoint of a
# fresh supervisor against its second (issue 25: the first within 1.2x
# of the second). Each round starts memvisor with tests' rb_target
# (FIRST_MIB MiB mapped, half of it written), checkpoints it twice into
# FIRST_DIR and ends it. Reported per build, medians of FIRST_REPS
# rounds: each checkpoint's job time (elapsed_ns), its wait for the
# staging buffers before the stop (prepare_ns) and its pause, and first
# over second. With two builds the rounds alternate between them.
#
# Knobs: FIRST_MIB=32 FIRST_REPS=5 FIRST_DIR (where images go)
set -euo pipefail
export LC_ALL=C

BUILDS=("${@:-build}")
MIB=${FIRST_MIB:-32}
REPS=${FIRST_REPS:-5}
. "$(dirname "$0")/lib.sh"
bench_images first first.img "${FIRST_DIR:-}"

echo "# memvisor: the first checkpoint of a fresh supervisor against its second"
echo
echo "command: FIRST_MIB=$MIB FIRST_REPS=$REPS $0 $*"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); host: $(uname -sr), $(nproc) CPUs; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

# One round of build B: "K elapsed_ms prepare_ms pause_ms" for K=1,2.
round() { # B
	local mv=${BUILDS[$1]}/memvisor wl=${BUILDS[$1]}/workloads/rb_target k pid
	rm -f "$T/in" "$T/out" "$T/sock"
	mkfifo "$T/in"
	"$mv" run --socket "$T/sock" -- "$wl" "$MIB" <"$T/in" >"$T/out" 2>/dev/null &
	pid=$!
	exec 7>"$T/in"
	while ! grep -q '^ready' "$T/out" 2>/dev/null; do sleep 0.02; done
	for k in 1 2; do
		rm -rf "${DIR:?}/$BENCH_IMG"
		"$mv" ctl -s "$T/sock" --json checkpoint "$DIR/$BENCH_IMG" --wait | tail -1 |
			python3 -c 'import json,sys; r=json.load(sys.stdin)["result"]
print(sys.argv[1], "%.1f %.1f %.1f" % (r["elapsed_ns"] / 1e6, r["prepare_ns"] / 1e6, r["pause_ns"] / 1e6))' "$k"
	done
	exec 7>&-
	wait "$pid" || true
}

for r in $(seq 1 "$REPS"); do
	for b in "${!BUILDS[@]}"; do
		round "$b" | sed "s/^/$b /" >>"$T/rows"
	done
done

echo "| build | first job ms | second job ms | first/second | first prepare ms | second prepare ms | first pause ms | second pause ms |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for b in "${!BUILDS[@]}"; do
	col() { awk -v b="$b" -v k="$1" -v c="$2" '$1 == b && $2 == k {print $c}' "$T/rows" | median; }
	e1=$(col 1 3) e2=$(col 2 3)
	echo "| ${BUILDS[$b]} | $e1 | $e2 | $(awk -v a="$e1" -v b="$e2" 'BEGIN {printf "%.2f", a / b}') | $(col 1 4) | $(col 2 4) | $(col 1 5) | $(col 2 5) |"
done
