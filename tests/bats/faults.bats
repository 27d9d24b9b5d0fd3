#!/usr/bin/env bats
# Fault injection: MEMVISOR_FAULT=NAME[:N] makes the N-th call at a named
# point fail. memvisor must survive, the program must be unaffected or
# cleanly told, and nothing may leak (docs/reliability.md).

load helpers
bats_require_minimum_version 1.5.0

setup() {
	setup_tmp
	SOCK=$TMP/ctl.sock
}
teardown() {
	exec 7>&- 2>/dev/null || true
	teardown_tmp
}

# Run mt_mem under memvisor with a fault; it must print the native output.
survives() { # POINT[:N]
	local native
	native=$("$WL/mt_mem" 6 4)
	run env MEMVISOR_FAULT="$1" "$MEMVISOR" run --notify-all --stats-json "$TMP/s.json" -- "$WL/mt_mem" 6 4
	assert_success
	assert_line "$(echo "$native" | tail -1)"
	assert_output --partial "fault injected at ${1%%:*}"
}

@test "notify_recv failing: supervision goes on" {
	survives notify_recv:5
}

@test "notify_send failing: the answer is retried, the program is unaffected" {
	survives notify_send:7
}

@test "pidfd_open failing: the process is still supervised and counted" {
	run env MEMVISOR_FAULT=pidfd_open:1 "$MEMVISOR" run --notify-all --stats-json "$TMP/s.json" -- sh -c 'echo hi'
	assert_success
	assert_line hi
	[ "$(json_get "$TMP/s.json" 'd["notifications"]')" -gt 5 ]
}

@test "statsjson_write failing: a clear error and exit 125" {
	run env MEMVISOR_FAULT=statsjson_write "$MEMVISOR" run --stats-json "$TMP/s.json" -- true
	assert_failure 125
	assert_output --partial "cannot write --stats-json"
	[ ! -e "$TMP/s.json" ]
}

# A long-lived supervised program for the control-socket faults.
start_victim() {
	mkfifo "$TMP/in"
	env MEMVISOR_FAULT="$1" "$MEMVISOR" run --socket "$SOCK" -- "$WL/mappings" <"$TMP/in" >"$TMP/out" 2>"$TMP/err" &
	MVPID=$!
	remember_pid $MVPID
	exec 7>"$TMP/in"
	wait_for 10 grep -q '^ready' "$TMP/out"
	PID=$(awk '/^ready/{print $2}' "$TMP/out")
}

fds() { ls /proc/"$MVPID"/fd | wc -l; }

stop_victim() {
	exec 7>&-
	wait $MVPID
}

@test "ctl_accept, ctl_read, ctl_write, ctl_alloc failing: errors for that client, no leak" {
	for point in ctl_accept:2 ctl_read:2 ctl_write:2 ctl_alloc:2; do
		start_victim "$point"
		"$MEMVISOR" ctl --socket "$SOCK" status >/dev/null
		before=$(fds)
		# The faulty call: the client may fail, memvisor must not.
		"$MEMVISOR" ctl --socket "$SOCK" --timeout 2 regions "$PID" >/dev/null 2>&1 || true
		run "$MEMVISOR" ctl --socket "$SOCK" --json regions "$PID"
		assert_success
		echo "$output" | python3 "$BATS_TEST_DIRNAME/regions_check.py" "$PID"
		sleep 0.2
		[ "$(fds)" -eq "$before" ]
		grep -q "fault injected at ${point%%:*}" "$TMP/err"
		stop_victim
		rm -f "$TMP/in" "$TMP/out"
	done
}

@test "ctl_alloc failing: the client gets an internal error reply" {
	start_victim ctl_alloc:1
	run "$MEMVISOR" ctl --socket "$SOCK" status
	assert_failure 1
	assert_output --partial "internal: out of memory"
	run "$MEMVISOR" ctl --socket "$SOCK" status
	assert_success
	stop_victim
}

@test "procmap_read failing: regions answers an error, the next query works" {
	start_victim procmap_read:1
	run "$MEMVISOR" ctl --socket "$SOCK" regions "$PID"
	assert_failure 1
	assert_output --partial "internal"
	run "$MEMVISOR" ctl --socket "$SOCK" --json regions "$PID"
	assert_success
	stop_victim
}
