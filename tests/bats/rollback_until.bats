#!/usr/bin/env bats
# mark --hold and rollback --until (issue 26): the fuzzing loop. The
# program is marked and held in its read of stdin; each rollback puts it
# back and runs it to its next read of stdin, its crash, its exit or a
# time limit, and holds it there. tests/workloads/rb_target reports after
# each read the hash of its memory, which must be the mark's.

load helpers
bats_require_minimum_version 1.5.0

setup() {
	setup_tmp
	skip_unless_wp_async
}

teardown() {
	teardown_tmp
}

# The state of process $PID: "t" in a tracing stop.
proc_state() { awk '/^State:/{print $2}' "/proc/$PID/status"; }
held() { [ "$(proc_state)" = t ]; }
# Every thread of $PID in a tracing stop.
all_held() { [ "$(awk '/^State:/{print $2}' /proc/$PID/task/*/status | sort -u)" = t ]; }
answers_after() { out_after_has "$1" '^got '; } # N

mark_held() {
	run ctl mark --hold
	echo "$output"
	assert_success
	assert_output --partial "held stopped at the mark"
	held
}

# The first line after line N that matches RE (its first word the same)
# must equal the one the runs before found ($want, which it becomes).
same_as_before() { # N RE
	local got first=${2#^}
	got=$(out_after "$1" | grep "^${first%% *} " | head -1 || true)
	[[ $got =~ $2 ]] || { echo "no line /$2/ after line $1: '$got'"; return 1; }
	[ -z "$want" ] || [ "$got" = "$want" ] || { echo "after the runs before: '$got', the mark: '$want'"; return 1; }
	want=$got
}

# rollback --until ARGS...; the job's result in $TMP/r.json, its until
# event's field F in ev F.
until_run() {
	run ctl --json rollback --until "$@"
	echo "$output"
	assert_success
	echo "$output" | tail -1 >"$TMP/r.json"
}
ev() { json_get "$TMP/r.json" "d['result']['until'].get('$1')"; }

@test "rollback --until: held at the mark, each input runs from the mark to the next read of stdin" {
	start_fed "$WL/rb_target" 16
	mark_held
	n=$(out_lines)
	echo x >&7
	# Held: the input waits in the pipe.
	sleep 0.3
	[ "$(out_lines)" = "$n" ]
	held
	want=
	for i in 1 2 3 4 5 6 7 8; do
		n=$(out_lines)
		echo "w $i 64" >&7
		[ "$i" = 1 ] || echo "w $i 64" >&7
		until_run read:0
		r='d["result"]'
		u='d["result"]["until"]'
		[ "$(json_get "$TMP/r.json" "[$u['event'], $u['syscall'], $u['arg0'], $u['tid'], $r['held']]")" = "[\"reached\", \"read\", 0, $PID, true]" ]
		held
		same_as_before "$n" '^got 0 [0-9a-f]+ 0 ok$'
	done
	# The text says what it stopped at.
	echo x >&7
	run ctl rollback --until read:0
	assert_success
	assert_output --partial "until: thread $PID reached read(0)"
	assert_output --partial "held stopped"
}

@test "rollback --until: a crash is an event, not the end: SIGSEGV with its address, abort, stack overflow" {
	start_fed "$WL/rb_target" 16
	mark_held
	echo c >&7
	until_run read:0
	[ "$(ev event)" = crashed ]
	[ "$(ev signal)" = 11 ]
	[ "$(ev signal_name)" = SIGSEGV ]
	[ "$(ev addr)" = 16 ]
	held
	echo a >&7
	until_run read:0
	[ "$(ev event)" = crashed ]
	[ "$(ev signal_name)" = SIGABRT ]
	echo o >&7
	until_run read:0
	[ "$(ev event)" = crashed ]
	[ "$(ev signal)" = 11 ]
	# The stack that grew since the mark is unmapped again.
	[ "$(json_get "$TMP/r.json" "d['result']['unmapped_bytes'] == 0")" = True ]
	n=$(out_lines)
	echo x >&7
	until_run read:0
	[ "$(ev event)" = reached ]
	[ "$(json_get "$TMP/r.json" "d['result']['unmapped_bytes'] > 0")" = True ]
	out_after "$n" | grep -q '^got 0 [0-9a-f]* 0 ok$'
	# In a thread made during the run: the thread and its address.
	echo C >&7
	until_run read:0
	[ "$(ev event)" = crashed ]
	[ "$(ev signal)" = 11 ]
	[ "$(ev addr)" = 32 ]
	[ "$(ev tid)" != "$PID" ]
	n=$(out_lines)
	echo x >&7
	until_run read:0
	[ "$(ev event)" = reached ]
	[ "$(json_get "$TMP/r.json" "d['result']['threads_ended']")" = 1 ]
	out_after "$n" | grep -q '^got 0 [0-9a-f]* 0 ok$'
	run ctl rollback --until read:0 --timeout 0.2
	assert_success
	kill -0 "$PID"
}

@test "rollback --until: an exit is held before it happens; the next rollback runs again" {
	start_fed "$WL/rb_target" 16
	mark_held
	echo e >&7
	until_run read:0
	[ "$(ev event)" = exited ]
	[ "$(ev status)" = 3 ]
	[ "$(ev syscall)" = exit_group ]
	held
	kill -0 "$MVPID"
	n=$(out_lines)
	echo x >&7
	until_run read:0
	[ "$(ev event)" = reached ]
	out_after "$n" | grep -q '^got 0 '
}

@test "rollback --until: a time limit, a thread made during the run, none" {
	start_fed "$WL/rb_target" 16
	mark_held
	echo h >&7
	until_run read:0 --timeout 0.5
	[ "$(ev event)" = timeout ]
	[ "$(json_get "$TMP/r.json" "d['result']['until']['run_ns'] >= 500000000")" = True ]
	held
	# A thread the program starts during the run is stopped with it, and
	# ended by the next rollback.
	echo t >&7
	until_run read:0
	[ "$(ev event)" = reached ]
	[ "$(ls /proc/$PID/task | wc -l)" = 2 ]
	all_held
	echo x >&7
	until_run none --timeout 0.3
	[ "$(ev event)" = timeout ]
	[ "$(json_get "$TMP/r.json" "d['result']['threads_ended']")" = 1 ]
	[ "$(ls /proc/$PID/task | wc -l)" = 1 ]
	# Two threads made in one run, both in system calls all the time (the
	# per-thread record of the run grew past its end: make asan).
	for i in 1 2 3; do
		echo D >&7
		until_run read:0 --timeout 2
		[ "$(ev event)" = reached ]
		[ "$(ls /proc/$PID/task | wc -l)" = 3 ]
	done
}

# A clone(2) without CLONE_THREAD and with no exit signal is reported to
# a tracer as a thread's clone (PTRACE_EVENT_CLONE): the new process is
# let go like a forked child, and its exit_group is its own, not the
# program's exit.
@test "rollback --until: a process made by clone(2) without an exit signal is not taken for a thread" {
	local mode i
	for mode in traced notified; do
		MV_ARGS=()
		[ "$mode" = traced ] || MV_ARGS=(--until-point read:0)
		start_fed "$WL/rb_target" 16
		mark_held
		for i in 1 2 3; do
			n=$(out_lines)
			echo q >&7
			until_run read:0 --timeout 10
			[ "$(json_get "$TMP/r.json" "[d['result']['until'][k] for k in ('event', 'pid', 'tid', 'stops')]")" = "[\"reached\", $PID, $PID, \"$mode\"]" ]
			# It reaped the process and went on to its next read.
			out_after "$n" | grep -q '^ready '
		done
		run ctl unmark
		assert_success
		stop_fed
	done
}

@test "rollback --until: job cancel ends the run and holds the program" {
	start_fed "$WL/rb_target" 16
	mark_held
	echo h >&7
	ctl --json rollback --until read:0 --timeout 120 >"$TMP/r.out" 2>"$TMP/r.err" &
	rb=$!
	job_running() { ctl --json job 2 | json_get - 'd["state"] == "running" and d["phase"] == "running"' | grep -q True; }
	wait_for 20 job_running
	t0=$SECONDS
	run ctl job cancel 2
	echo "$output"
	assert_success
	wait "$rb"
	[ $((SECONDS - t0)) -lt 20 ]
	tail -1 "$TMP/r.out" >"$TMP/r.json"
	[ "$(ev event)" = cancelled ]
	[ "$(json_get "$TMP/r.json" "d['state']")" = done ]
	held
	# The next rollback puts the hung run back.
	n=$(out_lines)
	echo x >&7
	until_run read:0
	[ "$(ev event)" = reached ]
	out_after "$n" | grep -q '^got 0 '
}

@test "rollback --until: a new program is an event that lets it go; the next rollback is refused" {
	start_fed "$WL/rb_target" 16
	mark_held
	echo E >&7
	until_run read:0
	[ "$(ev event)" = exec ]
	[ "$(json_get "$TMP/r.json" "d['result']['held']")" = False ]
	wait_for 10 grep -q sleep "/proc/$PID/cmdline"
	[ "$(proc_state)" = S ]
	run ctl rollback
	assert_failure
	assert_output --partial "ran a new program (execve) since the mark"
	kill "$PID"
}

# run --until-point read:0: memvisor's filter notifies the read of stdin
# (and exit, exit_group), so that a run goes under PTRACE_CONT and stops
# once, not at every call. The same loop as above, each run told of by
# the filter ("stops": "notified"); a point the run was not started
# with is traced as before.
@test "rollback --until under run --until-point: each input runs from the mark to the next read, told by the filter" {
	MV_ARGS=(--until-point read:0)
	start_fed "$WL/rb_target" 16
	mark_held
	want=
	for i in 1 2 3 4 5 6; do
		n=$(out_lines)
		echo "w $i 64" >&7
		until_run read:0
		[ "$(json_get "$TMP/r.json" "[d['result']['until'][k] for k in ('event', 'syscall', 'arg0', 'tid', 'stops')]")" = "[\"reached\", \"read\", 0, $PID, \"notified\"]" ]
		held
		same_as_before "$n" '^got 0 [0-9a-f]+ 0 ok$'
	done
	# Stopped before the read: a line written now waits in the pipe.
	n=$(out_lines)
	echo x >&7
	sleep 0.3
	[ "$(out_lines)" = "$n" ]
	# Another point: every call traced, as without the option.
	echo x >&7
	until_run read:7 --timeout 0.5
	[ "$(ev stops)" = traced ]
	[ "$(ev event)" = timeout ]
	# Crashes, an exit, a thread made in the run, a time limit.
	echo c >&7
	until_run read:0
	[ "$(ev event) $(ev signal) $(ev addr) $(ev stops)" = "crashed 11 16 notified" ]
	echo e >&7
	until_run read:0
	[ "$(ev event) $(ev syscall) $(ev status)" = "exited exit_group 3" ]
	held
	echo t >&7
	until_run read:0
	[ "$(ev event)" = reached ]
	[ "$(ls /proc/$PID/task | wc -l)" = 2 ]
	all_held
	echo h >&7
	until_run read:0 --timeout 0.3
	[ "$(ev event)" = timeout ]
	n=$(out_lines)
	echo x >&7
	until_run read:0
	[ "$(ev event)" = reached ]
	[ "$(json_get "$TMP/r.json" "d['result']['threads_ended']")" = 0 ]
	out_after "$n" | grep -q "^$want\$"
	# Let go: its reads go on unstopped, and it ends as it would.
	run ctl unmark
	assert_success
	n=$(out_lines)
	echo "w 9 8" >&7
	wait_for 10 eval '[ "$(out_lines)" -gt '"$n"' ]'
	exec 7>&-
	wait "$MVPID"
}

# The same random loop as above (crashes, exits, threads, layout
# changes), with a thread in a loop of system calls beside it, under the
# filter's stop point: 300 runs, each from the mark, each told by it.
@test "rollback --until under run --until-point: 300 random runs beside a busy thread, each from the mark" {
	MV_ARGS=(--until-point read:0)
	start_fed "$WL/rb_target" 8
	say T '^got 0 '
	mark_held
	RBLOOP_STOPS=notified run python3 "$HELPERS/rbloop.py" "$SOCK" "$TMP/in" "$TMP/out" 300 "$RANDOM" "w,m,u,p,z,b,s,t,x,c,a,o,e,C,f" until
	echo "$output"
	assert_success
	assert_output --partial "ok 300 rollbacks"
	all_held
}

# A tree's mark runs every process of the mark (tests/workloads/rb_tree: a
# parent reads stdin and asks its child for its hash): each input runs
# both from the mark to the parent's next read of stdin. The child's
# crash, its exit and its death by its parent's signal are events, held
# before they happen, and the next input runs from the mark again.
tree_until_loop() { # STOPS: traced or notified
	start_fed "$WL/rb_tree" 4
	kid=$(awk '/^ready/{print $3}' "$TMP/out")
	[ -n "$kid" ]
	kid_held() { [ "$(awk '/^State:/{print $2}' "/proc/$kid/status")" = t ]; }
	say n '^hashes 0 '
	mark_held
	kid_held
	local cmd want= got e
	for cmd in n "w 1 200" n m n S n x n K n f "w 2 30" n "W 4" G n; do
		n=$(out_lines)
		echo "$cmd" >&7
		until_run read:0
		# event pid tid signal_name addr sender syscall arg0 stops held
		e=$(json_get "$TMP/r.json" "' '.join(str(d['result']['until'].get(k)) for k in 'event pid tid signal_name addr sender syscall arg0 stops'.split()) + ' ' + str(d['result']['held'])")
		case $cmd in
		S) [ "$e" = "crashed $kid $kid SIGSEGV 16 None None None $1 True" ] ;;
		K) [ "$e" = "crashed $kid $kid SIGTERM None $PID None None $1 True" ] ;;
		x) [[ $e == "exited $kid $kid None None None exit_group 0 $1 True" ]] ;;
		*) [ "$e" = "reached $PID $PID None None None read 0 $1 True" ] ;;
		esac
		held
		kid_held
		[ "$cmd" = n ] || continue
		same_as_before "$n" '^hashes 1 [0-9a-f]+ [0-9a-f]+$'
	done
	# The text names the process of the event.
	echo S >&7
	run ctl rollback --until read:0
	assert_success
	assert_output --partial "until: thread $kid crashed with SIGSEGV at address 0x10"
	assert_output --partial "rolled back process $PID"
	# Let go: both run on from where they were held, unstopped.
	run ctl unmark
	assert_success
	exec 7>&-
	wait "$MVPID" || true
	kid_gone() { ! kill -0 "$kid" 2>/dev/null; }
	wait_for 10 kid_gone
}

@test "rollback --until of a tree: both processes run from the mark each time; the child's crash, exit and death are events" {
	tree_until_loop traced
}

@test "rollback --until of a tree under run --until-point: the same, each stop told by the filter" {
	MV_ARGS=(--until-point read:0)
	tree_until_loop notified
}

# Random commands in both processes, crashes, exits and deaths of the
# child among them: TREE_UNTIL_ITERS (150) iterations of two runs each,
# traced and then told by the filter; after each, both are the mark's.
@test "rollback --until of a tree: TREE_UNTIL_ITERS random commands, each run of both from the mark" {
	local mode
	for mode in traced notified; do
		MV_ARGS=()
		[ "$mode" = traced ] || MV_ARGS=(--until-point read:0)
		start_fed "$WL/rb_tree" 4
		say n '^hashes 0 '
		run ctl --json mark --hold
		assert_success
		snap=$(echo "$output" | tail -1 | json_get - 'd["result"]["snapshot"].get("pid", 0)')
		RBLOOP_STOPS=$mode run python3 "$HELPERS/rbloop.py" "$SOCK" "$TMP/in" "$TMP/out" "${TREE_UNTIL_ITERS:-150}" "$RANDOM" "w,m,f,d,x,S,K,n,W,G" tree
		echo "$output"
		assert_success
		assert_output --partial "ok $((2 * ${TREE_UNTIL_ITERS:-150})) rollbacks"
		# Every process made since the mark was killed by the rollback
		# after it: none is left asleep in pause(2) (rb_tree's
		# grandchildren), below the parent or orphaned to the reaper
		# (beside the mark's snapshot, which sleeps there too).
		reaper=$(awk '/^PPid:/{print $2}' "/proc/$PID/status")
		asleep() {
			local p
			for p in $(pgrep -P "$reaper") $(pgrep -P "$PID") $(pgrep -P "$(pgrep -P "$PID" | head -1)"); do
				[ "$p" = "$snap" ] || [ "$(cat "/proc/$p/wchan" 2>/dev/null)" != __do_sys_pause ] || echo "$p"
			done
		}
		# (one killed just now may take a moment to end)
		none_asleep() { [ -z "$(asleep)" ]; }
		wait_for 10 none_asleep || { echo "left asleep: $(asleep)"; return 1; }
		run ctl unmark
		assert_success
		exec 7>&-
		wait "$MVPID" || true
	done
}

@test "run --until-point: a call memvisor notifies already, an unknown call or a bad descriptor is refused" {
	for p in mmap exit_group nosuch read:x read: ""; do
		run "$MEMVISOR" run --until-point "$p" -- true
		echo "$p: $output"
		[ "$status" = 125 ]
		assert_output --partial "--until-point"
	done
	run "$MEMVISOR" run --until-point mmap -- true
	assert_output --partial "mmap is a call memvisor notifies already"
	run "$MEMVISOR" run --until-point read:0 -- sh -c 'read a; echo "got $a"; exit 4' <<<"hello"
	[ "$status" = 4 ]
	assert_output "got hello"
}

@test "mark --hold: unmark lets the program run; a checkpoint is refused while it is held" {
	start_fed "$WL/rb_target" 16
	mark_held
	run ctl checkpoint "$TMP/img"
	assert_failure
	assert_output --partial "holds process $PID stopped"
	[ ! -e "$TMP/img/manifest.json" ]
	n=$(out_lines)
	echo x >&7
	run ctl unmark
	assert_success
	wait_for 20 answers_after "$n"
	[ "$(proc_state)" != t ]
	stop_fed
}

# A held program, SIGNAL sent to TARGET (memvisor or the program):
# memvisor ends with STATUS.
held_then_signalled() { # SIGNAL TARGET STATUS
	start_fed "$WL/rb_target" 16
	mark_held
	if [ "$2" = memvisor ]; then kill "-$1" "$MVPID"; else kill "-$1" "$PID"; fi
	wait_for 20 sh -c "! kill -0 $MVPID 2>/dev/null"
	rc=0
	wait "$MVPID" || rc=$?
	[ "$rc" = "$3" ]
}

@test "mark --hold: a signal for the program reaches it; memvisor ends with its status" {
	held_then_signalled TERM memvisor 143
}

@test "rollback --until: a held program killed from outside is gone, and said so" {
	held_then_signalled KILL program 137
}

@test "rollback: offsets of files open at the mark go back; --close-fds closes those opened since" {
	printf '0123456789abcdefghijklmnop' >"$TMP/file"
	RB_FILE=$TMP/file start_fed "$WL/rb_target" 16
	run ctl --json mark --hold
	assert_success
	echo "$output" | tail -1 >"$TMP/m.json"
	[ "$(json_get "$TMP/m.json" 'd["result"]["offsets_kept"] >= 1 and d["result"]["held"]')" = True ]
	held
	for i in 1 2 3; do
		n=$(out_lines)
		echo r >&7
		until_run read:0
		out_after "$n" | grep -qx 'read 01234567' || { out_after "$n"; cat "$TMP/r.json"; false; }
	done
	[ "$(json_get "$TMP/r.json" "d['result']['offsets_rewound']")" = 1 ]
	n=$(out_lines)
	echo O >&7
	until_run read:0
	fd=$(out_after "$n" | sed -n 's/^opened //p')
	[ "$fd" -gt 2 ]
	n=$(out_lines)
	echo O >&7
	until_run read:0 --close-fds
	[ "$(json_get "$TMP/r.json" "d['result']['fds_closed']")" = 1 ]
	[ "$(out_after "$n" | sed -n 's/^opened //p')" = "$fd" ]
	# Without it, the one opened in the last run stays open.
	n=$(out_lines)
	echo O >&7
	until_run read:0
	[ "$(json_get "$TMP/r.json" "d['result']['fds_closed']")" = 0 ]
	[ "$(out_after "$n" | sed -n 's/^opened //p')" = "$((fd + 1))" ]
}

@test "rollback --until: bad points and limits are refused, nothing touched" {
	start_fed "$WL/rb_target" 16
	mark_held
	for bad in nosuchcall read:x read: none:3 :0 read:-1; do
		run ctl rollback --until "$bad"
		echo "$output"
		assert_failure
		assert_output --partial "until"
	done
	run ctl rollback --timeout 1
	assert_failure
	assert_output --partial "only with"
	run ctl rollback --until read:0 --timeout 0
	assert_failure
	held
	[ "$(ctl --json status | json_get - 'd["command_state"]')" = running ]
}

# args.wait_ms: the request is answered with the job once it has ended
# (or wait_ms has passed), and the requests sent after it wait their turn.
@test "rollback and job with wait_ms: answered at the job's end, the next requests in order" {
	start_fed "$WL/rb_target" 16
	mark_held
	raw() { python3 "$HELPERS/ctlraw.py" "$SOCK" "$@"; }
	# Job 2, a run to its 400 ms limit, and a job request sent with it.
	run raw pipe '{"id":1,"cmd":"rollback","args":{"until":"none","timeout_ms":400,"wait_ms":60000}}' \
		'{"id":2,"cmd":"job","args":{"id":2}}'
	echo "$output"
	assert_success
	first=${lines[0]#* } second=${lines[1]#* }
	[ "${lines[0]%% *}" -ge 400 ]
	[ "$(echo "$first" | json_get - '[d["id"], d["result"]["id"], d["result"]["state"], d["result"]["result"]["until"]["event"]]')" = '[1, 2, "done", "timeout"]' ]
	[ "$(echo "$second" | json_get - '[d["id"], d["result"]["state"]]')" = '[2, "done"]' ]
	held
	# wait_ms shorter than the job: answered running when it has passed.
	run raw pipe '{"id":3,"cmd":"rollback","args":{"until":"none","timeout_ms":1500}}' \
		'{"id":4,"cmd":"job","args":{"id":3,"wait_ms":300}}' \
		'{"id":5,"cmd":"job","args":{"id":3,"wait_ms":60000}}'
	echo "$output"
	assert_success
	[ "$(echo "${lines[1]#* }" | json_get - '[d["id"], d["result"]["state"]]')" = '[4, "running"]' ]
	[ "${lines[1]%% *}" -ge 300 ]
	[ "$(echo "${lines[2]#* }" | json_get - '[d["id"], d["result"]["state"], d["result"]["result"]["until"]["event"]]')" = '[5, "done", "timeout"]' ]
	[ "${lines[2]%% *}" -ge 1500 ]
	# A client that leaves while it waits: the job ends all the same,
	# and memvisor answers the next one.
	raw leave '{"id":6,"cmd":"rollback","args":{"until":"none","timeout_ms":300,"wait_ms":60000}}'
	job_ended() { ctl --json job 4 | json_get - 'd["state"]' | grep -qx done; }
	wait_for 20 job_ended
	held
	# Bad values start nothing.
	for bad in -1 86400001 '"1"' 1.5; do
		run raw send "{\"id\":7,\"cmd\":\"rollback\",\"args\":{\"wait_ms\":$bad}}"
		echo "$output"
		assert_output --partial '"code":"bad_request"'
		assert_output --partial 'wait_ms'
	done
	run raw send '{"id":8,"cmd":"job","args":{"id":4,"wait_ms":-5}}'
	assert_output --partial 'wait_ms'
	[ "$(ctl --json jobs | json_get - 'len(d["jobs"])')" = 4 ]
	# A job already ended: answered at once.
	run raw pipe '{"id":9,"cmd":"job","args":{"id":2,"wait_ms":60000}}'
	[ "$(echo "${lines[0]#* }" | json_get - 'd["result"]["state"]')" = done ]
}

rss_kb() { awk '/^VmRSS/{print $2}' "/proc/$1/status"; }

# RSS of memvisor and of the program after a run of "x" (the same state).
rss_at_x() {
	echo x >&7
	until_run read:0
	[ "$(ev event)" = reached ]
	RSS_MV=$(rss_kb "$MVPID")
	RSS_P=$(rss_kb "$PID")
	echo "rss: memvisor $RSS_MV kB, program $RSS_P kB"
}

# ROLLBACK_UNTIL_ITERS: 1000 in make check, 20000 in make soak. Memory
# stays flat: memvisor's and the program's RSS within 1% from the 200th
# rollback to the last. (No forks here: memvisor keeps the counters of
# the last 4096 processes that exited, the children a rollback kills.)
@test "rollback --until: ROLLBACK_UNTIL_ITERS random inputs with crashes and exits, each run from the mark; memory flat" {
	start_fed "$WL/rb_target" 8
	mark_held
	n=${ROLLBACK_UNTIL_ITERS:-1000}
	cmds=w,m,u,p,z,b,s,t,x,c,a,o,e,C
	run python3 "$HELPERS/rbloop.py" "$SOCK" "$TMP/in" "$TMP/out" 200 "$RANDOM" "$cmds" until
	echo "$output"
	assert_success
	rss_at_x
	mv0=$RSS_MV p0=$RSS_P
	run python3 "$HELPERS/rbloop.py" "$SOCK" "$TMP/in" "$TMP/out" "$((n - 200))" "$RANDOM" "$cmds" until
	echo "$output"
	assert_success
	assert_output --partial "ok $((n - 200)) rollbacks"
	rss_at_x
	# make asan: freed memory waits in ASan's quarantine; RSS not checked.
	[ -n "${SANITIZER_REPORTS:-}" ] || [ $((RSS_MV * 100)) -le $((mv0 * 101)) ]
	[ $((RSS_P * 100)) -le $((p0 * 101)) ]
}

# A thread that makes system calls all the time runs beside each run: it
# is stopped at every point of a call (entry, exit, between) when the
# main thread reaches its read, and put back with it.
@test "rollback --until: 200 runs beside a thread in a loop of system calls, each back at the mark" {
	start_fed "$WL/rb_target" 8
	say T '^got 0 '
	mark_held
	[ "$(ls /proc/$PID/task | wc -l)" = 2 ]
	run python3 "$HELPERS/rbloop.py" "$SOCK" "$TMP/in" "$TMP/out" 200 "$RANDOM" "w,x,s,t,f" until
	echo "$output"
	assert_success
	assert_output --partial "ok 200 rollbacks"
	all_held
}

# A thread made in each run and ended by the next rollback: the mark's
# record of the held threads kept every one of them (memvisor +320-430 kB
# in 1500 runs, 3.5-4.6%) until it dropped those gone.
@test "rollback --until: 800 runs that each start a thread leave memvisor's memory flat" {
	[ -z "${SANITIZER_REPORTS:-}" ] || skip "ASan build (make asan): freed memory waits in its quarantine, RSS not checked"
	start_fed "$WL/rb_target" 8
	mark_held
	run python3 "$HELPERS/rbloop.py" "$SOCK" "$TMP/in" "$TMP/out" 100 "$RANDOM" t until
	assert_success
	rss_at_x
	mv0=$RSS_MV
	run python3 "$HELPERS/rbloop.py" "$SOCK" "$TMP/in" "$TMP/out" 800 "$RANDOM" t until
	echo "$output"
	assert_success
	rss_at_x
	[ $((RSS_MV * 100)) -le $((mv0 * 101)) ]
}

# rollback --hold: put back and kept stopped at the mark, so that what it
# will read can be written first, or its memory looked at; a plain
# rollback lets it run from there. Not with --until, which holds where it
# stops it.
@test "rollback --hold: put back and held at the mark; the next rollback runs it from there" {
	start_fed "$WL/rb_target" 16
	run ctl mark
	assert_success
	got_line() { say "$1" '^got '; }
	got_line x
	want=$LAST
	got_line "w 3 200"
	run ctl --json rollback --hold
	echo "$output"
	assert_success
	echo "$output" | tail -1 >"$TMP/r.json"
	[ "$(json_get "$TMP/r.json" "d['result']['held']")" = True ]
	held
	# Held: an input waits in the pipe.
	n=$(out_lines)
	echo x >&7
	sleep 0.3
	[ "$(out_lines)" = "$n" ]
	held
	run ctl rollback --hold
	assert_success
	assert_output --partial "held stopped at the mark"
	held
	run ctl rollback
	assert_success
	refute_output --partial "held"
	wait_for 30 out_longer_than "$n"
	[ "$(out_after "$n" | head -1)" = "$want" ]
	run ctl rollback --hold --until read:0
	assert_failure
	assert_output --partial "not with args.until"
	stop_fed
}

# A regular file open for reading at the mark and closed since is opened
# again in the process (same file, number, close-on-exec flag and the
# mark's offset); what cannot be (a pipe, a file deleted since) is named
# in the result and stays closed.
@test "rollback: a file closed since the mark is open again at its number and offset; a pipe is reported" {
	printf '0123456789abcdefghijklmnop' >"$TMP/file"
	RB_FILE=$TMP/file start_fed "$WL/rb_target" 16
	mark_held
	r='d["result"]'
	for i in 1 2 3; do
		n=$(out_lines)
		echo K >&7
		until_run read:0
		# The pipe stays closed after the first time.
		want="closed 0 0"
		[ "$i" = 1 ] || want="closed 0 -1"
		out_after "$n" | grep -qx "$want"
		n=$(out_lines)
		echo r >&7
		until_run read:0
		out_after "$n" | grep -qx 'read 01234567' || { out_after "$n"; cat "$TMP/r.json"; false; }
		[ "$(json_get "$TMP/r.json" "[$r['fds_reopened'], [(f['kind'], f['why']) for f in $r['fds_lost']]]")" = '[1, [["pipe", "only regular files are opened again"]]]' ]
	done
	# Its close-on-exec flag is the mark's.
	n=$(out_lines)
	echo F >&7
	until_run read:0
	out_after "$n" | grep -qx 'flags 1'
	echo K >&7
	until_run read:0
	echo x >&7
	run ctl rollback --until read:0
	assert_success
	assert_output --partial "1 closed since opened again"
	assert_output --partial "(pipe) was closed since the mark and stays closed"
	refute_output --partial "(file) was closed"
	# Deleted since: not opened again, and said so.
	echo K >&7
	until_run read:0
	rm "$TMP/file"
	n=$(out_lines)
	echo r >&7
	until_run read:0
	[ "$(json_get "$TMP/r.json" "[f['why'] for f in d['result']['fds_lost'] if f['kind'] == 'file']")" = '["the file was deleted"]' ]
	out_after "$n" | grep -qx 'read -'
}

# A number open on something else since the mark (another file, or the
# same file opened again, with an offset of its own): the mark's file
# goes back over it. perl, rolled back while it loaded its modules, read
# the next module through the number of one it had closed ("syntax error
# at EOF").
@test "rollback: a descriptor whose number names another file, or another open of it, is the mark's again" {
	printf '0123456789abcdefghijklmnop' >"$TMP/file"
	RB_FILE=$TMP/file start_fed "$WL/rb_target" 16
	mark_held
	for cmd in Y Z Y Z; do
		n=$(out_lines)
		echo "$cmd" >&7
		until_run read:0
		out_after "$n" | grep -qE '^(replaced|reopened) 0$'
		n=$(out_lines)
		echo r >&7
		until_run read:0
		[ "$(json_get "$TMP/r.json" 'd["result"]["fds_reopened"]')" = 1 ]
		out_after "$n" | grep -qx 'read 01234567' || { out_after "$n"; cat "$TMP/r.json"; false; }
	done
}
