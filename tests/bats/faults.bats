#!/usr/bin/env bats
# Fault injection: MEMVISOR_FAULT=NAME[:N] makes the N-th call at a named
# point fail. memvisor must survive, the program must be unaffected or
# cleanly told, and nothing may leak (docs/reliability.md).
#
# "every fault point" runs each point `memvisor --list-faults` prints
# through the scenario its name's prefix maps to (SCENARIOS below). A new
# point needs a scenario that reaches it, or that test fails. FAULT_NTH
# (default "1") lists which calls at each point fail; make soak uses more.

load helpers
bats_require_minimum_version 1.5.0

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

@test "ctl_alloc failing: the client gets an internal error reply" {
	MEMVISOR_FAULT=ctl_alloc:1 start_fed "$WL/mappings"
	run ctl status
	assert_failure 1
	assert_output --partial "memvisor ctl: out of memory"
	run ctl status
	assert_success
	stop_fed
}

@test "procmap_read failing: regions answers an error, the next query works" {
	MEMVISOR_FAULT=procmap_read:1 start_fed "$WL/mappings"
	run ctl --json regions "$PID"
	assert_failure 1
	assert_output --partial '"code":"internal"'
	run ctl --json regions "$PID"
	assert_success
	stop_fed
}

# Point name prefix -> scenario. supervise: memvisor runs the workload with
# the fault and is queried and checkpointed; image: `memvisor image verify`
# runs with the fault; exit: like supervise, and memvisor must exit 125 at
# the end (the point is on its way out); evict: reload_wl is evicted and
# reloaded with the fault (run_evict_point); reload_wl shares no memory,
# so shm_ points are not reached there (shm_evict.bats tests shm_punch),
# nor dedup_ ones, which need a forked tree (evict_safety.bats tests
# dedup_differs); live: a checkpoint --live with the fault (run_live_point);
# rollback: a mark and a rollback with the fault (run_rollback_point);
# agent: a point of the agent's containers, which need a runtime: a test
# of agent.bats runs it (checked here by name).
# The first prefix that matches wins.
SCENARIOS=(
	"notify_ supervise"
	"pidfd_ supervise"
	"proc_ supervise"
	"procmap_ supervise"
	"ctl_ supervise"
	"ckpt_ supervise"
	"ptrace_setregs rollback"
	"ptrace_ supervise"
	"reaper_ supervise"
	"img_ image"
	"statsjson_ exit"
	"remote_ evict"
	"uffd_ evict"
	"reload_ evict"
	"serve_ evict"
	"evict_ evict"
	"shm_ evict"
	"dedup_ evict"
	"live_ live"
	"container_ agent"
)

scenario_of() { # POINT
	local s
	for s in "${SCENARIOS[@]}"; do
		[[ $1 == "${s%% *}"* ]] && { echo "${s#* }"; return 0; }
	done
	return 1
}

@test "every point in the sources is registered, and every registered point has a scenario" {
	run "$MEMVISOR" --list-faults
	assert_success
	listed=$output
	[ "$(echo "$listed" | wc -l)" -ge 20 ]
	used=$(grep -rhoE '(fault_hit|FAULT_RETURN)\("[a-z0-9_]+"' "$ROOT"/supervisor "$ROOT"/common \
		"$ROOT"/state "$ROOT"/policy "$ROOT"/tracee | sed 's/.*("//; s/"$//' | sort -u)
	missing=$(comm -23 <(echo "$used") <(echo "$listed" | sort))
	[ -z "$missing" ] || { echo "not in common/fault.c's registry: $missing"; return 1; }
	for point in $listed; do
		scenario_of "$point" >/dev/null || { echo "no scenario for fault point $point"; return 1; }
	done
	# An unknown point is refused aloud, not ignored.
	run env MEMVISOR_FAULT=no_such_point "$MEMVISOR" run -- true
	assert_success
	assert_output --partial "unknown point 'no_such_point'"
}

# The workload for the supervise scenario: threads, every kind of memory,
# commands on the FIFO held on fd 7.
start_pattern() { # FAULT
	MV_ARGS=(--notify-all --stats-json "$TMP/s.json")
	MEMVISOR_FAULT=$1 start_fed "$WL/ckpt_pattern" --dense 4 --sparse 16 --threads 2
	wait_for 10 test -S "$SOCK"
}

# The workload verifies its memory and answers "ok" (or "bad ...") within
# SECONDS (20); on anything else, say what it answered.
say_check() { # [SECONDS]
	say_until check '^ok\|^bad' "${1:-20}" || { echo "no answer to check in ${1:-20} s"; return 1; }
	out_after "$SAID_AT" | grep -q '^ok' ||
		{ echo "answer to check: $(out_after "$SAID_AT" | head -3)"; return 1; }
}

children() { pgrep -P "$MVPID" | sort | tr '\n' ' '; }
untraced() { ! grep -h '^TracerPid:' /proc/"$PID"/task/*/status 2>/dev/null | grep -vq '[[:space:]]0$'; }

# No checkpoint job is running (a client that lost its connection does
# not stop the job it started).
jobs_idle() {
	[ "$(ctl --timeout 5 --json jobs 2>/dev/null | json_get - 'any(j["state"] == "running" for j in d["jobs"])')" = False ]
}

# One round of queries and a checkpoint into DIR. With STRICT every step
# must succeed; without, a step may fail, but only cleanly: an error
# status, no half image, the program untraced and intact. CKPT_FAILED
# says whether the checkpoint job failed.
exercise() { # DIR STRICT FAULT-FOR-VERIFY
	local dir=$1 strict=$2 ok=0
	CKPT_FAILED=0
	for q in status ps "regions $PID" "stats $PID"; do
		# shellcheck disable=SC2086
		ctl --timeout 5 $q >/dev/null 2>&1 || { [ -z "$strict" ] || { echo "ctl $q failed"; return 1; }; }
	done
	ctl_within 60 checkpoint "$dir" --wait >"$TMP/ckpt.out" 2>&1 && ok=1
	if [ $ok = 0 ]; then
		[ -z "$strict" ] || { echo "checkpoint failed: $(cat "$TMP/ckpt.out")"; return 1; }
		grep -q . "$TMP/ckpt.out" || { echo "a failed checkpoint said nothing"; return 1; }
		wait_for 60 jobs_idle || { echo "the checkpoint job does not end"; return 1; }
		[ -e "$dir" ] || CKPT_FAILED=1
		no_temp_image || { echo "a failed checkpoint left a temporary image"; return 1; }
	fi
	# A finished image (the job may finish after its client failed) is whole.
	if [ -e "$dir" ]; then
		env MEMVISOR_FAULT="$3" "$MEMVISOR" image verify "$dir" >"$TMP/verify.out" 2>&1 || {
			[ -n "$3" ] || { echo "image verify failed: $(cat "$TMP/verify.out")"; return 1; }
			grep -q "fault injected at ${3%%:*}" "$TMP/verify.out"
			grep -v "fault injected" "$TMP/verify.out" | grep -qi 'error\|input/output\|cannot\|failed'
			"$MEMVISOR" image verify "$dir" >/dev/null
		}
	fi
	wait_for 10 untraced || { echo "the program is still traced"; return 1; }
	say_check || { echo "the program's memory changed"; return 1; }
}

# The supervise, image and exit scenarios: memvisor survives the fault,
# answers again afterwards, and exits with the program's status (125 for
# the exit scenario once the point was reached). N lenient rounds let the
# N-th call happen in one of them; then one strict round. Nothing leaks:
# after it, memvisor holds no more fds than a run without a fault does
# (REF_FDS; memvisor caches an O_PATH /proc fd per process once a query
# needed one, so the count before the first query is no baseline), and
# has the same children. At the first call of a checkpoint point
# (ckpt_*, ptrace_*) the first checkpoint must fail.
run_point() { # POINT:N SCENARIO
	local spec=$1 scenario=$2 point=${1%%:*} nth=${1##*:} run_fault=$1 verify_fault= want=0 r
	[ "$scenario" = image ] && { run_fault=; verify_fault=$spec; }
	[ -z "$spec" ] && { run_fault=; nth=1; }
	rm -rf "$TMP"/img*
	start_pattern "$run_fault"
	local kids
	kids=$(children)
	for r in $(seq 1 "$nth"); do
		exercise "$TMP/img$r" "" "$verify_fault" || return 1
		if [ "$r" = 1 ] && [ "$nth" = 1 ] && [[ $point == ckpt_* || $point == ptrace_* ]] &&
			[ "$CKPT_FAILED" = 0 ]; then
			echo "the checkpoint succeeded although $point failed"
			return 1
		fi
		kill -0 "$MVPID" || { echo "memvisor died"; return 1; }
	done
	exercise "$TMP/img-strict" strict "" || return 1
	sleep 0.3
	FDS=$(fd_count)
	[ -z "$REF_FDS" ] || [ "$FDS" -le "$REF_FDS" ] || {
		echo "fds: $FDS, $REF_FDS without a fault"
		ls -l /proc/"$MVPID"/fd | sed 's/^/fd /'
		return 1
	}
	[ "$(children)" = "$kids" ] || { echo "children: $kids before, $(children) after"; return 1; }
	exec 7>&-
	local rc=0
	wait "$MVPID" || rc=$?
	local reached=1
	[ -z "$spec" ] || [ -n "$verify_fault" ] || grep -q "fault injected at $point" "$TMP/err" || reached=0
	[ "$scenario" = exit ] && [ $reached = 1 ] && want=125
	[ "$rc" -eq "$want" ] || { echo "memvisor exited $rc, not $want"; cat "$TMP/err"; return 1; }
	[ "$want" -eq 0 ] || grep -q "memvisor: .*stats-json" "$TMP/err"
	# The first call at every point must be reached; a later one (make
	# soak's FAULT_NTH) may not be, for points passed once or twice a run.
	if [ $reached = 0 ]; then
		[ "$nth" != 1 ] || { echo "the scenario did not reach $point"; return 1; }
		echo "note: $spec was not reached"
	fi
}

# The evict scenario: reload_wl runs with the fault, is evicted and
# reloaded. Either step may fail cleanly; the program's memory must stay
# right (its own check, and 4 threads touching every page), memvisor must
# run on, and once a reload finished memvisor holds no more fds than
# before the evict and has the same children.
run_evict_point() { # POINT:N
	local point=${1%%:*} reloaded=0 fds kids
	rm -rf "$TMP"/eimg
	MV_ARGS=()
	MEMVISOR_FAULT=$1 start_fed "$WL/reload_wl" --file "$TMP/F" --mib 8 || { echo "reload_wl did not start"; return 1; }
	sleep 0.3
	fds=$(fd_count)
	kids=$(children)
	if ctl_within 60 checkpoint "$TMP/eimg" --evict --wait >"$TMP/ev.out" 2>&1; then
		ctl_within 60 reload "$TMP/eimg" --wait >"$TMP/rl.out" 2>&1 && reloaded=1
	fi
	say_check 60 || {
		echo "$1: the program's memory changed"
		cat "$TMP/ev.out" "$TMP/rl.out" "$TMP/err" 2>/dev/null
		return 1
	}
	say_until "threads 4" '^threads ok' 30 || { echo "threads did not finish"; return 1; }
	kill -0 "$MVPID" || { echo "memvisor died"; return 1; }
	if [ $reloaded = 1 ]; then
		sleep 0.3
		[ "$(fd_count)" -le "$fds" ] || { echo "fds: $(fd_count) after the reload, $fds before the evict"; return 1; }
	fi
	[ "$(children)" = "$kids" ] || { echo "children: $kids before, $(children) after"; return 1; }
	exec 7>&-
	wait "$MVPID" || { echo "memvisor exited $?"; cat "$TMP/err"; return 1; }
	grep -q "fault injected at $point" "$TMP/err" || echo "note: $1 was not reached"
}

# The rollback scenario: rb_target is marked, writes, and is rolled back
# with the fault. A rollback that fails once it began to change the
# program kills it and says so; memvisor ends with the program's status.
run_rollback_point() { # POINT:N
	local point=${1%%:*} rc=0
	MEMVISOR_FAULT=$1 start_fed "$WL/rb_target" 8
	ctl mark >/dev/null 2>&1 || { echo "the mark failed"; return 1; }
	say "w 3 50" '^got 0 ' || return 1
	if ctl rollback >"$TMP/rb.out" 2>&1; then
		! grep -q "fault injected at $point" "$TMP/err" ||
			{ echo "the rollback succeeded although $point failed"; return 1; }
		say x '^got 0 ' || return 1
		exec 7>&-
		wait "$MVPID" || { echo "memvisor exited $?"; return 1; }
		echo "note: $1 was not reached"
		return 0
	fi
	grep -q "was killed" "$TMP/rb.out" ||
		{ echo "the rollback failed without saying what became of the program: $(cat "$TMP/rb.out")"; return 1; }
	exec 7>&-
	wait "$MVPID" || rc=$?
	[ "$rc" = 137 ] || { echo "memvisor exited $rc, not with the killed program's 137"; return 1; }
}

# The live scenario: the pattern workload is checkpointed --live with the
# fault; the image is whole and the program's memory right.
run_live_point() { # POINT:N
	local point=${1%%:*}
	rm -rf "$TMP"/limg
	MV_ARGS=()
	MEMVISOR_FAULT=$1 start_fed "$WL/ckpt_pattern" --dense 4 --sparse 16 --threads 2 ||
		{ echo "ckpt_pattern did not start"; return 1; }
	ctl_within 60 checkpoint "$TMP/limg" --live --wait >"$TMP/lv.out" 2>&1 ||
		{ echo "$1: checkpoint --live failed: $(cat "$TMP/lv.out")"; return 1; }
	"$MEMVISOR" image verify "$TMP/limg" >/dev/null || { echo "$1: the image does not verify"; return 1; }
	say_check || { echo "$1: the program's memory changed"; return 1; }
	kill -0 "$MVPID" || { echo "memvisor died"; return 1; }
	exec 7>&-
	wait "$MVPID" || { echo "memvisor exited $?"; cat "$TMP/err"; return 1; }
	grep -q "fault injected at $point" "$TMP/err" || echo "note: $1 was not reached"
}

@test "every fault point: memvisor survives, the program is unaffected or cleanly told, nothing leaks" {
	local point n failed=
	REF_FDS=
	run_point "" supervise
	REF_FDS=$FDS
	for point in $("$MEMVISOR" --list-faults); do
		scenario=$(scenario_of "$point") || { echo "no scenario for $point"; return 1; }
		for n in ${FAULT_NTH:-1}; do
			if [ "$scenario" = evict ]; then
				run_evict_point "$point:$n" || { failed="$failed $point:$n"; echo "FAILED: $point:$n (evict)"; }
			elif [ "$scenario" = live ]; then
				run_live_point "$point:$n" || { failed="$failed $point:$n"; echo "FAILED: $point:$n (live)"; }
			elif [ "$scenario" = agent ]; then
				grep -q "MEMVISOR_FAULT=$point" "$BATS_TEST_DIRNAME/agent.bats" ||
					{ failed="$failed $point"; echo "FAILED: $point: no test of agent.bats runs it"; }
			elif [ "$scenario" = rollback ]; then
				run_rollback_point "$point:$n" || { failed="$failed $point:$n"; echo "FAILED: $point:$n (rollback)"; }
			else
				run_point "$point:$n" "$scenario" || { failed="$failed $point:$n"; echo "FAILED: $point:$n ($scenario)"; }
			fi
			exec 7>&- 2>/dev/null || true
		done
	done
	[ -z "$failed" ] || { echo "failed points:$failed"; return 1; }
}
