#!/usr/bin/env bats
# Job control from memvisor ctl (issue 16): `job cancel` stops a running
# checkpoint cleanly, a reload cannot be cancelled but `job unthrottle`
# lifts its rate limit, and Ctrl-C while following a job leaves the job
# running and says how to follow or stop it.

load helpers
bats_require_minimum_version 1.5.0

# No thread of the workload is traced (every stopped thread resumed).
untraced() { ! grep -h '^TracerPid:' /proc/"$PID"/task/*/status 2>/dev/null | grep -vq '[[:space:]]0$'; }
traced() { ! untraced; }

# The state of job ID, from `ctl --json job ID`.
job_state() { ctl --json job "$1" | json_get - 'd["state"]'; }
job_running() { [ "$(job_state "$1")" = running ]; }
# Job ID runs and has done some of its work.
job_started() { ctl --json job "$1" | json_get - 'd["state"] == "running" and d["done"] > 0' | grep -q True; }

# `memvisor ctl ARGS...` in the background with SIGINT at its default
# (a background job of a script would ignore it), stderr in $TMP/cerr;
# CPID is its pid.
ctl_bg() {
	env --default-signal=INT "$MEMVISOR" ctl --socket "$SOCK" "$@" >"$TMP/cout" 2>"$TMP/cerr" &
	CPID=$!
	remember_pid $CPID
}

@test "job cancel: Ctrl-C leaves a checkpoint running; cancel resumes every thread and writes nothing" {
	# ckpt_stall holds the program stopped for up to 3 s, as a slow copy would.
	export MEMVISOR_FAULT=ckpt_stall
	start_fed "$WL/mappings"
	unset MEMVISOR_FAULT
	ctl_bg checkpoint "$TMP/img" --wait
	wait_for 10 traced
	kill -INT $CPID
	st=0
	wait $CPID || st=$?
	[ "$st" -eq 130 ] || { echo "ctl exited $st"; cat "$TMP/cerr"; return 1; }
	grep -qF 'job 1 continues; `memvisor ctl job 1 --wait` follows it, `memvisor ctl job cancel 1` stops it' "$TMP/cerr" ||
		{ cat "$TMP/cerr"; return 1; }
	# The client is gone; the job is not.
	[ "$(job_state 1)" = running ]
	run ctl job cancel 1
	assert_success
	assert_output --partial "job 1 cancelled"
	[ "$(job_state 1)" = cancelled ]
	wait_for 10 untraced
	[ ! -e "$TMP/img" ]
	no_temp_image
	# The program runs on, and a later checkpoint works.
	echo "mmap 1114112" >&7
	wait_for 5 grep -q '^asked' "$TMP/out"
	run ctl job cancel 1
	[ "$status" -eq 1 ]
	assert_output --partial "job 1 has already ended (cancelled)"
	run ctl checkpoint "$TMP/img" --wait
	assert_success
	"$MEMVISOR" image verify "$TMP/img"
	stop_fed
}

@test "job cancel: an unknown job, or none given, is a clear error" {
	start_fed "$WL/mappings"
	run ctl job cancel 9
	[ "$status" -eq 1 ]
	assert_output --partial "no job 9"
	run ctl job cancel
	[ "$status" -eq 2 ]
	assert_output --partial "no ID given"
	run ctl job unthrottle x
	[ "$status" -eq 2 ]
	assert_output --partial "'x' is not a job id"
	stop_fed
}

@test "a reload cannot be cancelled, says so, and job unthrottle lifts its rate limit" {
	skip_unless_uffd
	start_fed "$WL/mappings"
	run ctl checkpoint "$TMP/img" --evict --wait
	assert_success
	# 1 MB/s: far longer than this test.
	ctl_bg reload "$TMP/img" --rate 1 --wait
	wait_for 10 job_running 2
	kill -INT $CPID
	st=0
	wait $CPID || st=$?
	[ "$st" -eq 130 ] || { echo "ctl exited $st"; cat "$TMP/cerr"; return 1; }
	grep -qF 'job 2 continues; `memvisor ctl job 2 --wait` follows it (a reload cannot be cancelled; `memvisor ctl job unthrottle 2` lifts its rate limit)' "$TMP/cerr" ||
		{ cat "$TMP/cerr"; return 1; }
	# On a terminal `ctl job` says when the job should end; in a pipe not.
	skip_unless_cmd script
	wait_for 10 job_started 2
	run script -qec "'$MEMVISOR' ctl --socket '$SOCK' job 2" /dev/null
	assert_success
	assert_output --regexp "job 2 reload +running, loading .*, ETA [0-9]+(m[0-9]+s| s)\)"
	run ctl job 2
	assert_success
	refute_output --partial "ETA"
	run ctl job cancel 2
	[ "$status" -eq 1 ]
	assert_output --partial "job 2 is a reload, which cannot be cancelled"
	assert_output --partial "'job unthrottle 2'"
	[ "$(job_state 2)" = running ]
	run ctl job unthrottle 1
	[ "$status" -eq 1 ]
	assert_output --partial "job 1 has already ended (done)"
	run ctl job unthrottle 2
	assert_success
	assert_output --partial "rate limit is lifted"
	run ctl_within 60 job 2 --wait
	assert_success
	[ "$(job_state 2)" = done ]
	# The result as text, not JSON.
	assert_output --partial "reload of $TMP/img"
	assert_output --regexp "loaded back into 1 address space "
	refute_output --partial "{"
	stop_fed
}
