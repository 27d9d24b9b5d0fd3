#!/usr/bin/env bats
# Supervisor death and stop under load (run.bats has the quiet cases):
# whatever memvisor is doing when it is killed, no supervised process
# outlives it by more than a second; a SIGTERM is passed on and memvisor
# exits cleanly with the command's status (docs/reliability.md).

load helpers
bats_require_minimum_version 1.5.0

# Start memvisor on a storm of threads (most waiting on a notification
# at any time) and processes forking and exec'ing; MVPID is its pid.
start_storms() {
	start_bg --notify-all -- sh -c "'$WL/storm' 16 60 & '$WL/forkstorm' 8 60 & wait" >"$TMP/out" 2>"$TMP/err"
	sleep 1.5
}

@test "SIGKILL to memvisor during a storm: no supervised process survives a second" {
	start_storms
	kids=$(descendants $MVPID)
	[ "$(echo "$kids" | wc -w)" -ge 10 ]
	kill -9 $MVPID
	sleep 1
	none_alive $kids
	# Nor any process started after the list was taken.
	! pgrep -f "$WL/(storm|forkstorm)"
}

@test "SIGKILL to memvisor during a checkpoint: no supervised process survives a second" {
	"$MEMVISOR" run --socket "$SOCK" -- "$WL/ckpt_pattern" --dense 64 --sparse 256 --threads 4 \
		</dev/zero >"$TMP/out" 2>&1 &
	MVPID=$!
	remember_pid $MVPID
	wait_for 20 grep -q '^ready' "$TMP/out"
	kids=$(descendants $MVPID)
	ctl checkpoint "$TMP/img" >/dev/null
	sleep 0.05
	kill -9 $MVPID
	sleep 1
	none_alive $kids
	# A half image is never left looking whole.
	[ ! -e "$TMP/img" ]
}

@test "SIGKILL to memvisor's reaper: a clear error, 125, and the orphaned tree is ended" {
	start_bg -- sh -c 'sleep 300 & (sleep 301 &); sleep 302' >"$TMP/out" 2>&1
	wait_for 10 pgrep -f 'sleep 302'
	sleep 0.2
	kids=$(descendants $MVPID)
	reaper=$(pgrep -P $MVPID)
	kill -9 "$reaper"
	wait $MVPID && rc=0 || rc=$?
	[ "$rc" -eq 125 ]
	grep -q "reaper process died unexpectedly" "$TMP/out"
	sleep 1
	none_alive $kids
}

@test "SIGTERM to memvisor during a storm: passed on, exit 143, stats written, nothing left" {
	"$MEMVISOR" run --notify-all --stats-json "$TMP/s.json" -- "$WL/storm" 16 60 >"$TMP/out" 2>&1 &
	MVPID=$!
	remember_pid $MVPID
	sleep 2
	kids=$(descendants $MVPID)
	kill -TERM $MVPID
	wait $MVPID && rc=0 || rc=$?
	[ "$rc" -eq 143 ]
	[ "$(json_get "$TMP/s.json" 'd["exit_status"]')" -eq 143 ]
	# Every call was answered; those of threads already dying when they
	# were received (at most one each) belong to no process and are not
	# in the per-process times.
	timed=$(json_get "$TMP/s.json" 'd["totals"]["service_ns"]["count"]')
	n=$(json_get "$TMP/s.json" 'd["notifications"]')
	[ "$timed" -le "$n" ] && [ $((n - timed)) -le 16 ]
	none_alive $kids
}
