#!/usr/bin/env bats
# The control socket and memvisor ctl: regions, ps, events, stats, the
# protocol's error handling, limits and permissions.

load helpers
bats_require_minimum_version 1.5.0

# Most tests run the mappings workload (start_fed "$WL/mappings").
# --notify-all: these tests look at memory calls (events, provenance,
# counts), which the default policy leaves in the kernel.
MV_ARGS=(--notify-all)

@test "regions equals /proc/PID/maps line for line, committed matches smaps Rss" {
	start_fed "$WL/mappings"
	for src in auto maps procmap_query; do
		if [ $src = procmap_query ] && ! ctl --json hello | grep -q '"procmap_query":true'; then
			continue
		fi
		ctl --json call regions "{\"pid\":$PID,\"source\":\"$src\"}" >"$TMP/r.json"
		python3 "$HELPERS/regions_check.py" $PID <"$TMP/r.json"
	done
	# The known mappings are there with the right kind and size.
	run ctl --json regions $PID
	assert_success
	echo "$output" >"$TMP/r.json"
	sparse=$(awk '/^sparse/{print $2}' "$TMP/out")
	kind=$(json_get "$TMP/r.json" "[r for r in d['regions'] if int(r['start'],16)==0x$sparse][0]['kind']")
	size=$(json_get "$TMP/r.json" "[r for r in d['regions'] if int(r['start'],16)==0x$sparse][0]['size']")
	committed=$(json_get "$TMP/r.json" "[r for r in d['regions'] if int(r['start'],16)==0x$sparse][0]['committed']")
	[ "$kind" = anon ]
	[ "$size" -eq $((1 << 30)) ]
	# One page in 16 written: 64 MiB.
	[ "$committed" -eq $((64 << 20)) ]
	json_get "$TMP/r.json" "[r['kind'] for r in d['regions'] if r['path'] and r['path'].startswith('/memfd:mappings')]" | grep -q shmem
	json_get "$TMP/r.json" "[r['kind'] for r in d['regions'] if r['path']=='/dev/zero (deleted)']" | grep -q shmem
	json_get "$TMP/r.json" "[r['prot'] for r in d['regions'] if r['prot']=='---']" | grep -q -- '---'
	# What memvisor knows beyond the kernel: who made the sparse region.
	[ "$(json_get "$TMP/r.json" "[r for r in d['regions'] if int(r['start'],16)==0x$sparse][0]['created_by']['syscall']")" = mmap ]
	[ "$(json_get "$TMP/r.json" "[r for r in d['regions'] if r['kind']=='stack'][0]['created_by']['syscall']")" = execve ]
	stop_fed
}

@test "regions follows a new mapping and names the call that made it" {
	start_fed "$WL/mappings"
	ctl regions $PID >/dev/null
	echo "mmap 1114112" >&7
	wait_for 5 grep -q '^asked' "$TMP/out"
	start=$(awk '/^asked/{print $2}' "$TMP/out")
	ctl --json regions $PID >"$TMP/r.json"
	[ "$(json_get "$TMP/r.json" "[r for r in d['regions'] if int(r['start'],16)==0x$start][0]['size']")" -eq 1114112 ]
	[ "$(json_get "$TMP/r.json" "[r for r in d['regions'] if int(r['start'],16)==0x$start][0]['created_by']['syscall']")" = mmap ]
	python3 "$HELPERS/regions_check.py" $PID <"$TMP/r.json"
	stop_fed
}

@test "ps shows a forked and exec'd tree; exits disappear" {
	start_fed "$WL/mappings"
	echo fork >&7
	wait_for 5 grep -q '^child' "$TMP/out"
	child=$(awk '/^child/{print $2}' "$TMP/out")
	wait_for 5 ctl_has '"sleep"' --json ps
	run ctl --json ps
	assert_success
	echo "$output" >"$TMP/ps.json"
	[ "$(json_get "$TMP/ps.json" "[p['ppid'] for p in d['processes'] if p['pid']==$child][0]")" -eq "$PID" ]
	[ "$(json_get "$TMP/ps.json" "[p['cmdline'] for p in d['processes'] if p['pid']==$child][0]")" = '["sleep", "300"]' ]
	[ "$(json_get "$TMP/ps.json" "[p['threads'] for p in d['processes'] if p['pid']==$PID][0]")" -eq 1 ]
	[ "$(json_get "$TMP/ps.json" "[p['mapped'] for p in d['processes'] if p['pid']==$PID][0]")" -gt $((1 << 30)) ]
	run ctl ps
	assert_success
	assert_output --partial "sleep 300"
	assert_output --regexp "PID +PPID +THR +STATE +MAPPED +COMMITTED"
	echo "reap $child" >&7
	wait_for 5 grep -q '^reaped' "$TMP/out"
	wait_for 5 ctl_lacks "\"pid\":$child," --json ps
	stop_fed
}

@test "events shows a known mmap of a known length, and process exits" {
	start_fed "$WL/mappings"
	ctl --json events >"$TMP/events" 7>&- &
	evpid=$!
	remember_pid $evpid
	sleep 0.3
	echo "mmap 1183744" >&7
	wait_for 5 grep -q '"length":1183744' "$TMP/events"
	line=$(grep '"length":1183744' "$TMP/events" | head -1)
	echo "$line" | grep -q '"syscall":"mmap"'
	echo "$line" | grep -q '"verdict":"allow"'
	echo "$line" | grep -q "\"pid\":$PID"
	echo "$line" | grep -q '"prot":"rw-"'
	stop_fed
	wait_for 5 grep -q '"event":"exit"' "$TMP/events"
	# The stream ends when memvisor exits.
	wait $evpid
}

@test "bad requests get clear errors and the connection stays usable" {
	start_fed "$WL/mappings"
	run raw send 'this is not json' '{"cmd":"nope","id":7}' '{"id":"a","cmd":"regions","args":{"pid":"x"}}' \
		'{"id":2,"cmd":"regions"}' '{"id":3,"cmd":"regions","args":{"pid":1}}' '[1,2]' \
		'{"id":4,"cmd":"status","args":5}' '{"id":{"x":1},"cmd":"hello"}'
	assert_success
	assert_line --index 0 --partial '"code":"bad_json"'
	assert_line --index 1 --partial '"id":7,"ok":false,"error":{"code":"unknown_command"'
	assert_line --index 2 --partial '"id":"a","ok":false,"error":{"code":"bad_request","message":"args.pid: expected an integer"}'
	assert_line --index 3 --partial '"message":"args.pid: missing'
	assert_line --index 4 --partial '"code":"no_such_process"'
	assert_line --index 5 --partial '"message":"a request must be a JSON object"'
	assert_line --index 6 --partial '"message":"args: expected an object"'
	assert_line --index 7 --partial '"id":{"x":1},"ok":true'
	stop_fed
}

@test "a line over 1 MiB is refused and the connection stays usable" {
	start_fed "$WL/mappings"
	run raw huge $((2 << 20)) '{"id":1,"cmd":"status"}'
	assert_success
	assert_line --index 0 --partial '"code":"too_large"'
	assert_line --index 1 --partial '"id":1,"ok":true'
	stop_fed
}

@test "a client vanishing mid-line changes nothing; 50 clients at once are served" {
	start_fed "$WL/mappings"
	run raw partial '{"id":1,"cmd":"stat'
	assert_success
	run raw many 50 '{"id":1,"cmd":"status"}'
	assert_success
	assert_output 50
	run ctl status
	assert_success
	stop_fed
}

@test "a client of another uid is refused with an error" {
	[ "$(id -u)" = 0 ] || skip "needs root to switch to nobody"
	start_fed "$WL/mappings"
	chmod 755 "$TMP"
	chmod 777 "$SOCK" # the socket's own mode must not be what stops it
	run setpriv --reuid=nobody --regid=nogroup --clear-groups -- /usr/bin/python3 "$HELPERS/ctlraw.py" "$SOCK" send '{"id":1,"cmd":"status"}'
	assert_success
	assert_output --partial '"code":"permission_denied"'
	assert_output --partial "uid 65534 may not use this socket"
	stop_fed
}

@test "an event subscriber that does not read is told how much it dropped" {
	# The command waits for "done" after its work: the dropped notice
	# comes once the reader drains its buffer, so memvisor must still run.
	mkfifo "$TMP/go" "$TMP/done"
	start_bg --notify-all -- sh -c "read x <'$TMP/go'; '$WL/mt_mem' 400 >/dev/null; read x <'$TMP/done'"
	raw slow-events 4 >"$TMP/slow" &
	reader=$!
	sleep 0.5
	echo go >"$TMP/go"
	wait $reader
	grep -q '"subscribed":true' "$TMP/slow"
	dropped=$(awk '/^dropped/{print $2}' "$TMP/slow")
	echo done >"$TMP/done"
	[ "$dropped" -gt 0 ]
	wait $MVPID
}

@test "default socket: under XDG_RUNTIME_DIR, private, found by ctl, removed at exit" {
	mkfifo "$TMP/go"
	"$MEMVISOR" run -- sh -c "read x <'$TMP/go'" &
	mv=$!
	remember_pid $mv
	sock=$XDG_RUNTIME_DIR/memvisor/$mv.sock
	wait_for 5 test -S "$sock"
	[ "$(stat -c %a "$XDG_RUNTIME_DIR/memvisor")" = 700 ]
	[ "$(stat -c %a "$sock")" = 600 ]
	# ctl finds the only one without --socket.
	run "$MEMVISOR" ctl --json status
	assert_success
	assert_output --partial '"command_state":"running"'
	run "$MEMVISOR" ctl --list
	assert_success
	assert_output --partial "$sock"
	echo go >"$TMP/go"
	wait $mv
	[ ! -e "$sock" ]
}

@test "ctl: MEMVISOR_SOCKET, several sockets, exit codes" {
	# One FIFO each: two readers of one FIFO may both see the first
	# writer's close, and the second write then has no reader.
	mkfifo "$TMP/go_a" "$TMP/go_b"
	"$MEMVISOR" run -- sh -c "read x <'$TMP/go_a'" &
	a=$!
	"$MEMVISOR" run -- sh -c "read x <'$TMP/go_b'" &
	b=$!
	remember_pid $a
	remember_pid $b
	wait_for 5 test -S "$XDG_RUNTIME_DIR/memvisor/$a.sock"
	wait_for 5 test -S "$XDG_RUNTIME_DIR/memvisor/$b.sock"
	run "$MEMVISOR" ctl status
	[ "$status" -eq 2 ]
	assert_output --partial "2 memvisors are running"
	assert_output --partial "$a.sock"
	assert_output --partial "$b.sock"
	MEMVISOR_SOCKET=$XDG_RUNTIME_DIR/memvisor/$b.sock run "$MEMVISOR" ctl --json hello
	assert_success
	assert_output --partial "\"pid\":$b"
	# 1: an error reply; 2: usage; 3: cannot connect.
	run "$MEMVISOR" ctl --json --socket "$XDG_RUNTIME_DIR/memvisor/$a.sock" regions 1
	[ "$status" -eq 1 ]
	assert_output --partial '"code":"no_such_process"'
	run "$MEMVISOR" ctl --socket "$XDG_RUNTIME_DIR/memvisor/$a.sock" regions notapid
	[ "$status" -eq 2 ]
	run "$MEMVISOR" ctl --socket "$XDG_RUNTIME_DIR/memvisor/$a.sock" frobnicate
	[ "$status" -eq 2 ]
	run "$MEMVISOR" ctl --socket "$TMP/nothing.sock" status
	[ "$status" -eq 3 ]
	assert_output --partial "cannot connect"
	echo go >"$TMP/go_a"
	echo go >"$TMP/go_b"
	wait $a
	wait $b
}

@test "hello, status and stats describe the run" {
	start_fed "$WL/mappings"
	run ctl --json hello
	assert_success
	echo "$output" >"$TMP/h.json"
	[ "$(json_get "$TMP/h.json" 'd["protocol"]')" -eq 2 ]
	[ "$(json_get "$TMP/h.json" 'd["pid"]')" -eq $MVPID ]
	json_get "$TMP/h.json" 'd["features"]["user_notif"]' | grep -q sync_wake_up
	run ctl --json status
	assert_success
	echo "$output" >"$TMP/s.json"
	[ "$(json_get "$TMP/s.json" 'd["command_pid"]')" -eq $PID ]
	[ "$(json_get "$TMP/s.json" 'd["totals"]["mapped"]')" -gt $((1 << 30)) ]
	[ "$(json_get "$TMP/s.json" 'd["totals"]["notifications"]')" -gt 10 ]
	run ctl --json stats $PID
	assert_success
	echo "$output" >"$TMP/st.json"
	[ "$(json_get "$TMP/st.json" 'd["stats"]["calls"]["mmap"]["allow"]')" -ge 7 ]
	[ "$(json_get "$TMP/st.json" 'd["stats"]["bytes"]["mmap"]')" -ge $((1 << 30)) ]
	p50=$(json_get "$TMP/st.json" 'd["stats"]["service_ns"]["p50"]')
	p99=$(json_get "$TMP/st.json" 'd["stats"]["service_ns"]["p99"]')
	[ "$p50" -gt 0 ] && [ "$p99" -ge "$p50" ]
	run ctl stats
	assert_success
	assert_output --partial "all processes"
	assert_output --partial "p99.9"
	stop_fed
}

@test "an explicit --socket that cannot be created stops memvisor before the command" {
	run "$MEMVISOR" run --socket /nonexistent/dir/x.sock -- sh -c 'echo ran'
	assert_failure 125
	refute_output --partial ran
	assert_output --partial "cannot create socket /nonexistent/dir/x.sock"
	# A live socket is not stolen.
	start_idle
	run "$MEMVISOR" run --socket "$SOCK" -- true
	assert_failure 125
	assert_output --partial "in use"
	stop_idle
}

# The notify thread reads what a policy asks of the kernel (statm, maps,
# an executable's headers) for a decision; the main loop must not wait
# behind it: a decision holds its own lock, not the state lock. The
# notify_stall fault point makes one decision take 3 s. Status must keep
# answering meanwhile, and so show the notification count standing still
# in several replies in a row; were the state lock held, the first
# request would wait for the end of the decision, and no two replies
# would show the same count. (Times are not asserted: on a loaded machine
# a ctl call alone takes most of a second.)
@test "a decision that takes seconds does not hold up the control socket" {
	MEMVISOR_FAULT=notify_stall:2000 start_bg --notify-all -- "$WL/mmap_pairs" 2000000
	local same=0 prev= n i
	for i in $(seq 1 25); do
		n=$(ctl_within 10 --json status | json_get - 'd["totals"]["notifications"]')
		echo "sample $i: $n notifications"
		[ "$n" != "$prev" ] || same=$((same + 1))
		prev=$n
		sleep 0.1
	done
	kill "$MVPID"
	wait "$MVPID" || true
	echo "replies showing no new notification: $same"
	[ "$same" -ge 2 ]
}
