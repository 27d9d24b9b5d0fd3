#!/usr/bin/env bats
# Evict and reload lose no byte (issue 11): each test is a way a program
# read memory it did not write, reproduced the way real programs hit it,
# repeated.

load helpers
bats_require_minimum_version 1.5.0

setup() {
	setup_tmp
	SOCK=$TMP/ctl.sock
	local v
	v=$(cat /proc/sys/vm/unprivileged_userfaultfd 2>/dev/null) || skip "no userfaultfd in this kernel"
	[ "$(id -u)" = 0 ] || [ "$v" = 1 ] || skip "userfaultfd needs root or vm.unprivileged_userfaultfd=1"
}

teardown() {
	exec 7>&- 2>/dev/null || true
	teardown_tmp
}

ctl() { "$MEMVISOR" ctl --socket "$SOCK" "$@"; }

# Run "$@" under memvisor in the background: stdout $TMP/out, stderr
# $TMP/err, memvisor's log $TMP/log; MVPID; waits for "ready".
start_bg() {
	"$MEMVISOR" run --socket "$SOCK" --log "$TMP/log" -- "$@" >"$TMP/out" 2>"$TMP/err" </dev/null &
	MVPID=$!
	remember_pid $MVPID
	wait_for 60 grep -q '^ready' "$TMP/out"
}

# N evict+reload cycles with --wait, a random pause in between.
cycles() { # N
	local i
	for ((i = 0; i < $1; i++)); do
		rm -rf "$TMP/img"
		ctl checkpoint "$TMP/img" --evict --wait >/dev/null || return 1
		sleep "0.0$((RANDOM % 10))"
		ctl reload "$TMP/img" --wait >/dev/null || return 1
	done
}

# Cycles until the program ends (or N of them), then its status.
cycles_until_exit() { # N
	local i
	for ((i = 0; i < $1; i++)); do
		kill -0 $MVPID 2>/dev/null || break
		rm -rf "$TMP/img"
		ctl checkpoint "$TMP/img" --evict --wait >/dev/null 2>&1 || continue
		sleep "0.$((RANDOM % 3))"
		ctl reload "$TMP/img" --wait >/dev/null 2>&1 || true
	done
	echo "$i cycles"
}

@test "evict safety: 8 processes keep their stacks through evict+reload cycles, 3 runs" {
	# The evict's own MADV_DONTNEED raises a REMOVE event that a late
	# fault worker took for the program's own madvise: the last region
	# ([stack]) was dropped from the map and served as zeros.
	for run in 1 2 3; do
		start_bg "$WL/evict_stack" --procs 8 --seconds 8
		cycles_until_exit 8
		rc=0
		wait $MVPID || rc=$?
		if [ $rc != 0 ] || ! grep -q '^ok 8' "$TMP/out"; then
			echo "run $run: exit $rc"
			cat "$TMP/out" "$TMP/err"
			return 1
		fi
	done
}
