#!/usr/bin/env bats
# Memory the kernel reads or writes on the program's behalf, without a
# fault memvisor could serve (issue 24): io_uring registered buffers
# (pinned) and registered files, robust mutexes and thread-exit words
# (written by the kernel while the thread exits, when a userfaultfd
# refuses to wait), an exec's path (read by memvisor through
# /proc/PID/mem, which does not wait on userfaultfd either), the
# arguments /proc/PID/cmdline shows. Each is kept resident, or served,
# across evict and --live (docs/reload.md, "What the kernel touches").
# Workload: tests/workloads/kheld.c.

load helpers
bats_require_minimum_version 1.5.0

setup() {
	setup_tmp
	skip_unless_uffd
}

teardown() {
	teardown_tmp
}

start() { # KHELD-ARGS...
	start_fed "$WL/kheld" --dir "$TMP" "$@"
}

# evict DIR: checkpoint --evict, the job's end in $TMP/evict.json.
evict() {
	run ctl --json checkpoint "$1" --evict --wait
	echo "$output" | tail -1 >"$TMP/evict.json"
	[ "$status" = 0 ] || { echo "$output"; return 1; }
}

evicted() { json_get "$TMP/evict.json" "d['result']['evicted']$1"; }

# A checkpoint job of $SOCK (ARGS...) started in the background, with
# live_copy_stall; waits until the program runs again and the copy is
# held back (the job's phase "stalled"), then returns. The job's end
# goes to $TMP/job.json (wait_job).
start_live() { # CHECKPOINT-ARGS...
	ctl --json checkpoint "$@" --wait >"$TMP/job.out" 2>&1 &
	JOBPID=$!
	wait_for 30 sh -c "'$MEMVISOR' ctl --socket '$SOCK' --json jobs | grep -q '\"phase\":\"stalled\"'" ||
		{ ctl --json jobs; return 1; }
}
wait_job() {
	wait $JOBPID || { cat "$TMP/job.out"; return 1; }
	tail -1 "$TMP/job.out" >"$TMP/job.json"
}

@test "kernel held: io_uring READ_FIXED and WRITE_FIXED on a registered buffer after evict: the program sees what the kernel read, the file gets what it wrote" {
	skip_unless_uring
	start
	say uring-setup '^uring ready '
	evict "$TMP/img"
	say uring-read '^read ok$'
	say uring-write '^write ok$'
	# The buffer stayed resident, and the result says why.
	run evicted "['kernel_bytes']"
	cat "$TMP/evict.json"
	[ "$output" -ge 16384 ]
	run evicted "['kernel_resident']"
	assert_output --partial 'io_uring registered buffer'
	run ctl --json reload "$TMP/img" --wait
	assert_success
	stop_fed
}

@test "kernel held: an io_uring worker thread waiting in a read: evict and --live go around it, the read completes into evicted memory" {
	skip_unless_uring
	start
	say uring-setup '^uring ready '
	say async-start '^async waiting$'
	# The worker (iou-wrk) is a thread of the process that never runs
	# user code: nothing may be injected into it.
	wait_for 10 grep -qs '^iou-wrk' /proc/$PID/task/*/comm
	run timeout 60 "$MEMVISOR" ctl --socket "$SOCK" checkpoint "$TMP/limg" --live --wait
	assert_success
	evict "$TMP/img"
	say async-finish '^async ok$'
	say uring-read '^read ok$'
	stop_fed
}

@test "kernel held: a memfd held only in io_uring's registered files stays resident: reads through the ring see its bytes, a 16-byte write loses none" {
	skip_unless_uring
	start
	say uring-setup '^uring ready '
	say memfd-setup '^memfd ready$'
	evict "$TMP/img"
	say memfd-read '^memfd read ok$'
	say memfd-write '^memfd write ok$'
	run evicted "['shared_resident']"
	assert_output --partial 'io_uring'
	stop_fed
}

@test "kernel held: checkpoint --live of a registered buffer that io_uring writes during the copy holds the buffer of the pause" {
	skip_unless_uring
	start --mib 64
	say uring-setup '^uring ready '
	say gen-start '^gen '
	read -r _ word buf <<<"$LAST"
	run ctl --json checkpoint "$TMP/img" --live --wait
	assert_success
	echo "$output" >"$TMP/job.json"
	say gen-stop '^gen stopped '
	# At any instant the buffer's word is at most the plain word (the
	# thread stores the plain one first): an image of one instant too.
	plain=$(python3 "$HELPERS/imgcmp.py" word "$TMP/img" "$PID" "${word#0x}")
	inbuf=$(python3 "$HELPERS/imgcmp.py" word "$TMP/img" "$PID" "${buf#0x}")
	echo "plain $plain, buffer $inbuf, after ${LAST##* } rounds"
	[ "$plain" -gt 0 ]
	[ "$inbuf" -le "$plain" ]
	stop_fed
}

@test "kernel held: a thread that exits holding a robust mutex while its page is evicted: the next lock gets EOWNERDEAD" {
	start
	say robust-lock '^locked$'
	evict "$TMP/img"
	say robust-exit '^exited$'
	say robust-check '^EOWNERDEAD$'
	run evicted "['kernel_resident']"
	assert_output --partial 'robust'
	stop_fed
}

@test "kernel held: a process that exits holding a process-shared robust mutex in evicted shared memory: the next lock gets EOWNERDEAD" {
	start
	say pshared-lock '^child locked$'
	evict "$TMP/img"
	say pshared-exit '^child exited$'
	say pshared-check '^EOWNERDEAD$'
	stop_fed
}

@test "kernel held: a thread that exits holding a robust mutex during a --live copy: EOWNERDEAD, and the image is whole" {
	# The copy stalls 2 s before it copies (fault point live_copy_stall):
	# the thread exits while the mutex's page is still write-protected.
	for mode in live live-evict; do
		MEMVISOR_FAULT=live_copy_stall start --mib 32
		say robust-lock '^locked$'
		args=("$TMP/img-$mode" --live)
		[ $mode = live ] || args+=(--evict)
		start_live "${args[@]}"
		say robust-exit '^exited$'
		wait_job
		run json_get "$TMP/job.json" 'd["state"]'
		assert_output done
		say robust-check '^EOWNERDEAD$'
		run "$MEMVISOR" image verify "$TMP/img-$mode"
		assert_success
		stop_fed
	done
}

@test "kernel held: pthread_join of a thread that ends after evict returns (the kernel clears its tid word at exit)" {
	start
	say join-start '^started$'
	evict "$TMP/img"
	say join '^joined$'
	stop_fed
}

@test "kernel held: under wx deny, an exec whose path lies on an evicted page runs" {
	policy deny '{"version": 1, "wx": "deny"}'
	MV_ARGS=(--policy "$TMP/deny.json")
	start
	say exec-prepare '^prepared$'
	evict "$TMP/img"
	say exec-go '^exec ok$'
	run stop_fed
	assert_success
}

@test "kernel held: /proc/PID/cmdline and environ of an evicted program read as before" {
	start
	cat /proc/$PID/cmdline | od -c >"$TMP/cmdline.before"
	tr '\0' '\n' </proc/$PID/environ | sort >"$TMP/environ.before"
	evict "$TMP/img"
	od -c </proc/$PID/cmdline >"$TMP/cmdline.after"
	tr '\0' '\n' </proc/$PID/environ | sort >"$TMP/environ.after"
	diff "$TMP/cmdline.before" "$TMP/cmdline.after"
	diff "$TMP/environ.before" "$TMP/environ.after"
	run ps -o args= -p "$PID"
	assert_output --partial kheld
	stop_fed
}

# The markers "KHELD-MARK" in a core file.
core_marks() { python3 -c 'import sys; print(open(sys.argv[1], "rb").read().count(b"KHELD-MARK"))' "$1"; }

# Dump core with SIGABRT in $TMP/cores/NAME; the core's path in CORE.
dump_core() { # NAME
	echo abort >&7
	wait $MVPID || true
	exec 7>&-
	CORE=$(ls "$TMP/cores/$1"/core* 2>/dev/null | head -1)
	[ -n "$CORE" ] || { echo "no core in $TMP/cores/$1"; return 1; }
}

@test "kernel held: a core dumped after reload --wait holds every page; one dumped while evicted lacks what is still evicted (docs/reload.md)" {
	# The kernel writes a core from the dying thread (PF_DUMPCORE), which
	# a userfaultfd does not wait for: the documented way to a whole
	# core is a reload first.
	pattern=$(cat /proc/sys/kernel/core_pattern)
	[ "$pattern" = core ] || skip "core_pattern is '$pattern', not core files in the working directory"
	ulimit -c unlimited
	for name in resident reloaded evicted; do
		mkdir -p "$TMP/cores/$name"
		cd "$TMP/cores/$name"
		start --mib 16
		say mark '^marked 4096$'
		if [ $name != resident ]; then
			evict "$TMP/img-$name"
			[ $name = evicted ] || { run ctl reload "$TMP/img-$name" --wait; assert_success; }
		fi
		dump_core $name
		marks=$(core_marks "$CORE")
		echo "$name: $marks markers of 4096"
		case $name in
		resident | reloaded) [ "$marks" -ge 4096 ] ;;
		evicted) [ "$marks" -lt 4096 ] ;;
		esac
		rm -f "$CORE"
		cd "$TMP"
	done
}
