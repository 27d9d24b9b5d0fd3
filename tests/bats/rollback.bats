#!/usr/bin/env bats
# mark and rollback (issue 26): a process put back, in place, to a marked
# instant. tests/workloads/rb_target reports after each read of its input
# the hash of its memory, its resident holes and whether its registers
# survived the read; after a rollback to a mark taken while it waited for
# input, each report must be the mark's.

load helpers
bats_require_minimum_version 1.5.0

# Also in the unprivileged tier (tests/run.sh): without CAP_SYS_PTRACE the
# mark's userfaultfd serves user-mode faults only, which asynchronous
# write-protect does not need.
setup() {
	setup_tmp
	skip_unless_wp_async
}

teardown() {
	teardown_tmp
}

# The "got" line the program prints for its next input.
got_for() { # LINE
	say "$1" '^got '
	GOT=$LAST
}

mark() {
	run ctl mark "$@"
	echo "$output"
	assert_success
	assert_output --partial "marked process $PID"
}

rollback() {
	run ctl rollback "$@"
	echo "$output"
	assert_success
	assert_output --partial "rolled back process $PID"
	# A job of no bytes: no "0 B / 0 B (0.0 MB/s" on its line.
	assert_output --regexp "job [0-9]+ rollback done \([0-9.]+ s\)"
}

# Each command changes something from the mark; after a rollback the
# next input must find the mark ($want) again.
back_at_mark_after() { # CMD...
	local cmd
	for cmd in "$@"; do
		rollback
		say "$cmd" '^got 0 '
		rollback
		got_for x
		[ "$GOT" = "$want" ] || { echo "after '$cmd': '$GOT', the mark: '$want'"; return 1; }
	done
}

@test "rollback: memory, holes, registers, brk and layout are the mark's again after each kind of change" {
	start_fed "$WL/rb_target" 16
	mark
	got_for x
	want=$GOT
	[[ $want =~ ^got\ 0\ [0-9a-f]+\ 0\ ok$ ]]
	# Each command changes one thing from the mark; then the next input
	# must find the mark again.
	back_at_mark_after "w 1 300" m u p z b s "w 2 2000"
	stop_fed
}

# Memory read-only at the mark, made writable and written since: the
# layout goes back first (read-only), then its bytes, which
# process_vm_writev may not write there: written through /proc/PID/mem.
@test "rollback: pages written since in memory read-only at the mark get the mark's bytes back" {
	start_fed "$WL/rb_target" 16
	say p '^got 0 '
	mark
	got_for x
	want=$GOT
	rollback
	say P '^got 1 '
	run ctl --json rollback
	assert_success
	echo "$output" | tail -1 >"$TMP/job.json"
	[ "$(json_get "$TMP/job.json" "d['result']['written_bytes'] >= 80 * 4096")" = True ]
	got_for x
	[ "$GOT" = "$want" ]
	stop_fed
}

# Pages a rollback puts back that the one before put back too (written in
# every run) are left writable: each rollback puts them back, and the
# program's next write does not fault. The mark's bytes all the same.
@test "rollback: pages written in every run are left writable, and put back each time byte for byte" {
	start_fed "$WL/rb_target" 16
	mark
	got_for x
	want=$GOT
	for i in 1 2 3 4 5 6; do
		run ctl --json rollback
		assert_success
		echo "$output" | tail -1 >"$TMP/j$i.json"
		# The same 16 pages each run (seed 5), and the stack.
		say "w 5 16" '^got 0 '
		[ "$LAST" = "$want" ] || { echo "run $i: '$LAST', the mark: '$want'"; false; }
	done
	# From the third rollback on, the pages put back the time before too
	# are left writable: at least the 16 written every run.
	[ "$(json_get "$TMP/j2.json" "d['result']['writable_bytes']")" -gt 0 ]
	[ "$(json_get "$TMP/j6.json" "d['result']['writable_bytes'] >= 16 * 4096")" = True ]
	# Runs that write other pages, or none: still the mark's.
	for cmd in x "w 6 16" x "w 5 16" "w 7 300"; do
		rollback
		say "$cmd" '^got 0 '
		[ "$LAST" = "$want" ] || { echo "after '$cmd': '$LAST', the mark: '$want'"; false; }
	done
	stop_fed
}

@test "rollback: the result says what was written back, dropped and unmapped" {
	start_fed "$WL/rb_target" 16
	mark
	say "w 7 100" '^got 0 '
	say m '^got 1 '
	run ctl --json rollback
	assert_success
	echo "$output" | tail -1 >"$TMP/job.json"
	cat "$TMP/job.json"
	r='d["result"]'
	# 100 writes land on at most 100 pages, some in the holes (dropped).
	[ "$(json_get "$TMP/job.json" "$r['written_bytes'] > 0")" = True ]
	[ "$(json_get "$TMP/job.json" "$r['written_bytes'] + $r['dropped_bytes'] <= 2 * 100 * 4096 + (1 << 20)")" = True ]
	[ "$(json_get "$TMP/job.json" "$r['unmapped_bytes'] >= 1 << 20")" = True ]
	[ "$(json_get "$TMP/job.json" "$r['rollbacks']")" = 1 ]
	[ "$(json_get "$TMP/job.json" "0 < $r['pause_ns'] <= $r['elapsed_ns']")" = True ]
	stop_fed
}

# ROLLBACK_ITERS: 150 in make check, 5000 in make soak.
@test "rollback: ROLLBACK_ITERS random iterations, each back at the mark byte for byte" {
	start_fed "$WL/rb_target" 8
	mark
	run python3 "$HELPERS/rbloop.py" "$SOCK" "$TMP/in" "$TMP/out" "${ROLLBACK_ITERS:-150}" "$RANDOM"
	echo "$output"
	assert_success
	assert_output --partial "ok ${ROLLBACK_ITERS:-150} rollbacks"
	stop_fed
}

# A rollback walks the page tables of neighbouring tracked regions in one
# PAGEMAP_SCAN, the untracked ones between them included: their pages
# are not the mark's to put back, however written.
# Shared anonymous memory can only be shared by fork: under a tree's mark
# every process that maps it is the mark's, and its bytes go back too
# (compared and written back whole). A mark of one process (--pid) cannot
# tell who else maps it: kept as it is, and said so.
@test "rollback: shared anonymous memory goes back under a tree's mark, and stays under --pid; the memory around it is the mark's" {
	local how round
	for how in tree pid; do
		RB_SHARED=1 start_fed "$WL/rb_target" 16
		if [ "$how" = tree ]; then mark_json; else mark_json --pid "$PID"; fi
		shared_hash() { # the shared MiB's hash, printed after the "got" line
			local n
			n=$(out_lines)
			say H '^got '
			wait_for 10 out_after_has "$n" '^shared '
			out_after "$n" | sed -n 's/^shared //p' | head -1
		}
		if [ "$how" = tree ]; then
			[ "$(json_get "$TMP/mark.json" 'd["result"]["shared_bytes"]')" = $((1 << 20)) ]
		else
			[ "$(json_get "$TMP/mark.json" 'd["result"]["shared_bytes"]')" = 0 ]
			json_get "$TMP/mark.json" '[u["why"] for u in d["result"]["untracked"]]' | grep -q "a mark of one process does not hold"
		fi
		at_mark=$(shared_hash)
		rollback
		got_for x
		want=$GOT
		for round in 1 2 3; do
			rollback
			say "w $round 3000" '^got '
			now=$(shared_hash)
			[ "$now" != "$at_mark" ] || { echo "round $round: nothing written to the shared MiB"; false; }
			rollback
			if [ "$how" = tree ]; then
				[ "$(shared_hash)" = "$at_mark" ] || { echo "round $round: the shared MiB is not the mark's"; false; }
			else
				[ "$(shared_hash)" = "$now" ] || { echo "round $round: the shared MiB was rolled back"; false; }
			fi
			rollback
			got_for x
			[ "$GOT" = "$want" ] || { echo "round $round: '$GOT', the mark: '$want'"; false; }
		done
		stop_fed
	done
}

@test "rollback: threads created and children forked since the mark end; the program is the mark's" {
	start_fed "$WL/rb_target" 16
	mark
	got_for x
	want=$GOT
	rollback
	say t '^got 0 '
	say f '^got 1 '
	say t '^got 2 '
	[ "$(ls /proc/"$PID"/task | wc -l)" = 3 ]
	child=$(cat /proc/"$PID"/task/*/children | tr -s ' ' '\n' | grep . | head -1)
	[ -n "$child" ]
	run ctl --json rollback
	assert_success
	echo "$output" | tail -1 >"$TMP/job.json"
	[ "$(json_get "$TMP/job.json" 'd["result"]["threads_ended"]')" = 2 ]
	[ "$(json_get "$TMP/job.json" 'd["result"]["children_killed"]')" = 1 ]
	[ "$(ls /proc/"$PID"/task | wc -l)" = 1 ]
	# Killed and reaped by its parent: no zombie left.
	! [ -e /proc/"$child" ]
	got_for x
	[ "$GOT" = "$want" ]
	stop_fed
}

@test "rollback: a mark of several threads puts each one's registers back" {
	start_fed "$WL/rb_target" 16
	say t '^got 0 '
	say t '^got 1 '
	[ "$(ls /proc/"$PID"/task | wc -l)" = 3 ]
	mark
	assert_output --partial "3 threads"
	got_for x
	want=$GOT
	for cmd in "w 5 500" s m; do
		rollback
		say "$cmd" '^got 2 '
		rollback
		got_for x
		[ "$GOT" = "$want" ]
		[ "$(ls /proc/"$PID"/task | wc -l)" = 3 ]
	done
	stop_fed
}

@test "rollback: no mark, another name, or a new program since the mark: a clear error, nothing touched" {
	start_fed "$WL/rb_target" 16
	run ctl rollback
	assert_failure
	assert_output --partial "no mark"
	mark first
	run ctl rollback other
	assert_failure
	assert_output --partial "no mark named other (the mark is first)"
	run ctl unmark
	assert_success
	assert_output --partial "mark first of process $PID dropped"
	run ctl rollback
	assert_failure
	assert_output --partial "no mark"
	# A new program since the mark: the mark is gone, nothing is touched.
	mark again
	echo E >&7
	wait_for 10 sh -c "grep -q sleep /proc/$PID/comm"
	run ctl rollback
	echo "$output"
	assert_failure
	assert_output --partial "ran a new program (execve) since the mark"
	grep -q sleep /proc/"$PID"/comm
	kill "$PID"
	stop_fed || true
}

@test "rollback: a mark refuses checkpoint --live and --evict, which need the memory's userfaultfd; unmark lifts it" {
	skip_unless_uffd
	start_fed "$WL/rb_target" 16
	mark
	run ctl checkpoint "$TMP/img" --evict --wait
	assert_failure
	assert_output --partial "--live and --evict cannot while it does"
	# A plain checkpoint reads the memory without a userfaultfd.
	run ctl checkpoint "$TMP/img" --wait
	assert_success
	run ctl unmark
	assert_success
	run ctl checkpoint "$TMP/img2" --evict --wait
	assert_success
	say x '^got 0 '
	stop_fed
}

# The mark holds a pidfd of its own: one that shared its open file with
# the process table's kept the exits epoll set reporting the process after
# it was gone, and memvisor spun instead of ending.
@test "rollback: a program that exits after the mark ends memvisor with its status" {
	start_fed "$WL/rb_target" 16
	mark
	echo e >&7
	wait_for 20 sh -c "! kill -0 $MVPID 2>/dev/null"
	rc=0
	wait "$MVPID" || rc=$?
	[ "$rc" = 3 ]
}

# The mark's baseline is a copy-on-write clone of the program (a sibling,
# made by a clone run in it) that must never run the program's code nor
# hold what the program holds.
snap_of() { json_get "$TMP/mark.json" 'd["result"]["snapshot"].get("pid", 0)'; }
mark_json() {
	run ctl --json mark "$@"
	echo "$output"
	assert_success
	echo "$output" | tail -1 >"$TMP/mark.json"
}
blocked() { # PID SIGNAL-NUMBER: is the signal in its blocked set?
	local m
	m=$(awk '/^SigBlk:/{print $2}' "/proc/$1/status")
	(((0x$m >> ($2 - 1)) & 1))
}

@test "mark: the baseline is a snapshot that never runs: no descriptors, signals blocked, its own session, not in the tree; unmark ends it" {
	start_fed "$WL/rb_target" 16
	mark_json
	snap=$(snap_of)
	[ "$snap" -gt 0 ]
	r='d["result"]'
	[ "$(json_get "$TMP/mark.json" "$r['baseline_bytes'] >= 8 << 20 and $r['copied_bytes'] < $r['baseline_bytes'] and $r['snapshot']['bytes'] >= 8 << 20")" = True ]
	# Asleep in pause(2), with nothing of the program's open.
	[ "$(cut -d' ' -f1 "/proc/$snap/syscall")" = 34 ]
	[ -z "$(ls "/proc/$snap/fd")" ]
	for sig in 1 2 3 15 17 10; do blocked "$snap" $sig; done
	[ "$(awk '{print $6}' "/proc/$snap/stat")" = "$snap" ]
	# Out of memory, the kernel kills it before the program.
	[ "$(cat "/proc/$snap/oom_score_adj")" = 1000 ]
	# Not the program's child, not a process of the tree.
	[ "$(awk '{print $4}' "/proc/$snap/stat")" != "$PID" ]
	[ -z "$(cat "/proc/$PID/task/$PID/children")" ]
	! ctl --json ps | json_get - '[p["pid"] for p in d["processes"]]' | grep -qw "$snap"
	# Signals wait, blocked; the program's code never runs in it.
	kill -TERM "$snap"
	kill -INT "$snap"
	kill -USR1 "$snap"
	sleep 0.2
	[ "$(cut -d' ' -f1 "/proc/$snap/syscall")" = 34 ]
	# It holds the mark: written pages come back from it.
	got_for x
	want=$GOT
	back_at_mark_after "w 5 2000" z "w 6 300"
	# A new mark replaces it; unmark ends the new one.
	mark_json
	snap2=$(snap_of)
	[ "$snap2" -gt 0 ] && [ "$snap2" != "$snap" ]
	wait_for 10 sh -c "! [ -e /proc/$snap ]"
	run ctl unmark
	assert_success
	wait_for 10 sh -c "! [ -e /proc/$snap2 ]"
	stop_fed
}

dead() { # PID: gone, or a zombie
	[ ! -e "/proc/$1" ] || [ "$(awk '/^State:/{print $2}' "/proc/$1/status" 2>/dev/null)" = Z ]
}

# memvisor and its reaper killed at once (an OOM kill of their cgroup, a
# kill -9 of both): nothing is left to kill the snapshot, which must not
# sleep on for ever, holding the program's memory.
@test "mark: the snapshot dies with memvisor's reaper, even when nothing is left to kill it" {
	start_fed "$WL/rb_target" 16
	mark_json
	snap=$(snap_of)
	[ "$snap" -gt 0 ]
	remember_pid "$snap" # should the test fail
	reaper=$(pgrep -P "$MVPID")
	kill -9 "$MVPID" "$reaper"
	wait_for 10 dead "$snap"
}

@test "mark: memory a clone does not get (MADV_DONTFORK, MADV_WIPEONFORK) is copied, and rolled back byte for byte" {
	RB_NOFORK=1 start_fed "$WL/rb_target" 16
	mark_json
	[ "$(snap_of)" -gt 0 ]
	[ "$(json_get "$TMP/mark.json" 'd["result"]["copied_bytes"] >= 2 << 20')" = True ]
	got_for x
	want=$GOT
	back_at_mark_after "w 8 2000" z "w 9 2000"
	stop_fed
}

@test "rollback: a snapshot killed from outside refuses the rollback before anything changes" {
	start_fed "$WL/rb_target" 16
	mark_json
	snap=$(snap_of)
	kill -KILL "$snap"
	wait_for 10 sh -c "! [ -e /proc/$snap ]"
	say "w 3 50" '^got 0 '
	run ctl rollback
	echo "$output"
	assert_failure
	assert_output --partial "snapshot (process $snap"
	assert_output --partial "was killed"
	# Untouched: it runs on from where it was.
	say x '^got 1 '
	run ctl unmark
	assert_success
	mark
	stop_fed
}

@test "mark --pid of a process that is not memvisor's child: the baseline is copied, and the result says why" {
	start_fed "$WL/rb_target" 16
	say f '^got 0 '
	child_of() { pgrep -P "$PID" | head -1; }
	wait_for 10 child_of
	kid=$(child_of)
	mark_json --pid "$kid"
	[ "$(snap_of)" = 0 ]
	json_get "$TMP/mark.json" 'd["result"]["snapshot"]["why"]' | grep -q "not a child of memvisor's"
	[ "$(json_get "$TMP/mark.json" 'd["result"]["copied_bytes"] == d["result"]["baseline_bytes"] > 0')" = True ]
	run ctl rollback
	echo "$output"
	assert_success
	assert_output --partial "rolled back process $kid"
	kill "$kid" # it sleeps on, and would keep memvisor running
	stop_fed
}

# A clone run in a program whose own seccomp filter forbids it would
# kill the program: its baseline is copied instead.
@test "mark of a program with seccomp filters of its own: no clone is run in it, the baseline is copied" {
	RB_NOCLONE=1 start_fed "$WL/rb_target" 16
	mark_json
	[ "$(snap_of)" = 0 ]
	json_get "$TMP/mark.json" 'd["result"]["snapshot"]["why"]' | grep -q "seccomp filters of its own"
	got_for x
	want=$GOT
	back_at_mark_after "w 4 500" z
	stop_fed
}

# Failure point ptrace_setregs: the registers cannot be put back after the
# memory was. The process is neither the mark nor what it was: killed,
# and the job says so.
@test "rollback: a failure after the process began to change kills it, and says so" {
	MV_ARGS=()
	MEMVISOR_FAULT=ptrace_setregs start_fed "$WL/rb_target" 16
	mark
	say "w 3 50" '^got 0 '
	run ctl rollback
	echo "$output"
	assert_failure
	assert_output --partial "was killed: it was no longer what it was and not yet the mark"
	wait_for 20 sh -c "! kill -0 $MVPID 2>/dev/null"
	rc=0
	wait "$MVPID" || rc=$?
	[ "$rc" = 137 ]
}

@test "mark of a tree: a child that ran a new program since refuses the rollback, which changes nothing" {
	start_fed "$WL/rb_tree" 4
	kid=$(awk '/^ready/{print $3}' "$TMP/out")
	say n '^hashes 0 '
	mark
	say E '^child runs sleep'
	is_sleep() { [ "$(cat "/proc/$kid/comm")" = sleep ]; }
	wait_for 10 is_sleep
	run ctl rollback
	echo "$output"
	assert_failure
	assert_output --partial "process $kid ran a new program (execve) since the mark"
	say n '^hashes 2 [0-9a-f]+ -$'
	is_sleep
	run ctl unmark
	assert_success
	kill "$kid"
	stop_fed
}

# What cannot be undone is found in every process before any changes: a
# child that unmapped a file mapping refuses the rollback, though its
# parent, first in the mark, has a region to unmap. Before, the parent's
# layout went back first, and then the tree was killed.
@test "mark of a tree: a change one process cannot undo refuses the rollback before any process changes" {
	start_fed "$WL/rb_tree" 4
	kid=$(awk '/^ready/{print $3}' "$TMP/out")
	say n '^hashes 0 '
	mark
	say m '^hashes 1 '
	say U '^hashes 2 '
	run ctl rollback
	echo "$output"
	assert_failure
	assert_output --partial "of process $kid was unmapped or replaced since the mark"
	refute_output --partial "was killed"
	say n '^hashes 3 [0-9a-f]+ [0-9a-f]+$'
	kill -0 "$kid"
	stop_fed
}

# The same in a tree: every process of the mark is killed, the child too.
@test "rollback of a tree: a failure after it began to change kills every process of the mark" {
	MV_ARGS=()
	MEMVISOR_FAULT=ptrace_setregs start_fed "$WL/rb_tree" 4
	kid=$(awk '/^ready/{print $3}' "$TMP/out")
	say n '^hashes 0 '
	mark
	say "w 3 50" '^hashes 1 '
	run ctl rollback
	echo "$output"
	assert_failure
	assert_output --partial "and the rest of its tree was killed: it was no longer what it was"
	wait_for 20 sh -c "! kill -0 $kid 2>/dev/null"
	wait_for 20 sh -c "! kill -0 $MVPID 2>/dev/null"
	rc=0
	wait "$MVPID" || rc=$?
	[ "$rc" = 137 ]
}

# The kernel writes a thread's rseq area (which CPU it runs on) on its way
# back to user space, and it is not the program's to roll back: a kernel
# that writes it only when the CPU changed since it last did would leave
# the mark's CPU there, and one built with CONFIG_DEBUG_RSEQ kills the
# thread. The program marked on CPU 0 moves to CPU 1; the rollback's
# injected munmap returns on CPU 1; held after it, the area says CPU 1.
@test "rollback: the rseq area keeps what the kernel wrote last, not the mark's CPU" {
	[ "$(nproc)" -ge 2 ] || skip "needs two CPUs"
	skip_unless_cmd taskset
	MV_ARGS=()
	start_fed taskset -c 0 "$WL/rb_target" 16
	run ctl --json mark
	echo "$output"
	assert_success
	addr=$(echo "$output" | tail -1 | json_get - 'd["result"]["rseq"][0]["addr"]')
	[ -n "$addr" ] && [ "$addr" != None ] || skip "no rseq area registered (libc or kernel)"
	cpu_at() { python3 -c 'import os,struct,sys; f=os.open(f"/proc/{sys.argv[1]}/mem",os.O_RDONLY); print(struct.unpack("<II",os.pread(f,8,int(sys.argv[2])))[1])' "$PID" "$addr"; }
	# A drop of a page first touched since (an madvise run in it) after
	# the bytes went back would have the kernel write the area again:
	# some rounds have none.
	for round in 1 2 3 4 5 6 7 8; do
		taskset -p -c 1 "$PID"
		say m '^got '
		run ctl rollback --hold
		echo "$output"
		assert_success
		[ "$(cpu_at)" = 1 ] || { echo "round $round: CPU $(cpu_at) in the rseq area"; false; }
		taskset -p -c 0 "$PID"
		run ctl rollback
		assert_success
	done
	run ctl unmark
	assert_success
	got_for x
	stop_fed
}

# The kernel's rseq registration is not memory. A thread whose area moved
# since the mark (glibc registers it while a program starts: a program
# marked then) kept the registration, the layout step unmapped the page
# it named, and the kernel faulted on it at every return to user space:
# the rollback's next call never ran, and the process was killed.
@test "rollback: an rseq area registered since the mark is unregistered, the mark's registered again" {
	start_fed "$WL/rb_target" 16
	mark
	got_for x
	want=$GOT
	for round in 1 2 3; do
		say R '^got '
		wait_for 10 sh -c "[ \$(grep -c '^rseq' '$TMP/out') = $round ]"
		rs=$(grep '^rseq' "$TMP/out" | tail -1)
		[ "$rs" != "rseq -1 -1" ] || skip "no rseq area registered by glibc"
		[ "$rs" = "rseq 0 0" ] || { echo "$rs"; false; }
		run ctl --json rollback
		echo "$output"
		assert_success
		[ "$(echo "$output" | tail -1 | json_get - 'd["result"]["rseq_undone"]')" = 1 ]
		got_for x
		[ "$GOT" = "$want" ]
		rollback
	done
	stop_fed
}

# The harness itself: "w" prints its "ready" line only after its writes,
# which may be after the next command was sent. That line is not the
# next command's answer (say skips it); it once made the shared-mapping
# test above read "ready ..." as a hash, under load.
@test "rollback tests: a long command's late ready line is not the next command's answer" {
	start_fed "$WL/rb_target" 16
	say "w 1 400000" '^got 0 '
	say x '^got 1 '
	stop_fed
}

# The baseline is taken region by region: a run of present pages that
# continues from the region before is split there. Before, with a region
# made read-only in the filled half ("p") and pages written in the holes
# since ("w"), the split took the holes between for present pages: the
# mark read them (mapping them, HOLES grew) and each rollback wrote them.
@test "rollback: holes after a region boundary stay holes" {
	start_fed "$WL/rb_target" 16
	say p '^got 0 '
	say "w 5 200" '^got 1 '
	got_for x
	holes=$(echo "$GOT" | awk '{print $4}')
	[ "$holes" -gt 0 ]
	mark
	got_for x
	want=$GOT
	[ "$(echo "$want" | awk '{print $4}')" = "$holes" ] || { echo "$want: the mark mapped holes (were $holes)"; return 1; }
	local cmd
	for cmd in "w 6 300" s; do
		rollback
		say "$cmd" '^got 3 '
		rollback
		got_for x
		[ "$GOT" = "$want" ] || { echo "after '$cmd': '$GOT', the mark: '$want'"; return 1; }
	done
	stop_fed
}

# A kernel before 6.7 has no asynchronous write-protect: a mark tracks
# writes with synchronous faults, which memvisor's fault thread serves by
# lifting the page's protection; private file mappings (.data), which the
# kernel does not register then, are put back whole. MEMVISOR_ROLLBACK_WP
# =sync tracks so here. The kernel's own writes into protected memory
# (each read of the input) fault the same way: a userfaultfd of user-mode
# faults only (no privilege) would fail them, so the mark is refused.
@test "mark without asynchronous write-protect: synchronous faults track, .data goes back whole" {
	MEMVISOR_ROLLBACK_WP=sync start_fed "$WL/rb_target" 16
	run ctl --json mark
	echo "$output"
	if [ "$(id -u)" != 0 ]; then
		assert_failure
		assert_output --partial "the synchronous kind needs a userfaultfd that serves the kernel's writes too"
		say x '^got 0 '
		stop_fed
		return
	fi
	assert_success
	echo "$output" | tail -1 >"$TMP/mark.json"
	json_get "$TMP/mark.json" 'd["result"]["tracking"]' | grep -q synchronous
	json_get "$TMP/mark.json" '[w["name"] for w in d["result"]["whole"]]' | grep -q rb_target
	got_for x
	want=$GOT
	[[ $want =~ ^got\ 0\ [0-9a-f]+\ 0\ ok$ ]]
	back_at_mark_after "w 1 300" m u p P z b s "w 2 2000"
	stop_fed
}

# A mark without --pid is of the tree: tests/workloads/rb_tree is a parent
# and the child it forked, each with memory of its own and shared memory
# of both. All goes back, at one instant (the shared memory too, written
# by both and by a grandchild forked since that maps it untracked); a
# grandchild forked since is killed and reaped by its parent, and what it
# forked is killed too.
@test "mark of a tree: the child's memory, layout and the grandchildren it forked since go back with its parent's" {
	start_fed "$WL/rb_tree" 4
	kid=$(awk '/^ready/{print $3}' "$TMP/out")
	[ -n "$kid" ]
	say n '^hashes 0 '
	run ctl status
	refute_output --partial "mark:"
	mark_json
	[ "$(json_get "$TMP/mark.json" '[p["pid"] for p in d["result"]["processes"]]')" = "[$PID, $kid]" ]
	run ctl status
	assert_output --regexp "mark: +mark, of processes $PID, $kid; [0-9.]+ MiB kept, 0 rollbacks"
	[ "$(json_get "$TMP/mark.json" 'd["result"]["processes"][1]["baseline_bytes"] >= 4 << 20')" = True ]
	say n '^hashes 1 '
	want=$LAST
	local cmd
	for cmd in "w 1 300" m f "W 5" G "w 2 50"; do
		rollback
		say "$cmd" '^(hashes|forked) 1 |^forked '
		if [ "$cmd" = f ]; then
			grand=${LAST#forked }
			kill -0 "$grand"
			great_of() { pgrep -P "$grand"; }
			wait_for 10 great_of
			great=$(great_of)
		fi
		run ctl --json rollback
		echo "$output"
		assert_success
		r=$(echo "$output" | tail -1)
		[ "$(echo "$r" | json_get - 'len(d["result"]["processes"])')" = 2 ]
		if [ "$cmd" = f ]; then
			[ "$(echo "$r" | json_get - 'd["result"]["children_killed"]')" = 1 ]
			! kill -0 "$grand" 2>/dev/null
			# Below it, no orphan runs on (reaped by memvisor's reaper).
			gone() { ! kill -0 "$great" 2>/dev/null; }
			wait_for 10 gone
		fi
		say n '^hashes 1 '
		[ "$LAST" = "$want" ] || { echo "after '$cmd': '$LAST', the mark: '$want'"; return 1; }
	done
	# Held at the mark, then let run: the same.
	rollback --hold
	rollback
	say n '^hashes 1 '
	[ "$LAST" = "$want" ]
	[ "$(ctl --json status | json_get - 'd["mark"]["rollbacks"]')" = 14 ]
	stop_fed
}

# A process made since the mark whose parent ended is an orphan of the
# tree's top (memvisor's reaper), below no process of the mark: the
# rollback kills it too.
@test "mark of a tree: an orphan made since the mark is killed by the rollback" {
	start_fed "$WL/rb_tree" 4
	say n '^hashes 0 '
	mark
	say n '^hashes 1 '
	want=$LAST
	rollback
	say d '^daemon [0-9]+$'
	h=${LAST#daemon }
	kill -0 "$h"
	reaper=$(awk '/^PPid:/{print $2}' "/proc/$PID/status")
	orphaned() { [ "$(awk '/^PPid:/{print $2}' "/proc/$h/status")" = "$reaper" ]; }
	wait_for 10 orphaned
	run ctl --json rollback
	echo "$output"
	assert_success
	# The grandchild (a zombie) and its orphan.
	[ "$(echo "$output" | tail -1 | json_get - 'd["result"]["children_killed"]')" = 2 ]
	gone() { ! kill -0 "$h" 2>/dev/null; }
	wait_for 10 gone
	say n '^hashes 1 '
	[ "$LAST" = "$want" ]
	stop_fed
}

# Without privilege a process that forbids tracing (not dumpable, as a
# set-user-ID program is) cannot be marked: a tree's mark says so and
# how to mark the command alone, which works.
@test "mark of a tree with a process that forbids tracing: refused with the way to mark the command alone" {
	[ "$(id -u)" != 0 ] || skip "as root every process may be traced (the unprivileged tier runs it)"
	RB_NODUMP=1 start_fed "$WL/rb_tree" 4
	say n '^hashes 0 '
	run ctl mark
	echo "$output"
	assert_failure
	assert_output --partial "Operation not permitted; a mark of the tree needs every process of it: \`mark --pid $PID\` marks the command alone"
	mark --pid "$PID"
	say n '^hashes 1 '
	want=$LAST
	rollback
	say n '^hashes 1 '
	[ "${LAST%% * * *}" = "${want%% * * *}" ]
	stop_fed
}

# Missing pages of shared memory the program's own userfaultfd registered
# are not read for another process (the kernel gives up instead of
# waiting): that memory is left as it is, said why, and the mark and its
# rollbacks work as for any shared mapping they cannot put back.
@test "mark of a tree: shared memory the program's own userfaultfd holds stays as it is, and the mark works" {
	"$WL/rb_uffd_shm" </dev/null >/dev/null 2>&1 || [ $? != 3 ] || skip "no userfaultfd for this user"
	start_fed "$WL/rb_uffd_shm"
	mark_json
	json_get "$TMP/mark.json" '[u["why"] for u in d["result"]["untracked"] if u["name"].startswith("/dev/zero")]' |
		grep -q "shared mapping that cannot be read"
	[ "$(json_get "$TMP/mark.json" 'd["result"]["shared_bytes"]')" = 0 ]
	say x '^seen 0$'
	say x '^seen 1$'
	rollback
	say x '^seen 0$'
	stop_fed
}

@test "mark of a tree: a child that exited since refuses the rollback, which changes nothing" {
	start_fed "$WL/rb_tree" 4
	kid=$(awk '/^ready/{print $3}' "$TMP/out")
	say n '^hashes 0 '
	mark
	say "w 3 100" '^hashes 1 '
	say x '^child exited'
	run ctl rollback
	echo "$output"
	assert_failure
	assert_output --partial "process $kid has exited since the mark: a rollback cannot revive it"
	# The parent runs on as it was: its next input is its fourth.
	say n '^hashes 3 [0-9a-f]+ -$'
	kill -0 "$PID"
	run ctl unmark
	assert_success
	stop_fed
}
