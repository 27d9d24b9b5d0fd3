#!/usr/bin/env bash
# bench/rb_tree.sh BUILD_DIR: a tree's mark and rollback against one
# process's, side by side in one run (issue 26, docs/rollback.md "A tree").
#
# tests/workloads/rb_tree: a parent and its child, each with MIB MiB of
# private memory. Marked as a tree (mark) and as the parent alone (mark
# --pid), in alternating rounds; each mark is followed by RB_N
# iterations of "w SEED 64" (64 pages written in each process) and a
# rollback. Reported: the mark's pause, and the rollbacks' pause (p50 and
# the largest), medians over RB_REPS rounds.
#
# Knobs: RB_MIB=64 RB_N=30 RB_REPS=3
set -euo pipefail
export LC_ALL=C

BUILD=${1:-build}
MV=$BUILD/memvisor
MIB=${RB_MIB:-64}
N=${RB_N:-30}
REPS=${RB_REPS:-3}
dir=$(mktemp -d)
exec 8<>/dev/null
cleanup() {
	exec 8>&-
	[ -n "${mvpid:-}" ] && kill "$mvpid" 2>/dev/null && wait "$mvpid" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
# field F (Python on the result r) of a --json job line on stdin
field() { python3 -c 'import json,sys; r=json.loads(sys.stdin.read().strip().splitlines()[-1])["result"]; print(eval(sys.argv[1]))' "$1"; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "# memvisor: a tree's mark and rollback against one process's"
echo
echo "command: RB_MIB=$MIB RB_N=$N RB_REPS=$REPS $0 $*"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); host: $(uname -sr), $(nproc) CPUs; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

mkfifo "$dir/in"
"$MV" run --socket "$dir/s" -- "$BUILD/workloads/rb_tree" "$MIB" <"$dir/in" >"$dir/out" 2>"$dir/err" &
mvpid=$!
exec 8>"$dir/in"
for _ in $(seq 100); do grep -q '^ready' "$dir/out" 2>/dev/null && break; sleep 0.1; done
parent=$(awk '/^ready/{print $2}' "$dir/out")
lines() { wc -l <"$dir/out"; }
say() { # LINE: wait for its answer
	local n
	n=$(lines)
	echo "$1" >&8
	for _ in $(seq 500); do [ "$(lines)" -gt "$n" ] && return; sleep 0.01; done
	echo "no answer to $1" >&2
	exit 1
}
say n

round() { # how: "" (the tree) or --pid
	local how=$1 m
	# shellcheck disable=SC2086
	m=$("$MV" ctl --socket "$dir/s" --json mark ${how:+--pid $parent})
	echo "$m" | field 'r["pause_ns"] / 1e6' >>"$dir/mark$how"
	: >"$dir/rb"
	for i in $(seq "$N"); do
		say "w $i 64"
		"$MV" ctl --socket "$dir/s" --json rollback | field 'r["pause_ns"] // 1000' >>"$dir/rb"
	done
	median <"$dir/rb" >>"$dir/rb50$how"
	sort -n "$dir/rb" | tail -1 >>"$dir/rbmax$how"
	"$MV" ctl --socket "$dir/s" unmark >/dev/null
}
for r in $(seq "$REPS"); do
	if [ $((r % 2)) = 1 ]; then round ""; round --pid; else round --pid; round ""; fi
done
printf '| %s MiB each | mark pause, ms | rollback pause p50, us | largest, us |\n|---|---|---|---|\n' "$MIB"
for how in "" --pid; do
	printf '| %s | %.1f | %s | %s |\n' "$([ -z "$how" ] && echo "tree (parent and child)" || echo "parent alone (--pid)")" \
		"$(median <"$dir/mark$how")" "$(median <"$dir/rb50$how")" "$(median <"$dir/rbmax$how")"
done
