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
	grep -qF "job 1 continues; \`memvisor ctl --socket $SOCK job 1 --wait\` follows it, \`memvisor ctl --socket $SOCK job cancel 1\` stops it" "$TMP/cerr" ||
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
	grep -qF "job 2 continues; \`memvisor ctl --socket $SOCK job 2 --wait\` follows it (a reload cannot be cancelled; \`memvisor ctl --socket $SOCK job unthrottle 2\` lifts its rate limit)" "$TMP/cerr" ||
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

# The N-th command a message in FILE gives (`memvisor ctl ...` between
# backquotes, or after "first (" or "with: " up to the closing
# parenthesis).
hint() { # FILE N
	sed -n -e 's/[^`]*`\(memvisor ctl [^`]*\)`/\1\n/g' -e 's/.*first (\(memvisor ctl .*\))$/\1/' \
		-e 's/.*with: \(memvisor ctl .*\))$/\1/' -e '/^memvisor ctl /p' "$1" |
		tr -s '\n' | grep '^memvisor ctl ' | sed -n "$2p"
}

# Run COMMAND as a shell reads it, with this memvisor first on PATH.
as_printed() { run env PATH="$(dirname "$MEMVISOR"):$PATH" sh -c "$1"; }

@test "the commands a hint prints repeat how the supervisor was chosen: with two up, each works as printed" {
	skip_unless_uffd
	mkfifo "$TMP/in1" "$TMP/in2"
	# Both in the default place, which has a space (quoted in the hints).
	export XDG_RUNTIME_DIR="$TMP/run dir"
	mkdir -m 700 "$XDG_RUNTIME_DIR"
	MEMVISOR_FAULT=ckpt_stall "$MEMVISOR" run --name one -- "$WL/reload_wl" --file "$TMP/F1" --mib 8 \
		<"$TMP/in1" >"$TMP/out1" 2>&1 8>&- 9>&- &
	remember_pid $!
	exec 8>"$TMP/in1"
	"$MEMVISOR" run -- "$WL/reload_wl" --file "$TMP/F2" --mib 8 \
		<"$TMP/in2" >"$TMP/out2" 2>&1 8>&- 9>&- &
	remember_pid $!
	local two="$XDG_RUNTIME_DIR/memvisor/$!.sock"
	exec 9>"$TMP/in2"
	wait_for 60 grep -q '^ready' "$TMP/out1"
	wait_for 60 grep -q '^ready' "$TMP/out2"
	run "$MEMVISOR" ctl ps
	[ "$status" -eq 2 ]
	assert_output --partial "2 memvisors are running"

	# -n NAME: Ctrl-C while following a stalled checkpoint.
	env --default-signal=INT "$MEMVISOR" ctl -n one checkpoint "$TMP/img1" --wait 2>"$TMP/cerr" 8>&- 9>&- &
	CPID=$!
	remember_pid $CPID
	wait_for 10 eval '"$MEMVISOR" ctl -n one --json job 1 | json_get - "d[\"state\"]" | grep -q running'
	kill -INT $CPID
	wait $CPID || true
	cat "$TMP/cerr"
	[ "$(hint "$TMP/cerr" 2)" = "memvisor ctl -n one job cancel 1" ]
	as_printed "$(hint "$TMP/cerr" 2)"
	assert_success
	assert_output --partial "job 1 cancelled"
	as_printed "$(hint "$TMP/cerr" 1)"
	assert_output --partial "job 1 was cancelled"
	refute_output --partial "memvisors are running"

	# --socket PATH, from memvisor's own message.
	"$MEMVISOR" ctl --socket "$two" checkpoint "$TMP/img 2" --evict --wait >/dev/null
	run "$MEMVISOR" ctl --socket "$two" checkpoint "$TMP/img3"
	[ "$status" -eq 1 ]
	echo "$output" >"$TMP/refused"
	[ "$(hint "$TMP/refused" 1)" = "memvisor ctl --socket '$two' reload '$TMP/img 2' --wait" ]
	as_printed "$(hint "$TMP/refused" 1)"
	assert_success
	assert_output --partial "reload of $TMP/img 2"

	# $MEMVISOR_SOCKET: the hint names the socket, and works without it.
	MEMVISOR_SOCKET=$two "$MEMVISOR" ctl checkpoint "$TMP/img4" >"$TMP/started"
	cat "$TMP/started"
	[ "$(hint "$TMP/started" 1)" = "memvisor ctl --socket '$two' job 3 --wait" ]
	as_printed "$(hint "$TMP/started" 1)"
	assert_success
	assert_output --partial "image $TMP/img4"
	exec 8>&- 9>&-
}
