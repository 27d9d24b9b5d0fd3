#!/usr/bin/env bash
# bench/rollback.sh BUILD_DIR: memvisor's rollback against a fork server
# (issue 26), side by side in one run.
#
# bench/rb_iter does one iteration of fuzzing-like work: it writes PAGES
# pseudo-random pages of a heap of MIB MiB. Three ways to run RB_N (300)
# iterations, each starting from the same state:
#   plain     never reset: the work's own cost
#   fork      a fork server: fork, the child iterates and exits, the parent
#             waits (AFL's scheme)
#   memvisor  marked once; each iteration is fed one byte over a pipe and
#             rolled back over the control socket (bench/rb_drive.py)
#   until     marked once and held (mark --hold); each iteration is one
#             byte and one `rollback --until read:0`, which puts it back
#             and runs it to its next read
#   point     the same, with rb_iter under `run --until-point read:0`: the
#             read is notified by memvisor's filter, the run goes under
#             PTRACE_CONT instead of stopping at every call
# For each RB_MIBS (16 256) x RB_PAGES (1 64 1024): the per-iteration p50
# and p99 and iterations per second; memvisor/fork is the ratio of
# iterations per second (above 1: memvisor is faster), the rollback's own
# pause, and where it went (the job result's times). Run on a machine with
# no other job.
set -euo pipefail
BUILD=${1:-build}
MV=$BUILD/memvisor
PROG=$BUILD/bench/rb_iter
N=${RB_N:-300}
echo "# bench/rollback.sh $BUILD  (RB_MIBS='${RB_MIBS:-16 256}' RB_PAGES='${RB_PAGES:-1 64 1024}' RB_N=$N)"
printf '| MiB | pages | plain p50 us | fork p50 us | fork /s | memvisor p50 us | p99 us | memvisor /s | memvisor/fork | rollback pause p50 / p99 us | stop / layout / memory p50 us | until p50 us | until /s | until/fork | point p50 us | point /s | point/fork |\n'
printf '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|\n'
kv() { tr ' ' '\n' | sed -n "s/^$1=//p"; }
for mib in ${RB_MIBS:-16 256}; do
	for pages in ${RB_PAGES:-1 64 1024}; do
		plain=$("$PROG" "$mib" "$pages" plain "$N")
		fork=$("$PROG" "$mib" "$pages" fork "$N")
		mv=$(python3 "$(dirname "$0")/rb_drive.py" "$MV" "$PROG" "$mib" "$pages" "$N")
		un=$(python3 "$(dirname "$0")/rb_drive.py" "$MV" "$PROG" "$mib" "$pages" "$N" until)
		pt=$(python3 "$(dirname "$0")/rb_drive.py" "$MV" "$PROG" "$mib" "$pages" "$N" point)
		fps=$(echo "$fork" | kv per_s)
		mps=$(echo "$mv" | kv per_s)
		ups=$(echo "$un" | kv per_s)
		pps=$(echo "$pt" | kv per_s)
		printf '| %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %s / %s | %s / %s / %s | %s | %s | %.2f | %s | %s | %.2f |\n' "$mib" "$pages" \
			"$(echo "$plain" | kv p50_us)" "$(echo "$fork" | kv p50_us)" "$fps" \
			"$(echo "$mv" | kv p50_us)" "$(echo "$mv" | kv p99_us)" "$mps" \
			"$(echo "$mps $fps" | awk '{print $1 / $2}')" \
			"$(echo "$mv" | kv pause_p50_us)" "$(echo "$mv" | kv pause_p99_us)" \
			"$(echo "$mv" | kv stop_p50_us)" "$(echo "$mv" | kv layout_p50_us)" "$(echo "$mv" | kv memory_p50_us)" \
			"$(echo "$un" | kv p50_us)" "$ups" "$(echo "$ups $fps" | awk '{print $1 / $2}')" \
			"$(echo "$pt" | kv p50_us)" "$pps" "$(echo "$pps $fps" | awk '{print $1 / $2}')"
	done
done
