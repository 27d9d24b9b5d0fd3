#!/usr/bin/env bats
# Supervisor death and stop under load (run.bats has the quiet cases):
# whatever memvisor is doing when it is killed, no supervised process
# outlives it by more than a second; a SIGTERM is passed on and memvisor
# exits cleanly with the command's status (docs/reliability.md).

load helpers
bats_require_minimum_version 1.5.0

# No process of the list is alive (a zombie waiting for init is dead).
none_alive() { # PID...
	local k state alive=0
	for k in "$@"; do
		# One read: the process may vanish between two.
		state=$(awk '/^State:/{print $2}' /proc/"$k"/status 2>/dev/null || true)
		if [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]; then
			echo "process $k survived (state $state): $(tr '\0' ' ' </proc/"$k"/cmdline 2>/dev/null)"
			alive=1
		fi
	done
	[ $alive -eq 0 ]
}

# Start memvisor on a storm of threads (most waiting on a notification
# at any time) and processes forking and exec'ing; MV is its pid.
start_storms() {
	"$MEMVISOR" run --notify-all --socket "$SOCK" -- sh -c \
		"'$WL/storm' 16 60 & '$WL/forkstorm' 8 60 & wait" >"$TMP/out" 2>"$TMP/err" &
	MV=$!
	remember_pid $MV
	wait_for 10 test -S "$SOCK"
	sleep 1.5
}

@test "SIGKILL to memvisor during a storm: no supervised process survives a second" {
	start_storms
	kids=$(descendants $MV)
	[ "$(echo "$kids" | wc -w)" -ge 10 ]
	kill -9 $MV
	sleep 1
	none_alive $kids
	# Nor any process started after the list was taken.
	! pgrep -f "$WL/(storm|forkstorm)"
}

@test "SIGKILL to memvisor during a checkpoint: no supervised process survives a second" {
	"$MEMVISOR" run --socket "$SOCK" -- "$WL/ckpt_pattern" --dense 64 --sparse 256 --threads 4 \
		</dev/zero >"$TMP/out" 2>&1 &
	MV=$!
	remember_pid $MV
	wait_for 20 grep -q '^ready' "$TMP/out"
	kids=$(descendants $MV)
	ctl checkpoint "$TMP/img" >/dev/null
	sleep 0.05
	kill -9 $MV
	sleep 1
	none_alive $kids
	# A half image is never left looking whole.
	[ ! -e "$TMP/img" ]
}

@test "SIGKILL to memvisor's reaper: a clear error, 125, and the orphaned tree is ended" {
	"$MEMVISOR" run --socket "$SOCK" -- sh -c 'sleep 300 & (sleep 301 &); sleep 302' >"$TMP/out" 2>&1 &
	MV=$!
	remember_pid $MV
	wait_for 10 pgrep -f 'sleep 302'
	sleep 0.2
	kids=$(descendants $MV)
	reaper=$(pgrep -P $MV)
	kill -9 "$reaper"
	wait $MV && rc=0 || rc=$?
	[ "$rc" -eq 125 ]
	grep -q "reaper process died unexpectedly" "$TMP/out"
	sleep 1
	none_alive $kids
}

@test "SIGTERM to memvisor during a storm: passed on, exit 143, stats written, nothing left" {
	"$MEMVISOR" run --notify-all --stats-json "$TMP/s.json" -- "$WL/storm" 16 60 >"$TMP/out" 2>&1 &
	MV=$!
	remember_pid $MV
	sleep 2
	kids=$(descendants $MV)
	kill -TERM $MV
	wait $MV && rc=0 || rc=$?
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
